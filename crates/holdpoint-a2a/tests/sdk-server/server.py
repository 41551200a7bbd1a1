"""A remote A2A 1.0 agent built with the official Python SDK (a2a-sdk).

It stands in for somebody else's agent in crates/holdpoint-a2a's tests
(tests/sdk_server.rs) and in examples/a2a-agents: a wire desk that will
not move money without a yes.

- A message without a task starts one and stops it at
  TASK_STATE_INPUT_REQUIRED, asking "confirm the wire to acct-4471? yes/no"
  (a text part and a data part naming the account and the request).
- The answer, sent on the same taskId, completes the task: a `yes` (the
  text "yes", or the data part {"approved": true}) sends the wire, anything
  else does not; either way the `result` artifact says what happened.
- GET /answers lists every answer this process received (taskId, what it
  said, whether the wire went), so a test can check each arrived once.

Usage: server.py [PORT]. Listens on 127.0.0.1 (PORT 0 or none: any free
port) and prints `listening http://127.0.0.1:PORT` when it is ready.
"""

import asyncio
import logging
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)

ACCOUNT = "acct-4471"
QUESTION = f"confirm the wire to {ACCOUNT}? yes/no"

# What each answer said, in the order they arrived.
ANSWERS = []


def said_yes(parts):
    """Whether an answer's parts say yes (text "yes", or approved: true)."""
    for text in get_text_parts(parts):
        if text.strip().lower() in ("yes", "y", "approve", "approved"):
            return True
    for data in get_data_parts(parts):
        if isinstance(data, dict) and data.get("approved") is True:
            return True
    return False


class WireDesk(AgentExecutor):
    """Asks before wiring; wires (or not) on the answer."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            # A new request: a task of its own, waiting for a yes.
            task = Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
            updater = TaskUpdater(event_queue, task.id, task.context_id)
            request = context.get_user_input()
            await updater.requires_input(
                updater.new_agent_message(
                    [
                        new_text_part(QUESTION),
                        new_data_part(
                            {"question": "confirm", "account": ACCOUNT, "request": request}
                        ),
                    ]
                )
            )
            return
        # The answer, on the same task.
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        parts = list(context.message.parts)
        yes = said_yes(parts)
        answer = {
            "taskId": task.id,
            "contextId": task.context_id,
            "text": get_text_parts(parts),
            "data": get_data_parts(parts),
            "wired": yes,
        }
        ANSWERS.append(answer)
        outcome = (
            f"wired to {ACCOUNT} (the answer was yes)"
            if yes
            else f"not wired to {ACCOUNT} (the answer was no)"
        )
        await updater.add_artifact(
            [new_text_part(outcome), new_data_part({"account": ACCOUNT, "wired": yes})],
            name="result",
        )
        await updater.complete(updater.new_agent_message([new_text_part(outcome)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        task_id = task.id if task else context.task_id
        context_id = task.context_id if task else context.context_id
        await TaskUpdater(event_queue, task_id, context_id).cancel()


def card(base: str) -> AgentCard:
    return AgentCard(
        name="wireDesk",
        description="Wires money once a person confirms it",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="wire",
                name="wire",
                description="Wires money after a yes",
                tags=["banking"],
                examples=["wire $200 to acct-4471"],
            )
        ],
    )


async def answers(_request):
    return JSONResponse(ANSWERS)


async def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # Listening before the banner: a client that connects at once waits in
    # the backlog until uvicorn accepts.
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent_card = card(base)
    handler = DefaultRequestHandler(
        agent_executor=WireDesk(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = [
        *create_agent_card_routes(agent_card),
        *create_jsonrpc_routes(handler, "/a2a"),
        Route("/answers", answers, methods=["GET"]),
    ]
    config = uvicorn.Config(Starlette(routes=routes), log_level="warning")
    server = uvicorn.Server(config)
    print(f"listening {base}", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    # a2a-sdk 1.3 leaves an event queue's dispatch loop pending after a
    # task stops at input-required; asyncio and opentelemetry log it (with
    # tracebacks) when the loop is collected. Not this agent's doing, and
    # nothing the tests read.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    logging.getLogger("opentelemetry.context").setLevel(logging.CRITICAL)
    asyncio.run(main())

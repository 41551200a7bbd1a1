"""A stdio MCP server (official Python SDK) for the stateless `input_required`
flow of the 2026-07-28 revision.

`cancel_booking(restaurant)` is annotated destructive, for approval gates.
`book_table(restaurant)` asks for the party size with an `InputRequiredResult`
(one form elicitation under the key "party") and keeps the restaurant in
`requestState`; the retry with the answer and the echoed state completes the
call. The server keeps nothing between rounds, so a restart of this process
between the question and the answer changes nothing.

`requestState` is sealed by the SDK under the key in HOLDPOINT_MCP_STATE_KEY
(shared by every process of the server, so a restarted one still opens the
state an earlier one sealed). Every completed booking is appended to the file named by HOLDPOINT_MCP_LOG
(when set), so a test can count how often the tool really ran.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)

app = MCPServer(
    "holdpoint-stateless",
    request_state_security=RequestStateSecurity(keys=[os.environ["HOLDPOINT_MCP_STATE_KEY"]]),
)

PARTY_SCHEMA = {
    "type": "object",
    "properties": {"people": {"type": "integer", "minimum": 1, "maximum": 12}},
    "required": ["people"],
}


def _answer(ctx: Context, key: str):
    responses = ctx.input_responses or {}
    answer = responses.get(key)
    if answer is None:
        return None
    if hasattr(answer, "model_dump"):
        return answer.model_dump(by_alias=True, exclude_none=True)
    return answer


@app.tool()
async def book_table(restaurant: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Books a table; asks for the party size first."""
    answer = _answer(ctx, "party")
    if answer is None:
        question = ElicitRequest(
            params=ElicitRequestFormParams(
                message=f"How many people for {restaurant}?",
                requested_schema=PARTY_SCHEMA,
            )
        )
        state = json.dumps({"restaurant": restaurant})
        return InputRequiredResult(input_requests={"party": question}, request_state=state)
    state = json.loads(ctx.request_state or "{}")
    if state.get("restaurant") != restaurant:
        return CallToolResult(
            content=[TextContent(type="text", text="requestState does not match the call")],
            is_error=True,
        )
    action = answer.get("action")
    if action != "accept":
        return CallToolResult(content=[TextContent(type="text", text=f"booking {action}ed")])
    people = answer.get("content", {}).get("people")
    log = os.environ.get("HOLDPOINT_MCP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{restaurant}:{people}\n")
    return CallToolResult(
        content=[TextContent(type="text", text=f"Booked {restaurant} for {people}")],
        structured_content={"restaurant": restaurant, "people": people},
    )


@app.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
async def cancel_booking(restaurant: str) -> str:
    """Cancels a booking (destructive: it cannot be undone)."""
    log = os.environ.get("HOLDPOINT_MCP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"cancelled:{restaurant}\n")
    return f"Cancelled {restaurant}"


if __name__ == "__main__":
    app.run()

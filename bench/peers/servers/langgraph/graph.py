"""The approval-cycle graph served by LangGraph's Agent Server (`langgraph dev`, in-memory runtime).

Workload (the same as Holdpoint's scripted banking model and the Genkit server):
  user "Transfer $500 to my savings account." -> the fake model's first turn is the tool call
  transferMoney({"amount": 500, "toAccount": "savings"}) -> the tool calls interrupt({"details": ...})
  -> the client resumes the thread with Command(resume={"approved": True}) (`{"command": {"resume": ...}}`
  on POST /threads/{id}/runs/wait) -> the tool returns {"success": True, "transactionId": "txn-123"}
  -> the fake model's second turn is the text "Done: txn-123".
The model and the tool are async so the server's event loop runs them without a thread hop.
"""
import json

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import create_react_agent
from langgraph.types import interrupt


def _scripted_turn(messages):
    """A tool call unless the last message is the tool's result; then the final text."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        reply = AIMessage(content=f"Done: {json.loads(last.content)['transactionId']}")
    else:
        reply = AIMessage(content="", tool_calls=[{
            "name": "transferMoney", "args": {"amount": 500, "toAccount": "savings"},
            "id": "call_1", "type": "tool_call"}])
    return ChatResult(generations=[ChatGeneration(message=reply)])


class ScriptedModel(BaseChatModel):
    """Deterministic chat model: no network, no tokens."""

    @property
    def _llm_type(self) -> str:
        return "scripted-transfer"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return _scripted_turn(messages)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return _scripted_turn(messages)


def _transfer(amount: float, toAccount: str) -> dict:
    answer = interrupt({"details": f"Transfer ${amount:.2f} to {toAccount}"})
    if not answer.get("approved"):
        return {"success": False}
    return {"success": True, "transactionId": "txn-123"}


async def _atransfer(amount: float, toAccount: str) -> dict:
    return _transfer(amount, toAccount)


transfer_money = StructuredTool.from_function(
    func=_transfer, coroutine=_atransfer, name="transferMoney",
    description="Transfer money to an account (requires human approval).")

# No checkpointer: the Agent Server supplies its own (in memory under `langgraph dev`).
graph = create_react_agent(ScriptedModel(), [transfer_money])

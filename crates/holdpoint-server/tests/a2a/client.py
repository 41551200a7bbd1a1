"""Drives Holdpoint's A2A endpoint with the official Python SDK (a2a-sdk).

Usage: client.py BASE_URL API_KEY. Prints one JSON object (the last line
of stdout) with what each step saw; tests/server/a2a.rs asserts on it.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf import json_format

from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)

BASE, KEY = sys.argv[1], sys.argv[2]
AGENT = f"{BASE}/agents/opsAgent"


def request(parts, task_id=None, context_id=None):
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return json_format.ParseDict({"message": message}, SendMessageRequest())


def as_dict(proto):
    return json_format.MessageToDict(proto)


def failure(e):
    return {"error": {"type": type(e).__name__, "message": str(e)}}


async def run(client, parts, task_id=None, context_id=None):
    """Sends a message; the events seen and the task as it ended."""
    events = []
    try:
        async for event in client.send_message(request(parts, task_id, context_id)):
            events.append(as_dict(event))
    except Exception as e:  # noqa: BLE001 - the error is the result
        return failure(e)
    state, holds, text, task_id_seen = None, [], "", None
    for e in events:
        status = None
        if "task" in e:
            task_id_seen = e["task"]["id"]
            status = e["task"].get("status")
            for a in e["task"].get("artifacts", []):
                text += "".join(p.get("text", "") for p in a.get("parts", []))
        if "statusUpdate" in e:
            status = e["statusUpdate"]["status"]
        if "artifactUpdate" in e:
            text += "".join(p.get("text", "") for p in e["artifactUpdate"]["artifact"].get("parts", []))
        if status:
            state = status.get("state")
            parts_ = status.get("message", {}).get("parts", [])
            holds = [p["data"] for p in parts_ if "data" in p]
    return {"taskId": task_id_seen, "state": state, "holds": holds, "text": text, "events": len(events)}


async def main():
    out = {}
    async with httpx.AsyncClient(headers={"x-api-key": KEY}, timeout=60) as http:
        streaming = await create_client(AGENT, ClientConfig(httpx_client=http, streaming=True))
        plain = await create_client(AGENT, ClientConfig(httpx_client=http, streaming=False))
        out["card"] = as_dict(streaming._card) if hasattr(streaming, "_card") else None

        # A hold: input-required, the hold a data part.
        first = await run(streaming, [{"text": "close checking"}], context_id="py-ctx")
        out["first"] = first
        task_id = first["taskId"]
        got = await plain.get_task(GetTaskRequest(id=task_id))
        out["got"] = {"state": as_dict(got)["status"]["state"]}
        hold = first["holds"][0]
        answer = [{"data": {"holdId": hold["holdId"], "approve": True}}]
        out["approved"] = await run(streaming, answer, task_id=task_id)
        out["replayed"] = await run(plain, answer, task_id=task_id)
        try:
            await plain.get_task(GetTaskRequest(id="no-such-task"))
            out["unknown"] = {}
        except Exception as e:  # noqa: BLE001
            out["unknown"] = failure(e)

        # Cancel.
        second = await run(plain, [{"text": "close savings"}], context_id="py-ctx")
        cancelled = await plain.cancel_task(CancelTaskRequest(id=second["taskId"]))
        out["cancelled"] = {"state": as_dict(cancelled)["status"]["state"]}

        # A schema mismatch, then a denial.
        third = await run(plain, [{"text": "close bonds"}], context_id="py-ctx")
        out["third"] = third
        bad = [{"data": {"respond": {"toolApproved": "yes"}}}]
        out["mismatch"] = await run(plain, bad, task_id=third["taskId"])
        out["denied"] = await run(plain, [{"data": {"deny": "not today"}}], task_id=third["taskId"])

        # An answer given elsewhere, seen by a subscriber.
        fourth = await run(plain, [{"text": "close gold"}], context_id="py-ctx")
        seen = []

        async def watch():
            async for event in streaming.subscribe(SubscribeToTaskRequest(id=fourth["taskId"])):
                seen.append(as_dict(event))

        watcher = asyncio.create_task(watch())
        while not seen:
            await asyncio.sleep(0.05)
        hold = fourth["holds"][0]
        r = await http.post(
            f"{BASE}/agents/opsAgent/answer",
            json={"data": {"snapshotId": hold["snapshotId"], "ref": hold.get("ref"), "decision": "approve"}},
        )
        out["answeredElsewhere"] = r.status_code
        await asyncio.wait_for(watcher, 30)
        out["subscribed"] = [
            (e.get("statusUpdate") or e.get("task") or {}).get("status", {}).get("state") for e in seen
        ]
    print(json.dumps(out))


asyncio.run(main())

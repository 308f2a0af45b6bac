"""``POST /turns/{id}/end`` returns the context for the next model call: after a turn whose
large tool result was answered in ``end``, that context holds the result's observation, not the
raw result (before the fix it returned every raw byte: nothing ran at ``end``)."""

from __future__ import annotations

import json

import httpx

from tests.server.conftest import Env
from tests.server.live import auth

ROWS = [{"id": i, "name": f"item {i}", "city": "Lisbon"} for i in range(300)]  # ~9,000 tokens; message_tokens 400


def test_the_context_end_returns_holds_no_observed_tool_result(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=120) as client:
        assert client.post("/api/threads", json={"id": "end-ctx-1"}).status_code == 201
        begun = client.post("/api/threads/end-ctx-1/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Export the table, please."}],
        })  # fmt: skip
        assert begun.status_code == 201, begun.text
        turn_id = begun.json()["turn_id"]
        call = {"id": "call_1", "type": "function", "function": {"name": "export", "arguments": "{}"}}
        stepped = client.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]})  # fmt: skip
        assert stepped.status_code == 200, stepped.text
        stepped = client.post(f"/api/turns/{turn_id}/step", json={"format": "openai", "messages": [
            {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"rows": ROWS})},
        ]})  # fmt: skip
        assert stepped.status_code == 200, stepped.text
        assert "item 299" in json.dumps(stepped.json()["context"]["openai"])  # the actor reads the result once
        ended = client.post(f"/api/turns/{turn_id}/end", json={"format": "openai", "messages": [
            {"role": "assistant", "content": "Exported 300 rows."},
        ]})  # fmt: skip
        assert ended.status_code == 200, ended.text
        wire = json.dumps(ended.json()["context"]["openai"])
        assert "item 299" not in wire and len(wire) < 20_000, len(wire)
        assert "item 299" not in json.dumps(client.get("/api/threads/end-ctx-1/context").json())
        # nothing lost: the raw result is still stored
        messages = client.get("/api/threads/end-ctx-1/messages").json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]

"""``obsmem mcp`` (stdio) stops serving a key once it is revoked (helper-188).

Over HTTP every MCP request and tool call checks the key, so a revoked key is refused at once.
Over stdio the key was checked once, when the process started: an ``obsmem mcp`` an MCP client
keeps running for days went on reading and forgetting with a key its org had revoked
(``obsmem keys revoke``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from obsmem import Memory, Message
from obsmem.server.keys import key_store_for

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


async def test_a_key_revoked_while_obsmem_mcp_runs_is_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'memory.db'}"
    async with Memory(store) as memory:
        await memory.create_thread("t1", "alice", org_id="acme")
        await memory.save_messages("t1", [Message.user("My locker is 5521.")])
    keys = key_store_for(store)
    await keys.setup()
    key, secret = await keys.create("acme", resource_id="alice")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "obsmem", "mcp", "--store", store],
        env={**os.environ, "OBSMEM_API_KEY": secret, "PYTHONPATH": str(ROOT / "src")}, cwd=str(ROOT),
    )  # fmt: skip
    try:
        async with Client(params) as client:
            served = await client.call_tool("memory_status", {"thread_id": "t1"})
            assert not served.is_error and json.loads(_text(served))["thread_id"] == "t1"

            assert await keys.revoke(key.key_id)
            for name, arguments in (
                ("memory_status", {"thread_id": "t1"}),
                ("forget", {"value": "5521", "thread_id": "t1"}),
            ):
                refused = await client.call_tool(name, arguments)
                assert refused.is_error and "revoked" in _text(refused), (name, _text(refused))
            with pytest.raises(Exception, match="revoked"):
                await client.read_resource("obsmem://threads/t1/observations")
    finally:
        await keys.close()
    async with Memory(store) as memory:
        assert [m.text for m in await memory.list_messages("t1")] == ["My locker is 5521."]  # nothing forgotten

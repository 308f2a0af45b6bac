"""The MCP server driven by the MCP SDK's own client: streamable HTTP (mounted at /mcp in the live
server) and stdio (``obsmem mcp`` as a subprocess), scoped by the API key like REST."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.integrations.agent_model import small_memory_config
from tests.server.conftest import Env, open_env
from tests.server.live import auth

pytestmark = pytest.mark.anyio
SECRET = "MCP-SECRET-777"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("mcp")):
        keys = env.keys
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for key, thread in ((keys.alice, "m-alice"), (keys.bob, "m-bob"), (keys.globex, "m-carol")):
                assert client.post("/api/threads", json={"id": thread}, headers=auth(key)).status_code == 201
            for number in range(30):
                client.post("/api/threads/m-alice/messages", headers=auth(keys.alice), json={"format": "openai", "messages": [
                    {"role": "user", "content": f"Item {number}: the Osprey plan step {number} uses {SECRET} code."},
                    {"role": "assistant", "content": f"Understood step {number}."}]})  # fmt: skip
            client.get("/api/threads/m-alice/context", headers=auth(keys.alice))
        env.live.call(env.live.service.memory.observe("m-alice"))
        yield env


def http_client(env: Env, key: str | None) -> Client:
    headers = auth(key) if key else {}
    transport = streamable_http_client(env.url + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    return Client(transport)


def payload(result: Any) -> Any:
    assert not result.is_error, result
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


def failed(result: Any) -> str:
    assert result.is_error, result
    text: str = " ".join(getattr(c, "text", "") for c in result.content)
    assert SECRET not in text
    return text


async def test_http_tools_and_resource_for_the_right_key(env: Env) -> None:
    async with http_client(env, env.keys.alice) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"recall", "search_knowledge", "remember", "forget"} <= names
        recalled = payload(await client.call_tool("recall", {"thread_id": "m-alice", "limit": 5}))
        assert SECRET in json.dumps(recalled)
        remembered = payload(await client.call_tool("remember", {"text": f"Alice's locker is {SECRET}"}))
        assert remembered["scope"] == "org:acme/resource:alice"
        hits = payload(await client.call_tool("search_knowledge", {"query": "locker"}))
        assert any(SECRET in hit["text"] for hit in hits)
        read = await client.read_resource("obsmem://threads/m-alice/observations")
        assert "Osprey" in read.contents[0].text


async def test_http_other_keys_get_nothing(env: Env) -> None:
    for key in (env.keys.bob, env.keys.globex):
        async with http_client(env, key) as client:
            assert "does not exist" in failed(await client.call_tool("recall", {"thread_id": "m-alice"}))
            failed(await client.call_tool("recall", {"thread_id": "m-alice", "query": "Osprey"}))
            failed(await client.call_tool("forget", {"value": SECRET, "thread_id": "m-alice"}))
            failed(await client.call_tool("forget", {"value": SECRET, "resource_id": "alice"}))
            failed(await client.call_tool("remember", {"text": "planted", "thread_id": "m-alice"}))
            failed(await client.call_tool("search_knowledge", {"query": "locker", "resource_id": "alice"}))
            hits = payload(await client.call_tool("search_knowledge", {"query": "locker"}))
            assert SECRET not in json.dumps(hits)
            with pytest.raises(Exception) as raised:
                await client.read_resource("obsmem://threads/m-alice/observations")
            assert SECRET not in str(raised.value)
    # alice's thread still holds the value: the refused forgets changed nothing
    async with http_client(env, env.keys.alice) as client:
        assert SECRET in json.dumps(payload(await client.call_tool("recall", {"thread_id": "m-alice", "limit": 5})))


async def test_http_without_a_key_is_refused(env: Env) -> None:
    async with httpx.AsyncClient(timeout=60) as raw:
        response = await raw.post(env.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401 and response.json()["error"]["type"] == "AuthenticationError"
    with pytest.raises(Exception):
        async with http_client(env, "om_0123456789abcdef_" + "y" * 43) as client:
            await client.list_tools()


async def test_read_only_key_cannot_forget(env: Env) -> None:
    async with http_client(env, env.keys.alice_read_only) as client:
        assert "read-only" in failed(await client.call_tool("forget", {"value": SECRET, "thread_id": "m-alice"}))
        assert SECRET in json.dumps(payload(await client.call_tool("recall", {"thread_id": "m-alice", "limit": 5})))


async def test_forget_in_own_thread(env: Env) -> None:
    async with http_client(env, env.keys.bob) as client:
        counts = payload(await client.call_tool("forget", {"value": "hello-never-said", "thread_id": "m-bob"}))
        assert isinstance(counts, dict)


def stdio_params(env: Env, key: str) -> StdioServerParameters:
    root = Path(__file__).resolve().parents[2]
    config = env.store_path.parent / "config.json"
    config.write_text(json.dumps(small_memory_config(retrieval=True).snapshot()))
    return StdioServerParameters(
        command=sys.executable, args=["-m", "obsmem", "mcp", "--store", f"sqlite:///{env.store_path}",
                                      "--knowledge", str(env.store_path.parent / "knowledge.db"),
                                      "--config", str(config)],
        env={**os.environ, "OBSMEM_API_KEY": key, "PYTHONPATH": str(root / "src")}, cwd=str(root),
    )  # fmt: skip


async def test_stdio_is_scoped_by_the_key(env: Env) -> None:
    async with Client(stdio_params(env, env.keys.alice)) as client:
        assert SECRET in json.dumps(payload(await client.call_tool("recall", {"thread_id": "m-alice", "limit": 5})))
    async with Client(stdio_params(env, env.keys.globex)) as client:
        assert "does not exist" in failed(await client.call_tool("recall", {"thread_id": "m-alice"}))
        assert payload(await client.call_tool("recall", {"thread_id": "m-carol", "limit": 5})) is not None


async def test_http_memory_status_and_receipt_tools(env: Env) -> None:
    memory = env.live.service.memory
    async with httpx.AsyncClient(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as rest:
        turn = (await rest.post("/api/threads/m-alice/turns", json={
            "format": "openai", "messages": [{"role": "user", "content": "Which Osprey step is next?"}]})).json()  # fmt: skip
        ended = await rest.post(f"/api/turns/{turn['turn_id']}/end", json={"messages": [
            {"id": "m-alice-mcp-reply", "role": "assistant", "parts": [{"type": "text", "text": "Step 30."}]}]})  # fmt: skip
        assert ended.status_code == 200, ended.text
    async with http_client(env, env.keys.alice) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"memory_status", "receipt"} <= names
        status = payload(await client.call_tool("memory_status", {"thread_id": "m-alice"}))
        expected = env.live.call(memory.status("m-alice")).data()
        assert {k: v for k, v in status.items() if k != "checked_at"} == {
            k: v for k, v in expected.items() if k != "checked_at"}
        assert status["record_id"] is not None and status["phase"]
        made = payload(await client.call_tool("receipt", {"message_id": "m-alice-mcp-reply", "resolve": True}))
        receipt = env.live.call(memory.receipt("m-alice-mcp-reply"))
        sources = env.live.call(memory.receipt_sources(receipt))
        assert made["receipt"] == receipt.data() and made["thread_id"] == "m-alice"
        assert [g["id"] for g in made["groups"]] == [g.id for g in receipt.groups]
        for group in made["groups"]:
            assert [m["id"] for m in group["messages"]] == [m.id for m in sources[group["id"]]]
        assert [m["id"] for m in made["raw"]] == [m.id for m in sources["raw"]]
        assert "MessageNotFoundError" in failed(await client.call_tool("receipt", {"message_id": "no-such"}))
    for key in (env.keys.bob, env.keys.globex):
        async with http_client(env, key) as client:
            assert "does not exist" in failed(await client.call_tool("memory_status", {"thread_id": "m-alice"}))
            refused = failed(await client.call_tool("receipt", {"message_id": "m-alice-mcp-reply"}))
            assert "MessageNotFoundError" in refused and "Step 30" not in refused


async def test_recall_page_is_documented_and_answers_the_page_it_returns(env: Env) -> None:
    """A negative ``page`` is not an echoed mistake: as in the library's recall tool schema ("-1
    reads the other way") and REST (``page`` from -1000), page -1 is the first page read from the
    other end (the thread's last messages; with a cursor, those before it), -2 the one before it;
    page 0 is read as 1 and answered as 1. The MCP tool now tells its clients so.

    On main the paging already held, but the tool said nothing about ``page`` (no description;
    its docstring: "otherwise the conversation from its start"), so ``"page": -1`` in an answer read
    as an invalid value echoed back: ``AssertionError: assert '-1' in ''``."""
    async with http_client(env, env.keys.alice) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "recall")
        assert "-1" in tool.input_schema["properties"]["page"].get("description", "")
        assert "page" in (tool.description or "")

        def seqs(answer: dict[str, Any]) -> list[int]:
            return [m["seq"] for m in answer["messages"]]

        async def recall(page: int) -> dict[str, Any]:
            answer: dict[str, Any] = payload(await client.call_tool(
                "recall", {"thread_id": "m-alice", "limit": 3, "page": page}))  # fmt: skip
            assert "error" not in answer, answer
            return answer

        first, zero, last, before_last = await recall(1), await recall(0), await recall(-1), await recall(-2)
        assert (first["page"], zero["page"], last["page"], before_last["page"]) == (1, 1, -1, -2)
        assert seqs(zero) == seqs(first) == sorted(seqs(first)) and seqs(first)[0] == 1
        stored = await client.call_tool("recall", {"thread_id": "m-alice", "limit": 3, "page": 1000})
        assert payload(stored)["messages"] == [] and payload(stored)["page"] == 1000
        assert seqs(last) and seqs(before_last) and max(seqs(before_last)) < min(seqs(last))
        assert min(seqs(last)) > max(seqs(first)) and last["has_next_page"] and not last["has_prev_page"]


async def test_tool_arguments_have_the_rest_api_bounds(env: Env) -> None:
    """Found by a hostile review: on main MCP ``remember`` stored a 2,000,000-character text and a
    300,000-character subject (REST refuses text over 10,000 and a subject over 200 with 422),
    and every later knowledge search of the resource returned megabytes. Every tool argument now
    has the bounds of its REST counterpart, checked before anything runs."""
    async with http_client(env, env.keys.alice) as client:
        too_long = {
            "remember": [{"text": "x" * 10_001}, {"text": "fine", "subject": "s" * 201}, {"text": ""}],
            "recall": [{"thread_id": "m-alice", "limit": 201}, {"thread_id": "m-alice", "page": 1001},
                       {"thread_id": "m-alice", "limit": 0}, {"thread_id": "m-alice", "query": "q" * 2001},
                       {"thread_id": "t" * 201}],
            "search_knowledge": [{"query": "q" * 2001}, {"query": "locker", "limit": 101}],
            "forget": [{"value": "v" * 10_001, "thread_id": "m-alice"}, {"value": "", "thread_id": "m-alice"}],
            "memory_status": [{"thread_id": "t" * 201}],
            "receipt": [{"message_id": "m" * 201}],
        }
        for tool, calls in too_long.items():
            for arguments in calls:
                text = failed(await client.call_tool(tool, arguments))
                assert len(text) < 2_000, (tool, len(text))  # a refusal does not echo the argument back
        remembered = payload(await client.call_tool("remember", {"text": "y" * 10_000, "subject": "s" * 200}))
        assert len(remembered["text"]) == 10_000  # the bound itself is taken


async def test_tools_that_could_only_fail_are_not_listed(env: Env) -> None:
    """``obsmem mcp`` without ``--knowledge`` and without retrieval mode: on main it listed
    ``search_knowledge``, ``remember`` and ``recall``, each of which then always failed ("no
    knowledge store", "the recall tool needs retrieval mode"): a client's model was offered tools
    it could never use. Now only what works is listed."""
    root = Path(__file__).resolve().parents[2]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "obsmem", "mcp", "--store", f"sqlite:///{env.store_path}"],
        env={**os.environ, "OBSMEM_API_KEY": env.keys.alice, "PYTHONPATH": str(root / "src")}, cwd=str(root),
    )  # fmt: skip
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"forget", "memory_status", "receipt"} <= names
        assert not names & {"recall", "search_knowledge", "remember"}, names
        status = payload(await client.call_tool("memory_status", {"thread_id": "m-alice"}))
        assert status["thread_id"] == "m-alice"

"""MCP ``recall`` reads on with the answer's ``next_page`` in both directions. Read back from a
thread's latest messages (``page: -1``), ``next_page`` holds the cursor with ``anchor: "end"``;
the MCP tool had no ``anchor`` argument (the SDK drops arguments a tool does not take), so passing
``next_page`` on read *forward* from the cursor: the page repeated messages already shown and the
thread's start was never reached. Now the tool takes ``anchor`` and ``next_page`` reads on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import http_client, payload

pytestmark = pytest.mark.anyio

THREAD = "np-alice"
EXCHANGES = 12  # 24 messages, seq 1..24


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("mcp-next-page-139")):
        alice = auth(env.keys.alice)
        with httpx.Client(base_url=env.url, timeout=60) as client:
            assert client.post("/api/threads", json={"id": THREAD}, headers=alice).status_code == 201
            for number in range(EXCHANGES):
                said = {"format": "openai", "messages": [
                    {"role": "user", "content": f"Item {number}."},
                    {"role": "assistant", "content": f"Noted {number}."},
                ]}  # fmt: skip
                saved = client.post(f"/api/threads/{THREAD}/messages", json=said, headers=alice)
                assert saved.status_code == 201, saved.text
        yield env


async def read_all(env: Env, first: dict[str, Any]) -> list[list[int]]:
    """The seqs of every page, from ``first`` on by each answer's ``next_page`` (at most 20 pages)."""
    pages: list[list[int]] = []
    async with http_client(env, env.keys.alice) as client:
        arguments: dict[str, Any] | None = {"thread_id": THREAD, **first}
        while arguments is not None and len(pages) < 20:
            answer = payload(await client.call_tool("recall", arguments))
            assert "error" not in answer, answer
            pages.append([m["seq"] for m in answer["messages"]])
            following = answer.get("next_page")
            arguments = None if following is None else {"thread_id": THREAD, **following}
    return pages


async def test_reading_back_from_the_end_with_next_page_reaches_the_start_once(env: Env) -> None:
    pages = await read_all(env, {"page": -1, "limit": 5})
    seqs = [seq for page in pages for seq in page]
    # before: [[20, 21, 22, 23, 24], [19, 20, 21, 22, 23], [24]]: the second page read forward
    # from its cursor (anchor "end" dropped), repeating four messages; seq 1..18 never came
    assert sorted(seqs) == list(range(1, 2 * EXCHANGES + 1)), pages
    assert all(max(later) < min(earlier) for earlier, later in zip(pages, pages[1:], strict=False)), pages


async def test_reading_forward_with_next_page_still_reads_each_message_once(env: Env) -> None:
    pages = await read_all(env, {"page": 1, "limit": 5})
    assert [seq for page in pages for seq in page] == list(range(1, 2 * EXCHANGES + 1)), pages


async def test_the_tool_documents_anchor(env: Env) -> None:
    async with http_client(env, env.keys.alice) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "recall")
        anchor = tool.input_schema["properties"]["anchor"]
        assert "next_page" in anchor.get("description", "")
        assert "next_page" in (tool.description or "")

"""Hostile review (helper-124): the inspector's receipt page lists what a receipt names, and a
receipt is message metadata any client may store (``obsmem_receipt``). One naming 3,000 groups,
3,000 knowledge records and pins, and a raw tail spanning a whole thread made the page list every
one of them (a knowledge read each, the whole thread read and shown): a page as large as the
client cares to make it, and as slow. The page now lists the first of each and says how many
more there are; a group's own page and the timeline show the rest, a page at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

MANY = 3000
TAIL = 400


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("receipt-bounds124")):
        with httpx.Client(base_url=env.url, timeout=120, headers=auth(env.keys.alice)) as client:
            assert client.post("/api/threads", json={"id": "long124"}).status_code == 201
            client.post("/api/threads/long124/messages", json={"format": "openai", "messages": [
                {"role": "user", "content": f"line {n}"} for n in range(TAIL)]}).raise_for_status()  # fmt: skip
            receipt = {
                "hash": "f" * 64,
                "groups": [[f"g{n}", "long124", 1, TAIL, "observation"] for n in range(MANY)],
                "knowledge": [f"k{n}" for n in range(MANY)],
                "pins": [f"p{n}" for n in range(MANY)],
                "raw_span": ["long124", 1, TAIL],
            }
            client.post("/api/threads/long124/messages", json={"messages": [{
                "id": "forged124", "role": "assistant", "parts": [{"type": "text", "text": "hi"}],
                "metadata": {"obsmem_receipt": receipt}}]}).raise_for_status()  # fmt: skip
        yield env


def test_the_receipt_page_lists_a_bounded_part_of_a_huge_receipt(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=120, cookies={"obsmem_ui_key": env.keys.alice}) as client:
        answer = client.get("/ui/messages/forged124/receipt")
    assert answer.status_code == 200
    html = answer.text
    groups = html.count('class="rgroup')
    raw = len(re.findall(r'<li class="msg ', html))
    knowledge = html.count("<li><code>k")
    pins = html.count("<li><code>p")
    assert 0 < groups <= 200 and 0 < raw <= 200 and 0 < knowledge <= 200 and 0 < pins <= 200, (groups, raw, knowledge, pins)
    assert f"{MANY - groups:,} more" in html  # the groups not listed
    assert f"{MANY - knowledge:,} more" in html
    assert len(html) < 400_000


@pytest.mark.anyio
async def test_the_mcp_receipt_tool_resolves_a_bounded_part_of_a_huge_receipt(env: Env) -> None:
    """``receipt`` with ``resolve`` answered every group's messages (up to 200 each) and the whole
    raw span: for this receipt 3,000 groups, hundreds of thousands of message references from one
    call. It now resolves the first 100 groups and 500 raw messages, and says it left the rest."""
    import json

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    transport = streamable_http_client(env.url + "/mcp", http_client=httpx2.AsyncClient(headers=auth(env.keys.alice), timeout=300))
    async with Client(transport) as client:
        answer = await client.call_tool("receipt", {"message_id": "forged124", "resolve": True})
    assert not answer.is_error
    data = answer.structured_content or json.loads(answer.content[0].text)
    assert len(data["receipt"]["groups"]) == MANY  # the receipt itself, whole
    assert len(data["groups"]) == 100 and data["groups_truncated"] is True
    assert 0 < len(data["raw"]) <= 500

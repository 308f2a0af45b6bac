"""A knowledge search for half an emoji answers, as it did before the search index (helper-172).

A client that split an emoji sends a lone surrogate (JSON's ``"\\ud83d"``); a query with no
word of two letters is searched as it is. The full scan found nothing for it; the index (fbaa231)
passed it to SQLite and psycopg, which cannot encode it: ``Knowledge.search`` raised
UnicodeEncodeError, not an obsmem error, so a REST or MCP search with it failed as a crash.
"""

from __future__ import annotations

import pytest

from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"
THREAD = ALICE + "/thread:t1"


@pytest.mark.parametrize("query", ["\ud83d", "? \ud83d", "\udc00?!"])
async def test_a_query_holding_half_an_emoji_finds_nothing_and_does_not_crash(
    knowledge: Knowledge, query: str
) -> None:
    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "asked ? about the emoji 😀 and a tulip", ALICE, reason="x")
    assert await knowledge.search(query, THREAD) == []
    hits = await knowledge.search("tulip", THREAD)  # the store answers on
    assert [h.text for h in hits] == ["asked ? about the emoji 😀 and a tulip"]

"""A refused write to the in-memory knowledge store leaves its search index as it was, without
rebuilding it (helper-172).

The in-memory store (``Knowledge.in_memory()``) runs on the event loop. Its search index
(fbaa231) was thrown away whenever a write was refused (a node id that does not exist, a scope
that cannot see it: an agent's capture meets these), and rebuilt from every node and record on
the next write or search: ~0.3 s of the event loop at 5,000 records, each refusal.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.errors import ObsmemError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store import memory

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"
THREAD = ALICE + "/thread:t1"


async def test_a_refused_write_does_not_rebuild_the_search_index(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Knowledge.in_memory() as knowledge:
        user = await knowledge.node("User", "person", ALICE)
        for i in range(300):
            await knowledge.append(user.id, f"fact {i}: likes tulips and invoices", ALICE, reason="x")
        other = await knowledge.node("Bob", "person", "org:acme/resource:bob")
        before = await knowledge.store.search_lexical("tulips", THREAD, limit=1000)
        assert len(before) == 300

        indexed = [0]
        grams = memory._grams

        def counted(text: str) -> Any:
            indexed[0] += 1
            return grams(text)

        monkeypatch.setattr(memory, "_grams", counted)
        for _ in range(3):
            with pytest.raises(ObsmemError):  # Bob's node is not visible from Alice's scope
                await knowledge.append(other.id, "tulips for Bob", ALICE, reason="x")
        after = await knowledge.store.search_lexical("tulips", THREAD, limit=1000)
        record = await knowledge.append(user.id, "also likes tulips in spring", ALICE, reason="x")
        assert indexed[0] <= 2, f"{indexed[0]} texts indexed again after 3 refused writes and one append"
        assert [h.id for h in after] == [h.id for h in before]
        hits = await knowledge.store.search_lexical("spring", THREAD, limit=10)
        assert [h.id for h in hits] == [record.id]

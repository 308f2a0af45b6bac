"""A search or listing does not pay, on every read, for the length of every record it looks at
(helper-123's hostile review): each read built the tombstone key of each record's whole text
(NFKC, casefold, a Python pass over every character), even on a node without a single
tombstone. One 10 MB record made every search of its scope take ~20 s (~1.3 s per MB on this
machine) — and remind searches on every turn. Now a record's key is built only where its node
has tombstones to compare it with.

Work is counted, not timed (:mod:`tests.integrity.work_count`): a read over a record 4× as long
must cost about the same, not 4× as much.
"""

from __future__ import annotations

import asyncio

from obsmem.knowledge import Knowledge
from tests.integrity.work_count import work

RES = "org:acme/resource:alice"


def _read_work(length: int) -> int:
    loop = asyncio.new_event_loop()
    try:
        knowledge = Knowledge.in_memory(actor="t")

        async def prepare() -> str:
            node = await knowledge.node("Alice", "person", RES)
            await knowledge.append(node.id, "Alice plays the cello", RES, reason="said")
            await knowledge.append(node.id, "Alice pasted a log: " + "line of log text " * length, RES, reason="said")
            return node.id

        node = loop.run_until_complete(prepare())

        def read(_: str) -> None:
            hits = loop.run_until_complete(knowledge.search("cello", RES))
            assert [h.text for h in hits][:1] == ["Alice plays the cello"]
            about = loop.run_until_complete(knowledge.store.list_about(node, RES))
            assert len(about.items) == 2

        read("")  # warm-up: imports and caches are not the input's work
        return work(read, "")
    finally:
        loop.close()


def test_a_read_does_not_walk_every_character_of_the_records_it_sees() -> None:
    small, large = _read_work(2_000), _read_work(8_000)
    assert large / small < 2, (small, large)

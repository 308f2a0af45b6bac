"""A knowledge search's work is bounded by what its caller's scopes hold, not by other users'
and orgs' knowledge in the same database (helper-172).

The search index (fbaa231) holds every scope's rows; it was asked for a term across all of them
and the rows found were then filtered to the caller's scopes. A common word, or any term of one
or two letters (read through the index's vocabulary: every trigram it begins, the file over),
so cost each user's search, every remind turn, the work of the whole database: in SQLite,
24 ms where the scan before the index took 2 ms for a user of 50 records beside 15,000 of
another org's; in PostgreSQL a sequential scan of every scope's rows (27 ms at 200,000).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"
THREAD = ALICE + "/thread:t1"
OTHERS = "org:zeta/resource:bob"


async def _steps(knowledge: Knowledge, query: str) -> tuple[int, list[str]]:
    """SQLite's virtual-machine steps (in thousands) one search takes, and its hits."""
    store = knowledge.store
    ticks = [0]

    def tick() -> int:
        ticks[0] += 1
        return 0

    def install(handler: object) -> None:
        conn: sqlite3.Connection = store._connection()  # type: ignore[attr-defined]
        conn.set_progress_handler(handler, 1_000)  # type: ignore[arg-type]

    await store._on_thread(install, tick)  # type: ignore[attr-defined]
    try:
        hits = await store.search_lexical(query, THREAD, limit=50)
    finally:
        await store._on_thread(install, None)  # type: ignore[attr-defined]
    return ticks[0], sorted(h.text for h in hits)


async def test_a_search_does_not_grow_with_other_orgs_knowledge(tmp_path: Path) -> None:
    async with Knowledge.sqlite(tmp_path / "k.db") as knowledge:
        alice = await knowledge.node("Alice", "person", ALICE)
        mine = [f"fact {i}: we go to the tulip market on Friday" for i in range(20)]
        for text in mine:
            await knowledge.append(alice.id, text, ALICE, reason="x")
        queries = ["go to", "tulip market", "we"]
        alone = {q: await _steps(knowledge, q) for q in queries}

        bob = await knowledge.node("Bob", "person", OTHERS)
        for i in range(1_500):  # another org's knowledge, full of the same words
            await knowledge.append(bob.id, f"note {i}: go to the tulip market, we said, to buy tulips", OTHERS, reason="x")

        for query in queries:
            steps, hits = await _steps(knowledge, query)
            assert hits == alone[query][1] == sorted(mine)
            assert steps <= 2 * alone[query][0] + 5, (
                f"{query!r}: {steps}k steps beside another org's 1,500 records, {alone[query][0]}k alone"
            )


TEXTS = [
    "a" * 20_000 + " needle", "!!! ??? ...", "x😀y 👨‍👩‍👧 family", "cafe\u0301 ÉCOLE İSTANBUL ΣΊΣΥΦΟΣ",
    'say "hello" AND NEAR(a b) -x ^y col:val (paren) * star', "a", "ab", "ß Straße", "ǅ ǆ", "\u0301\u0301\u0301x",
    "ﬃ ligature", "tab\there", "ĳssel", "ᾼ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𐐀𐐨", "nul\x00inside text",
]
QUERIES = [
    '"', '""', '*', 'NEAR', 'AND', '-', '^', ':', '(', 'NEAR(a b)', 'col:val', '"hello"', 'a*', '^y', '-x', 'AND OR NOT',
    '😀', '👨‍👩‍👧', 'e\u0301', 'école', 'ÉCOLE', 'İstanbul', 'ΣΊΣΥΦΟΣ', 'a', 'ab', 'x', 'ss', 'STRASSE', 'Ǆ',
    '\u0301', 'ffi', '!!!', '?', '\t', 'needle', 'aaa', 'ij', 'ᾳι', '𝔘𝔫', '𐐀', 'x😀', 'y 👨', 'nul\x00in', '\x00',
    " ".join(f"w{i}" for i in range(2_000)),
]


@pytest.mark.parametrize("scan_work", [0, 20_000, 10**9])
async def test_the_index_and_the_scope_read_find_what_the_scan_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan_work: int
) -> None:
    """Whichever way the candidates are found (the index, the caller's rows read), the hits are
    those of the scan of every row (the search before the index), on text chosen to trip both."""
    from obsmem.knowledge.store import sql_tables
    from obsmem.knowledge.store.contract import RecordDraft, RecordView
    from obsmem.knowledge.store.scopes import Level

    from .test_search_index_168 import _both

    monkeypatch.setattr(sql_tables, "_SCAN_WORK", scan_work)
    async with Knowledge.sqlite(tmp_path / "k.db") as knowledge:
        store = knowledge.store
        ours = await knowledge.node("Node of Ǆ and ﬁ", "thing", "org:acme")
        theirs = await knowledge.node("Node of Ǆ and ﬁ", "thing", OTHERS)
        for node, scope in ((ours, "org:acme"), (ours, ALICE), (theirs, OTHERS)):
            for text in TEXTS:
                draft = RecordDraft(node_id=node.id, text=text, scope=scope, max_scope=Level.ORG)
                await store.append_record(draft, actor="me", reason="x")
        found = 0
        for query in QUERIES:
            for view in (RecordView(), RecordView(include_deleted=True, include_candidates=True)):
                indexed, scanned = await _both(store, query, THREAD, view, 1000)  # type: ignore[arg-type]
                assert indexed == scanned, query[:40]
                assert all(h.scope.startswith("org:acme") for h in indexed)
                found += len(indexed)
        assert found > 100

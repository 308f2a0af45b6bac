"""One knowledge search reads the rows that can match it, not the whole scope chain (helper-168).

``Knowledge.search`` (what the remind agent runs on every turn) decoded every node and record
of every scope the caller sees, then looked for the terms in Python: a search returning five
hits out of an org's 1,000 records parsed all 1,000, so every turn's background work grew with
the whole knowledge base. A search now finds its candidates through an index kept with the rows
(SQLite: FTS5 trigram; PostgreSQL: pg_trgm), and decodes those.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store import contract, memory

pytestmark = pytest.mark.anyio

ORG = "org:acme"
THREAD = "org:acme/resource:alice/thread:t1"
N = 1000
MATCHING = {7, 250, 499, 731, 998}


class Decoded:
    """Counts the nodes and records the store decodes from their stored JSON (the in-memory
    store: copies of its rows it hands out)."""

    def __init__(self) -> None:
        self.count = 0

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for cls in (contract.Record, contract.Node):
            original = cls.model_validate_json.__func__  # type: ignore[attr-defined]

            def counted(kind: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                self.count += 1
                return _original(kind, *args, **kwargs)

            monkeypatch.setattr(cls, "model_validate_json", classmethod(counted))
        clone = memory._clone

        def cloned(model: Any) -> Any:
            if isinstance(model, (contract.Record, contract.Node)):
                self.count += 1
            return clone(model)

        monkeypatch.setattr(memory, "_clone", cloned)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[Decoded]:
    yield Decoded()


async def test_a_search_matching_five_of_a_thousand_org_records_decodes_about_five(
    knowledge: Knowledge, decoded: Decoded, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = await knowledge.node("Team", "topic", ORG)
    for i in range(N):
        text = f"team fact {i} about kubernetes" if i in MATCHING else f"team fact {i} about tooling"
        await knowledge.append(team.id, text, ORG, reason="x")
    await knowledge.drain()

    decoded.wrap(monkeypatch)
    lexical = await knowledge.store.search_lexical("Kubernetes", THREAD, limit=5)
    assert sorted(h.text for h in lexical) == sorted(f"team fact {i} about kubernetes" for i in MATCHING)
    assert decoded.count <= 3 * len(MATCHING), decoded.count  # read every one of the 1,000 before

    decoded.count = 0
    hits = await knowledge.search("Kubernetes", THREAD, limit=5)
    assert {h.text for h in hits} == {f"team fact {i} about kubernetes" for i in MATCHING}
    # the fused search adds its semantic side's reads (a few times the limit), never the store
    assert decoded.count <= 10 * len(MATCHING), decoded.count


async def test_terms_shorter_than_a_trigram_read_only_their_rows(
    knowledge: Knowledge, decoded: Decoded, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = await knowledge.node("Team", "topic", ORG)
    for i in range(300):
        await knowledge.append(team.id, f"fact {i} about tooling", ORG, reason="x")
    for text in ("uses Qz", "Ω here", "qz again"):
        await knowledge.append(team.id, text, ORG, reason="x")

    decoded.wrap(monkeypatch)
    hits = await knowledge.store.search_lexical("QZ ω", THREAD, limit=10)  # terms of two characters and more: "qz"
    assert sorted(h.text for h in hits) == ["qz again", "uses Qz"]
    hits = await knowledge.store.search_lexical(" ω ", THREAD, limit=10)  # no such term: the query is the term
    assert [h.text for h in hits] == ["Ω here"]
    assert decoded.count <= 12, decoded.count

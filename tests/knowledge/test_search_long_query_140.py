"""Knowledge's lexical search folds each record's text once, however many terms the query has.

Found by profiling a hostile search (``Knowledge.search`` with a pasted 5,000-word query, as an
agent's LangGraph store search or the REST knowledge search can send it, over 400 records): the
score of a record asked ``term in record.text.casefold()`` for every term, so each record's text
was folded once per term: two million casefolds, 1.4 s of the search's 1.7 s (0.17 s now; the
substring tests themselves stay one per term and record, in C).

Counted, not timed: the characters of record text casefolded by one search.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.reads import KnowledgeReads

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice"


class _Folded:
    chars = 0


class _CountingText(str):
    """A record's text that notes the characters each ``casefold`` of it folds."""

    def casefold(self) -> str:
        _Folded.chars += len(self)
        return str.casefold(self)


async def test_a_long_query_folds_each_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    original = KnowledgeReads.visible_records

    def counted(self: KnowledgeReads, scope: str, view: Any, records: Iterable[Any], **kwargs: Any) -> list[Any]:
        seen = original(self, scope, view, records, **kwargs)
        return [r.model_copy(update={"text": _CountingText(r.text)}) for r in seen]

    async with Knowledge.in_memory() as knowledge:
        node = await knowledge.node("Alice", "person", SCOPE)
        for i in range(100):
            await knowledge.append(node.id, f"Alice fact {i}: she likes w{i}x and Berlin item{i}", SCOPE, reason="t")
        await knowledge.drain()
        monkeypatch.setattr(KnowledgeReads, "visible_records", counted)
        texts = sum(len(f"Alice fact {i}: she likes w{i}x and Berlin item{i}") for i in range(100))
        query = " ".join(f"w{i}x" for i in range(2_000))
        _Folded.chars = 0
        hits = await knowledge.store.search_lexical(query, SCOPE)
        assert {h.record.text for h in hits if h.record is not None} >= {"Alice fact 7: she likes w7x and Berlin item7"}
        assert _Folded.chars <= texts, f"{_Folded.chars:,} characters folded for {texts:,} characters of records"

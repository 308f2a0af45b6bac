"""Differential check of e7aab67: every read with the prefetched timelines (and the LangGraph
store's reads by attribute) answers as the reads before it (timelines read one attribute at a
time, the namespace paged), on a varied store: timelines across scopes, supersessions,
tombstones, candidates, merges, rescopes, erasures; views with as_of and as_known_at."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import TrustState
from obsmem.knowledge.store.reads import KnowledgeReads

pytestmark = pytest.mark.anyio

ORG = "org:acme"
RA = f"{ORG}/resource:alice"
RB = f"{ORG}/resource:bob"
T1 = f"{RA}/thread:t1"
T2 = f"{RA}/thread:t2"
READERS = [ORG, RA, RB, T1, T2]


def _old_read_timelines(self: KnowledgeReads, node_id: str, attributes: Any, known_at: Any) -> None:
    for attribute in attributes:
        timeline_view = RecordView(as_known_at=known_at)
        timelines: dict[str, list[Any]] = {}
        for other in self.t.attribute_records(node_id, attribute):
            if other.attribute == attribute and self._alive(other, timeline_view):
                timelines.setdefault(other.scope, []).append((other.valid_from, other.id))
        for line in timelines.values():
            line.sort()
        self._timeline_cache[(node_id, attribute, known_at)] = timelines


async def _build(k: Knowledge) -> tuple[list[str], list[datetime], list[str]]:
    marks: list[datetime] = []
    n1 = await k.node("Acme", "company", ORG)
    n2 = await k.node("Alice", "person", RA)
    n3 = await k.node("AcmeCorp", "company", ORG)
    n4 = await k.node("Settings", "thing", ORG)
    ids: list[str] = []

    async def add(node: str, text: str, scope: str, **kw: Any) -> str:
        r = await k.append(node, text, scope, reason="t", **kw)
        ids.append(r.id)
        marks.append(r.captured_at)
        return r.id

    c20 = await add(n1.id, "Acme is in Paris", ORG, attribute="city", when="2020-01-01")
    c22 = await add(n1.id, "Acme is in Berlin", ORG, attribute="city", when="2022-01-01")
    await add(n1.id, "Acme is in Rome", ORG, attribute="city", when="2024-01-01")
    await add(n1.id, "Acme is in Oslo for alice", RA, attribute="city", when="2023-01-01")
    c25 = await add(n1.id, "Acme is in Lima for t1", T1, attribute="city", when="2025-01-01")
    await add(n1.id, "Acme is in Kyiv for t2", T2, attribute="city", when="2021-06-01")
    await add(n1.id, "Acme is in Bern for bob", RB, attribute="city", when="2022-06-01")
    await add(n1.id, "Acme sells rockets", ORG, attribute="product", when="2019-01-01")
    await add(n1.id, "Acme sells anvils", ORG, attribute="product", when="2021-01-01", trust=TrustState.CANDIDATE)
    await add(n1.id, "Acme is loud", RA)
    await add(n1.id, "Acme is quiet", T1)
    await add(n2.id, "Alice works at [[Acme]]", RA, attribute="employer", when="2020-01-01")
    await add(n2.id, "Alice likes [[Acme]] in t1", T1, attribute="mood", when="2021-01-01")
    await add(n2.id, "Alice left [[Acme]]", T1, attribute="employer", when="2024-01-01", source_thread_id="t1")
    await add(n3.id, "AcmeCorp is in Madrid", ORG, attribute="city", when="2023-06-01")
    await add(n3.id, "AcmeCorp founded 1950", ORG, attribute="founded")
    for i in range(40):
        for j, scope in enumerate((ORG, RA, T1)):
            await add(n4.id, f"setting {i} is v{j}", scope, attribute=f"s{i}", when=f"202{j}-0{1 + i % 9}-01")
    await add(n4.id, "setting odd", RA, attribute="we'ird \"attr\" %_ ; -- ü 😀")
    await add(n4.id, "setting odd 2", RA, attribute="we'ird \"attr\" %_ ; -- ü 😀", when="2026-01-01")
    store = k.store
    # supersession, tombstones, trust, merge, rescope, erasure
    await store.remove_record(c20, ORG, actor="a", reason="s", superseded_by=c22)
    await store.remove_record(ids[-5], T1, actor="a", reason="gone")
    marks.append(datetime.now(UTC))
    await store.add_tombstone(n1.id, RA, "Acme is loud", actor="a", reason="no")
    await store.remove_record(ids[40], RA, actor="a", reason="t", tombstone=True)
    await store.set_trust(ids[8], ORG, TrustState.VERIFIED, actor="a", reason="ok")
    marks.append(datetime.now(UTC))
    src = await store.get_node(n3.id, ORG)
    assert src is not None
    await store.merge_nodes(n3.id, n1.id, src.version, scope=ORG, actor="a", reason="same")
    await store.rescope_record(ids[11], T2, T2, actor="a", reason="narrow")
    await store.rescope_record(ids[3], T1, T1, actor="a", reason="narrow")
    await store.erase_records([c25, ids[60]], T1, actor="a", reason="erase")
    marks.append(datetime.now(UTC))
    await add(n1.id, "Acme is in Quito", ORG, attribute="city", when="2025-06-01")
    return [n1.id, n2.id, n3.id, n4.id], marks, ids


def _views(marks: list[datetime]) -> list[RecordView]:
    views = [RecordView(), RecordView(include_superseded=True), RecordView(include_candidates=True),
             RecordView(include_deleted=True, include_superseded=True, include_candidates=True)]
    for as_of in (datetime(2021, 3, 1, tzinfo=UTC), datetime(2023, 3, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)):
        views.append(RecordView(as_of=as_of))
        views.append(RecordView(as_of=as_of, include_candidates=True, as_known_at=marks[len(marks) // 2]))
    for mark in marks[5:20:6] + marks[-4:]:
        views.append(RecordView(as_known_at=mark))
        views.append(RecordView(as_known_at=mark, include_superseded=True, include_candidates=True))
    return views


async def _all(read: Any, **kw: Any) -> list[Any]:
    out: list[Any] = []
    after = None
    while True:
        page = await read(after=after, **kw)
        out += [r.model_dump() for r in page.items]
        if page.next_cursor is None:
            return out
        after = page.next_cursor


async def _answers(k: Knowledge, nodes: list[str], marks: list[datetime], ids: list[str]) -> list[Any]:
    s = k.store
    out: list[Any] = []
    for view in _views(marks):
        for reader in READERS:
            for node in nodes:
                for limit in (7, 100):
                    out.append(await _all(s.list_about, node_id=node, scope=reader, view=view, limit=limit))
                out.append(await _all(s.list_mentioning, node_id=node, scope=reader, view=view, limit=5))
                out.append(await _all(s.list_related, node_id=node, scope=reader, view=view, limit=5))
            for q in ("Acme", "setting odd"):
                out.append([(h.kind, h.id, h.score, h.record.model_dump() if h.record else None)
                            for h in await s.search_lexical(q, reader, view=view, limit=1000)])
            for rid in ids[::17]:
                got = await s.get_record(rid, reader, view)
                out.append(got.model_dump() if got else None)
    for reader in READERS:
        out.append([r.model_dump() for r in (await s.list_candidates(reader, limit=1000)).items])
    return out


async def test_reads_answer_as_before(knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, marks, ids = await _build(knowledge)
    new = await _answers(knowledge, nodes, marks, ids)
    # list_about_attributes: the node's records of those attributes as list_about shows them
    s = knowledge.store
    for view in _views(marks)[::3]:
        for reader in READERS:
            for node in nodes:
                for attrs in (["city"], ["city", "product", "s3", "nope"], [f"s{i}" for i in range(40)],
                              ["we'ird \"attr\" %_ ; -- ü 😀"], [f"x{i}" for i in range(700)] + ["s39", "city"]):
                    by_attr = [r.model_dump() for r in await s.list_about_attributes(node, reader, attrs, view=view)]
                    paged = [r for r in await _all(s.list_about, node_id=node, scope=reader, view=view, limit=100)
                             if r["attribute"] in attrs]
                    assert by_attr == paged, (view, reader, node, attrs[:3])
    monkeypatch.setattr(KnowledgeReads, "_prefetch_timelines", lambda self, records, known_at: None)
    monkeypatch.setattr(KnowledgeReads, "_read_timelines", _old_read_timelines)
    old = await _answers(knowledge, nodes, marks, ids)
    assert len(new) == len(old)
    for i, (a, b) in enumerate(zip(new, old, strict=True)):
        assert a == b, i


async def _lg_answers(store: KnowledgeBaseStore) -> list[Any]:
    out: list[Any] = []
    for ns in (("memories",), ("org:acme", "memories"), ("prefs", "x"), ("org:acme", "resource:alice", "memories")):
        for key in ("a", "b", "A", "Mixed Key", "k 7", "k 13", "gone", "we'ird %_", "nope"):
            try:
                item = await store.aget(ns, key)
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
                continue
            out.append(None if item is None else (item.key, item.value, item.namespace))
        try:
            out.append([(i.key, i.value, i.namespace) for i in await store.asearch(ns, limit=1000)])
            out.append([(i.key, i.value) for i in await store.asearch(ns, query="note", limit=50)])
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
    out.append(await store.alist_namespaces(limit=1000))
    return out


async def test_langgraph_reads_answer_as_before(knowledge: Knowledge, monkeypatch: pytest.MonkeyPatch) -> None:
    store = KnowledgeBaseStore(knowledge, scope=T1)
    org = KnowledgeBaseStore(knowledge, scope=ORG, ceiling="org")
    for ns in (("memories",), ("prefs", "x")):
        for i in range(20):
            await store.aput(ns, f"k {i}", {"text": f"note {i}"})
        for key in ("a", "b", "A", "Mixed Key", "gone", "we'ird %_"):
            await store.aput(ns, key, {"text": f"first {key}"})
            await store.aput(ns, key, {"text": f"second {key}"})
        await store.adelete(ns, "gone")
        await store.aput(ns, "k 7", {"text": "changed"})
    await org.aput(("memories",), "a", {"text": "org a"})
    await org.aput(("memories",), "k 13", {"text": "org 13"})
    new = [await _lg_answers(store), await _lg_answers(org)]
    monkeypatch.setattr(KnowledgeReads, "_prefetch_timelines", lambda self, records, known_at: None)
    monkeypatch.setattr(KnowledgeReads, "_read_timelines", _old_read_timelines)
    monkeypatch.delattr(TablesKnowledgeStore, "list_about_attributes")
    old = [await _lg_answers(store), await _lg_answers(org)]
    assert new == old

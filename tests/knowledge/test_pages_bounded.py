"""A page of the review queue, of a thread's records or of the audit log reads what it returns,
not the whole scope (the project rule: no input makes a code path superlinear).

Before the fix ``list_candidates`` and ``list_by_source`` decoded every record of the scope and
``list_activity`` every event of it, for each page: the review UI, the curation worklist and the
activity feed slowed down with everything the scope ever learned, and reading them page by page
was quadratic. Work is counted, not timed (:mod:`tests.integrity.work_count`); the SQLite store
is opened inside the counted run so its connection thread is counted too. A page over 4x the
unrelated history must cost about the same (under 1.5x).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem.knowledge import SQLiteKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, TrustState

from tests.integrity.work_count import GROWTH_BOUND, work

RES = "org:acme/resource:alice"
Read = Callable[[SQLiteKnowledgeStore], Awaitable[list[Any]]]


def _fill(path: Path, history: int) -> None:
    """``history`` verified records (and their events) from thread "old", then three candidates
    and three records from thread "new"."""

    async def fill() -> None:
        async with SQLiteKnowledgeStore(path) as store:
            node = await store.create_node("User", "person", RES, actor="t", reason="r")
            for i in range(history):
                draft = RecordDraft(node.id, f"old fact {i}", RES, source_thread_id="old")
                await store.append_record(draft, actor="t", reason="r")
            for i in range(3):
                draft = RecordDraft(node.id, f"maybe {i}", RES, trust=TrustState.CANDIDATE)
                await store.append_record(draft, actor="t", reason="r")
                draft = RecordDraft(node.id, f"new fact {i}", RES, source_thread_id="new")
                await store.append_record(draft, actor="t", reason="r")

    asyncio.run(fill())


def _page_work(path: Path, read: Read) -> tuple[int, list[Any]]:
    found: list[Any] = []

    def run(_: str) -> None:
        async def go() -> None:
            async with SQLiteKnowledgeStore(path) as store:
                found.extend(await read(store))

        asyncio.run(go())

    return work(run, ""), found


async def _candidates(store: SQLiteKnowledgeStore) -> list[Any]:
    return [r.text for r in (await store.list_candidates(RES, limit=10)).items]


async def _by_source(store: SQLiteKnowledgeStore) -> list[Any]:
    return [r.text for r in (await store.list_by_source("new", RES, limit=10)).items]


async def _activity(store: SQLiteKnowledgeStore) -> list[Any]:
    return [str(e.action) for e in (await store.list_activity(RES, limit=5)).items]


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        (_candidates, ["maybe 2", "maybe 1", "maybe 0"]),
        (_by_source, ["new fact 0", "new fact 1", "new fact 2"]),
        (_activity, ["record-created"] * 5),
    ],
    ids=["candidates", "by_source", "activity"],
)
def test_a_page_does_not_read_the_scopes_whole_history(tmp_path: Path, read: Read, expected: list[Any]) -> None:
    for history in (100, 400):
        _fill(tmp_path / f"{history}.db", history)
    _page_work(tmp_path / "100.db", read)  # warm-up: imports and first-call caches
    small, found = _page_work(tmp_path / "100.db", read)
    assert found == expected
    large, found = _page_work(tmp_path / "400.db", read)
    assert found == expected
    assert large / small < 1.5, f"4x the history took {large / small:.1f}x the work for one page"


def _fill_node(path: Path, history: int) -> None:
    """A "User" node with ``history`` plain records and a five-record ``lives_in`` timeline, and a
    "Team" node whose records mention the user as often; then three newest records of each kind."""

    async def fill() -> None:
        async with SQLiteKnowledgeStore(path) as store:
            user = await store.create_node("User", "person", RES, actor="t", reason="r")
            team = await store.create_node("Team", "group", RES, actor="t", reason="r")
            for i in range(5):
                draft = RecordDraft(user.id, f"lives in city {i}", RES, attribute="lives_in")
                await store.append_record(draft, actor="t", reason="r")
            for label in [f"old {i}" for i in range(history)] + [f"newest {i}" for i in range(3)]:
                await store.append_record(RecordDraft(user.id, f"user {label}", RES), actor="t", reason="r")
                draft = RecordDraft(team.id, f"team {label}", RES, mentions=[user.id])
                await store.append_record(draft, actor="t", reason="r")

    asyncio.run(fill())


async def _user(store: SQLiteKnowledgeStore) -> str:
    node = await store.resolve_node("User", RES)
    assert node is not None
    return node.id


async def _about(store: SQLiteKnowledgeStore) -> list[Any]:
    return [r.text for r in (await store.list_about(await _user(store), RES, limit=3)).items]


async def _mentioning(store: SQLiteKnowledgeStore) -> list[Any]:
    return [r.text for r in (await store.list_mentioning(await _user(store), RES, limit=3)).items]


async def _related(store: SQLiteKnowledgeStore) -> list[Any]:
    return [r.text for r in (await store.list_related(await _user(store), RES, limit=4)).items]


async def _about_all_pages(store: SQLiteKnowledgeStore) -> list[Any]:
    """Every page of a node (what the knowledge agents do, 500 at a time): pages after the first
    start from their cursor."""
    user, after = await _user(store), None
    texts: list[str] = []
    while True:
        page = await store.list_about(user, RES, after=after, limit=50)
        texts.extend(r.text for r in page.items)
        if page.next_cursor is None:
            return [len(texts), texts[:1], texts[-1:]]
        after = page.next_cursor


@pytest.mark.parametrize(
    ("read", "expected"),
    [
        (_about, ["user newest 2", "user newest 1", "user newest 0"]),
        (_mentioning, ["team newest 2", "team newest 1", "team newest 0"]),
        (_related, ["team newest 2", "user newest 2", "team newest 1", "user newest 1"]),
    ],
    ids=["about", "mentioning", "related"],
)
def test_a_page_about_a_node_does_not_read_all_it_knows(tmp_path: Path, read: Read, expected: list[Any]) -> None:
    for history in (100, 400):
        _fill_node(tmp_path / f"{history}.db", history)
    _page_work(tmp_path / "100.db", read)
    small, found = _page_work(tmp_path / "100.db", read)
    assert found == expected
    large, found = _page_work(tmp_path / "400.db", read)
    assert found == expected
    assert large / small < 1.5, f"4x what the node knows took {large / small:.1f}x the work for one page"


def test_paging_through_a_node_is_linear_in_what_it_knows(tmp_path: Path) -> None:
    for history in (100, 400):
        _fill_node(tmp_path / f"{history}.db", history)
    _page_work(tmp_path / "100.db", _about_all_pages)
    small, found = _page_work(tmp_path / "100.db", _about_all_pages)
    assert found == [104, ["user newest 2"], ["lives in city 4"]]  # the timeline's newest only
    large, found = _page_work(tmp_path / "400.db", _about_all_pages)
    assert found == [404, ["user newest 2"], ["lives in city 4"]]
    assert large / small < GROWTH_BOUND, f"4x what the node knows took {large / small:.1f}x the work"

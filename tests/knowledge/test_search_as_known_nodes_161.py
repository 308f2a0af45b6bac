"""A search ``as_known_at`` a past moment shows no node the store did not hold then (helper-161).

Records are replayed as the store knew them at ``RecordView.as_known_at``; the node hits of the
same search were not: a node created (or whose content was written) after that moment came back,
its content with it ("Pregnancy — Alice is pregnant, due in May" for a search as known a week
before anyone wrote it), from ``Knowledge.search`` and ``search_lexical`` alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

ALICE = "org:acme/resource:alice"


@pytest.fixture(params=["memory", "sqlite"])
async def graph(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Knowledge, FakeClock]]:
    clock = FakeClock()
    make: Callable[[], Knowledge] = (
        (lambda: Knowledge.in_memory(clock=clock)) if request.param == "memory"
        else (lambda: Knowledge.sqlite(tmp_path / "k.db", clock=clock))
    )
    async with make() as knowledge:
        yield knowledge, clock


async def test_a_node_created_later_is_not_found_as_known_before(graph: tuple[Knowledge, FakeClock]) -> None:
    knowledge, clock = graph
    user = await knowledge.node("User", "person", ALICE)
    await knowledge.append(user.id, "alice likes green tea", ALICE, reason="said")
    clock.advance(3600)
    before = clock.now()
    clock.advance(3600)
    await knowledge.node("Pregnancy", "topic", ALICE, content="Alice is pregnant, due in May")
    then = RecordView(as_known_at=before)

    hits = await knowledge.search("pregnant tea", ALICE, view=then)
    assert [h.text for h in hits] == ["alice likes green tea"]
    lexical = await knowledge.store.search_lexical("pregnant", ALICE, view=then)
    assert lexical == []
    # positive control: now it is known
    assert [h.kind for h in await knowledge.store.search_lexical("pregnant", ALICE)] == ["node"]


async def test_content_written_later_is_not_found_as_known_before(graph: tuple[Knowledge, FakeClock]) -> None:
    knowledge, clock = graph
    jane = await knowledge.node("Jane", "person", ALICE, content="a colleague")
    clock.advance(3600)
    before = clock.now()
    clock.advance(3600)
    updated = await knowledge.store.update_node(jane.id, jane.version, scope=ALICE, actor="me", reason="told",
                                                content="Jane is leaving the company in March")
    assert updated is not None
    then = RecordView(as_known_at=before)
    assert await knowledge.store.search_lexical("leaving", ALICE, view=then) == []
    assert [h.text for h in await knowledge.search("leaving company", ALICE, view=then)] == []
    assert [h.kind for h in await knowledge.store.search_lexical("leaving", ALICE)] == ["node"]
    # as known after the change, it is found
    assert [h.id for h in await knowledge.store.search_lexical("leaving", ALICE, view=RecordView(
        as_known_at=clock.now()))] == [jane.id]

"""One fact that changes twice, read at five points on each time axis.

Jane's city (attribute ``city``, one node, one scope):

=========  ==================  ===================
record     fact time (when)    captured (known at)
=========  ==================  ===================
Paris      from 2020-01-01     2025-06-15 12:00 (K1)
London     from 2023-03-01     2025-06-16 12:00 (K2)
Berlin     from 2025-09-01     2025-06-17 12:00 (K3)  (told in advance)
=========  ==================  ===================
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import RecordDraft, RecordView, TrustState
from obsmem.knowledge.store.values import parse_when

from .world import ACT, RES, T2

pytestmark = pytest.mark.anyio

K0 = datetime(2025, 6, 15, 11, 0, tzinfo=UTC)  # before anything was known
K1 = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)
K2 = K1 + timedelta(days=1)
K3 = K1 + timedelta(days=2)


def at(text: str) -> datetime:
    return parse_when(text).start


async def _city(store: TablesKnowledgeStore, node_id: str, view: RecordView) -> list[str]:
    return [r.text for r in (await store.list_about(node_id, T2, view=view)).items]


async def test_as_of_and_as_known_at(kstore: TablesKnowledgeStore, clock: FakeClock) -> None:
    assert clock.now() == K1
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    paris = await kstore.append_record(
        RecordDraft(jane.id, "Paris", RES, attribute="city", when=parse_when("2020-01-01T00:00Z")), **ACT
    )
    clock.advance(86400)
    await kstore.append_record(
        RecordDraft(jane.id, "London", RES, attribute="City", when=parse_when("2023-03-01T00:00Z")), **ACT
    )
    clock.advance(86400)
    await kstore.append_record(
        RecordDraft(jane.id, "Berlin", RES, attribute="city", when=parse_when("2025-09-01T00:00Z")), **ACT
    )

    # Fact time, with everything known: five points.
    as_of = {
        "2019-06-01": [],
        "2021-06-01": ["Paris"],
        "2023-03-01": ["London"],  # the boundary belongs to the newer fact
        "2024-12-31": ["London"],
        "2026-01-01": ["Berlin"],
    }
    for when, expected in as_of.items():
        assert await _city(kstore, jane.id, RecordView(as_of=at(when))) == expected, when

    # Capture time, asking what held "now" (2025-10-01) as the store knew it: five points.
    now = at("2025-10-01")
    as_known = {K0: [], K1: ["Paris"], K2: ["London"], K2 + timedelta(hours=1): ["London"], K3: ["Berlin"]}
    for known_at, expected in as_known.items():
        view = RecordView(as_of=now, as_known_at=known_at)
        assert await _city(kstore, jane.id, view) == expected, known_at

    # Both axes at once: at K2 the store believed Jane lived in Paris until 2023-03-01.
    assert await _city(kstore, jane.id, RecordView(as_of=at("2022-01-01"), as_known_at=K2)) == ["Paris"]
    # Nothing was deleted: the superseded record is closed, not gone.
    history = RecordView(as_of=at("2021-01-01"))
    (old,) = (await kstore.list_about(jane.id, T2, view=history)).items
    assert old.id == paris.id and old.valid_until == at("2023-03-01")
    # The default read is the current belief only.
    assert await _city(kstore, jane.id, RecordView()) == ["Berlin"]
    assert await _city(kstore, jane.id, RecordView(as_known_at=K1)) == ["Paris"]
    assert await _city(kstore, jane.id, RecordView(include_superseded=True)) == ["Berlin", "London", "Paris"]


async def test_a_superseded_candidate_still_waits_in_the_review_queue(kstore: TablesKnowledgeStore) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    candidate = await kstore.append_record(
        RecordDraft(
            jane.id, "London", RES, attribute="city", when=parse_when("2023"), trust=TrustState.CANDIDATE
        ),
        **ACT,
    )
    await kstore.append_record(
        RecordDraft(jane.id, "Berlin", RES, attribute="city", when=parse_when("2025")), **ACT
    )
    assert [r.id for r in (await kstore.list_candidates(T2)).items] == [candidate.id]


async def test_deletions_and_trust_changes_are_replayed_by_as_known_at(
    kstore: TablesKnowledgeStore, clock: FakeClock
) -> None:
    jane = await kstore.create_node("Jane", "person", RES, **ACT)
    record = await kstore.append_record(RecordDraft(jane.id, "Jane is on call", RES), **ACT)
    clock.advance(60)
    await kstore.remove_record(record.id, RES, **ACT)
    assert await _city(kstore, jane.id, RecordView()) == []
    assert await _city(kstore, jane.id, RecordView(as_known_at=K1 + timedelta(seconds=30))) == [
        "Jane is on call"
    ]

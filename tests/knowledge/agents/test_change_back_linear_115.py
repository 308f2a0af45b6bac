"""Capture and curate ask, for each record that may hold a proposal, whether its attribute
changed since (:meth:`FactIndex.changed_since`, 0682a2d: "Berlin again" after Paris is a change
back, not a restatement). That question walked every record of the attribute, once per candidate
record: a user whose home city went back and forth (Berlin, Paris, Berlin, ...; each change back
is now kept, so they add up) made one proposal cost a walk of all of them per Berlin record,
quadratic in the records of one attribute: 0.58 s of CPU, holding the event loop, for one
proposal at 2,000 records. The work per proposal is counted here (calls and lines,
:mod:`tests.integrity.work_count`), at n and 4n records: linear grows about 4x, quadratic about 16x. No time is asserted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from obsmem.knowledge.agents.capture import FactIndex, Said
from obsmem.knowledge.store.contract import Record
from tests.integrity.work_count import GROWTH_BOUND, work

T0 = datetime(2026, 1, 1, tzinfo=UTC)
N = 150


def _records(n: int) -> list[Record]:
    """n statements of one attribute, a day apart, the value going back and forth."""
    return [
        Record(id=f"r{i}", node_id="n", text=f"their home city is {'Berlin' if i % 2 == 0 else 'Paris'}",
               scope="org:o/resource:u", captured_at=T0 + timedelta(days=i), attribute="home city")
        for i in range(n)
    ]


def _held_by(index: FactIndex, text: str, until: datetime) -> Record | None:
    wanted = Said.of(text)
    return index.holder(wanted, accept=lambda r: not index.changed_since(r, "home city", until, wanted, None))


def _work(n: int) -> tuple[int, Record | None]:
    """The work (calls and lines) of one proposal's holder question over n records, and its answer."""
    index = FactIndex(_records(n))
    until = T0 + timedelta(days=n - 1)  # just before the last Paris
    held: list[Record | None] = []
    count = work(lambda _: held.append(_held_by(index, "their home city is Berlin", until)), "")
    return count, held[0]


def test_one_proposal_is_linear_in_the_records_of_its_attribute() -> None:
    _work(N // 4)  # warm-up: imports, compiled patterns
    small, held_small = _work(N)
    large, held_large = _work(4 * N)
    # The newest Berlin holds it (nothing changed since); every older one saw Paris after it.
    assert held_small is not None and held_small.id == f"r{N - 2}"
    assert held_large is not None and held_large.id == f"r{4 * N - 2}"
    assert large <= GROWTH_BOUND * small, (small, large)


def test_the_answers_are_those_of_a_walk_of_every_record() -> None:
    """The same answers as before, at every pair of a record and a time."""
    records = _records(12)
    index = FactIndex(records)
    for text in ("their home city is Berlin", "their home city is Paris", "their home city is Rome"):
        wanted = Said.of(text)
        for record in records:
            for day in range(14):
                until = T0 + timedelta(days=day, hours=12)
                expected = any(
                    other.id != record.id and record.valid_from < other.valid_from < until
                    and not (Said.of(other.text).holds(wanted) or wanted.holds(Said.of(other.text)))
                    for other in records
                )
                assert index.changed_since(record, "home city", until, wanted) is expected, (text, record.id, day)
    index.discard("r5")  # a removed record changes nothing any more
    wanted = Said.of("their home city is Berlin")
    assert index.changed_since(records[4], "home city", T0 + timedelta(days=5, hours=12), wanted) is False
    assert index.changed_since(records[4], "home city", T0 + timedelta(days=7, hours=12), wanted) is True

"""The one-pass raw ids and span of a context's receipt equal the rule written plainly, for any tail."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem.om.receipts import raw_ids_and_span, raw_span
from obsmem.om.text.own import MARKER_KEY
from obsmem.types import Message, TextPart

_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _plain_span(raw: list[Message]) -> tuple[str, int, int] | None:
    """The rule, plainly: the shown messages (no marker) all have a seq and one thread."""
    shown = [m for m in raw if MARKER_KEY not in m.metadata]
    if not shown or any(m.seq is None or m.thread_id != shown[0].thread_id for m in shown):
        return None
    seqs = [m.seq or 0 for m in shown]
    thread = shown[0].thread_id
    return (thread, min(seqs), max(seqs)) if thread is not None else None

_messages = st.lists(
    st.tuples(
        st.sampled_from([None, "t1", "t2"]),  # thread
        st.one_of(st.none(), st.integers(min_value=1, max_value=50)),  # seq
        st.booleans(),  # one of obsmem's reminders (a marker)
    ),
    max_size=8,
)


def _tail(specs: list[tuple[str | None, int | None, bool]]) -> list[Message]:
    return [
        Message(
            id=f"m{i}", role="user", parts=(TextPart(text=f"text {i}"),), created_at=_AT, thread_id=thread, seq=seq,
            metadata={MARKER_KEY: "temporal-gap"} if marked else {},
        )
        for i, (thread, seq, marked) in enumerate(specs)
    ]


@settings(max_examples=400, deadline=None)
@given(_messages)
def test_one_pass_equals_the_rules(specs: list[tuple[str | None, int | None, bool]]) -> None:
    tail = _tail(specs)
    ids, span = raw_ids_and_span(tail)
    assert ids == tuple(m.id for m in tail if MARKER_KEY not in m.metadata)
    assert span == _plain_span(tail) == raw_span(tail)


def test_a_table_of_tails() -> None:
    cases = [
        ([], ((), None)),
        ([("t1", 3, False), ("t1", 1, False)], (("m0", "m1"), ("t1", 1, 3))),
        ([("t1", 3, True), ("t2", 5, False)], (("m1",), ("t2", 5, 5))),  # a marker's thread does not count
        ([("t1", 3, False), ("t2", 5, False)], (("m0", "m1"), None)),  # two threads
        ([("t1", 3, False), ("t1", None, False)], (("m0", "m1"), None)),  # one unsaved
        ([(None, 3, False)], (("m0",), None)),  # no thread
        ([("t1", 9, False), (None, 4, False)], (("m0", "m1"), None)),
    ]
    for specs, wanted in cases:
        assert raw_ids_and_span(_tail(specs)) == wanted, specs

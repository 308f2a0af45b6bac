"""The context's one-pass raw ids and span equal the receipts module's rules, for any tail."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from obsmem.om.context import _raw_ids_and_span
from obsmem.om.receipts import raw_span
from obsmem.om.text.own import MARKER_KEY
from obsmem.types import Message, TextPart

_AT = datetime(2026, 1, 1, tzinfo=UTC)

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
    ids, span = _raw_ids_and_span(tail)
    assert ids == tuple(m.id for m in tail if MARKER_KEY not in m.metadata)
    assert span == raw_span(tail)


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
        assert _raw_ids_and_span(_tail(specs)) == wanted, specs

"""Which prefix an observation cycle takes: table tests of the pure selection rules."""

from __future__ import annotations

import pytest

from obsmem.om.selection import pending_tool_call_ids, select_observation_prefix, valid_cuts
from obsmem.types import DataPart, Message, TextPart, ToolCallPart, ToolResultPart


def text(role: str, body: str = "x") -> Message:
    return Message(role=role, parts=(TextPart(text=body),))  # type: ignore[arg-type]


def call(call_id: str) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(tool_call_id=call_id, tool_name="search"),))


def result(call_id: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="search", result="ok"),))


def test_no_tools_every_cut_is_valid() -> None:
    assert valid_cuts([text("user"), text("assistant"), text("user")]) == [1, 2, 3]


def test_never_splits_a_call_from_its_result() -> None:
    msgs = [text("user"), call("a"), text("assistant"), result("a"), text("assistant")]
    assert valid_cuts(msgs) == [1, 4, 5]


def test_pending_call_in_newest_message_is_never_taken() -> None:
    msgs = [text("user"), text("assistant"), call("a")]
    assert valid_cuts(msgs) == [1, 2]
    assert pending_tool_call_ids(msgs) == {"a"}


def test_orphan_call_that_is_not_newest_does_not_block() -> None:
    msgs = [text("user"), call("lost"), text("user"), text("assistant")]
    assert valid_cuts(msgs) == [1, 2, 3, 4]
    assert pending_tool_call_ids(msgs) == set()


def test_result_whose_call_was_already_observed_does_not_block() -> None:
    assert valid_cuts([result("old"), text("assistant")]) == [1, 2]


@pytest.mark.parametrize(
    ("counts", "floor", "threshold", "expected"),
    [
        ([1000] * 10, 3000, 10_000, 7),  # keep 3000 raw
        ([1000] * 10, 0, 10_000, 10),  # floor 0: observe all
        ([5000, 40_000], 6000, 30_000, 2),  # one huge message: must go under the threshold
        ([40_000], 6000, 30_000, 1),  # a single message larger than the threshold is observed
        ([2000, 2000, 2000], 10_000, 5000, 1),  # floor above everything: shortest prefix under threshold
    ],
)
def test_prefix_selection_table(counts: list[int], floor: int, threshold: int, expected: int) -> None:
    msgs = [text("user" if i % 2 == 0 else "assistant") for i in range(len(counts))]
    assert select_observation_prefix(msgs, counts, retention_floor=floor, threshold=threshold) == expected


def test_prefix_respects_tool_pairs() -> None:
    msgs = [text("user"), call("a"), result("a"), text("assistant"), text("user")]
    # the floor alone would cut between the call and its result; the cut moves earlier instead
    cut = select_observation_prefix(msgs, [100, 100, 100, 100, 100], retention_floor=300, threshold=500)
    assert cut == 1
    # when keeping the floor would leave the window at the threshold, the cut moves past the pair
    cut = select_observation_prefix(msgs, [100, 100, 100, 100, 100], retention_floor=300, threshold=400)
    assert cut == 3


def test_force_takes_everything_allowed() -> None:
    msgs = [text("user"), text("assistant"), call("p")]
    assert select_observation_prefix(msgs, [1, 1, 1], retention_floor=10, threshold=100, force=True) == 2


def test_marker_only_messages_are_skipped_by_observable() -> None:
    from obsmem.om.selection import observable_messages

    marker = Message(role="assistant", parts=(DataPart(name="om-x"),))
    sys = Message.system("be nice")
    keep = text("user")
    assert observable_messages([marker, sys, keep]) == [keep]

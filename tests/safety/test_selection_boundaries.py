"""Which prefix an observation may take, at its edges: parallel tool calls, orphans, nothing safe.

Table tests of ``obsmem.om.selection``'s public functions. A cut ``i`` means "observe
``messages[:i]``"; it is valid when no call is separated from its result and no call that is
still waiting for its result is taken.
"""

from __future__ import annotations

import pytest

from obsmem.om.selection import pending_tool_call_ids, select_observation_prefix, valid_cuts
from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart


def text(role: str = "user") -> Message:
    return Message(role=role, parts=(TextPart(text="x"),))  # type: ignore[arg-type]


def calls(*ids: str) -> Message:
    """One assistant message with several (parallel) tool calls."""
    return Message(role="assistant", parts=tuple(ToolCallPart(tool_call_id=i, tool_name="search") for i in ids))


def results(*ids: str) -> Message:
    return Message(
        role="tool", parts=tuple(ToolResultPart(tool_call_id=i, tool_name="search", result="ok") for i in ids)
    )


U, A = text("user"), text("assistant")


@pytest.mark.parametrize(
    ("messages", "cuts"),
    [
        pytest.param([U, calls("a", "b"), results("a"), results("b"), A], [1, 4, 5], id="parallel calls, results apart"),
        pytest.param([U, calls("a", "b"), results("b"), results("a"), A], [1, 4, 5], id="results in the other order"),
        pytest.param([U, calls("a", "b"), results("a", "b"), A], [1, 3, 4], id="parallel results in one message"),
        pytest.param([U, calls("a", "b", "c"), results("a"), results("c"), A, results("b")], [1, 6],
                     id="three calls, one answered late"),
        pytest.param([U, calls("lost"), U, calls("a"), A, results("a"), A], [1, 2, 3, 6, 7],
                     id="an orphan call before a real pair"),
        pytest.param([U, calls("p", "q")], [1], id="parallel calls pending in the newest message"),
        pytest.param([calls("p")], [], id="nothing but a pending call"),
        pytest.param([], [], id="no messages"),
    ],
)
def test_valid_cuts_table(messages: list[Message], cuts: list[int]) -> None:
    assert valid_cuts(messages) == cuts


def test_pending_calls_are_those_of_the_newest_message_without_a_result() -> None:
    assert pending_tool_call_ids([U, calls("a", "b")]) == {"a", "b"}
    assert pending_tool_call_ids([U, calls("a"), results("a"), calls("b", "c")]) == {"b", "c"}
    assert pending_tool_call_ids([]) == set()


def test_nothing_safe_to_observe_is_a_zero_prefix() -> None:
    assert select_observation_prefix([calls("p")], [50_000], retention_floor=0, threshold=100) == 0
    assert select_observation_prefix([], [], retention_floor=0, threshold=100, force=True) == 0


def test_when_no_prefix_gets_under_the_threshold_everything_allowed_is_taken() -> None:
    # a huge pending call at the end can never be observed, so the window stays over the threshold
    messages = [U, A, U, calls("p")]
    assert valid_cuts(messages) == [1, 2, 3]
    assert select_observation_prefix(messages, [100, 100, 100, 50_000], retention_floor=0, threshold=30_000) == 3

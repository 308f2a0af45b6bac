"""Which messages an observation cycle takes: pure rules, tested with tables.

An observation covers a *prefix* of the unobserved messages, because the cursor is a position:
everything up to it is observed, everything after it is raw. The prefix must never end between
a tool call and its result (the actor would see a result without its call, which providers
reject), must never take a call that is still waiting for its result, and should leave a raw
tail of about ``retention_floor`` tokens so the actor keeps the recent conversation verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence

from obsmem.types import Message

__all__ = [
    "observable_messages",
    "observation_batches",
    "pending_tool_call_ids",
    "select_observation_prefix",
    "valid_cuts",
]


def observable_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages that carry conversation: system messages and marker-only messages are skipped."""
    return [m for m in messages if m.role != "system" and not m.is_marker_only]


def pending_tool_call_ids(messages: Sequence[Message]) -> set[str]:
    """Ids of tool calls in the *newest* message that have no result yet (the model is waiting).

    A call without a result that is not in the newest message is an orphan (its result will
    never come); it does not block observation.
    """
    if not messages:
        return set()
    answered = {r.tool_call_id for m in messages for r in m.tool_results}
    return {c.tool_call_id for c in messages[-1].tool_calls if c.tool_call_id not in answered}


def valid_cuts(messages: Sequence[Message]) -> list[int]:
    """Every ``i`` in 1..n such that observing ``messages[:i]`` splits no call from its result
    and takes no pending call."""
    n = len(messages)
    call_at: dict[str, int] = {}
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            call_at.setdefault(call.tool_call_id, index)
        for result in message.tool_results:
            result_at[result.tool_call_id] = index
    # A cut i is blocked when some pair straddles it: call index < i <= result index.
    blocked = [0] * (n + 2)
    for call_id, start in call_at.items():
        end = result_at.get(call_id)
        if end is None:
            if start == n - 1:  # a pending call in the newest message: never observe it
                blocked[start + 1] += 1
                blocked[n + 1] -= 1
            continue
        if end > start:
            blocked[start + 1] += 1
            blocked[end + 1] -= 1
    # A result whose call is outside the list (already observed) does not constrain anything.
    cuts: list[int] = []
    running = 0
    for i in range(1, n + 1):
        running += blocked[i]
        if running == 0:
            cuts.append(i)
    return cuts


def select_observation_prefix(
    messages: Sequence[Message],
    token_counts: Sequence[int],
    *,
    retention_floor: int,
    threshold: int,
    force: bool = False,
) -> int:
    """How many leading messages to observe.

    Prefer the longest prefix that still leaves at least ``retention_floor`` tokens raw. If that
    would leave the window at or above ``threshold`` (one huge message, say), take the shortest
    prefix that brings it under; if none can, take everything that may be taken. ``force``
    (manual observe) takes everything that may be taken.
    """
    cuts = valid_cuts(messages)
    if not cuts:
        return 0
    if force:
        return cuts[-1]
    total = sum(token_counts)
    prefix_sums = [0]
    for count in token_counts:
        prefix_sums.append(prefix_sums[-1] + count)

    def tail(i: int) -> int:
        return total - prefix_sums[i]

    keeping_floor = [i for i in cuts if tail(i) >= retention_floor]
    if keeping_floor and tail(keeping_floor[-1]) < threshold:
        return keeping_floor[-1]
    under_threshold = [i for i in cuts if tail(i) < threshold]
    if under_threshold:
        return under_threshold[0]
    return cuts[-1]


def observation_batches(
    cuts: Sequence[int], token_counts: Sequence[int], end: int, max_tokens: int
) -> list[tuple[int, int]]:
    """``messages[:end]`` as consecutive ``(start, stop)`` batches, one observer call each.

    Batches end only at valid ``cuts`` (a tool call stays with its result) and hold at most
    ``max_tokens`` tokens, except where the run between two cuts is larger on its own: that
    run is one batch. ``end`` must be one of ``cuts``.
    """
    prefix_sums = [0]
    for count in token_counts[:end]:
        prefix_sums.append(prefix_sums[-1] + count)
    stops = [c for c in cuts if 0 < c <= end]
    if not stops or stops[-1] != end:
        stops.append(end)
    batches: list[tuple[int, int]] = []
    start = 0
    while start < end:
        later = [c for c in stops if c > start]
        fitting = [c for c in later if prefix_sums[c] - prefix_sums[start] <= max_tokens]
        stop = fitting[-1] if fitting else later[0]
        batches.append((start, stop))
        start = stop
    return batches

"""A thread's memory state right now: what ``Memory.status`` returns and ``Memory.watch`` streams.

Everything is read from the store (the record, the unobserved tail, the leases), so the status
is the same whichever process asks: the application, a worker, the server, the inspector. It
answers an operator's "what is it doing right now": how full the message window is against its
thresholds, which buffered observations wait for activation and what they cover, which memory
work holds a lease now (in flight, in any process), whether a reflection is due or buffered,
and whether a role is backing off after failures.

``phase`` names the state machine's state, first match wins: ``reflecting`` / ``observing``
(a synchronous step holds its lease), ``backoff`` (a role waits out failures), ``blocked`` (the
window passed ``block_after``: the next turn waits), ``reflection-due``, ``activation-due`` (the
window passed the threshold and buffered observations are ready), ``observation-due``,
``buffering`` (a buffer is in flight), ``idle``.

A status reads at most :data:`WINDOW_READ` of the unobserved messages, however long the window
(a thread saved while memory did not run may hold 100,000): past that, ``window_partial`` is
set and ``window_tokens`` / ``unobserved_messages`` count the messages read, a lower bound.
A lower bound can only say yes: a window whose first :data:`WINDOW_READ` messages already reach
``block_after`` (or the threshold) is blocked (or due) whatever follows. Under them it says
nothing (10,000 short messages, 185,000 tokens, read as 37,000 against a 60,000 threshold, are
not idle: the next turn waits on an observation), and no config bound makes 2,000 messages
reach a threshold (``message_tokens`` has no ceiling, a short message counts a few tokens), so
the status does not assume the window is due either: it estimates the whole window,
``window_estimate``, as the tokens read per message read × the unobserved messages, and decides
the phase on that. The unobserved messages are the thread's count (one ``count_messages``) when
nothing of it was observed yet; otherwise the count after the cursor is estimated from how
densely the thread's messages lie in ``seq`` over the part read, extended to its newest message
(one more row), and capped by the thread's count. ``window_estimate`` is None when the window
was read whole (then ``window_tokens`` is exact).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from obsmem.om.cycle import Backoff, Core
from obsmem.om.selection import observable_messages
from obsmem.storage import leasing
from obsmem.types import Message, Thread

__all__ = ["WINDOW_READ", "BufferedStatus", "Phase", "ThreadStatus", "thread_status"]

WINDOW_READ = 2000
"""The most unobserved messages one status reads (rows, whatever the window's length)."""

Phase = Literal[
    "reflecting", "observing", "backoff", "blocked", "reflection-due", "activation-due", "observation-due",
    "buffering", "idle",
]

_WORK = (leasing.SYNC_OBSERVATION, leasing.SYNC_REFLECTION, leasing.BUFFER_OBSERVATION, leasing.BUFFER_REFLECTION)


@dataclass(frozen=True, slots=True)
class BufferedStatus:
    """One buffered observation waiting for activation, and the messages it covers."""

    id: str
    first_seq: int
    last_seq: int
    message_tokens: int
    observation_tokens: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ThreadStatus:
    """One thread's memory state (see the module docstring). Token counts are the configured
    counter's; thresholds are resolved to tokens; ``in_flight`` maps each kind of memory work
    holding a lease now (``sync-observation``, ``buffer-reflection`` ...) to the lease's expiry.
    ``window_partial``: the window holds more than :data:`WINDOW_READ` messages, and
    ``window_tokens`` / ``unobserved_messages`` count only the first :data:`WINDOW_READ` of them;
    ``window_estimate`` is then the whole window's tokens, estimated (at least ``window_tokens``),
    which the phase is decided on (None when the window was read whole)."""

    thread_id: str
    resource_id: str
    scope: Literal["thread", "resource"]
    phase: Phase
    record_id: str | None = None
    generation: int = 0
    window_tokens: int = 0
    unobserved_messages: int = 0
    window_partial: bool = False
    window_estimate: int | None = None
    message_threshold: int = 0
    block_after: int | None = None
    observation_tokens: int = 0
    reflection_threshold: int = 0
    buffered: tuple[BufferedStatus, ...] = ()
    buffered_message_tokens: int = 0
    buffered_reflection_lines: int | None = None
    reflection_due: bool = False
    in_flight: Mapping[str, datetime] = field(default_factory=dict)
    backoff: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    checked_at: datetime | None = None

    def data(self) -> dict[str, Any]:
        """JSON-ready data (datetimes as ISO strings), what the REST API and the inspector show."""
        data: dict[str, Any] = _jsonable(asdict(self))
        return data

    def same_state(self, other: ThreadStatus | None) -> bool:
        """Equal but for ``checked_at`` (what :meth:`Memory.watch` compares to decide to yield)."""
        if other is None:
            return False
        mine, theirs = self.data(), other.data()
        mine.pop("checked_at", None)
        theirs.pop("checked_at", None)
        return mine == theirs


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


async def thread_status(core: Core, thread: Thread) -> ThreadStatus:
    """``thread``'s status, read from ``core``'s store (creates nothing, changes nothing)."""
    store, config, now = core.store, core.config, core.clock.now()
    lineage = core.lineage(thread)
    scope: Literal["thread", "resource"] = "resource" if core.resource_scope else "thread"
    record = await store.get_head(lineage)
    cursor = record.cursor(thread.id) if record is not None else 0
    # the window as the engine weighs it against its thresholds: each unobserved message's count,
    # of its first WINDOW_READ messages (one more read tells whether there are more)
    unobserved = await store.list_messages(thread.id, after_seq=cursor, limit=WINDOW_READ + 1)
    partial = len(unobserved) > WINDOW_READ
    conversation = observable_messages(unobserved[:WINDOW_READ])
    # a pasted log waiting in the window is counted in a thread (the first status a process asks
    # for counted a 5 MB log on the event loop: over a second), so the counts below are lookups
    await core.counter.warm(conversation)
    window = sum(core.counter.count_message(m) for m in conversation)
    estimate = await _whole_window(core, thread, cursor, unobserved, window) if partial else None
    weighed = window if estimate is None else estimate
    in_flight: dict[str, datetime] = {}
    for kind in _WORK:
        # the exact key, one row (a prefix read also returned the leases of "thread:t10",
        # "thread:t100", … for "thread:t1"); a synchronous observation in resource scope holds
        # one lease per thread
        if kind == leasing.SYNC_OBSERVATION and core.resource_scope:
            wanted = leasing.thread_observation_lease(lineage, thread.id)
        else:
            wanted = leasing.lineage_lease(kind, lineage)
        lease = await store.get_lease(wanted)
        if lease is not None and lease.key == wanted and not lease.is_expired(now):
            in_flight[kind] = lease.expires_at
    message_threshold = core.message_threshold(record) if record is not None else _threshold(core)
    reflection_threshold = core.reflection_threshold()
    block_after = config.observation.resolved_block_after
    buffered = tuple(
        BufferedStatus(c.id, c.first_seq, c.last_seq, c.message_tokens, c.observation_tokens, c.created_at)
        for c in (record.buffered_chunks if record is not None else ())
        if c.thread_id == thread.id
    )
    backoff: dict[str, dict[str, Any]] = {}
    if record is not None:
        roles: tuple[Literal["observation", "reflection"], ...] = ("observation", "reflection")
        for role in roles:
            entry = Backoff.of(record, role)
            if entry is not None and entry.until > now:
                backoff[role] = {"failures": entry.failures, "until": entry.until, "kind": entry.kind}
    observation_tokens = record.observation_tokens if record is not None else 0
    reflection_due = observation_tokens >= reflection_threshold > 0
    buffered_reflection = record.buffered_reflection if record is not None else None
    phase: Phase
    if "sync-reflection" in in_flight:
        phase = "reflecting"
    elif "sync-observation" in in_flight:
        phase = "observing"
    elif backoff:
        phase = "backoff"
    elif block_after is not None and weighed >= block_after:
        phase = "blocked"
    elif reflection_due:
        phase = "reflection-due"
    elif weighed >= message_threshold and buffered:
        phase = "activation-due"
    elif weighed >= message_threshold:
        phase = "observation-due"
    elif "buffer-observation" in in_flight or "buffer-reflection" in in_flight:
        phase = "buffering"
    else:
        phase = "idle"
    return ThreadStatus(
        thread_id=thread.id,
        resource_id=thread.resource_id,
        scope=scope,
        phase=phase,
        record_id=record.id if record is not None else None,
        generation=record.generation if record is not None else 0,
        window_tokens=window,
        unobserved_messages=len(conversation),
        window_partial=partial,
        window_estimate=estimate,
        message_threshold=message_threshold,
        block_after=block_after,
        observation_tokens=observation_tokens,
        reflection_threshold=reflection_threshold,
        buffered=buffered,
        buffered_message_tokens=sum(b.message_tokens for b in buffered),
        buffered_reflection_lines=buffered_reflection.line_count if buffered_reflection is not None else None,
        reflection_due=reflection_due,
        in_flight=in_flight,
        backoff=backoff,
        checked_at=now,
    )


async def _whole_window(core: Core, thread: Thread, cursor: int, read: list[Message], tokens: int) -> int:
    """The whole unobserved window's tokens, estimated from its first :data:`WINDOW_READ` rows
    (``read`` holds one more, which tells it is longer): their ``tokens`` per row × the window's
    rows (see the module docstring). At least ``tokens``."""
    sample = read[:WINDOW_READ]
    rows = await core.store.count_messages(thread.id)  # every row of the thread: a ceiling
    if cursor > 0:
        newest = await core.store.list_messages(thread.id, after_seq=cursor, limit=1, newest_first=True)
        first, last = sample[0].seq or 0, sample[-1].seq or 0
        if newest and last > first:
            spread = ((newest[0].seq or 0) - first + 1) / (last - first + 1)
            rows = min(rows, round(len(sample) * spread))
    rows = max(rows, len(read))
    return max(tokens, round(tokens * rows / len(sample)))


def _threshold(core: Core) -> int:
    """The message threshold before any record exists (an empty record's)."""
    from obsmem.storage.contract import ObservationRecord

    empty = ObservationRecord(id="-", lineage="-", scope="thread", thread_id="-", resource_id="-")
    return core.message_threshold(empty)

"""Durable per-lane agent state: cursors, failures and backoff, shared by every process.

A *lane* is one agent on one source thread (``curate:t1``, ``capture:t1``). Its state lives in
the main store (the storage contract's key/value "working memory", under the reserved prefix
:data:`LANE_PREFIX`), and every read-modify-write of it holds the store lease of the same name,
so two processes (an application and an ``obsmem worker``) see one state and never interleave
their updates. Nothing here is process-local. A deleted thread's lanes go with it
(:meth:`Lanes.forget_thread`, called by ``Memory.delete_thread`` and ``delete_resource``).

A run's lease is renewed while it runs, and it is *fenced*: a run that loses its lease (it
expired while the process stalled, and another holder took the lane) must not write as if it
still held it. :meth:`Lanes.check` (which the agents call before each write of a run, see
:meth:`Lanes.fence`) and :meth:`Lanes.write` renew the lease compare-and-set on the fencing token
it was taken with, and raise :class:`LaneLostError` when it is gone: the new holder read the
lane's state (and whatever the old one had written) after the old one's last renewal, so what
the old one would write now is what the new one does again.

Backoff: a failed run (including a run that ran but did not advance its cursor) sets
``failures += 1`` and ``next_attempt_at = now + min(60 s * 2**(failures-1), 1 h)``; a run that
advanced clears both. A run that was skipped (not due, lane busy) leaves the state untouched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from obsmem.clock import Clock, SystemClock
from obsmem.storage import leasing
from obsmem.storage.contract import Store
from obsmem.storage.notes import LANE_AGENTS, LANE_PREFIX

__all__ = [
    "BACKOFF_MAX_S",
    "BACKOFF_START_S",
    "LANE_AGENTS",
    "LANE_PREFIX",
    "LaneBusyError",
    "LaneLostError",
    "LaneState",
    "Lanes",
    "backoff_delay",
]

"""The agents that keep a lane per source thread (``<agent>:<thread id>``)."""
BACKOFF_START_S = 60.0
BACKOFF_MAX_S = 3600.0


class LaneBusyError(RuntimeError):
    """Another process holds the lane's lease: the run is skipped, the state untouched."""


class LaneLostError(LaneBusyError):
    """The run's lease on its lane expired and another holder took it (or it was released): the
    run stops, writing nothing more; the new holder does the work from the lane's state."""


#: The lanes held by the running task (and the tasks it starts): lane key → (the Lanes holding it,
#: the fencing token it was taken with). What a run holds, not a lock: the store's lease decides.
_HELD: ContextVar[Mapping[str, tuple[Lanes, int, str]]] = ContextVar("obsmem_knowledge_lanes_held", default={})


def backoff_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failures in a row: 60, 120, 240 … capped at 3600."""
    if failures <= 0:
        return 0.0
    return float(min(BACKOFF_START_S * 2 ** (failures - 1), BACKOFF_MAX_S))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class LaneState:
    """One lane's durable state. ``cursor``: the id (or seq) the lane finished through."""

    cursor: str | None = None
    cursor_updated_at: datetime | None = None
    failures: int = 0
    next_attempt_at: datetime | None = None
    last_error: str | None = None
    runs: int = 0
    extra: tuple[tuple[str, Any], ...] = ()

    def due(self, now: datetime) -> bool:
        """Not backing off at ``now``."""
        return self.next_attempt_at is None or now >= self.next_attempt_at

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.extra).get(key, default)

    def with_extra(self, **values: Any) -> LaneState:
        merged = {**dict(self.extra), **values}
        return replace(self, extra=tuple(sorted(merged.items())))

    def succeeded(self, cursor: str | None, now: datetime) -> LaneState:
        moved = cursor != self.cursor
        return replace(
            self,
            cursor=cursor,
            cursor_updated_at=now if moved else self.cursor_updated_at,
            failures=0,
            next_attempt_at=None,
            last_error=None,
            runs=self.runs + 1,
        )

    def failed(self, error: str, now: datetime) -> LaneState:
        failures = self.failures + 1
        return replace(
            self,
            failures=failures,
            next_attempt_at=now + timedelta(seconds=backoff_delay(failures)),
            last_error=error[:500],
            runs=self.runs + 1,
        )

    def dumps(self) -> str:
        data = asdict(self)
        data["cursor_updated_at"] = _iso(self.cursor_updated_at)
        data["next_attempt_at"] = _iso(self.next_attempt_at)
        data["extra"] = dict(self.extra)
        return json.dumps(data, sort_keys=True, default=str)

    @classmethod
    def loads(cls, text: str | None) -> LaneState:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(
            cursor=data.get("cursor"),
            cursor_updated_at=_parse(data.get("cursor_updated_at")),
            failures=int(data.get("failures", 0)),
            next_attempt_at=_parse(data.get("next_attempt_at")),
            last_error=data.get("last_error"),
            runs=int(data.get("runs", 0)),
            extra=tuple(sorted(dict(data.get("extra") or {}).items())),
        )


class Lanes:
    """Lane state in ``store``, serialised per lane by the store's leases."""

    def __init__(self, store: Store, *, clock: Clock | None = None, owner: str | None = None,
                 lease_ttl_s: float = 600.0) -> None:
        self.store = store
        self.clock = clock or SystemClock()
        self.owner = owner or f"lanes-{uuid.uuid4().hex[:12]}"
        self.lease_ttl_s = lease_ttl_s

    @staticmethod
    def key(lane: str) -> str:
        return LANE_PREFIX + lane

    async def read(self, lane: str) -> LaneState:
        return LaneState.loads(await self.store.get_working_memory(self.key(lane)))

    async def write(self, lane: str, state: LaneState) -> None:
        """Store the lane's state; inside :meth:`hold`, only while the run still holds the lane
        (:meth:`check`; LaneLostError otherwise, and nothing is written)."""
        await self.check(lane)
        await self.store.set_working_memory(self.key(lane), state.dumps())

    async def check(self, lane: str) -> None:
        """When this task holds ``lane`` (inside :meth:`hold`): renew its lease, compare-and-set on
        the fencing token it was taken with, so the run may write for the lease's TTL from now.
        Raises LaneLostError when the lease expired, was released or another holder took it.
        Outside a hold of this Lanes: nothing to check."""
        key = self.key(lane)
        held = _HELD.get().get(key)
        if held is None or held[0] is not self:
            return
        lease = await self.store.renew_lease(key, held[2], ttl_s=self.lease_ttl_s, now=self.clock.now())
        if lease is None or lease.token != held[1]:
            raise LaneLostError(f"lane {lane!r} was taken over by another holder while this run went on")

    def fence(self, lane: str) -> Callable[[], Awaitable[None]] | None:
        """:meth:`check` of ``lane`` for an agent to call before each write of its run, when this
        task holds the lane; None otherwise."""
        held = _HELD.get().get(self.key(lane))
        if held is None or held[0] is not self:
            return None
        return lambda: self.check(lane)

    @asynccontextmanager
    async def hold(self, lane: str, *, wait_s: float = 0.0) -> AsyncIterator[LaneState]:
        """Hold the lane's lease for a run (renewed while it runs, and checked by :meth:`check`
        and :meth:`write`); yields its state. Raises LaneBusyError if another holder keeps it
        for ``wait_s`` (real) seconds more (0: do not wait)."""
        key = self.key(lane)
        owner = self._run_owner()
        waited = 0.0
        while not await leasing.acquired(self.store, key, owner, ttl_s=self.lease_ttl_s, clock=self.clock):
            if waited >= wait_s:
                raise LaneBusyError(f"lane {lane!r} is being run by another holder")
            await asyncio.sleep(0.05)
            waited += 0.05
        # Released at the run's end whatever ends it (a request's deadline cancelling every
        # await of the cleanup left the lane held for its TTL).
        async with leasing.holding(self.store, key, owner, ttl_s=self.lease_ttl_s, clock=self.clock):
            lease = await self.store.get_lease(key)
            if lease is None or lease.owner != owner or lease.is_expired(self.clock.now()):
                raise LaneLostError(f"lane {lane!r} was taken over by another holder as this run began")
            held = _HELD.set({**_HELD.get(), key: (self, lease.token, owner)})
            try:
                yield await self.read(lane)
            finally:
                try:
                    _HELD.reset(held)
                except ValueError:  # left from another context: this run's entry goes all the same
                    _HELD.set({k: v for k, v in _HELD.get().items() if k != key})

    def _run_owner(self) -> str:
        """The lease owner of one hold: this Lanes' owner and a part of the hold's own. A lease
        taken again by its owner is renewed (the store's rule), so with the Lanes' owner alone two
        runs of one lane in one process, or two updates of the lane index, both held it at once
        (and the first to finish released it under the other)."""
        return f"{self.owner}:{uuid.uuid4().hex[:8]}"

    async def all_lanes(self) -> dict[str, LaneState]:
        """Every lane with a stored state (for ``obsmem worker`` and inspection)."""
        # Working memory has no listing; lanes with a state also ever held a lease, but released
        # leases are deleted. Callers track their lanes through the marker index instead.
        index = await self.store.get_working_memory(LANE_PREFIX + "index")
        names = json.loads(index) if index else []
        return {name: await self.read(name) for name in names}

    @asynccontextmanager
    async def _index(self) -> AsyncIterator[list[str]]:
        """The lane index's names, under the index's own lease (LaneBusyError if it stays busy)."""
        key = LANE_PREFIX + "index"
        owner = self._run_owner()
        for _ in range(50):
            if await leasing.acquired(self.store, key, owner, ttl_s=30.0, clock=self.clock):
                break
            await asyncio.sleep(0.01)
        else:
            raise LaneBusyError("the lane index stayed busy")
        async with leasing.holding(self.store, key, owner, ttl_s=30.0, clock=self.clock, renew=False):
            text = await self.store.get_working_memory(key)
            yield json.loads(text) if text else []

    async def register(self, lane: str) -> None:
        """Add ``lane`` to the lane index (under its own lease) so a worker can find it."""
        async with self._index() as names:
            if lane not in names:
                await self.store.set_working_memory(LANE_PREFIX + "index", json.dumps(sorted([*names, lane])))

    async def forget_thread(self, thread_id: str) -> int:
        """Delete a deleted thread's lanes: each agent's state (cursor, failures, the observation
        cycles it captured) and its names in the lane index. Returns the rows deleted (an index
        left empty counts as one)."""
        gone = 0
        for agent in LANE_AGENTS:
            gone += int(await self.store.delete_working_memory(self.key(f"{agent}:{thread_id}")))
        async with self._index() as names:
            kept = [name for name in names if name.partition(":")[2] != thread_id]
            if len(kept) != len(names):
                if kept:
                    await self.store.set_working_memory(LANE_PREFIX + "index", json.dumps(sorted(kept)))
                else:
                    gone += int(await self.store.delete_working_memory(LANE_PREFIX + "index"))
        return gone


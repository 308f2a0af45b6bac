"""Durable per-lane agent state: cursors, failures and backoff, shared by every process.

A *lane* is one agent on one source thread (``curate:t1``, ``capture:t1``). Its state lives in
the main store (the storage contract's key/value "working memory", under the reserved prefix
:data:`LANE_PREFIX`), and every read-modify-write of it holds the store lease of the same name,
so two processes (an application and an ``obsmem worker``) see one state and never interleave
their updates. Nothing here is process-local. A deleted thread's lanes go with it
(:meth:`Lanes.forget_thread`, called by ``Memory.delete_thread`` and ``delete_resource``).

Backoff: a failed run (including a run that ran but did not advance its cursor) sets
``failures += 1`` and ``next_attempt_at = now + min(60 s * 2**(failures-1), 1 h)``; a run that
advanced clears both. A run that was skipped (not due, lane busy) leaves the state untouched.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from obsmem.clock import Clock, SystemClock
from obsmem.storage import leasing
from obsmem.storage.contract import Store

__all__ = [
    "BACKOFF_MAX_S",
    "BACKOFF_START_S",
    "LANE_AGENTS",
    "LANE_PREFIX",
    "LaneBusyError",
    "LaneState",
    "Lanes",
    "backoff_delay",
]

LANE_PREFIX = "obsmem:knowledge:lane:"
LANE_AGENTS = ("capture", "curate", "learn")
"""The agents that keep a lane per source thread (``<agent>:<thread id>``)."""
BACKOFF_START_S = 60.0
BACKOFF_MAX_S = 3600.0


class LaneBusyError(RuntimeError):
    """Another process holds the lane's lease: the run is skipped, the state untouched."""


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
        await self.store.set_working_memory(self.key(lane), state.dumps())

    @asynccontextmanager
    async def hold(self, lane: str, *, wait_s: float = 0.0) -> AsyncIterator[LaneState]:
        """Hold the lane's lease for a run; yields its state. Raises LaneBusyError if another
        holder keeps it for ``wait_s`` (real) seconds more (0: do not wait)."""
        key = self.key(lane)
        waited = 0.0
        while not await leasing.acquired(self.store, key, self.owner, ttl_s=self.lease_ttl_s, clock=self.clock):
            if waited >= wait_s:
                raise LaneBusyError(f"lane {lane!r} is being run by another holder")
            await asyncio.sleep(0.05)
            waited += 0.05
        # Released at the run's end whatever ends it (a request's deadline cancelling every
        # await of the cleanup left the lane held for its TTL).
        async with leasing.holding(self.store, key, self.owner, ttl_s=self.lease_ttl_s, clock=self.clock, renew=False):
            yield await self.read(lane)

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
        for _ in range(50):
            if await leasing.acquired(self.store, key, self.owner, ttl_s=30.0, clock=self.clock):
                break
            await asyncio.sleep(0.01)
        else:
            raise LaneBusyError("the lane index stayed busy")
        async with leasing.holding(self.store, key, self.owner, ttl_s=30.0, clock=self.clock, renew=False):
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


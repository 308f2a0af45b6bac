"""Holding a store lease for a piece of work: taken once, renewed while the work runs, released
at its end whatever ends it.

Memory work is often run inside someone else's deadline: a web app's request under
``anyio.move_on_after``, a framework's timeout. anyio cancels *every* ``await`` inside a
cancelled scope, a cleanup's too, so a release written as ``finally: await release()`` never
runs there, and the lease stays held for its whole TTL (every other holder skips or waits
meanwhile). Here the release runs as its own task, started before the cleanup's first
``await``, and goes to its end; an acquire still on its way when its caller is cancelled is
released when it lands (a store's write runs to its end on its worker thread all the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import secrets
import socket
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from obsmem.clock import Clock
from obsmem.errors import ObsmemError
from obsmem.storage.contract import Lease, Store
from obsmem.storage.notes import key_id
from obsmem.telemetry import log_failure

__all__ = [
    "BUFFER_OBSERVATION",
    "BUFFER_REFLECTION",
    "ERASING",
    "ERASING_TTL_S",
    "LATE_RESULTS",
    "LINEAGE_LEASE_KINDS",
    "SYNC_OBSERVATION",
    "SYNC_REFLECTION",
    "acquired",
    "erasing",
    "erasing_elsewhere",
    "holding",
    "lineage_lease",
    "run_to_end",
    "thread_observation_lease",
]

logger = logging.getLogger(__name__)

#: The kinds of lease taken for a lineage's work, each keyed ``<kind>:<lineage>``
#: (:func:`lineage_lease`): a synchronous step (in resource scope an observation holds one per
#: thread, :func:`thread_observation_lease`), a buffer (the engine's or a worker's), and a turn's
#: rewrite of late tool results. Deleting a thread or a resource releases exactly these keys.
SYNC_OBSERVATION = "sync-observation"
SYNC_REFLECTION = "sync-reflection"
BUFFER_OBSERVATION = "buffer-observation"
BUFFER_REFLECTION = "buffer-reflection"
LATE_RESULTS = "late-results"
LINEAGE_LEASE_KINDS = (SYNC_OBSERVATION, SYNC_REFLECTION, BUFFER_OBSERVATION, BUFFER_REFLECTION, LATE_RESULTS)


def lineage_lease(kind: str, lineage: str) -> str:
    """The key of the ``kind`` lease (one of :data:`LINEAGE_LEASE_KINDS`) of ``lineage``."""
    return f"{kind}:{lineage}"


def thread_observation_lease(lineage: str, thread_id: str) -> str:
    """The key of the lease a synchronous observation holds per thread in resource scope:
    ``sync-observation:<lineage>:<thread id as a key part>`` (:func:`~obsmem.storage.notes.key_id`:
    no ':' in it, so the last ':' ends the lineage: resource ``a`` with thread ``b:c`` and
    resource ``a:b`` with thread ``c`` have two keys, as do threads ``y:z`` and ``y%3Az``)."""
    return f"{lineage_lease(SYNC_OBSERVATION, lineage)}:{key_id(thread_id)}"


#: Tasks that must run to their end whatever cancels the work that started them (a lease's
#: release): referenced here until done (the loop keeps only weak references to tasks).
_RUNNING: set[asyncio.Task[Any]] = set()


def run_to_end(work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """``work`` as a task of its own, which nothing that cancels its starter cancels."""
    task = asyncio.get_running_loop().create_task(work)
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    return task


#: Leases this process could not release (the store was down, or locked by another writer):
#: per store (by ``id``: a store of the user's own may be neither hashable nor weakly referable),
#: key → owner. The next attempt at the same key releases it first, by its owner (a lease someone
#: took since is left alone; an id reused by a later store is as harmless), so a release lost to
#: an outage does not hold this process's next step of that lineage for the lease's whole TTL.
#: Other processes wait it out. Bounded: the newest :data:`UNRELEASED_KEPT` keys of the newest
#: :data:`UNRELEASED_STORES` stores (an outage meets every thread that steps during it; a lease
#: left out of the record expires by itself, as another process's does).
_UNRELEASED: dict[int, dict[str, str]] = {}
UNRELEASED_KEPT = 1024
UNRELEASED_STORES = 16


async def acquired(store: Store, key: str, owner: str, *, ttl_s: float, clock: Clock) -> bool:
    """Try the lease ``key`` once for ``owner``: True when taken. A caller cancelled while the
    store's write is on its way leaves the attempt to release the lease if it lands."""
    left = _UNRELEASED.get(id(store), {}).get(key)
    if left is not None:
        await asyncio.shield(run_to_end(_released(store, key, left)))
    attempt = run_to_end(store.acquire_lease(key, owner, ttl_s=ttl_s, now=clock.now()))
    try:
        return await asyncio.shield(attempt) is not None
    except asyncio.CancelledError:
        attempt.add_done_callback(
            lambda done: None
            if done.cancelled() or done.exception() is not None or done.result() is None
            else run_to_end(_released(store, key, owner))
        )
        raise


@contextlib.asynccontextmanager
async def holding(
    store: Store, key: str, owner: str, *, ttl_s: float, clock: Clock, renew: bool = True
) -> AsyncIterator[None]:
    """The ``async with`` body under the lease ``key``, which ``owner`` has just taken
    (:func:`acquired`): renewed every third of ``ttl_s`` while the body runs (in real time, on
    purpose: the lease guards work happening now, and a virtual clock in tests must not spin
    the renewals; not with ``renew=False``), released at the body's end, whatever ends it."""
    beat = None
    if renew:
        beat = asyncio.get_running_loop().create_task(_renew(store, key, owner, ttl_s, clock), name=f"obsmem:lease:{key}")
    try:
        yield
    finally:
        if beat is not None:
            beat.cancel()
        release = run_to_end(_released(store, key, owner))  # before any await: it runs even if this is cancelled
        if beat is not None:
            await asyncio.gather(beat, return_exceptions=True)
        await asyncio.shield(release)


async def _renew(store: Store, key: str, owner: str, ttl_s: float, clock: Clock) -> None:
    """Renew ``key`` until cancelled or lost (expired meanwhile, or taken over: what the holder
    writes stays compare-and-set, so a holder that lost its lease is still safe)."""
    while True:
        await asyncio.sleep(ttl_s / 3)
        if await store.renew_lease(key, owner, ttl_s=ttl_s, now=clock.now()) is None:
            return


def _note_unreleased(store_id: int, key: str, owner: str) -> None:
    left = _UNRELEASED.pop(store_id, {})
    _UNRELEASED[store_id] = left  # (the newest store last)
    left.pop(key, None)
    left[key] = owner
    while len(left) > UNRELEASED_KEPT:
        del left[next(iter(left))]
    while len(_UNRELEASED) > UNRELEASED_STORES:
        del _UNRELEASED[next(iter(_UNRELEASED))]


async def _released(store: Store, key: str, owner: str) -> None:
    try:
        await store.release_lease(key, owner)
    except ObsmemError as exc:  # it expires by itself: never a reason to lose the work
        _note_unreleased(id(store), key, owner)  # released at this key's next attempt
        log_failure(logger, "obsmem: could not release the lease %s", key, error=exc, operation="lease")
    else:
        left = _UNRELEASED.get(id(store))
        if left is not None and left.get(key) == owner:
            del left[key]
            if not left:
                del _UNRELEASED[id(store)]


#: A delete of a resource's data under way in a live process (``Memory.delete_resource`` and
#: ``delete_thread``, so ``obsmem delete-resource`` and the REST API's deletes too): a lease of its
#: own per delete, ``erasing:<sha256 of the resource id>:<random>`` (no id in the store's rows or
#: log once it is gone), owned by ``pid <n> on <host>``, renewed while the delete runs and released
#: at its end. A delete whose notes are left with no such lease was cut off (its process killed;
#: its lease, never released, expires within :data:`ERASING_TTL_S`); one with a lease is under way.
ERASING = "erasing"
ERASING_TTL_S = 30.0


def _erasing_prefix(resource_id: str) -> str:
    return f"{ERASING}:{hashlib.sha256(resource_id.encode('utf-8')).hexdigest()}:"


@contextlib.asynccontextmanager
async def erasing(store: Store, resource_id: str, *, clock: Clock) -> AsyncIterator[str]:
    """The ``async with`` body marked as a delete of ``resource_id``'s data under way (see
    :data:`ERASING`); yields the key of its lease, for :func:`erasing_elsewhere`."""
    key = _erasing_prefix(resource_id) + secrets.token_hex(8)
    owner = process_owner()
    if not await acquired(store, key, owner, ttl_s=ERASING_TTL_S, clock=clock):  # pragma: no cover
        raise ObsmemError(f"The lease {key} of a new delete was held already.")  # a fresh random key
    async with holding(store, key, owner, ttl_s=ERASING_TTL_S, clock=clock):
        yield key


async def erasing_elsewhere(store: Store, resource_id: str, *, clock: Clock, own: str | None = None) -> list[Lease]:
    """The leases of the other deletes of ``resource_id``'s data under way (not ``own``):
    unexpired, so their processes are alive (see :data:`ERASING`)."""
    now = clock.now()
    return [
        lease for lease in await store.list_leases(_erasing_prefix(resource_id))
        if lease.key != own and not lease.is_expired(now) and not ended_here(lease.owner)
    ]


#: ``[<label> ]pid <n> on <host>``: a lease owner naming its process (:func:`process_owner`).
_PROCESS_OWNER = re.compile(r"(?:.* )?pid (\d+) on (\S+)")


def process_owner(label: str = "") -> str:
    """A lease owner naming this process (``[<label> ]pid <n> on <host>``), so a lease it left
    when killed is told at once from a live one on the same host (:func:`ended_here`)."""
    return f"{label + ' ' if label else ''}pid {os.getpid()} on {socket.gethostname()}"


def ended_here(owner: str) -> bool:
    """Whether ``owner`` (:func:`process_owner`) names a process of this host that has ended: a
    delete or import killed here is told from a live one at once, not only when its lease
    expires. (A pid taken again by another process reads as alive: it is then waited for, as a
    process elsewhere is.)"""
    match = _PROCESS_OWNER.fullmatch(owner)
    if match is None or match[2] != socket.gethostname():
        return False
    try:
        os.kill(int(match[1]), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError, OverflowError):
        return False  # not ours to signal (alive), or no pid at all
    return False

"""Workers: processes that run obsmem's background memory work for any thread, from the store.

An application can leave buffering and reflection to other processes, on other machines: it
enqueues work after a turn (:func:`enqueue_thread_work`), and any number of ``obsmem worker``
processes claim it from the store's queue and run it::

    obsmem worker --store postgresql://user@db/obsmem        # as many as you like, anywhere

Why this is safe with no coordination besides the store (reference: the original protects its
buffers with in-process locks only, which do nothing across machines):

* **Claims expire.** A worker claims an item for ``claim_ttl_s`` and renews the claim while it
  works (a heartbeat every third of the TTL). A worker that crashes or is killed stops renewing;
  its claim expires and the next claimer takes the item over, with a higher fencing token, so
  the dead worker's claim can no longer complete or release it.
* **The work itself is compare-and-set.** A worker runs the engine's own transitions (buffer
  the thread's unbuffered messages, buffer or activate a reflection); they hold the engine's
  leases and commit by compare-and-set on the head record. Two workers on one thread, or a
  worker racing the application's own step, can waste a model call but never lose or
  duplicate a message: a chunk that no longer continues the stored coverage is dropped.
* **A lease held elsewhere is waited out, not ignored.** A worker takes the thread's buffer
  lease before its engine reads the window and reserves the range (not after, where another
  worker's item could find neither a lease nor a range left, and complete undone). If another
  owner holds it (a live worker, another loop of this worker, or a dead one whose lease has not
  expired), the item goes back to the queue until then instead of completing having done
  nothing (not counted as an attempt). A worker that ran an item of the thread, and so released the lease it held, wakes
  that waiting item (``Store.wake_work``): it is due at once, not at the lease's expiry, and
  the next free worker takes it. A waiter that finds the lease gone right after handing its
  item back wakes it itself, so a release between its look at the lease and its hand-back is
  never missed. Only a dead holder's lease is waited out to its expiry.
* **Poison work is bounded.** An item claimed more than ``max_attempts`` times (it keeps
  killing its workers) is dropped with an error in the log.
"""

from __future__ import annotations

import asyncio
import math
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from obsmem import telemetry
from obsmem.assembly import (
    KnowledgeHook,
    ModelSpec,
    assemble_roles,
    budget_events,
    check_collaborators,
    forget_kept_in_process,
    knowledge_hosted_for,
    knowledge_model,
    knowledge_settings,
    memory_config,
)
from obsmem.clock import Clock, SystemClock
from obsmem.config import MemoryConfig, MemoryOptions
from obsmem.implements import implements
from obsmem.errors import ConfigError, InvalidInputError, MigrationError, StorageError, StoreClosedError
from obsmem.models.retry import RetryPolicy
from obsmem.om.cycle import MODEL_TIMEOUT_S
from obsmem.om.buffering import LEASE_TTL_S
from obsmem.om.engine import Engine, EngineEvent
from obsmem.om.extractors import Extractor
from obsmem.om.group_index import group_index_for
from obsmem.om.protocols import Observer, Reflector
from obsmem.redact import redact_secrets
from obsmem.storage import leasing
from obsmem.storage.contract import Lease, Store, WorkItem, count_leases, has_work
from obsmem.storage.notes import ERASED
from obsmem.storage.ledger import LedgerBudget, LedgerWriter, calls_of_deleted_threads_dropped
from obsmem.tokens import TokenCounter
from obsmem.types import Thread, check_count, check_flag, check_id, describe_value

if TYPE_CHECKING:  # types only: numpy and the index modules load when first used
    from obsmem.embeddings import Embedder
    from obsmem.knowledge import Knowledge
    from obsmem.knowledge.agents import AgentRun
    from obsmem.vectors import VectorIndex

__all__ = [
    "WORK_KINDS",
    "WORK_KNOWLEDGE",
    "WORK_OBSERVE",
    "WORK_REFLECT",
    "Worker",
    "WorkerStats",
    "enqueue_thread_work",
]

logger = logging.getLogger("obsmem")

WORK_OBSERVE = "observe"  # buffer the thread's unbuffered messages into an inactive chunk
WORK_REFLECT = "reflect"  # buffer (or, past the threshold, activate) a reflection of its observations
WORK_KINDS = (WORK_OBSERVE, WORK_REFLECT)
# Run the knowledge agents on the thread (a Memory in queue mode hands them over): capture its
# committed observations, then curate if due; payload {"reflection": True} also curates and learns.
WORK_KNOWLEDGE = "knowledge"
_ALL_KINDS = (*WORK_KINDS, WORK_KNOWLEDGE)
_BUFFER_LEASE_PREFIX = {WORK_OBSERVE: leasing.BUFFER_OBSERVATION, WORK_REFLECT: leasing.BUFFER_REFLECTION}
#: Seconds a run meant to end (``exit_when_idle``, ``drain``) retries a store that keeps failing
#: before it raises the store's error (``Worker.run(store_patience_s=...)``). A worker run without
#: them retries for as long as it runs: it rides a database restart out.
STORE_PATIENCE_S = 60.0
#: How often (seconds of the worker's clock) a running worker looks at the store's schema again:
#: another obsmem version may have migrated it past this one since the worker opened it.
SCHEMA_CHECK_S = 60.0


def _work_kinds(kinds: object) -> tuple[str, ...] | None:
    """``kinds`` as a non-empty tuple of known work kinds, or None when it is not one."""
    if isinstance(kinds, str | bytes) or not isinstance(kinds, Sequence | set | frozenset):
        return None
    chosen = tuple(kinds)
    if not chosen or not all(isinstance(kind, str) and kind in _ALL_KINDS for kind in chosen):
        return None
    return chosen


async def enqueue_thread_work(
    store: Store, thread_id: str, *, now: datetime, kinds: Sequence[str] = WORK_KINDS
) -> list[WorkItem]:
    """Ask the workers to look at a thread (call after a turn). Coalesces with waiting work."""
    if not implements(store, Store):
        raise InvalidInputError(
            f"Invalid store: expected a Store, got {describe_value(store)}", argument="store"
        )
    check_id(thread_id, "thread_id")
    if not isinstance(now, datetime) or now.utcoffset() is None:
        raise InvalidInputError(
            f"Invalid now: expected a timezone-aware datetime, got {describe_value(now)}", argument="now"
        )
    chosen = _work_kinds(kinds)
    if chosen is None:
        raise InvalidInputError(
            f"Unknown work kinds in kinds={describe_value(kinds)}; workers run a non-empty list from "
            f"{list(_ALL_KINDS)}.",
            argument="kinds",
        )
    return [await store.enqueue_work(kind, thread_id, now=now) for kind in chosen]


def _positive_number(value: object, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ConfigError(argument, f"got {describe_value(value)}", allowed="a finite number of seconds > 0")
    return float(value)


def _whole_at_least_one(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(argument, f"got {describe_value(value)}", allowed="a whole number >= 1")
    return value


@dataclass
class WorkerStats:
    """What a worker did, for its log line and for tests."""

    claimed: int = 0
    completed: int = 0
    released: int = 0  # given back: failed, or waiting for another owner's lease
    abandoned: int = 0  # failed max_attempts times (or its workers kept dying): moved to the dead-letter table
    lost_claims: int = 0  # the claim expired under us and another worker took the item
    woken: int = 0  # items of a thread waiting for the lease this worker released, made due at once
    curations: int = 0  # knowledge curation runs the idle timer started (that ran)
    drained: bool = False  # run(drain=True) found the queue empty and no lease held
    timed_out: bool = False  # run(timeout_s=...) ran out of time


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:worker-{uuid.uuid4().hex[:8]}"


class Worker:
    """Claims work from ``store`` and runs it with an engine of its own.

    Give it what the application gives :class:`~obsmem.memory.Memory`, so that it builds the
    same roles (:mod:`obsmem.assembly`) and sends the same model requests: ``config`` (a
    MemoryConfig or a dict of its options; its thresholds also decide what a buffer covers), the
    models (``model`` for both roles, or ``observer`` / ``reflector``; unset, the config's, then
    the offline pair), ``extractors`` and ``working_memory_scope``. ``concurrency`` claim loops
    share one engine.
    """

    def __init__(
        self,
        store: Store,
        *,
        config: MemoryConfig | MemoryOptions | None = None,
        model: ModelSpec = None,
        observer: Observer | ModelSpec = None,
        reflector: Reflector | ModelSpec = None,
        extractors: Sequence[Extractor] = (),
        working_memory_scope: Literal["thread", "resource"] = "thread",
        counter: TokenCounter | None = None,
        clock: Clock | None = None,
        owner: str | None = None,
        kinds: Sequence[str] = WORK_KINDS,
        claim_ttl_s: float = 60.0,
        lease_ttl_s: float = LEASE_TTL_S,
        poll_interval_s: float = 1.0,
        max_attempts: int = 5,
        concurrency: int = 1,
        on_event: Callable[[EngineEvent], None] | None = None,
        embedder: Embedder | None = None,
        vector_index: VectorIndex | None = None,
        retry: RetryPolicy | None = None,
        model_timeout_s: float | None = MODEL_TIMEOUT_S,
        knowledge: Knowledge | None = None,
    ) -> None:
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError("retry", f"expected a RetryPolicy, got {describe_value(retry)}",
                              allowed="obsmem.models.retry.RetryPolicy(...) or None")
        if model_timeout_s is not None and (
            isinstance(model_timeout_s, bool) or not isinstance(model_timeout_s, int | float)
            or not math.isfinite(model_timeout_s) or model_timeout_s <= 0
        ):
            raise ConfigError("model_timeout_s", f"got {describe_value(model_timeout_s)}",
                              allowed="None or a number of seconds > 0")
        if not implements(store, Store):
            raise ConfigError(
                "store", f"expected a Store, got {describe_value(store)}",
                allowed="open_store(url) or a Store",
            )
        self.store = store
        self.config = memory_config(config)
        chosen_kinds = _work_kinds(kinds)
        if chosen_kinds is None:
            raise ConfigError(
                "kinds", f"got {describe_value(kinds)}", allowed=f"a non-empty list from {list(_ALL_KINDS)}"
            )
        if owner is not None and (not isinstance(owner, str) or not owner):
            raise ConfigError("owner", f"got {describe_value(owner)}", allowed="a non-empty string or None")
        self.claim_ttl_s = _positive_number(claim_ttl_s, "claim_ttl_s")
        self.lease_ttl_s = _positive_number(lease_ttl_s, "lease_ttl_s")
        self.poll_interval_s = _positive_number(poll_interval_s, "poll_interval_s")
        self.max_attempts = _whole_at_least_one(max_attempts, "max_attempts")
        self.concurrency = _whole_at_least_one(concurrency, "concurrency")
        check_collaborators(
            counter=counter, clock=clock, on_event=on_event, working_memory_scope=working_memory_scope,
            embedder=embedder, vector_index=vector_index,
        )
        self.counter = counter if counter is not None else TokenCounter()
        self.clock = clock if clock is not None else SystemClock()
        self.owner = owner or default_owner()
        self.kinds = chosen_kinds
        self.stats = WorkerStats()
        # Readiness, for a health endpoint: did the last claim reach the store (None: not tried yet)?
        self.store_ok: bool | None = None
        self.last_store_error: str | None = None
        self._spawned: dict[int, list[asyncio.Task[None]]] = {}
        # Buffer lease keys one of this worker's loops holds for an item in progress (they
        # share the engine, so its lease owner): another loop's item of the thread waits.
        self._holding: set[str] = set()
        self._erased_seen: str | None = None  # the store's erase token when this worker last looked
        self._schema_checked: datetime | None = None  # when this worker last looked at the schema
        if model is not None and (observer is not None or reflector is not None):
            # Kept from before assembly was shared: ``model`` fills the role not given.
            observer = model if observer is None else observer
            reflector = model if reflector is None else reflector
            model = None
        # The cost ledger: the worker's model calls are recorded like the application's, written
        # after each item (and when a run ends); the budget is the application's, per resource.
        self.ledger = LedgerWriter(
            store.record_model_calls, after_write=calls_of_deleted_threads_dropped(store.get_thread, store.delete_model_calls)
        )
        self.budget: LedgerBudget | None = None
        if self.config.budget is not None:
            self.budget = LedgerBudget(
                self.config.budget,
                lambda resource_id, since: store.usage_rows(resource_id=resource_id, since=since),
                self.clock, prices=self.config.price_overrides(), on_exceeded=budget_events(on_event),
                unwritten=self.ledger.unwritten,
            )
            self.ledger.listen(self.budget.record)
        roles = assemble_roles(
            self.config, model=model, observer=observer, reflector=reflector, extractors=extractors,
            counter=self.counter, clock=self.clock, retry=retry, on_event=on_event, sinks=(self.ledger,),
            budget=self.budget,
        )
        if embedder is not None:
            from obsmem.embeddings.metered import MeteredEmbedder

            embedder = MeteredEmbedder(embedder, sinks=(self.ledger,), count_tokens=self.counter.count_text)
            if roles.guard_embedder is not None:  # the privacy boundary holds for embeddings too
                embedder = roles.guard_embedder(embedder)
        self.engine = Engine(
            store=store,
            observer=roles.observer,
            reflector=roles.reflector,
            config=self.config,
            counter=self.counter,
            clock=self.clock,
            extractors=roles.extractors,
            reflector_start_level=roles.reflector_start_level,
            on_event=on_event,
            working_memory_scope=working_memory_scope,
            spawn=self._spawn,
            # retrieval with vectors: the groups this worker writes are indexed like the app's
            group_index=group_index_for(self.config.retrieval, embedder, vector_index),
            model_timeout_s=None if model_timeout_s is None else float(model_timeout_s),
            buffer_lease_ttl_s=self.lease_ttl_s,
        )
        self.knowledge = knowledge
        self._knowledge: KnowledgeHook | None = None
        self._last_curation_check: datetime | None = None
        if knowledge is not None:
            from obsmem.knowledge import Knowledge
            from obsmem.knowledge.agents import KnowledgeAgents

            if not isinstance(knowledge, Knowledge):
                raise ConfigError("knowledge", f"expected a Knowledge, got {describe_value(knowledge)}",
                                  allowed="None or obsmem.knowledge.Knowledge")
            # The privacy boundary holds here as in Memory: captured text is redacted before the
            # knowledge store, and the agents' model is behind the same boundary (and metered).
            chat = knowledge_model(self.config, roles=roles)
            agents = KnowledgeAgents(knowledge, store, knowledge_settings(self.config),
                                     count_tokens=self.counter.count_text, clock=self.clock, owner=self.owner,
                                     model=chat, redact=roles.redact, hosted_for=knowledge_hosted_for(chat, roles))
            # The worker runs the agents itself, after each item (never off the engine's events).
            self._knowledge = KnowledgeHook(agents, store, lambda work, name: work.close())
            if kinds is WORK_KINDS:  # the default: a worker with a knowledge store takes its work too
                self.kinds = (*self.kinds, WORK_KNOWLEDGE)

    # -- running --------------------------------------------------------------------------------
    async def run(
        self, *, stop: asyncio.Event | None = None, max_items: int | None = None, exit_when_idle: bool = False,
        drain: bool = False, timeout_s: float | None = None, store_patience_s: float = STORE_PATIENCE_S,
    ) -> WorkerStats:
        """Claim and run work until ``stop`` is set, ``max_items`` are done, (with
        ``exit_when_idle``) the queue has nothing due, or (with ``drain``) the queue holds no work
        of this worker's kinds and no buffer lease is held: work waiting for a later time, claims
        of dead workers (taken over once they expire) and live leases are waited out.

        ``timeout_s`` bounds the run in seconds of real time; then ``stats.timed_out`` is True
        (with ``drain``: work was left). ``stats.drained`` says whether a drain finished.

        A store that fails (``StorageError``: down, overloaded, a damaged file) is retried with
        backoff; with ``exit_when_idle`` or ``drain`` (a run meant to end) its error is raised once
        it has failed for ``store_patience_s`` seconds with no success between."""
        if stop is not None and not isinstance(stop, asyncio.Event):
            raise InvalidInputError(
                f"Invalid stop: expected an asyncio.Event, got {describe_value(stop)}", argument="stop"
            )
        check_count(max_items, "max_items", optional=True)
        check_flag(exit_when_idle, "exit_when_idle")
        check_flag(drain, "drain")
        if timeout_s is not None:
            _positive_number(timeout_s, "timeout_s")
        _positive_number(store_patience_s, "store_patience_s")
        stop = stop or asyncio.Event()
        done = asyncio.Event()  # one drain loop saw the queue empty: the others stop too

        async def loop() -> None:
            backoff = self.poll_interval_s
            failing_since: float | None = None  # when the store's current run of failures began
            while not stop.is_set() and not done.is_set():
                if max_items is not None and self.stats.claimed >= max_items:
                    return
                try:
                    worked = await self.run_once()
                except (MigrationError, StoreClosedError) as exc:
                    self.store_ok, self.last_store_error = False, redact_secrets(exc)
                    raise  # the store will not get better by waiting
                except StorageError as exc:  # the database is down or overloaded: wait, then retry
                    self.store_ok, self.last_store_error = False, redact_secrets(exc)
                    now = time.monotonic()
                    failing_since = now if failing_since is None else failing_since
                    if (exit_when_idle or drain) and now - failing_since >= store_patience_s:
                        raise  # a run meant to end does not wait on the store forever
                    logger.warning("obsmem worker: the store failed (%s); retrying in %.1fs",
                                   redact_secrets(exc), backoff)
                    worked, backoff = False, min(backoff * 2, 30.0)
                else:
                    self.store_ok = True
                    backoff, failing_since = self.poll_interval_s, None
                if worked:
                    continue
                await self.curate_when_idle()
                if drain and backoff == self.poll_interval_s:
                    try:
                        if await self.drained():
                            self.stats.drained = True
                            done.set()
                            return
                    except (MigrationError, StoreClosedError):
                        raise
                    except StorageError as exc:
                        logger.warning("obsmem worker: the store failed (%s); retrying in %.1fs",
                                       redact_secrets(exc), backoff)
                elif exit_when_idle and backoff == self.poll_interval_s:
                    return
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), backoff)

        loops = [asyncio.create_task(loop(), name=f"obsmem:worker-loop:{n}") for n in range(self.concurrency)]
        try:
            await asyncio.wait_for(asyncio.gather(*loops), timeout_s)
        except TimeoutError:
            self.stats.timed_out = True
        finally:  # one loop failing (or our caller cancelling) stops them all, and waits for them
            for task in loops:
                if not task.done() and not task.cancelling():  # (a second cancel would cut its hand-back)
                    task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self.ledger.flush()
        return self.stats

    async def drained(self) -> bool:
        """True when the queue holds no work of this worker's kinds (waiting, due later or
        claimed) and no buffer lease is held (an unexpired one, by anyone)."""
        for kind in self.kinds:  # one row at most each (the store's has_work)
            if await has_work(self.store, kind):
                return False
        now = self.clock.now()
        for prefix in _BUFFER_LEASE_PREFIX.values():  # counted in the store
            total, expired = await count_leases(self.store, prefix + ":", now=now)
            if total > expired:
                return False
        return True

    async def curate_when_idle(self, *, force: bool = False) -> list[AgentRun]:
        """The idle timer: every ``knowledge.curate_interval_s`` (or now, with ``force``), curate
        each lane whose count or age trigger fired, so an idle resource is still curated.
        Failures are the lanes' own (durable backoff); they never stop the worker."""
        check_flag(force, "force")
        if self._knowledge is None:
            return []
        now = self.clock.now()
        last = self._last_curation_check
        interval = self.config.knowledge.curate_interval_s
        if not force and last is not None and (now - last).total_seconds() < interval:
            return []
        self._last_curation_check = now
        try:
            runs = await self._knowledge.curate_due()
        except Exception as exc:  # noqa: BLE001 - a store hiccup: the next tick tries again
            telemetry.log_failure(logger, "obsmem worker: idle curation failed", error=redact_secrets(exc),
                                  operation="curate")
            return []
        self.stats.curations += sum(1 for run in runs if run.agent == "curate" and run.status == "ran")
        return runs

    async def run_once(self) -> bool:
        """Claim one due item and run it; False when nothing was due. Another process's erase
        since the last item (the store's erase token changed) first drops what this worker keeps
        in its own caches."""
        await self._check_schema()
        await self._catch_up_erases()
        items = await self.store.claim_work(self.owner, ttl_s=self.claim_ttl_s, now=self.clock.now(), kinds=self.kinds)
        if not items:
            return False
        self.stats.claimed += 1
        try:
            await self.process(items[0])
        finally:
            await self.ledger.flush()  # the item's model calls, before the next claim
        return True

    async def _check_schema(self) -> None:
        """Raise the store's :class:`MigrationError` once another obsmem version has migrated it
        past this one (a migration this version does not know): the check the store made when the
        worker opened it, made again at most every :data:`SCHEMA_CHECK_S` seconds, before a claim,
        so a worker left running through an upgrade stops instead of writing the old shapes. The
        work stays queued for an upgraded worker."""
        now = self.clock.now()
        if self._schema_checked is not None and (now - self._schema_checked).total_seconds() < SCHEMA_CHECK_S:
            return
        await self.store.migrate(dry_run=True)  # lists pending steps; refuses unknown ones
        self._schema_checked = now

    async def _catch_up_erases(self) -> None:
        """A delete or forget in another process (the application, the server, the CLI) cannot
        reach this one's memory: the decoded rows, windows, counted texts and offline lines it
        keeps may hold what was erased. The erase changes the store's token
        (:data:`~obsmem.storage.notes.ERASED`); seeing it change, the worker drops all it keeps."""
        token = await self.store.get_working_memory(ERASED)
        if token == self._erased_seen:
            return
        self._erased_seen = token
        await forget_kept_in_process(engine=self.engine, store=self.store, counter=self.counter,
                                     knowledge_agents=self._knowledge.agents if self._knowledge is not None else None)

    async def process(self, item: WorkItem) -> None:
        """Run one claimed item under a heartbeat; complete it, or give it back on failure."""
        if not isinstance(item, WorkItem):
            raise InvalidInputError(
                f"Invalid item: expected a WorkItem (from store.claim_work), got {describe_value(item)}",
                argument="item",
            )
        started = time.monotonic()
        if item.attempts > self.max_attempts:  # its earlier claims ended without an answer: workers died on it
            error = item.last_error or (
                f"claimed {item.attempts - 1} times by workers that stopped before finishing (claims expired)"
            )
            self._log_job(item, started, await self._bury(item, error=error))
            return
        current = [item]
        heartbeat = asyncio.create_task(self._heartbeat(current), name=f"obsmem:heartbeat:{item.id}")
        try:
            held = await self._perform(item)
        except asyncio.CancelledError:
            # The worker is being stopped mid-item (``run`` cancelled: ``obsmem worker``'s second
            # Ctrl-C / SIGTERM): the item goes back, due now and not counted as an attempt (it
            # did not fail), so another worker takes it over at once instead of after its claim's
            # expiry. The buffer lease its work held was released by ``_perform`` on the way out.
            await self._hand_back_stopped(current[0])
            raise
        except Exception as exc:  # noqa: BLE001 - the item goes back with the error; the worker goes on
            error = redact_secrets(f"{type(exc).__name__}: {exc}")
            telemetry.log_failure(logger, "obsmem worker: %s work on %s failed", item.kind, item.target, error=error,
                                  thread_id=item.target, operation=item.kind)
            # The lease our work held is released. An item waiting for it has our kind and
            # target: a failed item given back coalesces into it (both are retried after the
            # failure's backoff, so no wake: it would cut that short); a buried one does not,
            # and the waiter, new work that never failed, is woken.
            if item.attempts >= self.max_attempts:
                outcome = await self._bury(current[0], error=error)
                if outcome == "dead-lettered":
                    await self._wake(item)
            else:
                outcome = await self._give_back(current[0], delay_s=min(60.0, 2.0 ** item.attempts), error=error)
                outcome = "failed" if outcome == "released" else outcome
            self._log_job(item, started, outcome)
            return
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        if held is not None:  # only waiting (another owner's live lease): not an attempt
            wait_s = max(0.05, (held.expires_at - self.clock.now()).total_seconds())
            outcome = await self._give_back(current[0], delay_s=wait_s, error=None, count_attempt=False)
            if outcome == "released":
                await self._wake_if_released(item, held)
            outcome = "waiting" if outcome == "released" else outcome
        else:
            await self._wake(item)  # the lease its work held is released: the thread's waiter goes now
            if await self.store.complete_work(current[0]):
                self.stats.completed += 1
                outcome = "completed"
            else:
                self.stats.lost_claims += 1
                outcome = "lost-claim"
        self._log_job(item, started, outcome)

    async def _wake(self, item: WorkItem) -> bool:
        """After ``item``'s work ran (and the buffer lease it took, if any, was released): the
        item of its kind and thread that was handed back to wait for that lease is due now.
        Not an attempt and no new work: a woken item that finds nothing to do completes. A store
        error here only costs the waiter its wait (until the lease's expiry): it is logged."""
        if item.kind not in _BUFFER_LEASE_PREFIX:
            return False
        try:
            woken = await self.store.wake_work(item.kind, item.target, now=self.clock.now())
        except (MigrationError, StoreClosedError):
            raise
        except StorageError as exc:
            logger.warning("obsmem worker: could not wake %s work on %s waiting for its lease (%s)",
                           item.kind, item.target, redact_secrets(exc))
            return False
        if woken:
            self.stats.woken += 1
        return woken

    async def _wake_if_released(self, item: WorkItem, held: Lease) -> None:
        """``item`` was just handed back to wait for ``held``: if that lease is gone already
        (released between our look at it and the hand-back, when its holder found nothing
        waiting to wake), wake the item ourselves so that it does not wait for the expiry."""
        try:
            lease = await self.store.get_lease(held.key)
        except (MigrationError, StoreClosedError):
            raise
        except StorageError as exc:  # the item stays handed back until the lease's expiry
            logger.warning("obsmem worker: could not look at the lease %s work on %s waits for (%s)",
                           item.kind, item.target, redact_secrets(exc))
            return
        if lease is None or lease.token != held.token or lease.is_expired(self.clock.now()):
            await self._wake(item)

    async def _hand_back_stopped(self, item: WorkItem) -> None:
        """Give ``item`` back to the queue while this worker stops (see :meth:`process`), due at
        once. Its attempt counts: an item whose work always outlasts a scheduled run (``--timeout``
        from cron, a model call longer than it) reaches the dead-work list after ``max_attempts``
        runs like any item that keeps failing, instead of being taken first by every run forever.
        A store that fails here only delays the item until its claim expires: it is logged."""
        try:
            outcome = await self._give_back(item, delay_s=0.0, error="stopped: the worker stopped during this work")
        except Exception as exc:  # noqa: BLE001 - the claim expires on its own
            logger.warning("obsmem worker: stopping, could not give %s work on %s back (%s); another worker "
                           "takes it over when its claim expires", item.kind, item.target, redact_secrets(exc))
            return
        logger.info("obsmem worker: stopping, gave %s work on %s back to the queue (%s)", item.kind, item.target,
                    outcome)  # fmt: skip

    def _log_job(self, item: WorkItem, started: float, outcome: str) -> None:
        logger.debug("obsmem worker: job %s %s on %s outcome=%s in %.3f s (attempt %d)",
                     item.id, item.kind, item.target, outcome, time.monotonic() - started, item.attempts)

    async def _give_back(
        self, item: WorkItem, *, delay_s: float, error: str | None, count_attempt: bool = True
    ) -> str:
        if await self.store.release_work(
            item, now=self.clock.now(), delay_s=delay_s, error=error, count_attempt=count_attempt
        ):
            if item.payload:
                # The release coalesces into an item of the same kind and target queued while this
                # one ran, and that item keeps its own payload: a knowledge item's {"reflection":
                # True} (curate and learn, capture included) would give way to a plain capture.
                # Queued again with it, the waiting item asks for what this one did.
                await self.store.enqueue_work(item.kind, item.target, now=self.clock.now(),
                                              payload=dict(item.payload), delay_s=delay_s)
            self.stats.released += 1
            return "released"
        self.stats.lost_claims += 1
        return "lost-claim"

    async def _bury(self, item: WorkItem, *, error: str | None) -> str:
        """Move work that keeps failing to the dead-letter table (``obsmem queue`` lists it)."""
        if not await self.store.bury_work(item, now=self.clock.now(), error=error):
            self.stats.lost_claims += 1
            return "lost-claim"
        kind = error.split(":", 1)[0].strip() if error else "error"  # "Type: text": the type only above DEBUG
        logger.error("obsmem worker: %s work on %s failed %d times; moved to the dead-letter queue "
                     "(obsmem queue retry %d requeues it; obsmem queue shows the last error); last error type: %s",
                     item.kind, item.target, item.attempts, item.id, kind if kind.isidentifier() else "error",
                     extra=telemetry.log_fields(item.target, item.kind))
        logger.debug("obsmem worker: dead-lettered %s work on %s: %s", item.kind, item.target, redact_secrets(error))
        self.stats.abandoned += 1
        return "dead-lettered"

    async def _heartbeat(self, current: list[WorkItem]) -> None:
        while True:
            await asyncio.sleep(self.claim_ttl_s / 3)
            renewed = await self.store.renew_work(current[0], ttl_s=self.claim_ttl_s, now=self.clock.now())
            if renewed is None:
                logger.warning("obsmem worker: lost the claim on %s work on %s", current[0].kind, current[0].target)
                return
            current[0] = renewed

    # -- the work -------------------------------------------------------------------------------
    async def _perform(self, item: WorkItem) -> Lease | None:
        """Do the item's work; returns another owner's live lease to wait for, or None when done."""
        thread = await self.store.get_thread(item.target)
        if thread is None:
            return None  # deleted meanwhile: nothing left to do
        if item.kind == WORK_KNOWLEDGE:
            await self._knowledge_item(item, thread)
            return None
        taken, held = await self._take_lease(item, thread)
        if held is not None:
            return held
        key = id(asyncio.current_task())
        self._spawned[key] = []
        try:
            engine = self.engine
            if engine.buffered is None:  # buffering off: the worker observes / reflects when due
                if item.kind == WORK_OBSERVE:
                    await engine.maybe_observe(thread)
                else:
                    await engine.maybe_reflect(thread)
            elif item.kind == WORK_OBSERVE:
                await engine.buffered.maybe_start_buffer(thread, idle=True, above_threshold=True)
            else:
                await engine.buffered.reflection_step(thread, await engine.head(thread))
            for task in self._spawned[key]:
                await task  # the engine reports its own failures (events, markers); nothing is lost
        finally:
            for task in self._spawned.pop(key):
                task.cancel()
            if taken is not None:  # the engine released it when its work ended; this is for when none ran
                self._holding.discard(taken)
                await self.store.release_lease(taken, self.engine_owner or "")
        await self._run_knowledge(item, thread)
        return None

    async def _knowledge_item(self, item: WorkItem, thread: Thread) -> None:
        """A ``knowledge`` item: a failure raises, so the item goes back to the queue (with the
        usual retry delay) and the thread's deltas stay uncaptured until a run succeeds."""
        if self._knowledge is None:
            raise ConfigError("knowledge", "this worker has no knowledge store for 'knowledge' work",
                              allowed="Worker(..., knowledge=Knowledge...) or obsmem worker --knowledge PATH|URL")
        if item.payload.get("reflection"):
            await self._knowledge.reflection_phase(thread.id)
            return
        await self._knowledge.capture_thread(thread.id)

    async def _run_knowledge(self, item: WorkItem, thread: Thread) -> None:
        """Capture what this item committed (and, after reflection work, curate and learn).
        A failing agent never fails the item: the observations are committed already, and the
        capture lane's cursor stays put for the next run."""
        if self._knowledge is None:
            return
        try:
            if item.kind == WORK_REFLECT:
                await self._knowledge.reflection_phase(thread.id)
            else:
                await self._knowledge.capture_thread(thread.id)
        except Exception as exc:  # noqa: BLE001
            telemetry.log_failure(logger, "obsmem worker: knowledge agents on %s failed", thread.id,
                                  error=redact_secrets(exc), thread_id=thread.id, operation="knowledge")

    async def _take_lease(self, item: WorkItem, thread: Thread) -> tuple[str | None, Lease | None]:
        """Take the item's buffer lease on its thread (its lineage) before the engine runs:
        ``(key, None)`` when this worker holds it now, ``(None, lease)`` when another owner's
        live buffer holds it (the item waits for it), ``(None, None)`` without buffering.

        Taken first, not by the engine's buffer after it reserved its range by compare-and-set
        on the head: in that gap a second worker saw no lease, then found the range reserved
        or the lease taken, and completed its item having done nothing, leaving the messages
        it was asked about unbuffered. The engine's buffer renews the lease (same owner) and
        releases it when its work ends. Another loop of this worker on the same thread holds
        the same owner's lease: it is waited for like another process's (``_holding``).

        The item waits for the lease's expiry: a live holder renews it and, when its work is
        done, releases it and wakes the item (:meth:`_wake`); a dead one's lease runs out and
        this item takes the work over."""
        key = leasing.lineage_lease(_BUFFER_LEASE_PREFIX[item.kind], self.engine.lineage(thread))
        owner = self.engine_owner
        lease: Lease | None = None
        for _ in range(3):  # a lease released between our two looks: try again
            if owner is not None and key not in self._holding:
                mine = await self.store.acquire_lease(key, owner, ttl_s=self.lease_ttl_s, now=self.clock.now())
                if mine is not None and key not in self._holding:
                    self._holding.add(key)
                    return key, None
            lease = await self.store.get_lease(key)
            if owner is None:  # buffering off: the engine takes no lease; only wait for a live one
                break
            if lease is not None and not lease.is_expired(self.clock.now()):
                return None, lease
        if lease is None or lease.is_expired(self.clock.now()):
            return None, None  # no live lease (or one released each time we looked): the engine takes its own
        return None, lease

    @property
    def engine_owner(self) -> str | None:
        return self.engine.buffered.owner if self.engine.buffered is not None else None

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None] | None:
        """The engine's background work runs inside the item that asked for it."""
        task = asyncio.get_running_loop().create_task(work, name=f"obsmem:worker:{name}")
        current = asyncio.current_task()
        bucket = self._spawned.get(id(current)) if current is not None else None
        if bucket is None:  # pragma: no cover - the engine only spawns from inside _perform
            task.cancel()
            return None
        bucket.append(task)
        return task


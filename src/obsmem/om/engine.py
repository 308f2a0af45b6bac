"""The observation engine: runs observe, activate and reflect against the store, safely.

The engine is a composition, and reads top-down:

- :mod:`obsmem.om.cycle` — the engine's parts (:class:`~obsmem.om.cycle.Core`), one cycle of
  model work, and the one compare-and-set loop every transition commits with;
- :mod:`obsmem.om.step` — the synchronous transitions (observe, activate, reflect);
- :mod:`obsmem.om.buffering` — the background lifecycle (buffers, early activation), built
  on those steps when buffering is on;
- :mod:`obsmem.om.activation` — the pure activation rule both of them ask.

Nothing here holds a lock, so any number of engines, in any number of processes, can share a
store: the storage contract is the only coordination. The engine receives its store, observer,
reflector, counter and clock; it never builds them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, Literal

from obsmem.clock import Clock
from obsmem.config import MemoryConfig
from obsmem.errors import ObsmemError, StorageError
from obsmem.models.retry import FailurePolicy
from obsmem.om.buffering import (
    LEASE_TTL_S,
    BufferedLifecycle,
    Handoff,
    Paused,
    Spawn,
    StepResult,
    read_snapshot,
)
from obsmem.om.cycle import Backoff, CommitPolicy, Core, Written
from obsmem.telemetry import log_failure
from obsmem.om.extractors import Extractor
from obsmem.om.group_index import GroupIndex
from obsmem.om.outcomes import CycleOutcome, EngineEvent
from obsmem.om.protocols import Observer, Reflector
from obsmem.om.sections import remove_thread
from obsmem.om.selection import (
    Unseen,
    check_input_sequence,
    close_waiting_calls,
    is_boundary,
    observable_messages,
    valid_cuts,
)
from obsmem.om.step import ActivateStep, ActivationTrigger, ObserveStep, ReflectStep, Trigger, backing_off_outcome
from obsmem.storage.contract import ObservationRecord, Store, ThreadState
from obsmem.tokens import TOKENS_PER_CONVERSATION, TokenCounter
from obsmem.types import Message, Thread

__all__ = ["CycleOutcome", "Engine", "EngineEvent", "FailurePolicy", "Prepared", "Trim"]

logger = logging.getLogger("obsmem")


@dataclass(frozen=True, slots=True)
class Prepared:
    """Where :meth:`Engine.advance_if_quiet` stopped at a boundary that needs a model call, for
    :meth:`Engine.advance` to go on from (``paused`` None: start over)."""

    paused: Paused | None


@dataclass(frozen=True, slots=True)
class Trim:
    """A raw window cut to fit: the messages ``kept``, how many were left out (``trimmed``, the
    oldest; they stay pending, unobserved) with their ``tokens``, and the ``limit`` it fits."""

    kept: list[Message]
    trimmed: int = 0
    tokens: int = 0
    limit: int = 0


@dataclass(frozen=True, slots=True)
class Quiet:
    """A boundary known quiet (:meth:`Engine.quiet_step`): the step's result, and ``taken``, to
    call when the caller skips the step on it (it notes what the step would have noted)."""

    result: StepResult
    taken: Callable[[], None]


def _may_close(tail: Sequence[Message], new: Sequence[Message]) -> bool:
    """Whether :func:`close_waiting_calls` could close anything: a call in ``new``, or a tail whose
    last conversation message is not one that says something and calls nothing (after such a
    message no call waits). The common boundary skips the walk."""
    if any(m.tool_calls for m in new):
        return True
    last = next((m for m in reversed(tail) if m.role != "system" and not m.is_marker_only), None)
    return last is not None and (bool(last.tool_calls) or not is_boundary(last))


class Engine:
    """One engine over one store: the transitions, the step boundary, and the parts they share.

    ``engine.buffered`` is the background lifecycle when buffering is on (and a ``spawn`` handle
    was given), else None. ``commit_policy`` sets the commit loop's attempts and pauses.
    """

    def __init__(
        self,
        *,
        store: Store,
        observer: Observer,
        reflector: Reflector,
        config: MemoryConfig,
        counter: TokenCounter,
        clock: Clock,
        extractors: Sequence[Extractor] = (),
        reflector_start_level: int = 1,
        failure_policy: FailurePolicy = "throw",
        model_timeout_s: float | None = 600.0,
        on_event: Callable[[EngineEvent], None] | None = None,
        working_memory_scope: Literal["thread", "resource"] = "thread",
        spawn: Spawn | None = None,
        group_index: GroupIndex | None = None,
        handoff: Handoff | None = None,
        buffer_lease_ttl_s: float = LEASE_TTL_S,
        commit_policy: CommitPolicy | None = None,
    ) -> None:
        self.core = Core(
            store=store, observer=observer, reflector=reflector, config=config, counter=counter, clock=clock,
            extractors=extractors, reflector_start_level=reflector_start_level, failure_policy=failure_policy,
            model_timeout_s=model_timeout_s, on_event=on_event, working_memory_scope=working_memory_scope,
            group_index=group_index, commit_policy=commit_policy,
        )
        self.activation = ActivateStep(self.core)
        self.observation = ObserveStep(self.core, self.activation)
        self.reflection = ReflectStep(self.core)
        # Buffered mode needs somewhere to run background work; without a spawn handle the
        # engine runs synchronously whatever the configuration says.
        self.buffered: BufferedLifecycle | None = None
        if spawn is not None and config.observation.buffering_enabled:
            self.buffered = BufferedLifecycle(
                self.core, observation=self.observation, activation=self.activation, reflection=self.reflection,
                spawn=spawn, handoff=handoff, lease_ttl_s=buffer_lease_ttl_s,
            )

    async def advance_if_quiet(
        self,
        thread: Thread,
        *,
        turn_start: bool = False,
        actor_model: str | None = None,
        fresh: Sequence[Message] = (),
        stored: tuple[ObservationRecord | None, list[Message]] | None = None,
    ) -> StepResult | Prepared:
        """:meth:`advance` up to its first memory model call: a boundary that needs none
        (activation and starting buffers only touch the store) is done and returned; otherwise
        where it stopped, for :meth:`advance` (``prepared=``) to go on from. A turn runs this
        inline and only the rest under its wait bound, so most boundaries cost no task hand-off.

        ``stored``: the boundary's first read, done by the caller (see
        :meth:`~obsmem.om.cycle.Core.window`); read here when None."""
        await self.core.counter.warm(fresh)
        unseen = Unseen.of(fresh, turn_start=turn_start)
        if self.buffered is not None:
            step = await self.buffered.step(
                thread, turn_start=turn_start, actor_model=actor_model, unseen=unseen, inline=True, stored=stored
            )
            return step if isinstance(step, StepResult) else Prepared(step)
        snapshot = await read_snapshot(self.core, thread, stored)
        if self._synchronous_quiet(thread, snapshot.record, snapshot.pending):
            return StepResult([], snapshot.record, snapshot.messages, snapshot.others)
        return Prepared(None)

    async def stalled(
        self, thread: Thread, stored: tuple[ObservationRecord | None, list[Message]] | None, *,
        actor_model: str | None = None,
    ) -> CycleOutcome | None:
        """Whether a boundary's memory work can do nothing before the observer's backoff ends,
        known from the head alone: the outcome such work would report (the observation skipped,
        backing off; reported as the ``observation-backoff-skipped`` event), else None.

        That is: the observer backs off (its model kept failing), the thread's window reaches the
        observation threshold (else nothing is due to skip), no buffered chunk waits to be
        activated, no reflection may start (under its threshold and buffering start, or its
        reflector backing off too) and, at a turn's start, the actor's model is the one the head
        knows. The work would read the window, count it and plan an observation, only to skip
        the model call: with a key revoked and thousands of messages pending, a quarter of a
        second a boundary, every boundary. The head is ``stored``'s (no read); without
        ``stored``, read for a window too long to keep (one row), else None (the step decides)."""
        core = self.core
        if stored is not None:
            record = stored[0]
        elif self.known_long(thread):
            record = await core.store.get_head(self.lineage(thread))
        else:
            return None
        if record is None or record.buffered_chunks or record.buffered_reflection is not None:
            return None
        if actor_model and record.metadata.get("last_model") != actor_model:
            return None  # early activation remembers the new model
        if not self._backs_off(record, "observation"):
            return None
        if stored is not None and not self._due(record, stored[1]):
            # Nothing to observe (a new thread of a resource whose backoff another thread's
            # backlog caused): no skip to report; the step finds the boundary quiet, as before.
            return None
        tokens = record.observation_tokens
        start = core.config.reflection.buffer_start_tokens
        may_reflect = tokens >= core.reflection_threshold() or (
            core.config.reflection_buffering_enabled and start is not None and tokens >= start
        )
        if may_reflect and not self._backs_off(record, "reflection"):
            return None
        if may_reflect and self.buffered is None:
            core.backing_off(record, "reflection", thread.id)  # reported as the synchronous step's reflection did
        backoff = core.backing_off(record, "observation", thread.id)
        return None if backoff is None else backing_off_outcome("observation", record, backoff)

    def _due(self, record: ObservationRecord, messages: Sequence[Message]) -> bool:
        """Whether the thread's own unobserved ``messages`` (as stored after its cursor) reach the
        observation threshold on ``record``, counted from the newest until they do (with sharing
        on, the other threads' block counts too: unknown here, so a window under the threshold is
        left to the step)."""
        core = self.core
        threshold = core.message_threshold(record)
        unobserved = observable_messages(messages)
        if not unobserved:
            return False
        total = TOKENS_PER_CONVERSATION
        for message in reversed(unobserved):
            total += core.counter.count_message(message)
            if total >= threshold:
                return True
        return False

    def _backs_off(self, record: ObservationRecord, role: Literal["observation", "reflection"]) -> bool:
        """Whether ``role``'s backoff is in force on ``record`` now (nothing reported)."""
        if self.core.backoff_first_s(role) is None:
            return False
        backoff = Backoff.of(record, role)
        return backoff is not None and self.core.clock.now() < backoff.until

    def _synchronous_quiet(self, thread: Thread, record: ObservationRecord, pending: int) -> bool:
        """Without buffering: whether a step on ``record`` with ``pending`` tokens does nothing."""
        core = self.core
        return (
            pending < core.message_threshold(record)
            and record.observation_tokens < core.reflection_threshold()
            and not any(c.thread_id == thread.id for c in record.buffered_chunks)
        )

    async def quiet_step(
        self,
        thread: Thread,
        *,
        turn_start: bool = False,
        actor_model: str | None = None,
        fresh: Sequence[Message] = (),
        stored: tuple[ObservationRecord | None, list[Message]],
    ) -> Quiet | None:
        """:meth:`advance_if_quiet` for a boundary that is sure to be quiet, decided without the
        store: the result it would return (nothing done, the window as ``stored``), or None when
        it might do anything (then call :meth:`advance_if_quiet`). No read, no write and no
        change, so a turn asks while its save still reaches the disk (writes must wait for that,
        decisions need not), and calls :meth:`Quiet.taken` when it skips the step on it.
        ``stored``: as for :meth:`advance_if_quiet` (a head is needed: None without one)."""
        core = self.core
        record = stored[0]
        if record is None or core.sharing:
            return None  # a first head to create, or other threads to read: the step decides
        await core.counter.warm(fresh)
        snapshot = await read_snapshot(core, thread, stored)  # no read: a head given, no other threads
        quiet = StepResult([], snapshot.record, snapshot.messages)
        if self.buffered is not None:
            keep = self.buffered.quiet(thread, snapshot, turn_start=turn_start, actor_model=actor_model)
            return None if keep is None else Quiet(quiet, keep)
        if self._synchronous_quiet(thread, snapshot.record, snapshot.pending):
            return Quiet(quiet, lambda: None)
        return None

    async def advance(
        self,
        thread: Thread,
        *,
        turn_start: bool = False,
        actor_model: str | None = None,
        fresh: Sequence[Message] = (),
        prepared: Prepared | None = None,
    ) -> StepResult:
        """Everything due at a step boundary: activation, observation, reflection, new buffers.

        ``fresh`` are the messages saved at this boundary (as stored, with their seq): the
        actor has not seen them, so they stay raw in this step, and so does, at a turn's start,
        the newest user message with everything after it (:class:`~obsmem.om.selection.Unseen`).
        They are observed at a later boundary. Returns the outcomes and the state after them,
        from which the actor's context is built without reading the store again.
        """
        await self.core.counter.warm(fresh)
        unseen = Unseen.of(fresh, turn_start=turn_start)
        if self.buffered is not None:
            step = await self.buffered.step(
                thread, turn_start=turn_start, actor_model=actor_model, unseen=unseen,
                resume=prepared.paused if prepared is not None else None,
            )
            assert isinstance(step, StepResult)  # only an inline step pauses
            return step
        outcomes = [await self.observation.maybe_observe(thread, unseen=unseen)]
        reflected = await self.reflection.maybe_reflect(thread)
        if reflected.applied or reflected.error is not None:
            outcomes.append(reflected)
        record, messages = await self.core.window(thread)
        return StepResult(outcomes, record, messages)

    # -- the transitions ----------------------------------------------------------------------
    async def maybe_observe(self, thread: Thread) -> CycleOutcome:
        """Observe when the unobserved tokens reach the threshold (a no-op otherwise). The newest
        user message and what follows it stay raw: an actor may be about to read them."""
        return await self.observation.maybe_observe(thread, unseen=Unseen(newest_user=True))

    async def observe(self, thread: Thread, *, force: bool = False, trigger: Trigger = "manual") -> CycleOutcome:
        """Observe synchronously (buffered chunks are activated first)."""
        return await self.observation.observe(thread, force=force, trigger=trigger)

    async def activate(
        self,
        thread: Thread,
        *,
        count: int | None,
        triggered_by: ActivationTrigger = "threshold",
        extra: dict[str, Any] | None = None,
    ) -> CycleOutcome:
        """Activate the first ``count`` stored chunks of a thread (all when None). No model call."""
        return await self.activation.activate(thread, count=count, triggered_by=triggered_by, extra=extra)

    async def maybe_reflect(self, thread: Thread) -> CycleOutcome:
        """Reflect when the observations reach the reflection threshold (a no-op otherwise)."""
        return await self.reflection.maybe_reflect(thread)

    async def reflect(self, thread: Thread, *, guidance: str | None = None) -> CycleOutcome:
        """Manual reflection: starts at compression level 0 with the reflection threshold as target."""
        return await self.reflection.reflect(thread, guidance=guidance)

    async def check_input(
        self, thread: Thread, new: Sequence[Message], *, tail: Sequence[Message] | None = None,
        argument: str = "messages", close_calls: bool = False, keep: Collection[str] = (),
    ) -> list[Message]:
        """Raise InvalidInputError when saving ``new`` on ``thread`` would put a tool result
        before its call or a message between a call and its result (see
        :func:`~obsmem.om.selection.check_input_sequence`). Call it *before* saving; save what
        it returns: ``new``, and with ``close_calls`` the calls still waiting when ``new`` says
        something answered as unanswered (:func:`~obsmem.om.selection.close_waiting_calls`),
        except those in ``keep`` (a turn's own calls: its model must answer them).

        ``tail`` is the thread's stored messages from the newest message with text, a file or a
        call on (a turn's last context's raw messages will do); without it the tail is read
        from the store, newest first, until such a message is found.
        """
        if not new:
            return []
        if tail is None:
            tail, _ = await self.stored_tail(thread)
        if close_calls and _may_close(tail, new):
            new = close_waiting_calls(tail, new, keep=keep)
        check_input_sequence(tail, new, argument=argument)
        return list(new)

    async def stored_tail(self, thread: Thread) -> tuple[list[Message], int]:
        """The thread's stored messages from its newest boundary message on, oldest first (the
        tail :meth:`check_input` checks against), and the newest seq of the thread as read with
        them (0: no message), for the save's ordering guard."""
        limit = 8
        while True:
            newest = await self.core.store.list_messages(thread.id, limit=limit, newest_first=True)
            observable = observable_messages(newest)
            if len(newest) < limit or any(is_boundary(m) for m in observable):
                return list(reversed(observable)), (newest[0].seq or 0) if newest else 0
            limit *= 4

    async def forget_thread(
        self, thread: Thread, *, overtaken: Callable[[], Awaitable[bool]] | None = None
    ) -> None:
        """Resource scope: remove a deleted thread's sections, hints and chunks from the record.
        ``overtaken``: whether another caller finished this delete and the id was made again
        since (``Memory.delete_thread``): the record is then left as it is (what it holds under
        the id is the new thread's)."""
        core = self.core
        if overtaken is not None and await overtaken():
            return
        if core.group_index is not None:
            try:
                await core.group_index.remove_thread(thread.resource_id, thread.id)
            except ObsmemError as exc:
                log_failure(logger, "obsmem: could not remove the vectors of thread %s", thread.id, error=exc,
                            thread_id=thread.id, operation="forget")
        if not core.resource_scope:
            return

        async def compose(record: ObservationRecord) -> ObservationRecord | None:
            active = remove_thread(record.active_observations, thread.id)
            # Its id goes too (the store allows a deleted thread's cursor out: its seqs are never
            # reused, and a write adding to it is refused as gone); unless the id was made again
            # meanwhile (the app started the conversation again while this delete ran): when that
            # finished this delete first (``overtaken``), the record is the new thread's and is
            # left alone; else the store refuses a live thread's cursor left out, so it stays, as
            # it did before ids left records (its sections go: they may be the deleted thread's).
            threads = {key: state for key, state in record.threads.items() if key != thread.id}
            if await core.store.get_thread(thread.id) is not None:
                if overtaken is not None and await overtaken():
                    return None
                if thread.id in record.threads:
                    threads[thread.id] = ThreadState(cursor=record.threads[thread.id].cursor)
            return record.model_copy(
                update={
                    "active_observations": active,
                    "observation_tokens": core.counter.count_text(active),
                    "threads": threads,
                    "buffered_chunks": tuple(c for c in record.buffered_chunks if c.thread_id != thread.id),
                    "buffered_reflection": None,
                    "updated_at": core.clock.now(),
                }
            )

        async def write(current: ObservationRecord, proposed: ObservationRecord) -> Written[ObservationRecord]:
            try:
                return await core.update(current, proposed)
            except StorageError:
                # Made again between the compose's look and the write: composed again (it keeps
                # the cursor now); any other refusal stands.
                if thread.id in proposed.threads or await core.store.get_thread(thread.id) is None:
                    raise
                return Written("stale", await core.stored_head(thread))

        done = await core.commit(lambda: core.stored_head(thread), compose, write)
        if done.status == "exhausted":
            # Other writers won every try: the thread's sections are still in the record, so the
            # delete must not go on as if done (its note stays; calling it again finishes it).
            raise StorageError(
                f"Could not take thread '{thread.id}' out of its resource's record: other writers "
                f"changed it on all {core.commit_policy.attempts} attempts. Delete the thread again."
            )

    # -- the raw window when memory falls behind -------------------------------------------------
    def raw_limit(self, record: ObservationRecord | None) -> int:
        """The most raw message tokens a turn's context holds, besides the input the actor has
        not seen, when the turn went on without its memory work (``max_turn_wait``): twice the
        message threshold, or ``observation.block_after`` when that is larger. The oldest raw
        messages past it are left out of that context (:meth:`trim_window`), still pending."""
        observation = self.config.observation
        threshold = self.core.message_threshold(record) if record is not None else observation.message_tokens
        return max(2 * threshold, observation.resolved_block_after or 0)

    def trim_window(
        self,
        thread: Thread,
        record: ObservationRecord | None,
        unobserved: Sequence[Message],
        *,
        keep: Sequence[Message] = (),
        older: int = 0,
    ) -> Trim:
        """``unobserved`` without its oldest messages, as few as bring it under :meth:`raw_limit`.

        Never cut: the newest user message and everything after it, the messages in ``keep``
        (this boundary's input) and after them, system messages (the application's
        instructions), and a tool call apart from its result. The cut falls before a user
        message when one allows it, so the kept conversation begins with a user turn. A cut is
        reported as a ``context-trimmed`` event; the messages left out stay pending, to be
        observed later. ``older``: messages of the window before ``unobserved``, not read (a
        window too long to read whole, :meth:`behind_window`), left out too; the event's
        ``tokens`` counts only those read.
        """
        cut, counts, total, limit = self._cut(record, unobserved, keep)
        if cut == 0 and not older:
            return Trim(list(unobserved), limit=limit)
        removed = unobserved[:cut]
        removed_tokens = sum(counts[:cut])
        trimmed = sum(1 for m in removed if m.role != "system") + older
        if trimmed == 0:
            return Trim(list(unobserved), limit=limit)
        kept = [m for m in removed if m.role == "system"] + list(unobserved[cut:])
        self.core.emit("context-trimmed", thread.id, messages=trimmed, tokens=removed_tokens, limit=limit)
        return Trim(kept, trimmed, removed_tokens, limit)

    def _cut(
        self, record: ObservationRecord | None, unobserved: Sequence[Message], keep: Sequence[Message]
    ) -> tuple[int, list[int], int, int]:
        """Where :meth:`trim_window` cuts ``unobserved`` (0: nowhere), with each message's tokens,
        their total and the raw limit."""
        limit = self.raw_limit(record)
        counts = [0 if m.role == "system" else self.counter.count_message(m) for m in unobserved]
        total = sum(counts)
        if total <= limit:
            return 0, counts, total, limit
        users = [i for i, m in enumerate(unobserved) if m.role == "user"]
        stop = users[-1] if users else len(unobserved)
        kept_ids = {m.id for m in keep}
        stop = min([stop, *(i for i, m in enumerate(unobserved) if m.id in kept_ids)])
        cuts = [cut for cut in valid_cuts(unobserved) if cut <= stop]
        # The kept tail begins an exchange (a user message) when some cut allows it: Anthropic's
        # API on Bedrock and Vertex refuses a conversation that starts with an assistant turn.
        cuts = [cut for cut in cuts if cut < len(unobserved) and unobserved[cut].role == "user"] or cuts
        if not cuts:
            return 0, counts, total, limit
        removed_tokens, cut = 0, 0
        for candidate in cuts:  # the smallest cut that fits, else the largest one allowed
            # A running sum (the cuts rise): one pass over the window, however many cuts it has.
            removed_tokens += sum(counts[cut:candidate])
            cut = candidate
            if total - removed_tokens <= limit:
                break
        return cut, counts, total, limit

    async def behind_window(
        self, thread: Thread, *, keep: Sequence[Message] = (), observable: bool = True
    ) -> tuple[ObservationRecord | None, list[Message], Trim]:
        """The live record, the thread's unobserved messages and their cut (:meth:`trim_window`)
        for a context while memory work is behind. A window too long to keep is not read whole
        at every boundary (its memory model down for hours, thousands pending): its newest
        messages are read, as many as hold the cut the whole window would get (past the raw
        limit, from a user message on, no result whose call is left out), and the older ones are
        counted as left out (:meth:`~obsmem.om.windows.Windows.read_recent`). ``observable``: the
        messages cut are those that carry conversation (:func:`observable_messages`), else all of
        them as stored (system messages too: the application's, when it recorded none)."""
        select = observable_messages if observable else list

        def enough(head: ObservationRecord | None, messages: list[Message]) -> bool:
            unobserved = select(messages)
            cut, _, total, limit = self._cut(head, unobserved, keep)
            if total <= limit or cut == 0 or unobserved[cut].role != "user":
                return False  # the whole window's cut may fall before these messages
            called = {c.tool_call_id for m in unobserved[cut:] for c in m.tool_calls}
            return all(r.tool_call_id in called for m in unobserved[cut:] for r in m.tool_results)

        recent = await self.core.windows.read_recent(self.lineage(thread), thread.id, enough)
        if recent is not None and not observable and recent.systems is None:
            recent = None  # the system messages before its newest, which the cut keeps, unknown
        if recent is None or recent.whole:
            record, window = await self.core.stored_window(thread) if recent is None else (recent.head, recent.messages)
            unobserved, older = select(window), 0
        elif observable:
            record, unobserved, older = recent.head, select(recent.messages), recent.older
        else:  # as stored: the older system messages are kept (the application's instructions)
            record, unobserved, older = recent.head, [*(recent.systems or ()), *recent.messages], recent.older_stored
        return record, unobserved, self.trim_window(thread, record, unobserved, keep=keep, older=older)

    def known_long(self, thread: Thread) -> bool:
        """Whether the thread's window was too long to keep when last read whole (a hint)."""
        return self.core.windows.known_long(self.lineage(thread), thread.id)

    async def first_window(self, thread: Thread) -> tuple[tuple[ObservationRecord | None, list[Message]], bool]:
        """A turn's first read: the window as stored (``Core.stored_window``) and True, or, for
        a window too long to keep, the record and its newest messages only (the input's check then
        reads the store's tail) and False."""
        recent = await self.core.windows.read_recent(self.lineage(thread), thread.id, lambda head, messages: True)
        if recent is None:
            return await self.core.stored_window(thread), True
        return (recent.head, recent.messages), recent.whole

    # -- reading --------------------------------------------------------------------------------
    def lineage(self, thread: Thread) -> str:
        return self.core.lineage(thread)

    def working_memory_key(self, thread: Thread) -> str:
        return self.core.working_memory_key(thread)

    async def head(self, thread: Thread) -> ObservationRecord:
        """The live record for a thread, created on first use."""
        return await self.core.head(thread)

    async def unobserved(self, record: ObservationRecord, thread_id: str) -> list[Message]:
        return await self.core.unobserved(record, thread_id)

    def message_threshold(self, record: ObservationRecord) -> int:
        return self.core.message_threshold(record)

    def reflection_threshold(self) -> int:
        return self.core.reflection_threshold()

    # -- the parts (read from the core at call time, so replacing one takes effect) -------------
    @property
    def store(self) -> Store:
        return self.core.store

    @property
    def config(self) -> MemoryConfig:
        return self.core.config

    @property
    def counter(self) -> TokenCounter:
        return self.core.counter

    @property
    def clock(self) -> Clock:
        return self.core.clock

    @property
    def timezone(self) -> tzinfo | None:
        return self.core.timezone

    @property
    def observer(self) -> Observer:
        return self.core.observer

    @observer.setter
    def observer(self, observer: Observer) -> None:
        self.core.observer = observer

    @property
    def reflector(self) -> Reflector:
        """The reflector as the engine calls it (wrapped for resource scope and retrieval)."""
        return self.core.reflector

    @property
    def extractors(self) -> tuple[Extractor, ...]:
        return self.core.extractors

    @property
    def reflector_start_level(self) -> int:
        return self.core.reflector_start_level

    @property
    def model_timeout_s(self) -> float | None:
        return self.core.model_timeout_s

    @model_timeout_s.setter
    def model_timeout_s(self, seconds: float | None) -> None:
        self.core.model_timeout_s = seconds

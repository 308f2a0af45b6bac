"""``Memory``: the object an application holds. It builds the parts and owns their lifetime.

Everything below it (the engine, the store, the observer and reflector) receives its
collaborators; ``Memory`` is the one place that decides which store, which models, which
counter and which clock to use, from plain arguments with offline defaults: SQLite in the
user's data directory and the deterministic offline observer. Nothing needs a network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import contextlib
import importlib
import math
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

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
from obsmem.background import BackgroundWork, WatchedClock
from obsmem.calls import UsageReport, call_scope
from obsmem.clock import Clock, SystemClock
from obsmem.config import MemoryConfig, MemoryOptions
from obsmem.implements import implements
from obsmem.errors import (
    ConfigError,
    DegenerateOutputError,
    InvalidInputError,
    ObsmemError,
    ReflectionError,
    StorageError,
    ThreadNotFoundError,
)
from obsmem.models.retry import RetryPolicy
from obsmem.om.context import (
    ContextWindow,
    build_context,
    drop_obsmem_messages,
    load_instructions,
    forget_rendered,
    obsmem_message_id,
    remember_instructions,
    rendered_erasures,
)
from obsmem.om.text.groups import ObservationGroup
from obsmem.om.text.own import MARKER_KEY
from obsmem.om.cycle import MODEL_TIMEOUT_S
from obsmem.om.cycle import describe as describe_error
from obsmem.om.engine import CycleOutcome, Engine, EngineEvent, FailurePolicy
from obsmem.om.extractors import Extractor
from obsmem.om.group_index import group_index_for, held_groups
from obsmem.om.protocols import Observer, Reflector
from obsmem.om.receipts import RECEIPT_KEY, Receipt, receipt_without_thread, resolve_groups, resolve_raw
from obsmem.om.status import ThreadStatus, thread_status
from obsmem.om.step import read_other_threads
from obsmem.om.recall.recaller import Recaller, RecallRequest
from obsmem.om.recall.render import DEFAULT_TOKEN_BUDGET, Detail, RecallMode, RecallResult
from obsmem.om.recall.tool import ToolFlavor, dispatch_recall, recall_instructions, recall_tool_schema
from obsmem.om.sections import observations_shown, remove_thread, split_sections
from obsmem.storage import ACCEPTED_URLS, SQLiteStore, Store, open_store
from obsmem.storage import leasing
from obsmem.storage.notes import ERASED, erasing_note, import_note
from obsmem.storage.notes import LANE_AGENTS as _LANE_AGENTS
from obsmem.storage.notes import LANE_PREFIX as _LANE_PREFIX
from obsmem.storage.contract import (
    MAX_FORGOTTEN_IDS, ObservationRecord, forgotten_among, lineage_key, newest_threads, note_forgotten_ids,
)
from obsmem.storage.ledger import LedgerBudget, LedgerWriter, calls_of_deleted_threads_dropped, check_window, usage_report
from obsmem.storage.forgetting import (
    ForgetsInFlight,
    forget_in_message,
    forget_in_record,
    forget_in_thread_metadata,
    forget_lines,
    forgotten_ids,
    holds,
    with_forgotten_ids,
)
from obsmem.storage.paging import all_threads
from obsmem.storage.contract import (
    json_needle,
    metadata_messages,
    replace_working_memory_if_unchanged,
    rewrite_generation_if_unchanged,
    rewrite_message_if_unchanged,
    section_messages,
)
from obsmem.tokens import TokenCounter, forget_segments
from obsmem.turn import Turn, input_not_saved, work_key
from obsmem.types import (
    DataPart,
    Message,
    Part,
    TextPart,
    Thread,
    check_choice,
    check_count,
    check_flag,
    check_id,
    check_json,
    check_text,
    describe_value,
    parse_messages,
)

if TYPE_CHECKING:  # types only: numpy and the index modules load when first used
    from obsmem.embeddings import Embedder
    from obsmem.knowledge import Knowledge, Record
    from obsmem.knowledge.agents import AgentRun, KnowledgeAgents
    from obsmem.vectors import VectorIndex

__all__ = ["Memory", "ModelSpec"]

_MAX_PAGE = 10**9  # page x limit must stay a count a store can take
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

logger = logging.getLogger("obsmem")

#: The knowledge agents' lanes (see Memory._drop_lanes).
_LANES = "obsmem.knowledge.agents.lanes"


def _has_section(text: str, thread_id: str) -> bool:
    return any(tid == thread_id for tid, _ in split_sections(text))


def _without_section(part: Part, thread_id: str) -> Part:
    """A marker part without the observations of ``thread_id``'s section (others unchanged)."""
    if not isinstance(part, DataPart):
        return part
    observations = part.data.get("observations")
    if not isinstance(observations, str) or not _has_section(observations, thread_id):
        return part
    return part.model_copy(update={"data": {**part.data, "observations": remove_thread(observations, thread_id)}})


_REWRITE_ATTEMPTS = 20  # an eraser's compare-and-set rewrite of one row, read again after each lost race
_FORGET_PAGE = 500  # messages a forget checks for the value per hand-off to a worker thread


class _Unset:
    """No value given (``None`` is one)."""


_UNSET = _Unset()


def _without_thread(generation: ObservationRecord, thread_id: str, counter: TokenCounter) -> ObservationRecord:
    """An older generation of a resource's record without ``thread_id``'s section, state,
    chunks and buffered reflection (itself when it holds no section of the thread)."""
    if not _has_section(generation.active_observations, thread_id) and thread_id not in generation.threads:
        return generation
    active = remove_thread(generation.active_observations, thread_id)
    return generation.model_copy(update={
        "active_observations": active,
        "observation_tokens": counter.count_text(active),
        "threads": {t: s for t, s in generation.threads.items() if t != thread_id},
        "buffered_chunks": tuple(c for c in generation.buffered_chunks if c.thread_id != thread_id),
        "buffered_reflection": None,
    })


def _without_thread_markers(message: Message, thread_id: str) -> Message:
    """A message whose markers hold no section of ``thread_id`` (itself when none did)."""
    parts = tuple(_without_section(part, thread_id) for part in message.parts)
    if all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    return message.model_copy(update={"parts": parts})


def _required_text(value: object, argument: str) -> str:
    """A non-empty string argument (``check_text`` lets None through)."""
    check_text(value, argument)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"Invalid {argument}: expected some text, got {describe_value(value)}",
                                argument=argument)
    return value


def _check_knowledge(knowledge: object) -> Knowledge | None:
    """``knowledge`` if it is a Knowledge facade (or None); anything else is a ConfigError."""
    if knowledge is None:
        return None
    from obsmem.knowledge import Knowledge

    if not isinstance(knowledge, Knowledge):
        raise ConfigError(
            "knowledge", f"expected a Knowledge, got {describe_value(knowledge)}",
            allowed="None or obsmem.knowledge.Knowledge (Knowledge.sqlite(path), Knowledge.in_memory(), ...)",
        )
    return knowledge


def _seconds(value: object, argument: str, *, positive: bool = False) -> float | None:
    """A duration argument: None, or a finite number of seconds (>= 0, or > 0 when ``positive``)."""
    if value is None:
        return None
    allowed = f"None or a number of seconds {'> 0' if positive else '>= 0'}"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(argument, f"got {describe_value(value)}", allowed=allowed)
    if value < 0 or (positive and value == 0):
        raise ConfigError(argument, f"{value!r} is out of range", allowed=allowed)
    return float(value)


def _instant(value: object, argument: str) -> datetime | None:
    """A ``since`` / ``until`` bound: an aware datetime, or a date (its UTC midnight)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        check_window(value, None) if argument == "since" else check_window(None, value)
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise InvalidInputError(f"Invalid {argument}: expected a datetime or a date, got {describe_value(value)}",
                            argument=argument)


#: The most reads of a head :meth:`Memory.reindex_groups` makes while the head changes under it.
REINDEX_ROUNDS = 8


class Memory:
    """Observational memory over a store.

    ``store``: a :class:`Store`, a URL (``"memory://"``, ``"sqlite:///path.db"``) or None for
    SQLite at the default path. A store given as an object stays open when the memory closes
    (its creator owns it); one built from a URL is closed with the memory. ``config``: a
    :class:`MemoryConfig` or a dict of its options (validated alike). ``model`` sets the
    observer and reflector model together; ``observer`` / ``reflector`` set them separately
    (each: ``"offline"``, a ChatModel, a ``"provider:model"`` string such as
    ``"openai:gpt-4o-mini"`` (see :func:`obsmem.models.infer_model`), tiers
    ``{max_input_tokens: model}``, or an object implementing the Observer / Reflector protocol).
    Unset, a role takes ``config.<role>.model``, then the other role's configured model, then
    ``"offline"``. The roles are built by :mod:`obsmem.assembly`, as a worker builds them.

    Retrieval mode (``config.retrieval``) groups observations with the messages they cover and
    offers :meth:`recall`; with ``retrieval.vector`` it also needs an ``embedder`` and a
    ``vector_index`` (for example ``LexicalHashEmbedder()`` and ``SQLiteVectorIndex(...)``),
    which stay the caller's: Memory never closes them.

    ``background``: ``"local"`` (the default) runs buffered observation and reflection as
    tasks of this process; ``"queue"`` puts them on the store's work queue instead, for
    ``obsmem worker`` processes (on this machine or others) to run. The turn still activates
    buffered chunks instantly and, if the workers fall behind, observes synchronously at
    ``block_after``, so a turn never depends on a worker being up.

    A failing or slow memory model never holds the application for long. ``max_turn_wait``
    (default 5 s; None: no bound) is the most a turn — ``begin_turn`` and its steps together —
    waits on memory work; past it the turn goes on with the raw window and the work goes on in
    the background (the messages stay pending; nothing is lost), and the next boundary of the
    thread waits for it (within its own turn's bound) before starting more. The context such a
    turn gets holds at most twice the message threshold (or ``observation.block_after`` when
    larger) of raw tokens besides its own input: older raw messages are left out of it
    (``turn.trimmed`` and a ``context-trimmed`` event say how many; they stay pending). The
    newest user message and the turn's own input are never cut. ``close_timeout`` (default
    5 s; None: wait for everything) bounds :meth:`aclose` (and ``async with``): background work
    still running then is cancelled, its messages stay pending and its leases are released (or
    expire), for a later process. Both bounds are measured on ``clock``; work about to sleep
    past one (a provider's ``retry-after``) ends the wait at once.

    ``retry`` (a :class:`~obsmem.models.retry.RetryPolicy`; default ``RetryPolicy()``, whose
    ``max_total_s`` deadline is 300 s) is how the observer and reflector models built here retry
    transient errors; ``model_timeout_s`` (default 60 s; None: no limit) bounds one observer or
    reflector call, retries included. A role whose model keeps failing backs off durably (see
    ``observation.failure_backoff``).

    ``failure_policy``: ``"throw"`` (the default) raises :class:`ObservationError` /
    :class:`ReflectionError` when a memory model call fails (degenerate output is logged, not
    raised); ``"warn"`` and ``"continue"`` return the failed :class:`CycleOutcome` instead
    (``"warn"`` logs it). Failed work is never lost: messages stay pending, observations stay.

    ``knowledge`` (a :class:`~obsmem.knowledge.Knowledge`; it stays the caller's: Memory never
    closes it) turns on the knowledge agents (``config.knowledge``; offline rules unless
    ``knowledge.model``): capture after every committed observation, pins and a reminder in
    every context, curate and learn after reflections and when a lane's trigger fires. They run
    as this memory's background tasks (``settled()`` waits for them; in ``"queue"`` mode they go
    to the workers as ``knowledge`` work); a failing agent never fails a turn nor loses an
    observation. See :mod:`obsmem.knowledge.agents`, :meth:`pin`, :meth:`curate_knowledge`.

    Every argument is checked here, so a wrong one raises :class:`ConfigError` naming it now
    rather than failing on the first turn; every method raises :class:`InvalidInputError` (or
    another :class:`ObsmemError`) naming the argument at fault.
    """

    def __init__(
        self,
        store: Store | str | None = None,
        *,
        config: MemoryConfig | MemoryOptions | None = None,
        model: ModelSpec = None,
        observer: Observer | ModelSpec = None,
        reflector: Reflector | ModelSpec = None,
        extractors: Sequence[Extractor] = (),
        counter: TokenCounter | None = None,
        clock: Clock | None = None,
        failure_policy: FailurePolicy = "throw",
        working_memory_scope: Literal["thread", "resource"] = "thread",
        on_event: Callable[[EngineEvent], None] | None = None,
        embedder: Embedder | None = None,
        vector_index: VectorIndex | None = None,
        background: Literal["local", "queue"] = "local",
        max_turn_wait: float | None = 5.0,
        close_timeout: float | None = 5.0,
        retry: RetryPolicy | None = None,
        model_timeout_s: float | None = MODEL_TIMEOUT_S,
        knowledge: Knowledge | None = None,
    ) -> None:
        self.config = memory_config(config)
        self.max_turn_wait = _seconds(max_turn_wait, "max_turn_wait")
        self.close_timeout = _seconds(close_timeout, "close_timeout")
        model_timeout = _seconds(model_timeout_s, "model_timeout_s", positive=True)
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError("retry", f"expected a RetryPolicy, got {describe_value(retry)}",
                              allowed="obsmem.models.retry.RetryPolicy(...) or None")
        if not (store is None or isinstance(store, str) or implements(store, Store)):
            raise ConfigError(
                "store", f"expected a Store, a URL or None, got {describe_value(store)}",
                allowed=ACCEPTED_URLS,
            )
        if not any(type(background) is str and background == kind for kind in ("local", "queue")):
            raise ConfigError("background", f"got {describe_value(background)}", allowed="'local' or 'queue'")
        policies = get_args(FailurePolicy)
        if not any(type(failure_policy) is str and failure_policy == policy for policy in policies):
            raise ConfigError(
                "failure_policy", f"got {describe_value(failure_policy)}",
                allowed=" or ".join(map(repr, policies)),
            )
        check_collaborators(
            counter=counter, clock=clock, on_event=on_event, working_memory_scope=working_memory_scope,
            embedder=embedder, vector_index=vector_index,
        )
        self.failure_policy: FailurePolicy = failure_policy
        self.knowledge = _check_knowledge(knowledge)
        self.knowledge_agents: KnowledgeAgents | None = None
        self._knowledge_hook: KnowledgeHook | None = None
        user_events = on_event
        if knowledge is not None:
            def on_event(event: EngineEvent) -> None:
                if user_events is not None:
                    user_events(event)
                if self._knowledge_hook is not None:
                    self._knowledge_hook.on_event(event)
        # Memory.watch wakes at once on this process's own memory events for the thread it watches.
        self._watchers: dict[str, set[asyncio.Event]] = {}
        heard = on_event

        def watched(event: EngineEvent) -> None:
            if heard is not None:
                heard(event)
            for waiter in self._watchers.get(event.thread_id, ()):
                waiter.set()

        on_event = watched

        if background == "queue" and not self.config.observation.buffering_enabled:
            raise ConfigError(
                "background", "'queue' hands buffered work to workers, but buffering is off",
                allowed="'local', or turn buffering on (observation.buffer_tokens)",
            )
        # A store passed in belongs to the caller; one built here from a URL belongs to Memory.
        self._owns_store = isinstance(store, str | None)
        self.counter = counter if counter is not None else TokenCounter()
        self.clock = clock if clock is not None else SystemClock()
        # Memory work sleeps on a watched clock, so a turn waiting for it hears at once when it
        # is about to wait past the turn's bound (see obsmem.background).
        work_clock = WatchedClock(self.clock)
        # The cost ledger: every model call of the roles built here (and of the knowledge agents'
        # model and the embedder) is buffered and written to the store by a background task.
        self.ledger = LedgerWriter(
            lambda calls: self.store.record_model_calls(calls), lambda work, name: self.background.spawn(work, name),
            after_write=calls_of_deleted_threads_dropped(
                lambda thread_id: self.store.get_thread(thread_id),
                lambda **target: self.store.delete_model_calls(**target),
            ),
        )
        self.budget: LedgerBudget | None = None
        if self.config.budget is not None:
            self.budget = LedgerBudget(
                self.config.budget,
                lambda resource_id, since: self._ledger_rows(resource_id=resource_id, since=since),
                self.clock, prices=self.config.price_overrides(), on_exceeded=budget_events(on_event),
                unwritten=self.ledger.unwritten,
            )
            self.ledger.listen(self.budget.record)
        roles = assemble_roles(
            self.config, model=model, observer=observer, reflector=reflector, extractors=extractors,
            counter=self.counter, clock=work_clock, retry=retry, on_event=on_event, sinks=(self.ledger,),
            budget=self.budget,
        )
        self.extractors = roles.extractors
        self._redact = roles.redact
        if embedder is not None:
            from obsmem.embeddings.metered import MeteredEmbedder

            embedder = MeteredEmbedder(embedder, sinks=(lambda call: self.ledger(call),),
                                       count_tokens=self.counter.count_text)
            if roles.guard_embedder is not None:  # the privacy boundary holds for embeddings too
                embedder = roles.guard_embedder(embedder)
        self.group_index = group_index_for(self.config.retrieval, embedder, vector_index)
        self.store: Store = store if not isinstance(store, str | None) else open_store(store)
        self.background = BackgroundWork(work_clock)
        # The values forgotten here while turns were open, for those turns' later saves.
        self._forgets = ForgetsInFlight(self._note_forgotten)
        self.engine = Engine(
            store=self.store,
            observer=roles.observer,
            reflector=roles.reflector,
            config=self.config,
            counter=self.counter,
            clock=work_clock,
            extractors=self.extractors,
            reflector_start_level=roles.reflector_start_level,
            failure_policy=failure_policy,
            model_timeout_s=model_timeout,
            on_event=on_event,
            working_memory_scope=working_memory_scope,
            spawn=self.background.spawn,
            group_index=self.group_index,
            handoff=self._enqueue if background == "queue" else None,
        )
        if self.knowledge is not None:
            from obsmem.knowledge.agents import KnowledgeAgents

            chat = knowledge_model(self.config, roles=roles)
            self.knowledge_agents = KnowledgeAgents(
                self.knowledge, self.store, knowledge_settings(self.config), count_tokens=self.counter.count_text,
                clock=self.clock, model=chat, redact=roles.redact, hosted_for=knowledge_hosted_for(chat, roles),
            )
            self._knowledge_hook = KnowledgeHook(
                self.knowledge_agents, self.store, self.background.spawn,
                handoff=self._enqueue_knowledge if background == "queue" else None,
            )
        self.recaller = Recaller(
            store=self.store, engine=self.engine, counter=self.counter, config=self.config.retrieval,
            group_index=self.group_index,
        )
        retrieval = self.config.retrieval
        self._recall_instructions = recall_instructions(retrieval) if retrieval.enabled else None

    async def _enqueue(self, thread: Thread, kind: str) -> None:
        """Queue a due buffer for the workers (coalesced with work already waiting)."""
        await self.store.enqueue_work(kind, thread.id, now=self.clock.now())

    async def _enqueue_knowledge(self, thread_id: str, reflection: bool) -> None:
        """Queue mode: the knowledge agents run on a worker (``obsmem worker --knowledge``)."""
        await self.store.enqueue_work(
            "knowledge", thread_id, now=self.clock.now(), payload={"reflection": True} if reflection else None
        )

    # -- lifetime -----------------------------------------------------------------------------
    async def settled(self) -> None:
        """Wait until no background memory work (buffered observation or reflection) is running,
        and the cost ledger has written every call recorded so far."""
        await self.background.settled()
        await self.ledger.flush()

    async def aclose(self, *, cancel: bool = False) -> None:
        """Finish (or with ``cancel=True``, cancel) background work, then close the store.

        Finishing waits at most ``close_timeout``; what is still running then is cancelled (its
        messages stay pending, its leases are released or expire), so closing never hangs on a
        model that does not answer.
        """
        check_flag(cancel, "cancel")
        if not cancel:
            await self.background.settled(timeout=self.close_timeout)
        await self.background.aclose(timeout=self.close_timeout)
        await self.ledger.flush()  # what the cancelled writer left, before the store closes
        if self._owns_store:
            await self.store.close()

    async def __aenter__(self) -> Memory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- threads and messages -----------------------------------------------------------------
    async def create_thread(
        self, thread_id: str, resource_id: str, *, title: str | None = None,
        metadata: dict[str, Any] | None = None, org_id: str | None = None,
    ) -> Thread:
        return (await self.create_thread_made(thread_id, resource_id, title=title, metadata=metadata, org_id=org_id))[0]

    async def create_thread_made(
        self, thread_id: str, resource_id: str, *, title: str | None = None,
        metadata: dict[str, Any] | None = None, org_id: str | None = None,
    ) -> tuple[Thread, bool]:
        """:meth:`create_thread`, and whether this call made the thread (False: one of that id
        existed, made before or by a call racing this one, and comes back as it is). A service
        answering "created" or "taken" tells them apart with it."""
        check_id(thread_id, "thread_id")
        check_id(resource_id, "resource_id")
        check_text(title, "title")
        check_id(org_id, "org_id", optional=True)
        check_json(metadata, "metadata")
        thread = Thread(
            id=thread_id, resource_id=resource_id, title=title, metadata={} if metadata is None else metadata,
            org_id=org_id,
        )
        if await self._erasing_thread(thread_id) is not None and await self.store.get_thread(thread_id) is None:
            # A delete of this id that a crash cut off: finished before the id is used again, so
            # what it left (working memory under the id) never reaches the new thread.
            await self.delete_thread(thread_id)
        created = await self.store.create_thread(thread)  # an existing thread of that id comes back as it is
        if created.resource_id != resource_id:
            raise _another_resource(thread_id, resource_id)  # never another user's thread, title or metadata
        if org_id is not None and created.org_id != org_id:
            raise InvalidInputError(
                f"Thread '{thread_id}' belongs to another org, not to the org_id given ('{org_id}'). "
                "Use a new thread id.",
                argument="org_id",
            )
        # Made here: the row holds this call's thread (its creation time, to the microsecond,
        # and its first version), not one another call made before or meanwhile.
        made = created.created_at == thread.created_at and created.version == 1 and created.title == thread.title
        return created, made

    async def get_thread(self, thread_id: str, *, resource_id: str | None = None) -> Thread:
        """The thread ``thread_id``. ``resource_id``: the user the caller acts for; a thread of
        another resource is refused as a turn refuses it (:class:`InvalidInputError` naming
        ``resource_id``), so a session bound to one user never reaches another's thread."""
        check_id(thread_id, "thread_id")
        if resource_id is not None:
            check_id(resource_id, "resource_id")
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            self.engine.core.windows.discard(thread_id)  # deleted elsewhere: keep none of its text
            raise ThreadNotFoundError(thread_id)
        if resource_id is not None and thread.resource_id != resource_id:
            raise _another_resource(thread_id, resource_id)
        return thread

    async def list_threads(
        self, resource_id: str, *, limit: int = 100, offset: int = 0, after: str | None = None,
        newest_first: bool = False, before: str | None = None,
    ) -> list[Thread]:
        """A resource's threads, oldest first. ``after``: the id of the last thread of the
        previous page, to read the next from an index there (a cost that does not grow with how
        far in the page is, and a thread deleted between pages skips no other); ``offset`` counts
        from it. A thread ``after`` that no longer exists raises ThreadNotFoundError.

        ``newest_first``: most recently active first (a thread's activity moves when it is
        created and whenever a message is saved into it; a message saved again under its id, or
        deleted, does not move it). The page is a :class:`~obsmem.storage.contract.ThreadPage`:
        pass its ``next_before`` as ``before`` to read the next one. A thread that gets a message
        between pages moves to the top (shown in the next pass, not again or later in this one);
        every other thread shows once. ``after`` (a thread id) pages from that thread's current
        place instead."""
        check_id(resource_id, "resource_id")
        check_count(limit, "limit")
        check_count(offset, "offset")
        if after is not None:
            check_id(after, "after")
        if not isinstance(newest_first, bool):
            raise InvalidInputError(f"newest_first must be True or False, got {newest_first!r}", argument="newest_first")
        if newest_first:
            if before is not None:
                check_id(before, "before")
            return await newest_threads(self.store, resource_id, limit=limit, offset=offset, after=after, before=before)
        if before is not None:
            raise InvalidInputError("before goes with newest_first=True", argument="before")
        return await self.store.list_threads(resource_id, limit=limit, offset=offset, after=after)

    async def unfinished_delete(self, thread_id: str) -> Thread | None:
        """The thread a :meth:`delete_thread` or :meth:`delete_resource` that was cut off midway
        (its process killed) was deleting: its row is gone, and what else it held may not be yet.
        None when no delete of ``thread_id`` is unfinished. ``delete_thread(thread_id)`` finishes
        it; a service checks the caller may see the returned thread (its resource and org) first,
        as it would check the thread itself."""
        check_id(thread_id, "thread_id")
        if await self.store.get_thread(thread_id) is not None:
            return None
        return await self._erasing_thread(thread_id)

    async def unfinished_deletes(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id`` whose rows a :meth:`delete_thread` or
        :meth:`delete_resource` cut off midway (its process killed) had deleted, the rest of them
        not yet: ``delete_resource(resource_id)`` finishes them. Empty when none. A service
        checks the caller may see each (its org) first, as :meth:`unfinished_delete`."""
        check_id(resource_id, "resource_id")
        return [t for t in await self._erasing_threads(resource_id) if await self.store.get_thread(t.id) is None]

    async def delete_thread(self, thread_id: str, *, actor: str | None = None) -> bool:
        """Delete a thread and its messages. In resource scope its sections leave the shared
        record too — the live head, every older generation, and the observation markers of the
        resource's other threads — so nothing the thread said stays in memory. Its working
        memory goes as well: the thread key, and the resource key (``working_memory_scope=
        "resource"``), which the observer rewrites whole from every thread of the user, so no line
        of it can be told to be another thread's: it is deleted, and the next observation of one
        of the user's other threads writes it again. Its queued work, leases, cost-ledger rows and
        knowledge-agent lanes go too. With ``knowledge=``, its own knowledge scope (the records
        it alone saw) is purged, and the resource's ``capture-guidance`` node lists no attribute
        that only the thread's records carried; ``actor`` is who the knowledge audit log says did
        it (default: the knowledge store's ``actor``).

        The thread goes first: an observation or reflection still in flight for it is then
        refused by the store (``gone``) and never commits, in thread or resource scope. A delete
        cut off midway (its process killed) is finished by calling it again (True then), or by
        ``delete_resource`` of its resource: it is noted in the store until it is done."""
        check_id(thread_id, "thread_id")
        if actor is not None:
            _required_text(actor, "actor")
        thread = await self.store.get_thread(thread_id)
        resumed = False
        if thread is None:  # gone; unless a delete of it was cut off midway (its process died): finish that
            thread = await self._erasing_thread(thread_id)
            if thread is None:
                return False
            resumed = True
        if self.knowledge is not None:  # its knowledge is purged last: a store that cannot be opened, first
            from obsmem.knowledge.lifecycle import check_reachable

            await check_reachable(self.knowledge)
        # marked under way while it runs (leasing.ERASING): `obsmem delete-resource` meanwhile says so
        async with leasing.erasing(self.store, thread.resource_id, clock=self.clock):
            deleted = await self._erase_thread(thread, resumed=resumed, actor=actor)
        await self._truncate_log()  # (after the lease's release: its row goes from the log too)
        return deleted

    async def _erase_thread(self, thread: Thread, *, resumed: bool, actor: str | None) -> bool:
        """:meth:`delete_thread`'s erase of ``thread``, under its erasing lease."""
        thread_id = thread.id
        await self._note_erase()
        await self._begin_erasing(thread)
        deleted = await self.store.delete_thread(thread_id) or resumed
        await self._forget_kept(self.engine.core.lineage(thread))  # nothing of it stays in this process
        steps = (
            lambda: self.engine.forget_thread(thread, overtaken=lambda: self._overtaken(thread_id)),
            lambda: self._forget_thread_sections(thread),
            lambda: self._forget_thread_receipts(thread),
            lambda: self._drop_thread_data(thread_id, resource_id=thread.resource_id),
        )
        for step in steps:
            if await self._overtaken(thread_id):
                break
            await step()
        if self.knowledge is not None and not await self._overtaken(thread_id):  # its own knowledge scope
            from obsmem.knowledge.lifecycle import DEFAULT_ORG, knowledge_scopes, prune_capture_guidance, scope_key

            who = actor or self.knowledge.actor
            for scope in knowledge_scopes([thread], thread_id=thread.id):
                await self.knowledge.store.purge_scope(scope, actor=who, reason="thread deleted")
            user_node = self.knowledge_agents.settings.user_node if self.knowledge_agents is not None else "User"
            resource_scope = scope_key(thread.org_id or DEFAULT_ORG, thread.resource_id)
            if resource_scope is not None:  # (a resource id no knowledge scope can hold has no guidance)
                await prune_capture_guidance(self.knowledge, resource_scope, user_node=user_node, actor=actor)
        # Again, now that its sections and the user's working memory are gone too: a context of
        # another of the user's threads built meanwhile (a turn in flight) showed them, and what
        # it kept (the shared sections, the counted texts) would otherwise outlive the delete.
        await self._forget_kept(self.engine.core.lineage(thread))
        await self._end_erasing(thread.resource_id, [thread.id])  # (before the truncation: the note holds ids)
        await self._announce_erase()
        return deleted

    async def _overtaken(self, thread_id: str) -> bool:
        """Whether this delete was finished by another caller and the id made again since: the
        app started the conversation again while it ran (making the id finishes a cut-off delete
        first, and takes its note away). What is stored under the id then is the new thread's:
        this delete goes no further (it would take the new thread's memory, its cursor kept)."""
        if await self.store.get_working_memory(erasing_note("thread", thread_id)) is not None:
            return False
        return await self.store.get_thread(thread_id) is not None

    async def _erasing_json(self, kind: Literal["thread", "resource"], ident: str) -> dict[str, Any]:
        text = await self.store.get_working_memory(erasing_note(kind, ident))
        if text is None:
            return {}
        try:
            data = json.loads(text)
        except ValueError:  # not ours after all (a hand-edited row): nothing to finish
            return {}
        return data if isinstance(data, dict) else {}

    async def _erasing_thread(self, thread_id: str) -> Thread | None:
        """The thread a delete cut off midway was deleting (its row already gone), else None."""
        data = await self._erasing_json("thread", thread_id)
        resource_id, org_id = data.get("resource_id"), data.get("org_id")
        if not isinstance(resource_id, str) or not resource_id or not (org_id is None or isinstance(org_id, str)):
            return None
        return Thread(id=thread_id, resource_id=resource_id, org_id=org_id)

    async def _erasing_threads(self, resource_id: str) -> list[Thread]:
        """The threads of ``resource_id`` a delete cut off midway had begun to delete."""
        threads = (await self._erasing_json("resource", resource_id)).get("threads")
        if not isinstance(threads, dict):
            return []
        return [
            Thread(id=tid, resource_id=resource_id, org_id=org)
            for tid, org in sorted(threads.items())
            if isinstance(tid, str) and tid and (org is None or isinstance(org, str))
        ]

    async def _begin_erasing(self, *threads: Thread) -> None:
        """Note, before anything of ``threads`` (of one resource) is deleted, that they are being
        deleted: under their ids and in their resource's list."""
        if not threads:
            return
        resource_id = threads[0].resource_id
        for thread in threads:  # (first: a listed thread with no note of its own is one whose delete is done)
            await self.store.set_working_memory(
                erasing_note("thread", thread.id), json.dumps({"resource_id": resource_id, "org_id": thread.org_id})
            )
        listed = {t.id: t.org_id for t in await self._erasing_threads(resource_id)}
        listed.update((t.id, t.org_id) for t in threads)
        await self.store.set_working_memory(erasing_note("resource", resource_id), json.dumps({"threads": listed}))

    async def _end_erasing(self, resource_id: str, thread_ids: Sequence[str], *, whole: bool = False) -> None:
        """The deletes :meth:`_begin_erasing` noted are done (``whole``: the resource's)."""
        for thread_id in thread_ids:
            await self.store.delete_working_memory(erasing_note("thread", thread_id))
        key = erasing_note("resource", resource_id)
        if whole:
            await self.store.delete_working_memory(key)
            return
        # The resource's list is read and written back by every delete of its threads, in this
        # process and others: one ending at the same time may write back a thread this one saw
        # listed and whose delete has ended since (its own note gone). So what is written back
        # keeps only threads whose note is still there, and is read again until it holds none
        # other: no note of a finished delete stays.
        while True:
            listed = await self._erasing_threads(resource_id)
            left = {
                t.id: t.org_id for t in listed
                if t.id not in thread_ids and await self.store.get_working_memory(erasing_note("thread", t.id)) is not None
            }  # fmt: skip
            if len(left) == len(listed):
                return  # (nothing to take off: none listed, or only deletes still under way)
            if left:
                await self.store.set_working_memory(key, json.dumps({"threads": left}))
            else:
                await self.store.delete_working_memory(key)

    async def _note_erase(self) -> None:
        """Before an erase changes anything: the SQLite store notes it until :meth:`_truncate_log`
        is done, so a process killed in between has the files cleaned when the store is next
        opened (:meth:`SQLiteStore.note_erase`)."""
        if isinstance(self.store, SQLiteStore):
            await self.store.note_erase()

    async def _truncate_log(self) -> None:
        """After an erase: the SQLite store's file rebuilt (``VACUUM``: no stale copy left in a
        page's unused space) and its write-ahead log moved into the file and truncated, so the old
        versions of the pages the erase changed are not left in the ``-wal`` file either
        (:mod:`obsmem.storage.sqlite.wal`; the SQLite knowledge store does the same after its
        purges and forgets). Other stores keep no such file."""
        if isinstance(self.store, SQLiteStore) and not await self.store.truncate_wal():
            logger.info(
                "Another connection kept %s busy (a writer held off the rebuild, or a reader kept the "
                "write-ahead log): the erased pages stay in the file or its log until the store's next "
                "write after that ends.", self.store.path,
            )

    async def _forget_thread_sections(self, thread: Thread) -> None:
        """Resource scope: the deleted thread's sections out of the older generations of the
        resource's record and out of the markers on the other threads' messages.

        Only the messages that can hold a section are read (:func:`section_messages`: a data
        part's ``observations`` naming a ``<thread id>``; a resource-scope reflection's end marker,
        or one an import copied, whatever the scope is now), a page at a time: never every
        message of the user's threads."""
        lineage = lineage_key("resource", None, thread.resource_id)
        offset = 0
        while True:
            page = await self.store.list_generations(lineage, limit=100, offset=offset)
            for generation in page:
                await self._rewrite_generation(generation, lambda g: _without_thread(g, thread.id, self.counter))
            if len(page) < 100:
                break
            offset += 100
        for other in await self._all_threads(thread.resource_id):
            # One deleted meanwhile (another caller's delete) took its markers with it: skipped.
            with contextlib.suppress(ThreadNotFoundError):
                async for batch in section_messages(self.store, other.id, page=_FORGET_PAGE):
                    for message in batch:
                        await self._rewrite_message(message, lambda m: _without_thread_markers(m, thread.id))

    async def _forget_thread_receipts(self, thread: Thread) -> None:
        """The deleted thread's id out of the receipts of the user's other threads' replies (a
        group of its observations, a raw span of it: see :mod:`obsmem.om.receipts`), so no row
        names it. Only the messages whose metadata holds the id are read (:func:`metadata_messages`,
        in SQL; an id with no plain ASCII in it: every reply with a receipt), a page at a time."""
        needle = json_needle(thread.id) or RECEIPT_KEY

        def change(message: Message) -> Message:
            changed = receipt_without_thread(message.metadata.get(RECEIPT_KEY), thread.id)
            if changed is None:
                return message
            return message.model_copy(update={"metadata": {**message.metadata, RECEIPT_KEY: changed}})

        for other in await self._all_threads(thread.resource_id):
            if other.id == thread.id:
                continue
            with contextlib.suppress(ThreadNotFoundError):  # deleted meanwhile: its replies went with it
                async for batch in metadata_messages(self.store, other.id, needle, page=_FORGET_PAGE):
                    for message in batch:
                        await self._rewrite_message(message, change)

    async def _rewrite_generation(
        self, generation: ObservationRecord, change: Callable[[ObservationRecord], ObservationRecord]
    ) -> bool:
        """An older generation rewritten with ``change`` (which returns it as it is when nothing
        changes), compare-and-set: another eraser (in this process or another) that rewrote it
        since it was read is not undone; it is read again and changed again. True if rewritten."""
        for _ in range(_REWRITE_ATTEMPTS):
            if generation.is_live:
                return False
            changed = change(generation)
            if changed is generation:
                return False
            if await rewrite_generation_if_unchanged(self.store, changed, expected=generation):
                return True
            current = await self.store.get_record(generation.id)
            if current is None:
                return False
            generation = current
        raise StorageError(
            f"Rewriting generation '{generation.id}' kept racing with other erasers; run it again."
        )

    async def _rewrite_message(
        self, message: Message, change: Callable[[Message], Message | None], *,
        first: Message | None | _Unset = _UNSET,
    ) -> Literal["kept", "rewritten", "empty"]:
        """A stored message rewritten with ``change`` (which returns it as it is when nothing
        changes, None when nothing of it would be left), compare-and-set as
        :meth:`_rewrite_generation`. ``empty``: the caller deletes it. ``first``: ``change(message)``
        worked out already (off the loop); the retries after a lost race work it out here."""
        for attempt in range(_REWRITE_ATTEMPTS):
            changed = change(message) if attempt or isinstance(first, _Unset) else first
            if changed is None:
                return "empty"
            if changed is message:
                return "kept"
            if await rewrite_message_if_unchanged(self.store, changed, expected=message):
                return "rewritten"
            found = await self.store.get_messages([message.id])
            if not found:
                return "kept"  # deleted meanwhile
            message = found[0]
        raise StorageError(f"Rewriting message '{message.id}' kept racing with other erasers; run it again.")

    async def delete_resource(
        self, resource_id: str, *, knowledge_within: str | None = None, actor: str | None = None
    ) -> dict[str, int]:
        """Delete everything stored for a resource: every thread (its messages and markers), every
        generation of every lineage (its threads' and the resource's), working memory (thread
        and resource keys, and the knowledge agents' lanes of its threads), retrieval vectors,
        leases and queued work. Returns counts per kind (``threads``, ``messages``, ``records``,
        ``working_memory``, ``vectors``, ``leases``, ``work_items``, ``model_calls``: the cost
        ledger's rows of the resource and its threads). With ``knowledge=``, the resource's
        knowledge scope (its threads' included) is purged too, a hard delete (``knowledge_<kind>``
        counts; see :mod:`obsmem.knowledge.lifecycle`): in every org its threads name and every
        org the knowledge store holds it in, so a resource whose threads are all deleted already
        still loses its knowledge. ``knowledge_within`` (a knowledge scope, ``org:acme`` or
        ``org:acme/resource:alice``) confines that purge to the scopes inside it, for a caller that
        may reach one org only: the same resource id's knowledge in another org stays
        (InvalidInputError, before anything is deleted, when one of its threads is outside it).
        ``actor`` is who the knowledge audit log says purged it (default: the knowledge store's
        ``actor``).

        Work in flight for a deleted thread never commits (the store reports it ``gone``).
        """
        check_id(resource_id, "resource_id")
        check_id(knowledge_within, "knowledge_within", optional=True)
        if actor is not None:
            _required_text(actor, "actor")
        counts = dict.fromkeys(
            ("threads", "messages", "records", "working_memory", "vectors", "leases", "work_items", "model_calls"), 0
        )
        threads = await self._all_threads(resource_id)
        # and those whose rows a delete cut off midway (its process died) had deleted already
        for cut_off in await self._erasing_threads(resource_id):
            if cut_off.id not in {u.id for u in threads} and await self.store.get_thread(cut_off.id) is None:
                threads.append(cut_off)  # (an id in use again, by another resource's thread, is not this one)
        if self.knowledge is not None:  # refused before anything is deleted
            from obsmem.knowledge.lifecycle import erasure_scopes

            await erasure_scopes(self.knowledge, threads, resource_id=resource_id, within=knowledge_within,
                                 fallback=knowledge_within is None, operation="delete")  # fmt: skip
        # marked under way while it runs (leasing.ERASING): `obsmem delete-resource` meanwhile says so
        async with leasing.erasing(self.store, resource_id, clock=self.clock):
            await self._erase_resource(resource_id, threads, counts, knowledge_within=knowledge_within, actor=actor)
        await self._truncate_log()  # (after the lease's release: its row goes from the log too)
        return counts

    async def _erase_resource(
        self, resource_id: str, threads: list[Thread], counts: dict[str, int], *,
        knowledge_within: str | None, actor: str | None,
    ) -> None:
        """:meth:`delete_resource`'s erase of ``threads`` and the resource's data, under its
        erasing lease; adds what went to ``counts``."""
        await self._note_erase()
        await self._begin_erasing(*threads)
        for thread in threads:
            with contextlib.suppress(ThreadNotFoundError):  # (a thread whose row a cut-off delete took)
                counts["messages"] += await self.store.count_messages(thread.id)
            lineage = lineage_key("thread", thread.id, "")
            counts["records"] += len(await self.store.list_generations(lineage, limit=_MAX_PAGE))
            if await self.store.delete_thread(thread.id):
                counts["threads"] += 1
            counts.update(self._summed(counts, await self._drop_thread_data(thread.id, resource_id=resource_id)))
        counts["records"] += await self.store.delete_lineage(lineage_key("resource", None, resource_id))
        counts["working_memory"] += await self.store.delete_working_memory(f"resource:{resource_id}")
        await self.store.delete_working_memory(import_note(resource_id))  # a cut-off import's note, if any
        # Work is queued per thread (each went with its thread above); none is keyed by the resource's
        # id, which may well be another user's thread id.
        counts["leases"] += await self._release_leases(
            lineage_key("resource", None, resource_id), resource_id=resource_id, thread_ids=[t.id for t in threads]
        )
        await self.ledger.flush()
        counts["model_calls"] += await self.store.delete_model_calls(resource_id=resource_id)
        await self._forget_kept(
            *(lineage_key("thread", t.id, "") for t in threads), lineage_key("resource", None, resource_id)
        )
        if self.group_index is not None:
            counts["vectors"] += await self.group_index.remove_resource(resource_id)
        if self.knowledge is not None:
            from obsmem.knowledge.lifecycle import delete_resource_knowledge

            purged = await delete_resource_knowledge(
                self.knowledge, resource_id, threads, within=knowledge_within, actor=actor
            )
            counts.update(purged)
        await self._end_erasing(resource_id, [t.id for t in threads], whole=True)
        await self._announce_erase()

    async def _forget_kept(self, *lineages: str) -> None:
        """After an erase: nothing this process keeps between calls holds what went any more
        (:func:`~obsmem.assembly.forget_kept_in_process`)."""
        await forget_kept_in_process(engine=self.engine, store=self.store, counter=self.counter,
                                     knowledge_agents=self.knowledge_agents, lineages=lineages)

    async def _announce_erase(self) -> None:
        """At an erase's end: the store's erase token (:data:`~obsmem.storage.notes.ERASED`)
        changes, so another process on the store (an ``obsmem worker``) drops what it keeps too
        before its next item (it cannot know what went)."""
        await self.store.set_working_memory(ERASED, secrets.token_hex(8))

    @staticmethod
    def _summed(counts: dict[str, int], more: dict[str, int]) -> dict[str, int]:
        return {key: counts[key] + value for key, value in more.items()}

    async def _drop_thread_data(self, thread_id: str, *, resource_id: str | None = None) -> dict[str, int]:
        """What outlives a deleted thread in the store: its lineage (when the thread row went
        first), working memory (its own key; with ``resource_id``, the resource's, which the
        thread's facts may be in, unattributed; and the knowledge agents' lanes of the thread),
        queued work and leases."""
        await self.ledger.flush()  # calls still buffered for the thread are deleted with it
        working_memory = int(await self.store.delete_working_memory(f"thread:{thread_id}"))
        if resource_id is not None:
            working_memory += int(await self.store.delete_working_memory(f"resource:{resource_id}"))
        working_memory += await self._drop_lanes(thread_id)
        return {
            "records": await self.store.delete_lineage(lineage_key("thread", thread_id, "")),
            "working_memory": working_memory,
            "work_items": await self.store.delete_work(thread_id),
            "leases": await self._release_leases(
                lineage_key("thread", thread_id, ""), resource_id=resource_id, thread_ids=[thread_id]
            ),
            "model_calls": await self.store.delete_model_calls(thread_id=thread_id),
        }

    async def _drop_lanes(self, thread_id: str) -> int:
        """The knowledge agents' lane rows of a deleted thread (kept in this store whether or not
        this memory runs the agents: a worker may have); a busy lane index is logged, not raised."""
        # A memory without knowledge agents has not loaded the knowledge package (half a second:
        # numpy, pydantic models), and loading it holds the interpreter lock even in a thread (the
        # first delete held the event loop ~0.1 s that way): the thread's lane rows and its names
        # in the index are looked up first (what Lanes.forget_thread deletes), and the package is
        # loaded, in a thread, only when there are any.
        if self.knowledge_agents is None and _LANES not in sys.modules and not await self._has_lanes(thread_id):
            return 0
        module = sys.modules.get(_LANES)
        if module is None:
            module = await asyncio.to_thread(importlib.import_module, _LANES)
        lanes = self.knowledge_agents.lanes if self.knowledge_agents is not None else module.Lanes(self.store, clock=self.clock)
        try:
            return await lanes.forget_thread(thread_id)
        except module.LaneBusyError as exc:
            logger.warning("obsmem: the knowledge lane index of deleted thread %s was left: %s", thread_id, exc)
            return 0

    async def _has_lanes(self, thread_id: str) -> bool:
        """Whether the store holds a knowledge lane row of ``thread_id``, or the lane index names it."""
        for agent in _LANE_AGENTS:
            if await self.store.get_working_memory(f"{_LANE_PREFIX}{agent}:{thread_id}") is not None:
                return True
        index = await self.store.get_working_memory(_LANE_PREFIX + "index")
        try:
            names = json.loads(index) if index else []
        except ValueError:
            return True  # (Lanes reads it as it is, and says what is wrong)
        return not isinstance(names, list) or any(
            not isinstance(name, str) or name.partition(":")[2] == thread_id for name in names
        )

    async def _release_leases(
        self, lineage: str, *, resource_id: str | None = None, thread_ids: Sequence[str] = ()
    ) -> int:
        """Release the leases taken for ``lineage`` (and, in ``resource_id``'s lineage, the
        per-thread observation leases of ``thread_ids``); holders still working find their
        compare-and-set refused. By exact key: another thread or resource whose id begins with
        this one's and a ':' (``chat`` and ``chat:2``) keeps its leases, which a live holder needs."""
        keys = {leasing.lineage_lease(kind, lineage) for kind in leasing.LINEAGE_LEASE_KINDS}
        if resource_id is not None:
            resource = lineage_key("resource", None, resource_id)
            keys.update(leasing.thread_observation_lease(resource, thread_id) for thread_id in thread_ids)
        released = 0
        for key in sorted(keys):  # one row each: never the other users' leases (a store may hold many)
            lease = await self.store.get_lease(key)
            if lease is not None and await self.store.release_lease(key, lease.owner):
                released += 1
        return released

    async def _all_threads(self, resource_id: str | None) -> list[Thread]:
        return await all_threads(self.store, resource_id)

    async def reindex_groups(self, *, thread_id: str | None = None, resource_id: str | None = None) -> int:
        """Embed the observation groups a thread (``thread_id``) or a resource's threads
        (``resource_id``) hold now into this memory's vector index, replacing what their keys
        held; returns how many groups were indexed. Groups are indexed as they are observed, so
        this is for an index that lacks them: a new embedder (the index of another embedder's
        vectors is refused, so a switch starts a new, empty one), a new or rebuilt index, groups
        observed while the index was down. It reads the current head of each lineage (the
        thread's, and in resource scope the resource's: in a thread's reindex only that
        thread's groups), its observations and buffered chunks, one head at a time. A failure
        of the embedder or index raises; what was indexed before it stays, and running it again
        redoes the rest. ConfigError without vector retrieval (``retrieval={"vector": True}``,
        an embedder and a vector index); ThreadNotFoundError for a thread that does not exist."""
        check_id(thread_id, "thread_id", optional=True)
        check_id(resource_id, "resource_id", optional=True)
        if (thread_id is None) == (resource_id is None):
            raise InvalidInputError("Invalid value: give thread_id or resource_id (one of them)")
        index = self.group_index
        if index is None:
            raise ConfigError(
                "retrieval.vector", "reindexing observation groups needs vector retrieval, which is off",
                allowed="MemoryConfig(retrieval={'vector': True}) with an embedder and a vector index",
            )
        if thread_id is not None:
            thread = await self.store.get_thread(thread_id)
            if thread is None:
                raise ThreadNotFoundError(thread_id)
            threads = [thread]
        else:
            assert resource_id is not None
            threads = await self._all_threads(resource_id)
        lineages: dict[str, str] = {}  # lineage -> its resource
        for thread in threads:
            lineages[lineage_key("thread", thread.id, thread.resource_id)] = thread.resource_id
            if self.config.scope == "resource":
                lineages[lineage_key("resource", None, thread.resource_id)] = thread.resource_id
        known = {thread.id: thread for thread in threads}

        async def held(lineage: str) -> dict[str, ObservationGroup]:
            return {gid: g for gid, g in held_groups(await self.store.get_head(lineage)).items()
                    if g.thread_id in known and (thread_id is None or g.thread_id == thread_id)}  # fmt: skip

        indexed = 0
        for lineage, resource in lineages.items():
            # Written, then the head read again until it holds what was written: a forget (or a
            # reflection) that rewrote the head and its vectors while these were embedded would
            # otherwise have them overwritten with the text it took out.
            groups: dict[str, ObservationGroup] = {}
            for _ in range(REINDEX_ROUNDS):  # (a head that keeps changing: its writers index what they write)
                now = await held(lineage)
                stale = [g for gid, g in groups.items() if gid not in now or now[gid].body != g.body]
                fresh = [g for gid, g in now.items() if gid not in groups or groups[gid].body != g.body]
                if not stale and not fresh:
                    break
                await index.remove(resource, stale)
                await index.add(resource, fresh)
                groups = now
            # A thread deleted meanwhile (its delete removes the vectors after the thread's rows):
            # seen gone here, its vectors just written go again; not yet gone, its delete's removal
            # comes after this write. Only the groups written here: a thread begun again under the
            # id keeps its own.
            for tid in {g.thread_id for g in groups.values()}:
                current, was = await self.store.get_thread(tid), known[tid]
                if current is None or (current.created_at, current.resource_id) != (was.created_at, was.resource_id):
                    gone = [g for g in groups.values() if g.thread_id == tid]
                    await index.remove(resource, gone)
                    indexed -= len(gone)
            indexed += len(groups)
        return indexed

    async def forget(
        self, value: str, *, thread_id: str | None = None, resource_id: str | None = None,
        knowledge_within: str | None = None, actor: str | None = None,
    ) -> dict[str, int]:
        """Forget every occurrence of ``value`` (a case-sensitive substring, in every spelling
        obsmem stores it in: as written in messages, quoted as data in observations, generations
        and context, ``<`` as ``‹`` or ``&lt;``; see :mod:`obsmem.storage.forgetting`).

        Scope: ``thread_id`` → that thread's messages and the records it reads (in resource
        scope the shared record: its lines containing the value go, whichever thread they came
        from); ``resource_id`` → every thread of the resource; neither → every thread of the
        store. In scope: messages (a text part holding the value goes, a message left empty is
        deleted; a tool call's arguments or a tool result holding it become ``"[forgotten]"``,
        so every result keeps its call), observation markers, every line of the live record
        *and of every older generation* holding it, buffered chunks and reflections, per-thread
        states, working memory lines (thread and resource keys), thread titles, and the
        retrieval vectors of the groups that changed. With ``knowledge=``, every knowledge node,
        record and audit event holding the value (in the covered scopes, their ancestors and
        below) is deleted, and the value is refused if captured again (kept only as a digest).
        The covered scopes are the threads' and, for a resource or the whole store, every scope
        the knowledge store holds for it (the resource's in each org; each org's), so the
        knowledge of a user whose threads are all deleted is reached too.
        ``knowledge_within`` (a knowledge scope, ``org:acme/resource:alice``) stops that at the
        ancestors broader than it, e.g. the org's records a caller confined to one resource may
        not change, and reaches no stored scope outside it (another org's); InvalidInputError
        when a scope of the covered threads is not within it. ``actor`` is who the knowledge audit
        log says forgot it (default: the knowledge store's ``actor``). With ``knowledge=``, neither
        it nor the audit's reason (``"value forgotten"``) may hold the value, which the audit log
        would then keep: InvalidInputError before anything is erased (so a value such as
        ``"forgotten"`` cannot be forgotten there).
        A thread in scope that has no observation record yet gets one (empty): the fence that
        keeps an observation running meanwhile from committing the value is kept on it.
        The cost ledger holds no text (ids and counts only), so nothing in it matches a value;
        :meth:`delete_thread` and :meth:`delete_resource` delete its rows. A turn of a thread in
        scope that is open when the forget begins (its model still answering) saves what it saves
        from then on with the value forgotten too (kept in this process's memory while such a turn
        is open, an hour at most: a turn of another process, a second server replica, saves its
        answer as its model gave it). With a SQLite store
        the write-ahead log is truncated before it returns, so the erased text is not left in
        the ``-wal`` file either (as after :meth:`delete_thread` and :meth:`delete_resource`).
        Returns counts per kind.
        """
        check_text(value, "value")
        if not value or not value.strip():  # " " is in nearly every message: forgetting it would empty the memory
            raise InvalidInputError(
                "Invalid value: forgetting needs a non-empty string that is not blank (whitespace only)",
                argument="value",
            )
        check_id(thread_id, "thread_id", optional=True)
        check_id(resource_id, "resource_id", optional=True)
        if actor is not None:
            _required_text(actor, "actor")
        if thread_id is not None:
            thread = await self.get_thread(thread_id)
            if resource_id is not None and thread.resource_id != resource_id:
                raise InvalidInputError(
                    f"Thread '{thread_id}' does not belong to resource '{resource_id}'", argument="resource_id"
                )
            threads = [thread]
        else:
            threads = await self._all_threads(resource_id)
        check_id(knowledge_within, "knowledge_within", optional=True)
        if self.knowledge is not None:  # an audit actor holding the value: refused before anything is erased
            from obsmem.knowledge.lifecycle import check_forget, check_reachable

            check_forget(self.knowledge, value, actor=actor)
            # and a knowledge store that cannot be opened (an empty file, a database down): it is
            # reached last, and failing then left the memory forgotten and the value not noted
            await check_reachable(self.knowledge)
        if knowledge_within is not None and self.knowledge is not None:  # refused before anything is deleted
            from obsmem.knowledge.lifecycle import erasure_scopes

            await erasure_scopes(self.knowledge, threads, thread_id=thread_id, resource_id=resource_id,
                                 within=knowledge_within)  # fmt: skip
        # Turns open now (a model answering) save their later messages with the value forgotten.
        self._forgets.forgot(value, thread_id=thread_id, resource_id=None if thread_id is not None else resource_id)
        counts = dict.fromkeys(("messages", "parts", "records", "generations", "working_memory", "threads"), 0)
        lineages: dict[str, str] = {}
        keys: set[str] = set()
        for thread in threads:
            lineages[lineage_key("thread", thread.id, thread.resource_id)] = thread.resource_id
            keys.add(f"thread:{thread.id}")
            if thread_id is None or self.config.scope == "resource":
                lineages[lineage_key("resource", None, thread.resource_id)] = thread.resource_id
            if thread_id is None or self.engine.working_memory_key(thread).startswith("resource:"):
                keys.add(f"resource:{thread.resource_id}")
        if resource_id is not None:
            lineages[lineage_key("resource", None, resource_id)] = resource_id
            keys.add(f"resource:{resource_id}")
        # Fenced before any message changes and until the forget is done: an observation, buffer
        # or reflection that read the messages before or during it commits nothing (see
        # obsmem.om.cycle.ERASURES_KEY); its messages stay pending.
        core = self.engine.core
        for thread in threads:
            # A thread never observed gets its record now: the fence is kept on it, and its first
            # observation (in this process or another) creates it or finds it, never misses it.
            with contextlib.suppress(ThreadNotFoundError):
                await core.head(thread)
        await self._note_erase()
        fenced: dict[str, str] = {}
        for lineage in sorted(lineages):
            if (token := await core.begin_erasure(lineage)) is not None:
                fenced[lineage] = token
        try:
            for thread in threads:
                # A thread of the resource deleted meanwhile (another caller's delete) took the
                # value with it; the thread named by thread_id is still required to exist.
                try:
                    await self._forget_in_thread(thread, value, counts)
                except ThreadNotFoundError:
                    if thread_id is not None:
                        raise
            for lineage, owner in sorted(lineages.items()):
                await self._forget_in_lineage(lineage, owner, value, counts)
            for key in sorted(keys):
                counts["working_memory"] += await self._forget_in_working_memory(key, value)
        finally:
            for lineage, token in fenced.items():
                await core.end_erasure(lineage, token)
        if self.knowledge is not None:
            from obsmem.knowledge.lifecycle import forget_in_knowledge

            counts.update(
                await forget_in_knowledge(self.knowledge, value, threads, thread_id=thread_id, resource_id=resource_id,
                                          within=knowledge_within, actor=actor)  # fmt: skip
            )
        await self._forget_kept()
        await self._announce_erase()
        await self._truncate_log()
        return counts

    async def _forget_in_thread(self, thread: Thread, value: str, counts: dict[str, int]) -> None:
        gone: list[str] = []
        messages = await self.store.list_messages(thread.id)
        # Checked for the value on a worker thread, a page at a time (each check dumps the message
        # and spells every text canonically: a 20,000-message thread held the loop 2.7 s); only
        # what holds it is rewritten here, compare-and-set.
        def check(page: list[Message]) -> list[tuple[Message, Message | None]]:
            return [(m, forget_in_message(m, value)) for m in page]

        for start in range(0, len(messages), _FORGET_PAGE):
            checked = [(m, first) for m, first in await asyncio.to_thread(check, messages[start : start + _FORGET_PAGE])
                       if first is not m]  # fmt: skip
            # Their ids go on the thread first: a copy of one saved back meanwhile or later (an
            # app holding the conversation as it was) is not stored (see forgotten_ids).
            await self._note_forgotten(thread, [m.id for m, _ in checked])
            for message, first in checked:
                if first is message:
                    continue  # holds nothing of the value
                outcome = await self._rewrite_message(message, lambda m: forget_in_message(m, value), first=first)
                if outcome == "empty":
                    gone.append(message.id)
                elif outcome == "rewritten":
                    counts["parts"] += 1
        if gone:
            counts["messages"] += await self.store.delete_messages(gone)
        # (obsmem's own entry of message ids stays: see forget_in_thread_metadata)
        if (thread.title is not None and holds(thread.title, value)) or (
            forget_in_thread_metadata(thread.metadata, value) is not thread.metadata
        ):
            for _ in range(5):
                current = await self.store.get_thread(thread.id)
                if current is None:
                    break
                title = None if current.title is not None and holds(current.title, value) else current.title
                metadata = forget_in_thread_metadata(current.metadata, value)
                cleaned = current.model_copy(update={"title": title, "metadata": metadata})
                if await self.store.update_thread(cleaned, expected_version=current.version) is not None:
                    counts["threads"] += 1
                    break

    async def _note_forgotten(self, thread: Thread, ids: list[str]) -> None:
        """Add ``ids`` to ``thread``'s forgotten message ids, compare-and-set."""
        if not ids:
            return
        for _ in range(_REWRITE_ATTEMPTS):
            current = await self.store.get_thread(thread.id)
            if current is None:
                raise ThreadNotFoundError(thread.id)
            noted = with_forgotten_ids(current, ids)
            if noted is current:
                return
            # Every one where the store keeps them all, before the row's list: the ids the row
            # holds too (noted before the store kept them, or imported), which the list is about to
            # drop when it is full.
            listed = forgotten_ids(current)
            await note_forgotten_ids(self.store, thread.id, [*listed, *ids] if len(listed) + len(ids) > MAX_FORGOTTEN_IDS else ids)
            if await self.store.update_thread(noted, expected_version=current.version) is not None:
                return
        raise StorageError(f"Noting the forgotten messages of thread '{thread.id}' kept racing with other writers; run it again.")

    async def _forget_in_working_memory(self, key: str, value: str) -> int:
        """The lines holding ``value`` out of the working memory under ``key`` (deleted when
        nothing is left), compare-and-set: a write of it since it was read (another forget, an
        observation) is not undone; it is read again. 1 if it held the value."""
        for _ in range(_REWRITE_ATTEMPTS):
            text = await self.store.get_working_memory(key)
            if text is None or not holds(text, value):
                return 0
            kept: str | None = forget_lines(text, value)
            if not (kept or "").strip():
                kept = None  # nothing left: deleted
            if await replace_working_memory_if_unchanged(self.store, key, kept, expected=text):
                return 1
        raise StorageError(f"Forgetting in working memory '{key}' kept racing with other writers; run it again.")

    async def _forget_in_lineage(self, lineage: str, resource_id: str, value: str, counts: dict[str, int]) -> None:
        """The live head (compare-and-set, retried) and then every older generation, until a pass
        finds the value nowhere (a reflection racing with us may copy an old head forward)."""
        count = self.counter.count_text
        for _ in range(10):
            found = False
            head = await self.store.get_head(lineage)
            if head is not None:
                cleaned = forget_in_record(head, value, count)
                if cleaned is not head:
                    found = True
                    written = await self.store.update_record(cleaned, expected_version=head.version)
                    if written.status == "stale":
                        continue
                    if written.applied:
                        counts["records"] += 1
                        if self.group_index is not None:
                            await self.group_index.refresh(
                                resource_id, head.active_observations, cleaned.active_observations
                            )
            offset = 0
            while True:
                page = await self.store.list_generations(lineage, limit=100, offset=offset)
                for generation in page:
                    if generation.is_live or forget_in_record(generation, value, count) is generation:
                        continue
                    found = True
                    if await self._rewrite_generation(generation, lambda g: forget_in_record(g, value, count)):
                        counts["generations"] += 1
                if len(page) < 100:
                    break
                offset += 100
            if not found:
                return
        raise StorageError(f"Forgetting in '{lineage}' kept racing with other writers; run it again.")

    async def save_messages(self, thread_id: str, messages: Sequence[Message | dict[str, Any]]) -> list[Message]:
        """Store messages in an existing thread as given, in order (a history imported, a
        backfill): no memory work runs, and their tool sequence is not checked. A turn
        (:meth:`begin_turn`, ``step``) checks it: a tool result whose call a later message
        closed as unanswered takes that answer's place there, where saved here it is stored
        after the newest message, a second result for its call."""
        check_id(thread_id, "thread_id")
        parsed = drop_obsmem_messages(parse_messages(messages, "messages"))
        thread = await self.get_thread(thread_id)
        parsed = await self.engine.core.input_markers_checked(thread.id, parsed)  # markers are obsmem's to write
        forgotten = await forgotten_among(self.store, thread.id, forgotten_ids(thread), [m.id for m in parsed])
        parsed = [m for m in parsed if m.id not in forgotten]  # a copy of a message forget rewrote or deleted
        saved = await self.store.save_messages(thread_id, parsed) if parsed else []
        await remember_instructions(self.store, thread, saved)
        return saved

    async def list_messages(
        self, thread_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Message]:
        check_id(thread_id, "thread_id")
        check_count(after_seq, "after_seq")
        check_count(limit, "limit", optional=True)
        await self.get_thread(thread_id)
        return await self.store.list_messages(thread_id, after_seq=after_seq, limit=limit)

    # -- the turn lifecycle -------------------------------------------------------------------
    async def begin_turn(
        self, *, thread_id: str, resource_id: str | None = None,
        messages: Sequence[Message | dict[str, Any]] = (), model: str | None = None,
    ) -> Turn:
        """Start a turn: saves the input, observes/reflects if due, and sets ``turn.context``.

        The thread is created when it does not exist and ``resource_id`` is given. ``model`` is
        the actor's ``provider:model`` id; it drives idle ('auto') and provider-change activation.

        A failure past the argument checks raises an :class:`~obsmem.errors.ObsmemError` whose
        ``input_saved`` says whether ``messages`` were stored before it. To retry, call again
        with the same Message objects (or the same explicit ids): the input is saved by id, so
        it is stored once, in its place, and the returned context holds it once. Messages built
        anew (``Message.user("hi")`` again) have new ids and are new messages; nothing is
        de-duplicated by content. See :mod:`obsmem.turn`.
        """
        check_id(thread_id, "thread_id")
        check_id(resource_id, "resource_id", optional=True)
        check_text(model, "model")
        parsed = parse_messages(messages, "messages")
        await self.engine.core.counter.ready()  # the tokenizer's table, off the loop (first turn only)
        await telemetry.ready()  # (and the OpenTelemetry API's imports)
        try:
            thread = await self._thread_for_turn(thread_id, resource_id)
        except ObsmemError as exc:
            input_not_saved(exc, "begin_turn")
            raise
        # Model calls of the turn's memory work (and of the background work it starts, which
        # copies this context) are recorded for the thread and resource (the cost ledger).
        with call_scope(thread_id=thread.id, resource_id=thread.resource_id):
            return await Turn.start(
                thread, parsed, engine=self.engine, store=self.store, contexts=self, model=model,
                background=self.background, max_wait=self.max_turn_wait, forgets=self._forgets,
            )

    async def resume_turn(self, *, thread_id: str, model: str | None = None, since_seq: int | None = None) -> Turn:
        """A turn begun by another process (a server replica, a worker of a web app) continued
        here: ``step`` and ``end`` work as on the turn that began it (:meth:`Turn.resume`). The
        thread must exist (:class:`~obsmem.errors.ThreadNotFoundError`).

        ``since_seq``: the turn's ``began_seq`` where it began. Pass it when several turns of the
        thread may run at once (two tabs): the resumed turn then tells its own tool calls from
        another turn's. Without it, every call waiting now is taken for the turn's own.

        A forget in this process from this call on is applied to what the turn saves (see
        :meth:`forget`); one made here after the turn began elsewhere and before this call is not."""
        check_id(thread_id, "thread_id")
        check_text(model, "model")
        if since_seq is not None and (isinstance(since_seq, bool) or not isinstance(since_seq, int) or since_seq < 1):
            raise InvalidInputError(
                f"since_seq: expected None or a message seq (an integer >= 1, turn.began_seq), got "
                f"{describe_value(since_seq)}",
                argument="since_seq",
            )
        return await Turn.resume(
            await self.get_thread(thread_id), engine=self.engine, store=self.store, contexts=self, model=model,
            background=self.background, max_wait=self.max_turn_wait, since_seq=since_seq, forgets=self._forgets,
        )

    @asynccontextmanager
    async def turn(
        self, *, thread_id: str, resource_id: str | None = None,
        messages: Sequence[Message | dict[str, Any]] = (), model: str | None = None,
    ) -> AsyncIterator[Turn]:
        """``async with memory.turn(...) as turn:`` — begins a turn and always ends it."""
        turn = await self.begin_turn(thread_id=thread_id, resource_id=resource_id, messages=messages, model=model)
        try:
            yield turn
        finally:
            await turn.end()

    async def get_context(self, thread_id: str) -> ContextWindow:
        """The messages an actor should see now, for use without the Turn API: the context from
        what is stored, once memory work a turn of this thread left running (``end`` starts what
        falls due after the turn's last messages) is done, or after ``max_turn_wait`` seconds, as
        a turn would wait (then the raw window is cut as a turn's is: ``context.trimmed`` says how
        many messages were left out, still pending). Nothing else runs here: the work itself
        happens at turn boundaries, :meth:`observe` and :meth:`reflect`."""
        thread = await self.get_thread(thread_id)
        if await self.background.finished(work_key(thread.id), self.max_turn_wait):
            return await self.context_for(thread)
        # The work goes on: what is stored, the raw window cut as a turn's is then (what is left
        # out stays pending; the newest user message and what follows it stay).
        await self.engine.core.counter.ready()
        record, _, trim = await self.engine.behind_window(thread, observable=False)
        context = await self.context_from(thread, record, trim.kept)
        return dataclasses.replace(context, trimmed=trim.trimmed) if trim.trimmed else context

    async def context_for(self, thread: Thread) -> ContextWindow:
        """The context for ``thread`` from what is stored now."""
        if not isinstance(thread, Thread):
            raise InvalidInputError(
                f"Invalid thread: expected a Thread (from memory.get_thread), got {describe_value(thread)}",
                argument="thread",
            )
        await self.engine.core.counter.ready()
        record, unobserved = await self.engine.core.stored_window(thread)
        return await self.context_from(thread, record, unobserved)

    async def context_from(
        self, thread: Thread, record: ObservationRecord | None, unobserved: Sequence[Message],
        *, others: Sequence[tuple[str, Sequence[Message]]] | None = None,
    ) -> ContextWindow:
        """The context for a record and the thread's messages after its cursor (a consistent read).
        ``others``: the resource's other threads' unobserved messages as read with ``record``
        (sharing on; a step read them already), else read here."""
        erasures = rendered_erasures()
        working_memory = None
        if self.config.observation.manage_working_memory:
            working_memory = await self.store.get_working_memory(self.engine.working_memory_key(thread))
        state = record.threads.get(thread.id) if record else None
        shown = {
            e.slug: state.extracted[e.slug]
            for e in self.extractors
            if state is not None and e.include_previous and not e.builtin and e.slug in state.extracted
        }
        shared = self.config.scope == "resource" and self.config.share_threads_in_resource
        if not shared:
            others = []
        elif others is None:
            others = await self._other_conversations(thread, record)
        await self.counter.warm(unobserved)  # a window read afresh (a new process) counted in a thread
        context = build_context(
            record,
            unobserved,
            thread_id=thread.id,
            now=self.clock.now(),
            temporal_markers=self.config.temporal_markers,
            include_hints=self.config.observation.continuation_hints,
            extracted=shown,
            working_memory=working_memory,
            shared=shared,
            other_conversations=others,
            recall_instructions=self._recall_instructions,
            instructions_without_observations=self.config.retrieval.scope == "resource",
            instructions=await load_instructions(self.store, thread),
            counter=self.counter,
        )
        if self.knowledge_agents is not None:
            context = await self._with_knowledge(thread, context)
        if rendered_erasures() != erasures:
            # An erase ran while this context was read and built: what the build kept (shared
            # sections, counted texts) may hold what it removed, and must not outlive it.
            self._drop_built()
        return context

    def _drop_built(self) -> None:
        """What building a context keeps between calls: the shared renderings and sections, the
        counted texts (not counted as an erase: see :func:`~obsmem.om.context.forget_rendered`)."""
        forget_rendered(erase=False)
        forget_texts = getattr(self.counter, "forget_texts", None)
        if forget_texts is not None:  # (a counter of the user's own keeps what it keeps)
            forget_texts()
        forget_segments()

    async def speculative_context(
        self, thread: Thread, record: ObservationRecord | None, unobserved: Sequence[Message]
    ) -> ContextWindow | None:
        """:meth:`context_from`, for a turn to build while its save reaches the disk (see
        :class:`~obsmem.turn.TurnContexts`); None where building it does more than read the
        store (knowledge agents may call a model) or needs the step's own read (other threads
        shown, in resource scope with sharing on)."""
        shared = self.config.scope == "resource" and self.config.share_threads_in_resource
        if self.knowledge_agents is not None or shared:
            return None
        return await self.context_from(thread, record, unobserved)

    async def _with_knowledge(self, thread: Thread, context: ContextWindow) -> ContextWindow:
        """The context with the pinned block and, on a user message, the remind agent's reminder.

        Both are obsmem's own system messages (volatile: they change from turn to turn), placed
        after obsmem's other system messages; a failure leaves them out and never fails the turn.
        """
        assert self.knowledge_agents is not None
        newest = context.raw_messages[-1] if context.raw_messages else None
        request = newest.text if newest is not None and newest.role == "user" else None
        try:
            scope = self.knowledge_agents.scope(thread.org_id, thread.resource_id, thread.id)
            blocks = await asyncio.wait_for(
                self.knowledge_agents.context_blocks(request, scope), self.config.knowledge.remind_timeout_s
            )
        except TimeoutError:  # a slow store or remind model never holds the turn
            logger.warning("knowledge left out of the context of %r: slower than knowledge.remind_timeout_s",
                           thread.id)
            return context
        except Exception as exc:  # e.g. ids a knowledge scope cannot hold: no knowledge, same turn
            telemetry.log_failure(logger, "knowledge left out of the context of %r", thread.id, error=exc,
                                  thread_id=thread.id, operation="remind")
            return context
        added = [
            Message(
                id=obsmem_message_id(key, thread.id), role="system", parts=(TextPart(text=text),),
                created_at=_EPOCH, metadata={MARKER_KEY: key, "obsmem_volatile": True},
            )
            for key, text in (("knowledge-pins", blocks.pinned.text), ("knowledge-reminder", blocks.reminder.text))
            if text
        ]
        if not added:
            return context
        messages = list(context.messages)
        at = messages.index(context.raw_messages[0]) if context.raw_messages else len(messages)
        messages[at:at] = added
        receipt = context.receipt
        if receipt is not None:
            receipt = receipt.revised(
                messages, context.raw_messages, counter=self.counter, added=added,
                knowledge_record_ids=blocks.reminder.sources if blocks.reminder.text else (),
                pin_ids=blocks.pinned.shown if blocks.pinned.text else (),
            )
        return dataclasses.replace(
            context, messages=messages, system_messages=[*context.system_messages, *added], receipt=receipt
        )

    async def _other_conversations(
        self, thread: Thread, record: ObservationRecord | None
    ) -> Sequence[tuple[str, Sequence[Message]]]:
        """Unobserved messages of the resource's other threads (shown only when sharing is on,
        with observations to show them with: none without a record), read from their cursors
        (:func:`~obsmem.om.step.read_other_threads`), not from the start of the resource."""
        if record is None:
            return []
        return (await read_other_threads(self.engine.core, thread, record)).shown

    # -- retrieval: the recall tool --------------------------------------------------------------
    async def recall(
        self,
        thread_id: str,
        *,
        mode: RecallMode = "messages",
        group_id: str | None = None,
        cursor: str | None = None,
        target_thread_id: str | None = None,
        anchor: Literal["start", "end"] = "start",
        query: str | None = None,
        page: int = 1,
        limit: int = 20,
        detail: Detail = "low",
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        char_offset: int = 0,
    ) -> RecallResult:
        """What the ``recall`` tool answers for the actor of ``thread_id`` (retrieval mode only).

        ``group_id`` → exactly the messages the observation group covers (paged by ``page`` and
        ``limit``); ``cursor`` → the conversation from that message id (``anchor="start"``
        forward, ``"end"`` backward); ``target_thread_id`` → another reachable thread; ``mode=
        "threads"`` lists reachable threads; ``mode="search"`` finds groups by ``query``. Nothing
        outside ``retrieval.scope`` is ever returned: such ids raise RecallNotFoundError, exactly
        like ids that do not exist.
        """
        check_id(thread_id, "thread_id")
        check_choice(mode, "mode", get_args(RecallMode))
        check_id(group_id, "group_id", optional=True)
        check_id(cursor, "cursor", optional=True)
        check_id(target_thread_id, "target_thread_id", optional=True)
        check_choice(anchor, "anchor", ("start", "end"))
        check_text(query, "query")
        check_count(page, "page", minimum=-_MAX_PAGE, maximum=_MAX_PAGE)  # negative: back from the cursor
        check_count(limit, "limit", minimum=1)
        check_choice(detail, "detail", get_args(Detail))
        check_count(token_budget, "token_budget")
        check_count(char_offset, "char_offset")
        caller = await self.get_thread(thread_id)
        request = RecallRequest(
            mode=mode, group_id=group_id, cursor=cursor, thread_id=target_thread_id, anchor=anchor,
            query=query, page=page, limit=limit, detail=detail, token_budget=token_budget,
            char_offset=char_offset,
        )
        # a query's embedding call is the recall's, for the caller's thread and resource (ledger)
        with call_scope(role="recall", thread_id=caller.id, resource_id=caller.resource_id):
            return await self.recaller.recall(caller, request)

    def recall_tool(self, *, flavor: ToolFlavor = "generic") -> dict[str, Any]:
        """The ``recall`` tool definition (JSON schema) for this memory's retrieval options."""
        check_choice(flavor, "flavor", get_args(ToolFlavor))
        return recall_tool_schema(self.config.retrieval, flavor=flavor)

    async def call_recall_tool(
        self, thread_id: str, args: Mapping[str, Any] | None, *, token_budget: int = DEFAULT_TOKEN_BUDGET
    ) -> dict[str, Any]:
        """Answer one ``recall`` tool call from the actor of ``thread_id`` (JSON-ready).

        Argument mistakes and out-of-reach ids come back as ``{"error": "..."}`` so the model
        can correct itself; a missing caller thread or retrieval being off still raise.
        """
        check_count(token_budget, "token_budget")
        caller = await self.get_thread(thread_id)
        if not self.config.retrieval.enabled:
            raise ConfigError(
                "retrieval", "the recall tool needs retrieval mode, which is off", allowed="retrieval=True"
            )

        async def run(request: RecallRequest) -> RecallResult:
            return await self.recaller.recall(caller, request)

        return await dispatch_recall(run, args, token_budget=token_budget)

    # -- knowledge: pins, capture and curation ------------------------------------------------
    def _agents(self) -> KnowledgeAgents:
        if self.knowledge_agents is None:
            raise ConfigError(
                "knowledge", "this memory has no knowledge store",
                allowed="Memory(..., knowledge=Knowledge.sqlite(path)) (see obsmem.knowledge)",
            )
        return self.knowledge_agents

    async def _knowledge_scope(self, thread_id: str) -> Any:
        thread = await self.get_thread(thread_id)
        return self._agents().scope(thread.org_id, thread.resource_id, thread.id)

    async def pin(self, thread_id: str, text: str, *, level: Literal["thread", "resource"] = "resource",
                  reason: str = "pinned by the user") -> Record:
        """Pin ``text`` so it is in every context of the thread's resource (``level="thread"``:
        of this thread only), within ``knowledge.pins_tokens``; clamped to the ceiling."""
        _required_text(text, "text")
        check_choice(level, "level", ("thread", "resource"))
        _required_text(reason, "reason")
        from obsmem.knowledge.store.scopes import parse_level

        scope = await self._knowledge_scope(thread_id)
        agents = self._agents()
        text = self.redacted(text)  # the privacy boundary holds for what the user pins too
        return await agents.pins.pin(text, scope, actor="user", reason=reason, level=parse_level(level))

    def redacted(self, text: str) -> str:
        """``text`` as the privacy boundary (``config.privacy``) lets it be stored in knowledge:
        redacted when privacy is on, else as given. Pins go through it; so does what a client
        asks the server to remember."""
        _required_text(text, "text")
        return self._redact(text) if self._redact is not None else text

    async def unpin(self, thread_id: str, record_id: str, *, reason: str = "unpinned by the user") -> Record:
        check_id(record_id, "record_id")
        _required_text(reason, "reason")
        scope = await self._knowledge_scope(thread_id)
        return await self._agents().pins.unpin(record_id, scope, actor="user", reason=reason)

    async def list_pins(self, thread_id: str) -> list[Record]:
        """The pins the thread sees, oldest first."""
        scope = await self._knowledge_scope(thread_id)
        return await self._agents().pins.list(scope)

    async def capture_knowledge(self, thread_id: str) -> list[AgentRun]:
        """Capture the thread's committed observations not captured yet (capture normally runs by
        itself after each observation; this catches up, e.g. after workers observed)."""
        await self.get_thread(thread_id)
        self._agents()
        assert self._knowledge_hook is not None
        return await self._knowledge_hook.capture_thread(thread_id)

    async def curate_knowledge(self, thread_id: str, *, force: bool = True) -> AgentRun:
        """Run curation for the thread's lane now (``force=False``: only if its trigger fired
        and it is not backing off). Returns what the run did."""
        check_flag(force, "force")
        scope = await self._knowledge_scope(thread_id)
        if force:
            return await self._agents().curate(scope, thread_id, force=True)
        return await self._agents().curate_if_due(scope, thread_id)

    # -- manual operations and inspection -----------------------------------------------------
    async def observe(self, thread_id: str) -> CycleOutcome:
        """Observe every unobserved message now, whatever the threshold or a failure backoff
        (see ``observation.failure_backoff``); a success clears the backoff."""
        return await self.engine.observe(await self.get_thread(thread_id), force=True)

    async def reflect(self, thread_id: str, *, guidance: str | None = None) -> CycleOutcome:
        """Reflect the observations now, whatever the threshold or a failure backoff (see
        ``reflection.failure_backoff``); ``guidance`` steers the reflector.

        A failed reflection keeps the observations. Under ``failure_policy="throw"`` it raises
        :class:`ReflectionError` (as a failed observation raises ObservationError; degenerate
        output is logged, not raised); otherwise the failed outcome is returned.
        """
        check_text(guidance, "guidance")
        outcome = await self.engine.reflect(await self.get_thread(thread_id), guidance=guidance)
        error = outcome.error
        if error is None or self.failure_policy != "throw" or isinstance(error, DegenerateOutputError):
            return outcome
        if isinstance(error, ReflectionError):
            raise error
        raise ReflectionError(
            f"Reflecting thread '{thread_id}' failed: {describe_error(error)}. The observations were kept "
            "(set failure_policy='warn' to get the failed outcome instead)."
        ) from error

    async def get_record(self, thread_id: str) -> ObservationRecord | None:
        thread = await self.get_thread(thread_id)
        return await self.store.get_head(self.engine.lineage(thread))

    async def get_instructions(self, thread_id: str) -> list[Message]:
        """The application's instructions recorded for ``thread_id`` (the system messages of the
        most recent call that passed any), as stored; empty when none are recorded (a missing
        thread is one that has none)."""
        try:
            thread = await self.get_thread(thread_id)
        except ThreadNotFoundError:
            return []
        return await load_instructions(self.store, thread) or []

    async def get_observations(self, thread_id: str) -> str:
        """The observations ``thread_id``'s context shows (empty until something was observed): in
        resource scope without ``share_threads_in_resource``, only its own sections and the
        resource's unsectioned text, never another thread's. (:meth:`get_record` is the whole
        record, which in resource scope is the resource's.)"""
        record = await self.get_record(thread_id)
        return observations_shown(record, thread_id, self.config) if record is not None else ""

    async def list_generations(self, thread_id: str, *, limit: int = 100) -> list[ObservationRecord]:
        check_count(limit, "limit")
        thread = await self.get_thread(thread_id)
        return await self.store.list_generations(self.engine.lineage(thread), limit=limit)

    async def get_working_memory(self, thread_id: str) -> str | None:
        thread = await self.get_thread(thread_id)
        return await self.store.get_working_memory(self.engine.working_memory_key(thread))

    # -- the cost ledger -----------------------------------------------------------------------
    async def usage(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        since: datetime | date | None = None,
        until: datetime | date | None = None,
    ) -> UsageReport:
        """What memory's model calls cost: the cost ledger summed per UTC day, role and model.

        Every call of the observer, reflector, knowledge agents and embedder that this memory (or a
        worker on the same store) made is recorded, success or failure, with its tokens (cached
        and cache-write included), latency and outcome; the offline roles make no model call and
        leave no row. ``thread_id`` / ``resource_id`` filter (both: both must match); ``since``
        (inclusive) and ``until`` (exclusive) bound the call's start (a ``date`` is its UTC
        midnight). ``cost_usd`` is an estimate from the price table (:mod:`obsmem.profiles`, as of
        :data:`~obsmem.profiles.PRICES_AS_OF`) and ``config.prices``; ``unpriced_calls`` counts the
        calls of models without a price. ``.total()``, ``.by("role")``, ``.by("day", "role")``.
        """
        check_id(thread_id, "thread_id", optional=True)
        check_id(resource_id, "resource_id", optional=True)
        start, end = _instant(since, "since"), _instant(until, "until")
        if start is not None and end is not None and start >= end:
            raise InvalidInputError(
                f"since ({start.isoformat()}) is not before until ({end.isoformat()}): no call can fall in that "
                "window (until is exclusive; a day is its UTC midnight). Swapped?",
                argument="since",
            )
        await self.ledger.flush()
        rows = await self._ledger_rows(thread_id=thread_id, resource_id=resource_id, since=start, until=end)
        return usage_report(rows, self.config.price_overrides())

    async def _ledger_rows(
        self, *, thread_id: str | None = None, resource_id: str | None = None, since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Any]:
        return await self.store.usage_rows(thread_id=thread_id, resource_id=resource_id, since=since, until=until)

    # -- what it is doing, and what an answer was made from ------------------------------------
    async def status(self, thread_id: str) -> ThreadStatus:
        """The thread's memory state now, read from the store (so the same in every process):
        window tokens against the thresholds, buffered observations and what they cover, memory
        work in flight (held leases), a due or buffered reflection, backoff, and the ``phase``.
        See :mod:`obsmem.om.status`. Unknown thread → :class:`~obsmem.errors.ThreadNotFoundError`."""
        check_id(thread_id, "thread_id")
        return await thread_status(self.engine.core, await self.get_thread(thread_id))

    async def watch(self, thread_id: str, *, interval_s: float = 0.5) -> AsyncIterator[ThreadStatus]:
        """Yield the thread's :meth:`status` now and again each time it changes (``checked_at``
        aside), forever: break out of the loop to stop. The store is read every ``interval_s``
        seconds, and at once when this process's memory work reports an event for the thread, so
        work done by other processes (workers) shows within ``interval_s``."""
        check_id(thread_id, "thread_id")
        interval = _seconds(interval_s, "interval_s", positive=True)
        if interval is None:
            raise ConfigError("interval_s", "got None", allowed="a number of seconds > 0")
        thread = await self.get_thread(thread_id)
        woken = asyncio.Event()
        self._watchers.setdefault(thread_id, set()).add(woken)
        try:
            previous: ThreadStatus | None = None
            while True:
                woken.clear()
                current = await thread_status(self.engine.core, thread)
                if not current.same_state(previous):
                    previous = current
                    yield current
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), interval)
        finally:
            waiters = self._watchers.get(thread_id)
            if waiters is not None:
                waiters.discard(woken)
                if not waiters:
                    del self._watchers[thread_id]

    async def receipt(self, message_id: str) -> Receipt | None:
        """The receipt of the context an assistant message was made from (stored with it by the
        turn: ``metadata["obsmem_receipt"]``); None when the message has none (it was not saved
        through a turn, or it is not a reply) or does not exist, and when what the message holds
        under that key is not a receipt obsmem can read (an application or a client may store
        message metadata of any shape)."""
        check_id(message_id, "message_id")
        found = await self.store.get_messages([message_id])
        data = found[0].metadata.get(RECEIPT_KEY) if found else None
        if not isinstance(data, dict):
            return None
        try:
            return Receipt.from_data(data)
        except (LookupError, TypeError, ValueError, OverflowError, AttributeError):
            return None  # (a forged or foreign shape: no receipt of obsmem's)

    async def receipt_sources(self, receipt: Receipt, *, per_group: int | None = None) -> dict[str, list[Message]]:
        """What a receipt's context was made of, as stored now: each observation group's id with
        the exact messages it covers, and ``"raw"`` with the raw tail's messages. Raw messages are
        never deleted by memory work, so this resolves after any number of later reflections; the
        messages of a thread deleted since resolve to nothing. Reflection groups can each span most
        of a long thread: ``per_group`` reads only the first messages of each (for a display)."""
        if not isinstance(receipt, Receipt):
            raise InvalidInputError(f"receipt: expected a Receipt, got {describe_value(receipt)}", argument="receipt")
        if per_group is not None and (isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1):
            raise InvalidInputError(f"per_group: expected None or an integer >= 1, got {describe_value(per_group)}",
                                    argument="per_group")  # fmt: skip
        sources = await resolve_groups(self.store, receipt, per_group=per_group)
        sources["raw"] = await resolve_raw(self.store, receipt)
        return sources

    async def _thread_for_turn(self, thread_id: str, resource_id: str | None) -> Thread:
        thread = await self.store.get_thread(thread_id)
        if thread is not None:
            if resource_id is not None and thread.resource_id != resource_id:
                raise _another_resource(thread_id, resource_id)
            return thread
        self.engine.core.windows.discard(thread_id)  # deleted elsewhere, perhaps: keep none of its text
        if resource_id is None:
            raise ThreadNotFoundError(thread_id)
        return await self.create_thread(thread_id, resource_id)


def _another_resource(thread_id: str, resource_id: str) -> InvalidInputError:
    """The refusal of a thread that belongs to another resource than ``resource_id``."""
    return InvalidInputError(
        f"Thread '{thread_id}' belongs to another resource, not to the resource_id given "
        f"('{resource_id}'). Use a new thread id for this resource.",
        argument="resource_id",
    )

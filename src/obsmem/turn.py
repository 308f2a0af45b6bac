"""The turn lifecycle any agent loop can drive: begin → step … → end.

A *turn* is one user request; a *step* is one model call inside it (an agent that calls tools
makes several). ``begin`` saves the input and returns the messages to send; after every model
call, ``step`` saves what came back and returns the messages for the next call; ``end`` closes
the turn. Memory work happens at those boundaries, so an agent needs no other integration.

::

    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hi")])
    response = await my_model(turn.context.messages)
    context = await turn.step([response])
    await turn.end()

A turn waits on memory work (activation, and a synchronous observation or reflection when one
is due) at most ``max_wait`` seconds in all, begin and steps together (``Memory(max_turn_wait=
...)``). Past it the turn goes on with what is stored: the work keeps running in the background
and the messages it was about stay pending. That context's raw window is cut from its oldest
end to the engine's :meth:`~obsmem.om.engine.Engine.raw_limit` (:attr:`Turn.trimmed` says how
many messages were left out); those stay pending too.

**Retrying a failed boundary.** ``begin_turn`` and ``step`` save their input first, then run
memory work and build the context; a store or model failure in that later work raises after the
input is stored. Call again with the *same Message objects* (or messages with the same explicit
ids): messages are saved by id, so the retry stores nothing twice and keeps the thread's order,
records the input's instructions if the failed call could not, and returns a context that holds
the input exactly once. The error says which case it was: ``error.input_saved`` is True when the
input was stored before the failure, False when the call failed before or while saving it (a
store that fails mid-write commits a batch whole or not at all, so a retry is safe either way).
Messages built again (``Message.user("hi")`` twice) get new ids and are new messages: obsmem never
de-duplicates by content, since a user may well say the same thing twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

from obsmem import telemetry
from obsmem.background import BackgroundWork
from obsmem.errors import InvalidInputError, ObsmemError, StorageError, ThreadChangedError, ThreadNotFoundError
from obsmem.om.buffering import StepResult
from obsmem.om.context import (
    ContextWindow,
    drop_obsmem_messages,
    model_visible,
    remember_instructions,
)
from obsmem.om.engine import CycleOutcome, Engine, Prepared, Quiet
from obsmem.om.receipts import RECEIPT_KEY
from obsmem.om.selection import answer_late, is_boundary, observable_messages, pending_tool_call_ids
from obsmem.om.windows import Saved, extended
from obsmem.storage import leasing
from obsmem.storage.contract import ObservationRecord, Store, forgotten_among, lineage_key, rewrite_message_if_unchanged
from obsmem.storage.forgetting import ForgetsInFlight, forgotten_ids
from obsmem.types import DataPart, FilePart, Message, TextPart, Thread, parse_messages

__all__ = ["Turn", "TurnContexts", "input_not_saved", "is_input", "retried_input", "same_shown"]


#: How many of the thread's newest messages a resumed turn reads (and of its own, from its start).
RESUME_WINDOW = 64

#: How far back (messages) a late tool result looks for the closing message of its call.
LATE_RESULT_WINDOW = 500

#: A late tool result rewrites its call's closing message under a lease of the thread held at
#: most this long (it expires by itself if its holder dies) ...
LATE_LEASE_TTL_S = 10.0
#: ... and waits at most this long for another holder (longer than the TTL: a dead holder's
#: lease runs out first).
LATE_LEASE_WAIT_S = 12.0
#: Tries at rewriting the closing messages when a forget keeps rewriting them between the read
#: and the compare-and-set write.
LATE_REWRITE_ATTEMPTS = 5

#: Saves a boundary tries when other writers of its thread keep landing between its check and
#: its save (each try reads the thread's tail again); then ``ThreadChangedError`` is raised.
SAVE_ATTEMPTS = 16
#: The first retry waits up to this long (random), each later one up to twice the one before,
#: at most :data:`SAVE_BACKOFF_MAX_S`: a boundary gives up after about 0.4 s of waits at most.
SAVE_BACKOFF_S = 0.001
SAVE_BACKOFF_MAX_S = 0.032

#: The largest window (messages) whose context a boundary builds while its save's commit reaches
#: the disk (:meth:`Turn._speculate`). Building it ahead gains at most the disk's sync time, and
#: costs about as much as the window is long: past this, memory is far behind (a memory model
#: failing for hours leaves thousands of messages pending), the context is cut to the raw limit
#: after the memory work, and a context of the whole window built ahead would be thrown away.
SPECULATE_MAX_MESSAGES = 1024


def work_key(thread_id: str) -> str:
    """The key a turn's memory work on ``thread_id`` runs under in the memory's background work:
    one at a time per thread; a later boundary (or ``Memory.get_context``) waits for it."""
    return f"turn:{thread_id}"


class TurnContexts(Protocol):
    """What a turn asks of the memory that runs it: the actor's context for a thread.

    :class:`~obsmem.memory.Memory` provides it; a turn knows nothing else about its memory.
    """

    async def context_for(self, thread: Thread) -> ContextWindow:
        """The context from what is stored now."""
        ...

    async def context_from(
        self, thread: Thread, record: ObservationRecord | None, unobserved: Sequence[Message],
        *, others: Sequence[tuple[str, Sequence[Message]]] | None = None,
    ) -> ContextWindow:
        """The context for ``record`` and the thread's messages after its cursor (one consistent read).
        ``others`` (passed only in resource scope with sharing on): the other threads' unobserved
        messages the step read with ``record``, to show instead of reading them again."""
        ...

    # Optional: ``async def speculative_context(thread, record, unobserved) -> ContextWindow | None``,
    # ``context_from`` for a boundary to build while its save reaches the disk (used only when
    # the memory work leaves that window as it was); None where it should not be built ahead.


class Turn:
    """One request/response cycle on a thread. Get one from :meth:`Memory.begin_turn`.

    It saves messages to ``store``, runs the memory work due at each boundary on ``engine``,
    and asks ``contexts`` for what the actor sees next. With ``background`` and ``max_wait``,
    the memory work runs as a task of ``background`` that the turn waits for at most
    ``max_wait`` seconds in all (see the module docstring); without, the turn runs it itself.

    ``trimmed``: how many of the oldest raw messages the latest context left out (its boundary
    stopped waiting for memory work; they stay pending). ``waited_out``: how many of the turn's
    boundaries stopped waiting at the bound.

    A boundary that fails raises an :class:`~obsmem.errors.ObsmemError` (an error that is not one
    comes out as :class:`~obsmem.errors.StorageError`) whose ``input_saved`` says whether its
    messages were stored; calling it again with the same messages (same ids) is safe either way
    (see the module docstring). A failed boundary changes nothing on the turn: not
    :attr:`context`, not :attr:`steps`.
    """

    def __init__(
        self, thread: Thread, *, engine: Engine, store: Store, contexts: TurnContexts,
        model: str | None = None, background: BackgroundWork | None = None, max_wait: float | None = None,
        forgets: ForgetsInFlight | None = None,
    ) -> None:
        self._engine = engine
        self._store = store
        self._contexts = contexts
        self._background = background
        self._wait_left = max_wait if background is not None else None
        self.max_wait = max_wait
        self.thread = thread
        self.model = model
        self.context: ContextWindow = ContextWindow(messages=[])
        self.outcomes: list[CycleOutcome] = []
        self.steps = 0
        self.ended = False
        self.trimmed = 0
        self.waited_out = 0
        # The newest seq of the thread the turn's last completed boundary knew of. Copies of
        # stored messages newer than it were saved by a boundary that failed: they are input.
        self._seen_seq: int | None = None
        # The tool calls this turn saved (its model's): only the turn answers them. A call of
        # another turn of the thread still waiting when this one goes on is closed as unanswered.
        self._own_calls: set[str] = set()
        # The ids of the messages that made them: a waiting call is this turn's only when its
        # message is one of these (a model server that numbers each response's calls from call_0
        # gives the calls of another turn of the thread the same ids).
        self._own_callers: set[str] = set()
        # A context that left out another turn's waiting calls, and its raw tail before the cut.
        self._cut_from: tuple[ContextWindow, Sequence[Message]] | None = None
        # The seq of the turn's first stored input: what is newer was saved while it ran.
        self._began_seq: int | None = None
        # The ids of the messages this turn stored (or was given again, stored), for a turn begun
        # here; None for one resumed from the store (its earlier steps' ids are not known here).
        self._own_ids: set[str] | None = None
        # The newest seq stored before the turn's new input (begun here): newer messages not its
        # own were stored by another writer while it began.
        self._history_seq: int | None = None
        # The seq of the turn's first message (its input), for resuming it elsewhere (began_seq).
        self._since: int | None = None
        # Whether the boundary's save read the thread again (its first view was stale), and the
        # newest seq of the view its check ran against.
        self._reread = False
        self._view_newest = 0
        self._input_saved = False
        # The thread's window just after the last save, when the save knew it (no read needed).
        self._saved_window: Window | None = None
        # Whether that save found the window changed by another writer since it was read.
        self._window_stale = False
        self._input_user: Message | None = None
        # A turn's start given its input again (a retried begin_turn: copies of stored messages
        # only): the newest question among them, its input all the same (see _advance).
        self._copied_input: Message | None = None
        # False once a boundary failed after saving: the stored tail then runs past the context.
        self._context_current = True
        # The ids of the messages a forget changed, as the thread's row said at this boundary's
        # check (_same_thread); None: as it said when the turn began (self.thread).
        self._forgotten: frozenset[str] | None = None
        # Seconds the current boundary waited on memory model work (for the wait/overhead metrics).
        self._wait_s = 0.0
        # The commit of the boundary's save while it reaches the disk (see _save): awaited
        # before the boundary writes or observes anything, and before it returns.
        self._commit: Callable[[], Awaitable[None]] | None = None
        # The forgets of this process that began while the turn is open: applied to what it saves.
        self._forgets = forgets
        self._forget_mark = 0 if forgets is None else forgets.opened()

    @classmethod
    async def start(
        cls, thread: Thread, messages: Sequence[Message | dict[str, Any]], *, engine: Engine, store: Store,
        contexts: TurnContexts, model: str | None = None, background: BackgroundWork | None = None,
        max_wait: float | None = None, forgets: ForgetsInFlight | None = None,
    ) -> Turn:
        """Begin a turn: save the input, run the memory work due, and set :attr:`context`.

        On failure raises an ObsmemError with ``input_saved``; calling again with the same
        messages (same ids) is safe (see the module docstring).
        """
        turn = cls(
            thread, engine=engine, store=store, contexts=contexts, model=model, background=background,
            max_wait=max_wait, forgets=forgets,
        )
        turn._own_ids = set()  # begun here: it knows the messages it stores
        try:
            await turn._begin(messages, thread, engine)
        except BaseException:
            turn._close_forgets()  # the caller has no turn to end
            raise
        return turn

    async def _begin(self, messages: Sequence[Message | dict[str, Any]], thread: Thread, engine: Engine) -> None:
        turn = self
        async with turn._traced("begin_turn") as span, turn._boundary("begin_turn"):
            # The window as it stood before the input: it checks the input's tool sequence, and
            # with the input added it is the boundary's first read (one store call for both).
            # (A window too long to keep: its newest messages only, and the check reads the tail.)
            before, whole = await engine.first_window(thread)
            saved = await turn._save(
                parse_messages(messages, "messages"), before=before[1] if whole else None, early=True,
                close_calls=True,
            )
            span.set("obsmem.messages", len(saved))
            stored: Window | None = turn._saved_window
            record, unobserved = before
            known = max((m.seq or 0 for m in unobserved), default=record.cursor(thread.id) if record else 0)
            # its history: what was stored before its new input (an edited old message keeps its seq)
            added = [m.seq for m in saved if m.seq is not None and m.seq > known]
            turn._history_seq = min(added) - 1 if added else known
            if stored is None and whole and not turn._window_stale and turn._view_newest <= known:
                stored = _extended(before, saved)  # the first read, with the input
            # (unless the save's marks said another writer changed the window since, or its check
            # saw messages the first read did not: read again)
            turn.context = await turn._advance(saved, turn_start=True, stored=stored)
            await turn._committed()

    @classmethod
    async def resume(
        cls, thread: Thread, *, engine: Engine, store: Store, contexts: TurnContexts, model: str | None = None,
        background: BackgroundWork | None = None, max_wait: float | None = None, since_seq: int | None = None,
        forgets: ForgetsInFlight | None = None,
    ) -> Turn:
        """Continue a turn begun elsewhere (another process or server replica): its state is
        rebuilt from the store, so ``step`` and ``end`` work as on the turn that began it. The
        context is the thread's current one. Nothing is saved and no memory work runs here.

        ``since_seq``: the seq of the turn's first message (:attr:`began_seq` where it began).
        The turn's question is then its first user message that says something, and its own
        calls are those still waiting among its messages up to the next turn's input (a user
        message that says something): a call another turn of the thread (another tab) made
        since is that turn's, left out of this turn's contexts while it runs. Without it, the
        question is the thread's newest user message (among its last 64 messages) and every
        call waiting now is the turn's own (one turn of the thread at a time).

        ``forgets``: a forget in this process from now on is applied to what the turn saves (one
        between its start elsewhere and this call is not: see :class:`ForgetsInFlight`)."""
        turn = cls(
            thread, engine=engine, store=store, contexts=contexts, model=model, background=background,
            max_wait=max_wait, forgets=forgets,
        )
        try:
            await turn._resume(since_seq)
        except BaseException:
            turn._close_forgets()  # the caller has no turn to end
            raise
        return turn

    async def _resume(self, since_seq: int | None) -> None:
        turn, thread, store, contexts = self, self.thread, self._store, self._contexts
        recent = (await store.list_messages(thread.id, limit=RESUME_WINDOW, newest_first=True))[::-1]
        turn._seen_seq = (recent[-1].seq or 0) if recent else 0
        waiting = pending_tool_call_ids(recent)
        turn._own_calls = waiting  # the calls the turn's model made
        caller = _waiting_calls(recent)[0]
        turn._own_callers = set() if caller is None else {caller.id}
        turn._began_seq = turn._seen_seq  # calls made after this are another turn's
        turn._input_user = next((m for m in reversed(recent) if is_input(m)), None)
        if since_seq is not None and recent:
            since = max(since_seq, 1)
            turn._since = since
            mine = [m for m in recent if (m.seq or 0) >= since]
            if not mine or (mine[0].seq or 0) > since:  # the turn is longer than the window: read its start
                mine = await store.list_messages(thread.id, after_seq=since - 1, limit=RESUME_WINDOW)
            question = next((m for m in mine if is_input(m)), None)
            if question is not None:
                nxt = next((m for m in mine if (m.seq or 0) > (question.seq or 0) and is_input(m)), None)
                until = (nxt.seq or 0) if nxt is not None else None
                # (the turn's start from ``mine``: a turn longer than the window began before ``recent``)
                made = [
                    m for m in {m.id: m for m in (*mine, *recent)}.values()
                    if m.tool_calls and (m.seq or 0) >= since and (until is None or (m.seq or 0) < until)
                ]
                # (those closed since too: their late results are the turn's, after its own calls)
                turn._own_calls = {c.tool_call_id for m in made for c in m.tool_calls}
                # a waiting call made outside the turn is another's (the same ids perhaps)
                turn._own_callers = {m.id for m in made}
                turn._began_seq = since - 1  # what others made since the turn began is theirs
                turn._input_user = question
        turn.context = turn._without_others_waiting(turn._with_input(await contexts.context_for(thread)))

    @property
    def began_seq(self) -> int | None:
        """The seq of the first message this turn saved (its input), None before it saved one:
        what :meth:`~obsmem.memory.Memory.resume_turn` takes (``since_seq``) to continue this turn
        elsewhere, knowing its own tool calls from those of other turns of the thread."""
        return self._since

    @property
    def waited(self) -> bool:
        """Whether this turn waited on a memory model call (sync observation or reflection), or
        on memory work until its bound."""
        return self.waited_out > 0 or any(outcome.waited for outcome in self.outcomes)

    async def step(self, responses: Sequence[Message | dict[str, Any]]) -> ContextWindow:
        """Record the model's response (and any tool results) and return the next context.

        While the newest message holds a tool call still waiting for its result, no
        observation runs: the call and its result must be observed together. What is passed
        here stays raw in the context this step returns (the actor has not seen it yet).

        Raises :class:`~obsmem.errors.InvalidInputError`, before anything is saved, for a tool
        result whose call is not waiting (never made, or already answered) and for any message
        between a tool call and its result. obsmem's own context messages passed back (a
        common "save what I sent" pattern) are dropped, never stored. Another turn of the
        thread running at the same time is no reason to refuse: its waiting calls are closed as
        unanswered, and its messages saved meanwhile are checked against (see
        :meth:`_checked_save`).

        Any other failure raises an ObsmemError with ``input_saved`` and leaves the turn as it
        was: call ``step`` again with the same messages (same ids) to retry; they are stored
        once and stay raw in the context the retry returns.
        """
        parsed = parse_messages(responses, "responses")
        if self.ended:
            raise InvalidInputError("This turn has ended; start a new one with memory.begin_turn(...).")
        async with self._traced("step") as span, self._boundary("step"):
            await self._same_thread()
            saved = await self._save(parsed, "responses", early=True)
            span.set("obsmem.messages", len(saved))
            context = await self._advance(saved, stored=self._saved_window)
            await self._committed()
        self.steps += 1
        self.context = context
        return self.context

    async def end(self, responses: Sequence[Message | dict[str, Any]] = ()) -> None:
        """Close the turn, saving any final messages. Idempotent. Memory work those messages make
        due starts here, in the background (see :meth:`_work_after_end`): ``end`` does not wait
        for it unless the memory has no wait bound (``max_turn_wait=None``)."""
        parsed = parse_messages(responses, "responses")
        if self.ended:
            return
        async with self._traced("end") as span:
            if parsed:
                async with self._boundary("end"):
                    await self._same_thread()
                    await self._engine.core.counter.warm(parsed)  # a long answer counted in a thread, as a step's
                    saved = await self._save(parsed, "responses")
                    span.set("obsmem.messages", len(saved))
                    await self._work_after_end(saved)
            self.ended = True
            self._close_forgets()
            if self.waited:
                telemetry.record_turn_waited()
            buffered = self._engine.buffered
            if buffered is not None and self._engine.config.observation.buffer_on_idle:
                await buffered.maybe_start_buffer(self.thread, idle=True)

    async def _work_after_end(self, saved: list[Message]) -> None:
        """The memory work due once the turn's last messages are stored (a large tool result
        answered in ``end``, say) runs now, not at the next boundary: that boundary, or a
        ``get_context`` meanwhile, would otherwise find the window past its threshold. With a wait
        bound it is queued in the background under the turn's key, after the turn's work still
        running there (the next boundary of the thread waits for it as for any turn work, within
        its own bound) and ``end`` does not wait; without one it runs here. A quiet end (nothing
        due, known from the save's window without a read) starts nothing; the actor has seen
        everything, so nothing stays unseen."""
        engine, thread, model = self._engine, self.thread, self.model
        if not saved or pending_tool_call_ids(saved[-1:]):
            return  # a call waiting for its result is observed with it, later
        stored = self._saved_window
        if stored is not None:
            quiet = await engine.quiet_step(thread, actor_model=model, stored=stored)
            if quiet is not None:
                quiet.taken()
                return

        async def work() -> StepResult:
            return await engine.advance(thread, actor_model=model)

        if self._background is None or self._wait_left is None:
            self.outcomes.extend((await work()).outcomes)
        else:
            self._background.queue(work_key(thread.id), work)

    def _close_forgets(self) -> None:
        """The turn is closed: the values forgotten while it was open need not be kept for it."""
        forgets, self._forgets = self._forgets, None
        if forgets is not None:
            forgets.closed(self._forget_mark)

    async def __aenter__(self) -> Turn:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.end()

    @asynccontextmanager
    async def _traced(self, call: str) -> AsyncIterator[telemetry.Span]:
        """The boundary's span (``obsmem.<call>``) and its overhead and wait metrics."""
        if not telemetry.recording():
            yield telemetry.span(call)
            return
        self._wait_s = 0.0
        began = time.perf_counter()
        attributes = {**telemetry.ids(self.thread.id, self.thread.resource_id), "obsmem.step": self.steps}
        with telemetry.span(f"obsmem.{call}", attributes) as span:
            outcomes = len(self.outcomes)
            try:
                yield span
            finally:
                new = self.outcomes[outcomes:]
                span.update({
                    "obsmem.outcomes": len(new),
                    "obsmem.applied": sum(1 for outcome in new if outcome.applied),
                    "obsmem.waited": self._wait_s > 0 or any(outcome.waited for outcome in new),
                    "obsmem.wait_s": round(self._wait_s, 6),
                    "obsmem.trimmed": self.trimmed,
                })
                telemetry.record_boundary(call, time.perf_counter() - began, self._wait_s)

    @asynccontextmanager
    async def _boundary(self, call: str) -> AsyncIterator[None]:
        """Run one boundary; a failure says whether its input was stored (``input_saved``)."""
        self._input_saved = False
        try:
            yield
        except BaseException as exc:
            await self._settle()  # the save's commit, if still on its way: it says whether the input is stored
            if not isinstance(exc, Exception):
                raise
            if not isinstance(exc, ObsmemError):
                self._context_current = self._context_current and not self._input_saved
                error = StorageError(f"{call} failed: {type(exc).__name__}: {exc}")
                raise _annotated(error, call, saved=self._input_saved) from exc
            self._context_current = self._context_current and not self._input_saved
            _annotated(exc, call, saved=self._input_saved)
            raise

    async def _same_thread(self) -> None:
        """Raise :class:`~obsmem.errors.ThreadNotFoundError` when the thread is no longer the one
        this turn began on: deleted (by another process, a web worker, the user erasing the
        chat), or deleted and a new conversation begun under its id since (another created_at,
        resource or org). Nothing of this turn may go there: its answer saved into the new
        conversation, its question (deleted) shown to the model again in its next context. One
        read of the thread's row, before anything is saved."""
        began = self.thread
        current = await self._store.get_thread(began.id)
        # (A forget while the model answered noted the messages it changed: a copy of one given
        # to this boundary is not saved; see _save.)
        self._forgotten = None if current is None else forgotten_ids(current)
        if current is None or (current.created_at, current.resource_id, current.org_id) != (
            began.created_at, began.resource_id, began.org_id
        ):
            raise ThreadNotFoundError(
                began.id,
                f"Thread '{began.id}' was deleted since this turn began"
                + ("" if current is None else ", and a new conversation began under its id")
                + ": nothing of this turn was saved. Begin a new turn.",
            )

    async def _committed(self) -> None:
        """Wait for the boundary's save to be stored (see :meth:`_save`); raises its error."""
        commit, self._commit = self._commit, None
        if commit is not None:
            await commit()
            self._input_saved = True

    async def _settle(self) -> None:
        """:meth:`_committed` on a failed boundary's way out: its error was the boundary's own, or
        the save failed and ``input_saved`` stays False."""
        try:
            await self._committed()
        except Exception:  # noqa: S110 - the boundary's own error is the one raised (a cancellation is not swallowed)
            pass

    async def _save(
        self, messages: list[Message], argument: str = "messages", *, before: Sequence[Message] | None = None,
        early: bool = False, close_calls: bool = False,
    ) -> list[Message]:
        """Save a boundary's input; return it as stored (with seqs), the messages the actor has
        not seen yet. Copies of stored messages are not saved again: sending the context back
        must neither re-order the input nor strip stored markers. Copies a failed boundary of
        this turn saved (newer than anything the last completed boundary knew of) are input all
        the same, and so is a batch of nothing but copies (a retried ``begin_turn``) for the
        instructions it carries. ``before``: the thread's unobserved messages as stored just now,
        a tail for the input check when they hold a boundary message (else the store is read).

        ``early``: return once the messages are written, before they are durable; the caller
        then awaits :meth:`_committed` before anything is written or observed from them (what
        only reads them, building a context, may run meanwhile: the disk syncs as it does).

        ``close_calls`` (a turn's start): tool calls still waiting when the input says something
        are closed first, each answered as unanswered (see the engine's ``check_input``); later
        boundaries close only the calls of other turns of the thread (see :meth:`_checked_save`)."""
        messages = drop_obsmem_messages(messages)  # obsmem's own context messages, sent back: never stored
        messages = await self._engine.core.input_markers_checked(self.thread.id, messages)  # markers: obsmem's
        changed: list[str] = []
        if self._forgets is not None and self._forgets.seq != self._forget_mark:
            # A forget of the thread began while the turn was open (the model answering): what the
            # turn saves now is saved with it applied, else the answer would bring the value back.
            messages, changed = self._forgets.apply(self._forget_mark, self.thread, messages)
        copies: list[Message] = []
        # "Save what I sent": copies of stored messages are not new input (one message alone is
        # re-saved as it is, saving a read, unless a failed boundary may have stored it already).
        sent = [m.id for m in messages]  # the call's order, for its instructions
        listed = forgotten_ids(self.thread) if self._forgotten is None else self._forgotten
        # (a thread past the row's list of them: its store's table, for these ids only)
        forgotten = await forgotten_among(self._store, self.thread.id, listed, [m.id for m in messages])
        if close_calls and messages and messages[-1].id in forgotten and is_input(messages[-1]):
            # A copy of a forgotten message is never stored again: as the turn's newest input it
            # would be dropped and the model answer a turn without its question.
            raise InvalidInputError(
                f"Message '{messages[-1].id}' has the id of a message forget deleted or rewrote in this "
                "thread, and what is said under that id is not stored again: give a new message a new id.",
                argument=argument,
            )
        if len(messages) > 1 or (messages and not self._context_current) or any(m.id in forgotten for m in messages):
            messages, copies = await self._split_copies(messages, forgotten)
        self._copied_input = None
        if self._own_ids is not None:  # (given again, or sent back: this turn's, or history)
            self._own_ids.update(m.id for m in copies)
        if close_calls and not any(is_input(m) for m in messages):
            # Given again, the newest question is the turn's only while still unanswered: the
            # thread's newest message (one row read, on this path only).
            asked = next((m for m in reversed(copies) if is_input(m)), None)
            if asked is not None:
                newest = await self._store.list_messages(self.thread.id, limit=1, newest_first=True)
                self._copied_input = asked if newest and newest[0].id == asked.id else None
        saved: list[Message] = []
        self._saved_window = None
        self._window_stale = False
        if messages:
            done = await self._checked_save(messages, argument=argument, before=before, begins=close_calls)
            if done is None:
                messages = []  # a late result took its unanswered place: nothing new stored
                self._window_stale = True  # but the closing message was rewritten: a window read before is stale
            else:
                # A save that had to read the thread again (another turn wrote a tool message since
                # the view it began from) makes that view stale, whatever the store could tell.
                saved, self._saved_window, self._commit, self._window_stale = (
                    done.messages, done.window, done.commit, done.stale or self._reread
                )
                self._own_calls.update(c.tool_call_id for m in saved for c in m.tool_calls)
                self._own_callers.update(m.id for m in saved if m.tool_calls)
                if self._own_ids is not None:
                    self._own_ids.update(m.id for m in saved)
                if close_calls and self._began_seq is None and saved:
                    self._began_seq = min(m.seq or 0 for m in saved)
                    self._since = self._began_seq
        if not early:
            await self._committed()
        if changed and self._forgets is not None:  # (saved with the value forgotten, or left empty: not saved)
            await self._committed()  # noted once stored, as a forget notes what it rewrote
            await self._forgets.note(self.thread, changed)
        self._input_saved = self._commit is None
        seen = self._seen_seq
        unseen = [] if seen is None else [m for m in copies if (m.seq or 0) > seen]
        fresh = sorted([*saved, *unseen], key=lambda m: m.seq or 0)
        # A retry re-records the instructions its failed call may not have; the record is
        # compare-and-set by seq, so an older call's instructions never replace newer ones.
        instructions = fresh if messages or seen is not None else copies
        if messages and any(m.role == "system" for m in copies):
            # System messages sent again (copies) with new input are this call's instructions
            # too, in the order sent: a framework keeps every system message of its state.
            known = {m.id for m in instructions}
            place = {id_: index for index, id_ in enumerate(sent)}
            instructions = sorted(
                [*instructions, *(m for m in copies if m.role == "system" and m.id not in known)],
                key=lambda m: place.get(m.id, len(place)),
            )
        if self._commit is not None and any(m.role == "system" for m in instructions):
            await self._committed()  # recording them writes: only what is stored
        self.thread = await remember_instructions(self._store, self.thread, instructions)
        return fresh

    async def _checked_save(
        self, messages: list[Message], *, argument: str, before: Sequence[Message] | None, begins: bool
    ) -> Saved | None:
        """Check the place of ``messages`` in the thread, then save them there; None when
        nothing was left to save (a late result took its unanswered place instead).

        The check runs against the last context's raw tail (what the actor saw; a waiting call
        is never observed away) when it is current, else against ``before`` (the thread's
        unobserved messages as stored just now) when they hold a boundary message, else against
        the store's tail. The save is guarded by the newest seq that view knew of (the store's
        ordering guard): when another turn of the thread (a task, a process, a replica) wrote
        since, nothing is saved and the check runs again against the store's tail, so no message
        ever lands between a tool call and its result. Calls another turn left waiting are
        closed as unanswered when this turn goes on (``begins``: a new turn closes every waiting
        call); their real results take that answer's place (:meth:`_answer_late`). This turn's
        own calls are its model's to answer: a message before their results is refused.

        Turns of this process saving in one thread take turns here (:func:`_saving`): not for
        safety (the store's guard is that, across processes too) but so that two of them with no
        model call between their saves do not keep beating each other's retries.
        """
        thread = self.thread
        view: tuple[Sequence[Message], int] | None = None
        if self.context.messages and not self.context.trimmed and self._context_current and self._seen_seq is not None:
            cut = self._cut_from
            view = (cut[1] if cut is not None and cut[0] is self.context else self.context.raw_messages, self._seen_seq)
        elif (tail := _tail_of(before)) is not None:
            assert before is not None
            view = (tail, max(m.seq or 0 for m in before))
        keep = () if begins else self._own_calls | {c.tool_call_id for m in messages for c in m.tool_calls}
        deadline = time.monotonic() + LATE_LEASE_WAIT_S
        pause = SAVE_BACKOFF_S
        while True:
            async with _saving(self._store, thread.id):
                try:
                    return await self._check_and_save(messages, argument=argument, view=view, keep=keep)
                except _LeaseBusy:
                    pass  # nothing saved: wait for the lease outside the lock, then check again
            # Another writer holds the thread's late-result lease (see _answer_late). The other
            # turns of this thread in this process save meanwhile: the wait is this step's alone.
            if time.monotonic() >= deadline:
                raise StorageError(
                    f"Another writer of thread '{thread.id}' kept its tool results' lease for "
                    f"{LATE_LEASE_WAIT_S:g} s; nothing was saved: retry the step."
                )
            await asyncio.sleep(random.uniform(pause / 2, pause))
            pause = min(pause * 2, SAVE_BACKOFF_MAX_S)
            view = None  # the thread changed meanwhile, perhaps: check against the store's tail

    async def _check_and_save(
        self, messages: list[Message], *, argument: str, view: tuple[Sequence[Message], int] | None,
        keep: Collection[str],
    ) -> Saved | None:
        """:meth:`_checked_save`'s tries: check against ``view`` (else the store's tail), save
        guarded by its newest seq, and on ``ThreadChangedError`` read the tail and try again."""
        engine, thread = self._engine, self.thread
        self._reread, self._view_newest = False, 0
        for attempt in range(SAVE_ATTEMPTS):
            tail, newest = view if view is not None else await engine.stored_tail(thread)
            self._reread = self._reread or (view is None and attempt > 0)
            view = None  # a retry reads the store
            others = self._others_waiting(tail)
            late = others & self._own_calls - {c.tool_call_id for m in messages for c in m.tool_calls}
            if any(r.tool_call_id in late for m in messages for r in m.tool_results):
                # Another turn's call waits under the id of one of this turn's calls, closed when
                # that turn went on: this turn's result is that closed call's, not the other's.
                messages = await self._answer_late(messages)
                self._reread = True
                tail, newest = await engine.stored_tail(thread)
                others = self._others_waiting(tail)
            try:
                checked = await engine.check_input(
                    thread, messages, tail=tail, argument=argument, close_calls=True, keep=set(keep) - others
                )
            except InvalidInputError:
                # A result refused as "already answered" may be an approval given after a new turn
                # (or another turn of the thread) closed its call as unanswered: it takes that
                # answer's place instead.
                messages = await self._answer_late(messages)
                self._reread = True
                tail, newest = await engine.stored_tail(thread)
                checked = await engine.check_input(
                    thread, messages, tail=tail, argument=argument, close_calls=True,
                    keep=set(keep) - self._others_waiting(tail),
                )
            if not checked:
                return None
            try:
                done = await engine.core.save_messages(thread, self._with_receipt(checked), after_seq=newest)
                self._view_newest = newest
                return done
            except ThreadChangedError:
                if attempt + 1 == SAVE_ATTEMPTS:
                    raise
                # Two writers keeping step (two turns with no model call between their saves) would
                # each lose the race to the other again: a short random wait breaks the step.
                await asyncio.sleep(random.uniform(0, min(SAVE_BACKOFF_S * 2**attempt, SAVE_BACKOFF_MAX_S)))  # noqa: S311
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _others_waiting(self, tail: Sequence[Message]) -> set[str]:
        """The calls waiting at the end of ``tail`` that another turn of the thread made (their
        message is not one of this turn's): closed at this turn's next boundary whatever their ids,
        and no result of this turn's answers them."""
        caller, waiting = _waiting_calls(tail)
        return set() if caller is None or caller.id in self._own_callers else waiting

    async def _answer_late(self, messages: list[Message]) -> list[Message]:
        """``messages`` without the real results of calls that a closing message of the thread
        answered as unanswered (:func:`~obsmem.om.selection.answer_late`): each is saved in its
        unanswered part's place (the closing message re-saved by id), so the result stays right
        after its call. Looks among the thread's newest :data:`LATE_RESULT_WINDOW` messages;
        raises nothing itself (the check that follows refuses what is still out of place)."""
        if not any(m.tool_results for m in messages):
            return messages
        recent = await self._store.list_messages(self.thread.id, limit=LATE_RESULT_WINDOW, newest_first=True)
        kept, closings = answer_late(recent[::-1], messages, callers=self._own_callers)
        if not closings:
            return kept  # the common case: every result follows its call
        # Rewriting a closing message is a read-modify-write of one row: two results for calls
        # of the same closing message, saved at once (two replicas, two tasks), would each
        # rewrite it from the same read and the second would put the first's "no result" back.
        # So it runs under the thread's late-result lease, reading the row again inside it.
        # The lease does not hold off a forget (of this process or another), which rewrites the
        # closing message too: each is rewritten compare-and-set against the copy read here, so a
        # forget landing between the read and the write is not undone (its value written back);
        # then it is read and rebuilt again (a result already in place is not placed twice).
        async with self._late_result_lease():
            for _ in range(LATE_REWRITE_ATTEMPTS):
                recent = await self._store.list_messages(self.thread.id, limit=LATE_RESULT_WINDOW, newest_first=True)
                kept, closings = answer_late(recent[::-1], messages, callers=self._own_callers)
                read = {m.id: m for m in recent}
                written = [await rewrite_message_if_unchanged(self._store, c, expected=read[c.id]) for c in closings]
                if any(written):
                    self._input_saved = True  # (some of) the input is stored: a failure after this says so
                if all(written):
                    return kept
        raise StorageError(
            f"Putting late tool results in place in thread '{self.thread.id}' kept racing with a forget; "
            "retry the step."
        )

    @asynccontextmanager
    async def _late_result_lease(self) -> AsyncIterator[None]:
        """Hold the store lease that orders the rewrites of this thread's closing messages (see
        :meth:`_answer_late`); :class:`_LeaseBusy` (nothing done) when another holder has it:
        :meth:`_checked_save` waits for it outside the process's save lock of the thread, at most
        :data:`LATE_LEASE_WAIT_S` (a holder that died frees it when it expires, after
        :data:`LATE_LEASE_TTL_S`). Renewed while held (a save slower than the TTL keeps it); a
        cancelled step leaves none behind: an acquire still on its way is released when it lands,
        and the release itself runs to its end whatever cancels the step."""
        store, clock = self._store, self._engine.core.clock
        # A lineage lease of the thread (deleting the thread releases it too).
        key = leasing.lineage_lease(leasing.LATE_RESULTS, lineage_key("thread", self.thread.id, ""))
        owner = f"turn:{uuid.uuid4().hex}"
        if not await leasing.acquired(store, key, owner, ttl_s=LATE_LEASE_TTL_S, clock=clock):
            raise _LeaseBusy()
        async with leasing.holding(store, key, owner, ttl_s=LATE_LEASE_TTL_S, clock=clock):
            yield

    def _with_receipt(self, messages: list[Message]) -> list[Message]:
        """The assistant messages among ``messages`` carry the receipt of the context the turn last
        handed the actor (what they were made from), under ``metadata["obsmem_receipt"]``."""
        receipt = self.context.receipt
        if receipt is None or not self.context.messages:
            return messages
        data = receipt.data()
        return [
            m.model_copy(update={"metadata": {**m.metadata, RECEIPT_KEY: data}})
            if m.role == "assistant" and RECEIPT_KEY not in m.metadata
            else m
            for m in messages
        ]

    async def _split_copies(
        self, messages: list[Message], forgotten: frozenset[str] = frozenset()
    ) -> tuple[list[Message], list[Message]]:
        """``messages`` split into those to save, and the copies of messages already stored in
        this thread with the same role and visible parts (as stored, in seq order). A message
        with the id of one a forget rewrote or deleted (``forgotten``: an app saving back the
        conversation as it held it) is neither: the stored one stands as a copy, a deleted one
        stays deleted (saving it would bring the forgotten value back)."""
        stored = {m.id: m for m in await self._store.get_messages([m.id for m in messages])}

        def mine(message: Message) -> bool:
            old = stored.get(message.id)
            return old is not None and old.thread_id == self.thread.id

        def same(message: Message) -> bool:
            old = stored[message.id]
            return old.role == message.role and _visible(old) == _visible(message)

        copies = {m.id: stored[m.id] for m in messages if mine(m) and (m.id in forgotten or same(m))}
        kept = [m for m in messages if m.id not in copies and m.id not in forgotten]
        return kept, sorted(copies.values(), key=lambda m: m.seq or 0)

    async def _advance(self, saved: list[Message], *, turn_start: bool = False, stored: Window | None = None) -> ContextWindow:
        """Run the memory work due now and return the context built from the state it left; the
        turn's input stays in view (see :meth:`_with_input`). ``stored``: the record and the
        unobserved messages as stored, with ``saved`` (read by the caller), else read here."""
        if turn_start:
            # The turn's question: the newest it saved, else the newest it was given again (a
            # retried begin_turn), which memory work may have observed since the first try.
            users = [m for m in saved if is_input(m)]
            self._input_user = users[-1] if users else self._copied_input
        context = await self._advance_inner(saved, turn_start=turn_start, stored=stored)
        context = self._with_input(self._with_unseen(context, saved))
        if turn_start:
            context = self._without_others_since(context)
        return self._without_others_waiting(context)

    def _without_others_since(self, context: ContextWindow) -> ContextWindow:
        """The context ``begin_turn`` gives, without what other writers of the thread stored
        after this turn's input meanwhile (another tab, another client of the gateway on the same
        thread: two requests at once): their questions and answers are theirs, and the model of
        this turn must answer this turn's question, the newest of its context. They are in this
        turn's step contexts and in the turns that follow. Kept:
        results for this turn's own calls, whoever stored them; left out with another's call, the
        results that answer it (an "unanswered" this turn stored for it). Only for a turn begun here
        (one resumed from the store does not know its earlier steps' messages)."""
        own, began = self._own_ids, self._history_seq
        raw = context.raw_messages
        if own is None or began is None or not raw:
            return context

        def others(m: Message) -> bool:
            if m.seq is None or m.seq <= began or m.id in own:
                return False
            results = m.tool_results
            return not (m.role == "tool" and results and all(r.tool_call_id in self._own_calls for r in results))

        dropped: set[str] = set()
        gone_calls: set[str] = set()  # the calls of what is left out: their results go with them
        for m in raw:
            results = m.tool_results
            if others(m) or (results and all(r.tool_call_id in gone_calls for r in results)):
                dropped.add(m.id)
                gone_calls.update(c.tool_call_id for c in m.tool_calls)
        if not dropped:
            return context
        shown = [m for m in context.messages if m.id not in dropped]
        kept = [m for m in raw if m.id not in dropped]
        counter = self._engine.core.counter
        receipt = context.receipt.revised(shown, kept, counter=counter) if context.receipt else None
        cut = dataclasses.replace(context, messages=shown, raw_messages=kept, receipt=receipt)
        self._cut_from = (cut, raw)  # the input check of the next boundary checks against the whole tail
        return cut

    def _without_others_waiting(self, context: ContextWindow) -> ContextWindow:
        """``context`` without the tool calls another turn of the thread, running at the same
        time, left waiting at its end since this turn began (and the results of theirs already
        in): that turn is still running them, and a call with no result is refused by every
        provider. They come back in this turn's later contexts
        once answered, or closed as unanswered by this turn's next save."""
        raw, began = context.raw_messages, self._began_seq
        if began is None or not raw or not raw[-1].tool_calls and raw[-1].role != "tool":
            return context  # the common end: a message with no call, nothing waits
        caller = _waiting_calls(raw)[0]
        # Only calls made since this turn began: one waiting from before it (an approval asked
        # in an earlier turn) is this turn's to answer, and stays in view.
        if caller is None or caller.id in self._own_callers or (caller.seq or 0) <= began:
            return context
        at = next(i for i, m in enumerate(raw) if m.id == caller.id)
        dropped = {m.id for m in raw[at:]}
        shown = [m for m in context.messages if m.id not in dropped]
        kept = list(raw[:at])
        counter = self._engine.core.counter
        receipt = context.receipt.revised(shown, kept, counter=counter) if context.receipt else None
        cut = dataclasses.replace(context, messages=shown, raw_messages=kept, receipt=receipt)
        # the input check of the next boundary needs the calls left out (and what the cut of
        # other writers' messages left out before this one: its whole tail)
        before = self._cut_from
        self._cut_from = (cut, before[1] if before is not None and before[0] is context else raw)
        return cut

    def _with_unseen(self, context: ContextWindow, saved: Sequence[Message]) -> ContextWindow:
        """``context`` with the messages this boundary saved in front of its raw tail when they
        are not in it, whatever their size: another writer of the thread (a process running a
        turn at the same time) observed them after they were stored, and the model has not seen
        them yet. This process's own memory work never observes them at their boundary. A
        context a port built its own way (no receipt) is left as it is."""
        if context.receipt is None or not saved:
            return context
        ids = {m.id for m in context.messages}
        missing = [
            shown for m in saved if m.role != "system" and m.id not in ids and (shown := model_visible(m)) is not None
        ]
        if not missing:
            return context
        if any(m.tool_results for m in missing):
            # A result whose call an earlier step saved: the call went with it, so the step before's
            # context (which showed the call) gives it back, and what followed it there.
            present = {m.id for m in missing} | ids
            earlier = [m for m in self.context.raw_messages if m.id not in present]
            needed = {r.tool_call_id for m in missing for r in m.tool_results}
            start = next((i for i, m in enumerate(earlier) if any(c.tool_call_id in needed for c in m.tool_calls)), None)
            if start is not None:
                missing = [*earlier[start:], *missing]
        missing = _whole_pairs(missing, context.messages)
        return self._in_front_of_raw(context, missing) if missing else context

    def _in_front_of_raw(self, context: ContextWindow, messages: list[Message]) -> ContextWindow:
        """``context`` with ``messages`` placed before its raw tail (its receipt revised)."""
        at = len(context.messages) - len(context.raw_messages)
        shown = [*context.messages[:at], *messages, *context.messages[at:]]
        raw = [*messages, *context.raw_messages]
        counter = self._engine.core.counter
        receipt = context.receipt.revised(shown, raw, counter=counter) if context.receipt else None
        return dataclasses.replace(context, messages=shown, raw_messages=raw, receipt=receipt)

    def _with_input(self, context: ContextWindow) -> ContextWindow:
        """``context`` with the turn's newest user message in front of the raw tail when a later
        step observed it: in a tool loop the model still reads the question it is answering
        (the observation keeps it too; the cursor does not move back). Whether or not the context
        holds observations: an observation may have written nothing for it (an observer that
        found nothing to note, a new thread's first cycle). Not for an input above a tenth of
        ``message_tokens`` (a pasted log): its observation stands in for it there."""
        user = self._input_user
        if user is None or any(m.id == user.id for m in context.messages):  # (a port may leave raw_messages empty)
            return context
        core = self._engine.core
        if core.counter.count_message(user) > core.config.observation.message_tokens // 10:
            return context  # a pasted log: its observation stands in for it (the window stays bounded)
        shown = model_visible(user)
        return context if shown is None else self._in_front_of_raw(context, [shown])

    async def _advance_inner(
        self, saved: list[Message], *, turn_start: bool = False, stored: Window | None = None
    ) -> ContextWindow:
        engine = self._engine
        speculative: _Speculative | None = None
        quiet: Quiet | None = None
        await engine.core.counter.warm(saved)  # a pasted megabyte counted in a thread: every count below is a lookup
        key = work_key(self.thread.id)
        stalled: CycleOutcome | None = None
        if (
            self._background is not None and self._wait_left is not None and not self._background.running(key)
            and not (saved and pending_tool_call_ids(saved[-1:]))
        ):
            # The observer backs off and nothing else is due: no memory work this boundary (it
            # would only read and count the window to skip the model call); the context is the
            # window cut as when memory is behind (below).
            stalled = await engine.stalled(self.thread, stored, actor_model=self.model if turn_start else None)
        if self._commit is not None and stalled is not None:
            await self._committed()
        elif self._commit is not None:
            # The save is still reaching the disk: build the context a quiet boundary returns
            # meanwhile (it only reads), and tell whether the boundary is quiet (that only
            # decides); then wait for the commit before any memory work.
            speculative = await self._speculate(saved, stored)
            decides_inline = self._background is not None and self._wait_left is not None  # see below
            if speculative is not None and stored is not None and decides_inline:
                quiet = await engine.quiet_step(
                    self.thread, turn_start=turn_start, actor_model=self.model, fresh=saved, stored=stored
                )
            await self._committed()
        if saved and pending_tool_call_ids(saved[-1:]):
            # The call and its result must be observed together; only buffering of the safe
            # prefix before the call may start.
            if engine.buffered is not None:
                await engine.buffered.maybe_start_buffer(self.thread, idle=False)
            if stored is not None and engine.buffered is None:
                context = await self._contexts.context_from(self.thread, *stored)
            else:  # a buffer may have started: read what it left
                context = await self._contexts.context_for(self.thread)
            self._saw(saved, context.raw_messages)
            return context
        thread = self.thread

        prepared: Prepared | None = None

        async def work() -> StepResult:
            return await engine.advance(
                thread, turn_start=turn_start, actor_model=self.model, fresh=saved, prepared=prepared
            )

        result: StepResult | None = None
        if stalled is not None:
            self.outcomes.append(stalled)
        elif self._background is None or self._wait_left is None:
            began = time.perf_counter()
            result = await work()
            if any(outcome.waited for outcome in result.outcomes):
                self._wait_s += time.perf_counter() - began
        else:
            if quiet is not None and not self._background.running(key):
                quiet.taken()  # known quiet while the save committed: nothing to do
                result = quiet.result
            elif not self._background.running(key) and not (stored is None and engine.known_long(thread)):
                # Most boundaries are quiet (nothing in them can wait on a model): they run
                # inline, with no bound to keep and no task hand-off; the others go on from
                # that read. (Not a window too long to keep: its work reads it in the background.)
                inline = await engine.advance_if_quiet(
                    thread, turn_start=turn_start, actor_model=self.model, fresh=saved, stored=stored
                )
                result, prepared = (inline, None) if isinstance(inline, StepResult) else (None, inline)
            if result is None:
                result = await self._within(key, work)
                if result is None and prepared is not None and prepared.paused is not None:
                    self.outcomes.extend(prepared.paused.outcomes)  # done inline before the wait
        if result is not None:
            self.outcomes.extend(result.outcomes)
            self.trimmed = 0
            if result.others is None:
                if speculative is not None and speculative.holds(result):
                    context = speculative.context  # nothing changed the window: the same inputs
                else:
                    context = await self._contexts.context_from(thread, result.record, result.messages)
            else:  # resource scope, sharing on: the other threads the step read, reused
                context = await self._contexts.context_from(
                    thread, result.record, result.messages, others=result.others.shown
                )
            self._saw(saved, result.messages, result.record.cursor(thread.id))
            return context
        # The work goes on in the background: the actor sees what is stored, the raw window cut
        # to the engine's limit (memory is behind; what is left out stays pending). The window
        # kept by the engine is not read again while its mark holds (a window of thousands of
        # messages pending, a memory model failing for hours, is not decoded again each boundary);
        # of one too long to keep, only the newest messages the cut needs are read.
        record, unobserved, trim = await engine.behind_window(thread, keep=saved)
        self.trimmed = trim.trimmed
        context = await self._contexts.context_from(thread, record, trim.kept)
        self._saw(saved, unobserved, record.cursor(thread.id) if record is not None else 0)
        return dataclasses.replace(context, trimmed=trim.trimmed) if trim.trimmed else context

    async def _speculate(self, saved: list[Message], stored: Window | None) -> _Speculative | None:
        """The context built from ``stored`` (the window with what this boundary saved), for
        when memory work leaves the window as it is; None where that cannot be known now (no
        head yet, a call waiting for its result) or the memory does not build contexts ahead
        (``contexts.speculative_context`` missing or None)."""
        build = getattr(self._contexts, "speculative_context", None)
        if (
            build is None or stored is None or stored[0] is None or len(stored[1]) > SPECULATE_MAX_MESSAGES
            or (saved and pending_tool_call_ids(saved[-1:]))
        ):
            return None
        record, messages = stored[0], observable_messages(stored[1])
        try:
            context = await build(self.thread, record, messages)
        except Exception:  # built again after the memory work, where a real failure surfaces
            return None
        return None if context is None else _Speculative(record, messages, context)

    async def _within(self, key: str, work: Callable[[], Coroutine[Any, Any, StepResult]]) -> StepResult | None:
        """``work`` under what is left of the turn's wait bound; None when the bound ran out
        first (the work goes on in the background)."""
        assert self._background is not None and self._wait_left is not None
        waited = await self._background.within(key, work, self._wait_left)
        self._wait_left = max(0.0, self._wait_left - waited.waited_s)
        if waited.value is None or any(outcome.waited for outcome in waited.value.outcomes):
            self._wait_s += waited.waited_s  # it waited on a model call (or until its bound)
        if waited.done:
            return waited.value
        self.waited_out += 1
        self._engine.core.emit(
            "turn-wait-exceeded", self.thread.id, waited_s=round(waited.waited_s, 3), max_turn_wait=self.max_wait
        )
        return None

    def _saw(self, saved: Sequence[Message], unobserved: Sequence[Message], cursor: int = 0) -> None:
        """A boundary completed: note the newest seq of the thread it knew of."""
        seqs = [m.seq or 0 for m in (*saved, *unobserved)]
        self._seen_seq = max([self._seen_seq or 0, cursor, *seqs])
        self._context_current = True



def same_shown(stored: Message, given: Message) -> bool:
    """Whether ``given`` is ``stored`` given again: the same role and the same parts, obsmem's
    markers (data parts) aside."""
    def shown(message: Message) -> list[object]:
        return [p for p in message.parts if not isinstance(p, DataPart)]

    return stored.role == given.role and shown(stored) == shown(given)


async def retried_input(
    store: Store, thread_id: str, messages: Sequence[Message],
    same: Callable[[Message, Message], bool] = same_shown,
) -> list[Message] | None:
    """The thread's newest ``len(messages)`` messages, as stored, when they are ``messages``
    given again (``same``, in order) and nothing follows them: the input of an attempt that
    saved it and then failed (a model call that failed, a retried request), retried. Passed in
    their place (same ids), they are not stored again, and the model gets them once. None
    otherwise (or for a thread that does not exist yet): the same words after an answer are new
    messages. One read of ``len(messages)`` rows."""
    if not messages:
        return None
    try:
        tail = (await store.list_messages(thread_id, limit=len(messages), newest_first=True))[::-1]
    except ThreadNotFoundError:
        return None
    given = {m.id for m in messages}
    if len(tail) != len(messages) or any(
        old.id in given or not same(old, new) for old, new in zip(tail, messages, strict=True)
    ):
        return None
    return tail


def is_input(message: Message) -> bool:
    """Whether ``message`` is a turn's input: a user message that says or shows something."""
    return message.role == "user" and any(isinstance(p, TextPart | FilePart) for p in message.parts)


def _annotated(error: ObsmemError, call: str, *, saved: bool) -> ObsmemError:
    """``error`` saying whether the failed boundary's input was stored (``input_saved``)."""
    error.input_saved = saved
    if saved:
        note = (
            f"{call} failed after its input was saved; calling {call} again with the same Message objects "
            "(same ids) stores nothing twice."
        )
    else:
        note = f"{call} failed before its input was saved (a save that failed commits nothing or all of it)."
    error.add_note(note)
    return error


def input_not_saved(error: ObsmemError, call: str) -> ObsmemError:
    """``error`` (raised by ``call`` before it saved anything) saying so, as a turn boundary's do."""
    return _annotated(error, call, saved=False)


def _visible(message: Message) -> list[object]:
    """What a provider sees of a message: its parts without obsmem's data parts (markers)."""
    return [p for p in message.parts if not isinstance(p, DataPart)]


Window = tuple[ObservationRecord | None, list[Message]]


def _extended(before: Window, saved: Sequence[Message]) -> Window:
    """``before`` (a record and its thread's messages after the cursor, as stored) with the
    messages ``saved`` since, by seq; a message already in it (saved again with the same id: a
    retried boundary, or new content for it) appears once, as saved."""
    record, messages = before
    return (record, extended(messages, saved)) if saved else before


@dataclasses.dataclass(frozen=True, slots=True)
class _Speculative:
    """A context built ahead from a window (see :meth:`Turn._speculate`)."""

    record: ObservationRecord
    messages: list[Message]
    context: ContextWindow

    def holds(self, result: StepResult) -> bool:
        """Whether the step left exactly the window this context was built from."""
        return (
            result.record is self.record
            and len(result.messages) == len(self.messages)
            and all(a is b for a, b in zip(result.messages, self.messages, strict=True))
        )


def _whole_pairs(messages: Sequence[Message], context: Sequence[Message]) -> list[Message]:
    """``messages`` (to go in front of ``context``'s raw tail), or only those without tool parts
    when any of them would leave a tool call without its result or a result without its call
    there (every provider refuses those). What is left out was observed: its observation stands in."""
    calls = {c.tool_call_id for m in (*context, *messages) for c in m.tool_calls}
    results = {r.tool_call_id for m in (*context, *messages) for r in m.tool_results}
    if all(c.tool_call_id in results for m in messages for c in m.tool_calls) and all(
        r.tool_call_id in calls for m in messages for r in m.tool_results
    ):
        return list(messages)
    return [m for m in messages if not m.tool_calls and not m.tool_results]


def _waiting_calls(messages: Sequence[Message]) -> tuple[Message | None, set[str]]:
    """The message whose tool calls wait for results at the end of ``messages`` (the newest that
    says, shows or calls something: every earlier call was due before it) and those calls, or
    (None, empty) when none waits. Results count only after that message: ids are reused (a model
    server numbering each response's calls from call_0), so an older result of the same id
    answers an older call."""
    newest_first: list[Message] = []
    for message in reversed(messages):
        newest_first.extend(observable_messages([message]))
        if newest_first and is_boundary(newest_first[-1]):
            caller = newest_first[-1]
            answered = {r.tool_call_id for m in newest_first for r in m.tool_results}
            waiting = {c.tool_call_id for c in caller.tool_calls} - answered
            return (caller, waiting) if waiting else (None, set())
    return None, set()


def _tail_of(messages: Sequence[Message] | None) -> list[Message] | None:
    """``messages`` (the stored messages after the cursor) as the tail for the input check
    (:meth:`~obsmem.om.engine.Engine.check_input`) when they hold a boundary message; None
    (read the store) otherwise."""
    # All of them, not only the newest end: a message re-sent by id (an old tool result
    # shortened, say) is known by the whole window, and a refusal says "already answered".
    if not messages:
        return None
    observable = observable_messages(messages)
    return observable if any(is_boundary(m) for m in observable) else None


#: The locks of :func:`_saving`, while some turn holds or waits for one.
_SAVE_LOCKS: weakref.WeakValueDictionary[tuple[asyncio.AbstractEventLoop, int, str], asyncio.Lock] = (
    weakref.WeakValueDictionary()
)


class _LeaseBusy(Exception):
    """Another writer holds the thread's late-result lease: nothing was saved; wait, then check again."""


def _saving(store: Store, thread_id: str) -> asyncio.Lock:
    """The lock the turns of this event loop take to check and save in ``thread_id`` of
    ``store``, one at a time. Fairness only: a turn that lost the store's ordering guard to another
    turn of this process reads again and saves while that one waits, instead of losing to it
    again and again. Correctness never rests on it (other processes do not see it)."""
    key = (asyncio.get_running_loop(), id(store), thread_id)
    lock = _SAVE_LOCKS.get(key)
    if lock is None:
        lock = _SAVE_LOCKS[key] = asyncio.Lock()
    return lock

"""``recall``: from an observation group (or a message, or a search) back to the raw messages.

Three modes (reference §5.5):

* ``messages`` — with ``group_id``: exactly the messages the group covers, paged; with
  ``cursor`` (a message id): the conversation from that message, forward (``anchor="start"``)
  or backward (``anchor="end"``), paged; with only ``thread_id``: that thread from its start
  (or, with ``anchor="end"``, its latest messages).
  Every page is read from the store by ``seq`` from its anchor (the group's edge, the cursor),
  never the group's whole span: a page costs its own messages and one more (to tell whether
  another page follows), plus those it skips to reach ``page``, at most :data:`MAX_SKIPPED`.
  A page further than that is refused (or, where fewer messages lie that way, answered empty);
  the answer's ``next_page`` (a cursor at the next page's first message: its place in its
  thread, opaque to the model and bound to the caller, so reading on passes a message deleted
  meanwhile) reads on from any depth at the cost of one page. A page the token budget cut
  (``truncated``) shows the messages nearest its anchor, and its ``next_page`` is its
  ``continue_with``: it starts at the first message not shown, in the page's direction, so
  reading on with ``next_page`` skips nothing.
* ``threads`` — the conversations recall may read, oldest first, paged the same way: by key from
  ``cursor`` (the position ``next_page`` gives, after the page's last thread: opaque to the model,
  bound to the caller's listing; a thread id also starts a page there), so a page costs one page
  at any depth and a thread deleted between pages, even one at the page's edge, shifts no other;
  ``page`` skips at most :data:`MAX_SKIPPED` threads.
* ``search`` — vector search over the groups (``retrieval.vector``), best first.

**Scope is enforced here, on every answer, against the store** — not by trusting an id, a
namespace or a vector hit. The caller is a thread; with ``retrieval.scope="thread"`` only that
thread's messages are reachable, with ``"resource"`` any thread of the same resource. Every
thread is re-read from the store and its resource compared, every message's thread and
resource are checked before it is returned, and every search hit is resolved to a stored group
of a reachable thread. Out-of-scope ids get the same :class:`RecallNotFoundError` as ids that
do not exist, so recall cannot be used to probe other users' memory (Mastra #21863).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from obsmem import telemetry
from obsmem.config import RetrievalConfig
from obsmem.errors import ConfigError, InvalidInputError, RecallNotFoundError, ThreadNotFoundError
from obsmem.om.group_index import GroupIndex, resource_namespace, thread_namespace
from obsmem.om.text.groups import ObservationGroup, find_group, strip_groups
from obsmem.om.recall.render import (
    DEFAULT_TOKEN_BUDGET,
    Detail,
    RecalledGroup,
    RecalledMessage,
    RecalledThread,
    RecallMode,
    RecallResult,
    recalled,
    render_message,
)
from obsmem.om.selection import observable_messages
from obsmem.storage.contract import Store, lineage_key, takes_keyword
from obsmem.tokens import TokenCounter
from obsmem.types import Message, Thread

if TYPE_CHECKING:
    from obsmem.om.engine import Engine

__all__ = [
    "MAX_GROUP_THREADS", "MAX_MESSAGES", "MAX_SEARCH_RESULTS", "MAX_SKIPPED", "MAX_THREADS", "RecallRequest",
    "Recaller",
]

MAX_MESSAGES = 20
MAX_SKIPPED = 200
"""How many messages (in ``threads`` mode, threads) a ``page`` may lie past its anchor
((page - 1) × limit): a page that lies further is refused (read on with ``next_page``, a cursor,
instead) unless the messages that way run out first (then it is empty), so no page number makes
one call read more than this and one page."""
MAX_THREADS = 50
MAX_GROUP_THREADS = 32
"""How many of the resource's other threads (the most recently active) a group named without its thread is
looked for in (resource scope), besides the caller's: their current memory only."""
MAX_SEARCH_RESULTS = 20
_MIN_BUDGET = 50
_FETCH_BATCH = 100
_SNIPPET_CHARS = 300
_MAX_GENERATIONS = 100

Anchor = Literal["start", "end"]


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """One recall call's arguments (the tool's arguments, typed). See the module docstring."""

    mode: RecallMode = "messages"
    group_id: str | None = None
    cursor: str | None = None
    thread_id: str | None = None
    anchor: Anchor = "start"
    query: str | None = None
    page: int = 1
    limit: int = MAX_MESSAGES
    detail: Detail = "low"
    token_budget: int = DEFAULT_TOKEN_BUDGET
    char_offset: int = 0

    def checked(self) -> RecallRequest:
        """The request with page 0 read as 1 and the limit capped per mode; errors for nonsense."""
        if self.mode not in ("messages", "threads", "search"):
            raise InvalidInputError(
                f"Unknown recall mode {self.mode!r}; use 'messages', 'threads' or 'search'."
            )
        if self.anchor not in ("start", "end"):
            raise InvalidInputError(f"Unknown anchor {self.anchor!r}; use 'start' or 'end'.")
        if self.detail not in ("low", "high"):
            raise InvalidInputError(f"Unknown detail {self.detail!r}; use 'low' or 'high'.")
        if self.limit < 1:
            raise InvalidInputError(f"limit must be 1 or more, got {self.limit}.")
        if self.char_offset < 0:
            raise InvalidInputError(f"char_offset must be 0 or more, got {self.char_offset}.")
        if self.token_budget < _MIN_BUDGET:
            raise InvalidInputError(f"token_budget must be at least {_MIN_BUDGET}, got {self.token_budget}.")
        for name in ("group_id", "cursor", "thread_id", "query"):
            _check_text(name, getattr(self, name))
        cap = {"messages": MAX_MESSAGES, "threads": MAX_THREADS, "search": MAX_SEARCH_RESULTS}[self.mode]
        return replace(self, page=self.page or 1, limit=min(self.limit, cap))

    def arguments(self) -> dict[str, Any]:
        """The tool arguments that repeat this request (used to build ``continue_with``)."""
        args: dict[str, Any] = {"mode": self.mode, "detail": self.detail, "limit": self.limit}
        for name in ("group_id", "cursor", "thread_id", "query"):
            value = getattr(self, name)
            if value:
                args[name] = value
        return args


def _check_text(name: str, value: str | None) -> None:
    """Refuse text no store can take as a parameter: a NUL (PostgreSQL refuses it) or a lone
    surrogate (JSON can carry ``"\\ud800"``; UTF-8 cannot encode it, so SQLite and PostgreSQL raised
    UnicodeEncodeError). The value is shown escaped: echoed as it is, the answer could not be sent
    as UTF-8 either."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        if "\x00" not in value:
            return
    shown = ascii(value if len(value) <= 40 else value[:37] + "...")
    raise InvalidInputError(
        f"recall argument '{name}' is not text an id can hold (a NUL or an unpaired surrogate): {shown}."
    )


Fetch = Callable[[int], Awaitable[list[Message]]]
"""The first ``n`` messages of one direction of a window, nearest first."""


class Recaller:
    """Answers recall requests for a caller thread, within the configured scope."""

    def __init__(
        self,
        *,
        store: Store,
        engine: Engine,
        counter: TokenCounter,
        config: RetrievalConfig,
        group_index: GroupIndex | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.counter = counter
        self.config = config
        self.group_index = group_index

    async def recall(self, caller: Thread, request: RecallRequest) -> RecallResult:
        """Answer ``request`` for ``caller`` (an ``obsmem.recall`` span: mode, detail, page, limit
        and what came back, by counts; never the query nor any text)."""
        attributes = {
            **telemetry.ids(caller.id, caller.resource_id),
            "obsmem.recall.mode": request.mode, "obsmem.recall.detail": request.detail,
            "obsmem.recall.page": request.page, "obsmem.recall.limit": request.limit,
        }
        with telemetry.span("obsmem.recall", attributes) as span:
            result = await self._recall(caller, request)
            span.update({
                "obsmem.recall.messages": len(result.messages), "obsmem.recall.threads": len(result.threads),
                "obsmem.recall.groups": len(result.groups), "obsmem.recall.truncated": result.truncated,
                "obsmem.recall.tokens": result.tokens,
            })
            return result

    async def _recall(self, caller: Thread, request: RecallRequest) -> RecallResult:
        if not self.config.enabled:
            raise ConfigError(
                "retrieval", "recall needs retrieval mode, which is off", allowed="retrieval=True"
            )
        request = request.checked()
        if request.mode == "threads":
            return await self._threads(caller, request)
        if request.mode == "search":
            return await self._search(caller, request)
        return await self._messages(caller, request)

    # -- scope --------------------------------------------------------------------------------
    def _scope_label(self, caller: Thread) -> str:
        if self.config.scope == "thread":
            return f"scope: thread '{caller.id}'"
        return "scope: this user's conversations"

    async def _reachable(self, caller: Thread, thread_id: str | None) -> Thread | None:
        """The stored thread if recall may read it, else None (re-read, never trusted)."""
        if not thread_id:
            return None
        if self.config.scope == "thread" and thread_id != caller.id:
            return None
        thread = await self.store.get_thread(thread_id)
        if thread is None or thread.resource_id != caller.resource_id:
            return None
        return thread

    @staticmethod
    def _belongs(message: Message, thread: Thread) -> bool:
        return message.thread_id == thread.id and message.resource_id in (None, thread.resource_id)

    def _not_found(self, caller: Thread, what: str, ident: str) -> RecallNotFoundError:
        return RecallNotFoundError(what, ident, self._scope_label(caller))

    # -- groups -------------------------------------------------------------------------------
    async def _other_threads(self, caller: Thread) -> list[Thread]:
        """Where a group named without its thread is looked for after the caller's thread: in
        resource scope, the :data:`MAX_GROUP_THREADS` most recently active other threads of the resource (none
        where the observations are the resource's: the caller's memory holds every thread's)."""
        if self.config.scope != "resource":
            return []
        if self.engine.lineage(caller) == lineage_key("resource", None, caller.resource_id):
            return []
        return await _newest_threads(self.store, caller, MAX_GROUP_THREADS)

    async def _group_in_lineage(
        self, lineage: str, group_id: str, *, older: bool = True
    ) -> ObservationGroup | None:
        head = await self.store.get_head(lineage)
        if head is None:
            return None
        texts = [head.active_observations, *(c.observations for c in head.buffered_chunks)]
        found = find_group(texts, group_id)
        if found is not None or not older:
            return found
        # A group the actor saw before a reflection replaced it is still in an older generation.
        generations = await self.store.list_generations(lineage, limit=_MAX_GENERATIONS)
        return find_group((g.active_observations for g in generations if g.id != head.id), group_id)

    async def find_group(
        self, caller: Thread, group_id: str, thread_id: str | None = None
    ) -> tuple[ObservationGroup, Thread]:
        """The group with ``group_id`` and its (reachable) thread; RecallNotFoundError otherwise.
        ``thread_id`` (not ``"current"``): looked for in that thread's memory only (its current
        memory and its older generations). Without it: in the caller's (current and older), then
        in the current memory of the resource's most recently active other threads (:data:`MAX_GROUP_THREADS`),
        so an id the model made up costs a bounded number of reads however many threads the user
        has; a group of an older thread is found with its ``thread_id`` (search results carry it)."""
        named = thread_id not in (None, "", "current")
        first = await self._reachable(caller, thread_id) if named else caller
        if first is not None:
            found = await self._owned_group(caller, self.engine.lineage(first), group_id, older=True)
            if found is not None:
                return found
        if not named:
            # listed only when the caller's memory has no such group (the usual call finds it there)
            seen = {self.engine.lineage(caller)}
            for thread in await self._other_threads(caller):
                lineage = self.engine.lineage(thread)
                if lineage in seen:
                    continue
                seen.add(lineage)
                found = await self._owned_group(caller, lineage, group_id, older=False)
                if found is not None:
                    return found
        raise self._not_found(caller, "observation group", group_id)

    async def _owned_group(
        self, caller: Thread, lineage: str, group_id: str, *, older: bool
    ) -> tuple[ObservationGroup, Thread] | None:
        """The group ``group_id`` in ``lineage``'s memory and its thread, when that is reachable."""
        group = await self._group_in_lineage(lineage, group_id, older=older)
        if group is None:
            return None
        owner = await self._reachable(caller, group.thread_id)
        return None if owner is None else (group, owner)

    @staticmethod
    def _describe(
        group: ObservationGroup, score: float | None = None, snippet: str | None = None
    ) -> RecalledGroup:
        return RecalledGroup(
            id=group.id,
            thread_id=group.thread_id,
            range=group.range,
            first_message_id=group.first_message_id,
            last_message_id=group.last_message_id,
            kind=group.kind,
            score=score,
            snippet=snippet,
        )

    # -- messages -----------------------------------------------------------------------------
    async def _run(
        self, thread: Thread, *, after: int, before: int | None, forward: bool, n: int
    ) -> list[Message]:
        """Up to ``n`` conversation messages of ``thread`` with ``after < seq < before``, nearest
        first from ``after`` (forward) or from ``before`` (backward), checked to belong to the
        thread. Read in batches of what is still wanted, so ``n`` messages cost about ``n`` rows
        (more only where system or marker-only messages are skipped)."""
        found: list[Message] = []
        while len(found) < n:
            want = min(_FETCH_BATCH, n - len(found))
            batch = await self.store.list_messages(
                thread.id, after_seq=after, before_seq=before, limit=want, newest_first=not forward
            )
            if not batch:
                break
            found.extend(m for m in observable_messages(batch) if self._belongs(m, thread))
            edge = batch[-1].seq or 0
            if forward:
                after = edge
            else:
                before = edge
            if len(batch) < want:
                break
        return found[:n]

    async def _cursor_message(self, caller: Thread, cursor: str) -> tuple[Message | _Place, Thread]:
        """The message ``cursor`` names (a message id, or a place ``next_page`` gave) and its
        thread; a place (whose message may have been deleted since: reading on from it reads the
        messages around it)."""
        position = _MessagePosition.decode(cursor, self._conversation(caller))
        if position is not None:
            return await self._placed(caller, position)
        found = await self.store.get_messages([cursor])
        message = found[0] if found else None
        if message is None:
            if cursor.startswith(_MESSAGE_PREFIX):
                raise _bad_cursor(cursor, "conversation")
            if ":" in cursor:
                raise InvalidInputError(
                    f"cursor takes one message id, not a range ({cursor!r}); to read a group's messages "
                    "pass its group_id instead."
                )
            raise self._not_found(caller, "message", cursor)
        thread = await self._reachable(caller, message.thread_id)
        if thread is None or not self._belongs(message, thread):
            raise self._not_found(caller, "message", cursor)
        return message, thread

    async def _placed(self, caller: Thread, position: _MessagePosition) -> tuple[_Place, Thread]:
        """The place ``position`` names and its (reachable) thread. The page read from it starts
        with the message there, when it is still there (read with the page, not before it)."""
        wanted = caller.id if position.thread_id is None else position.thread_id
        thread = await self._reachable(caller, wanted)
        if thread is None or _micros(thread.created_at) != position.thread_us:
            # (deleted, or deleted and a new conversation began under its id: not read on into it)
            raise self._not_found(caller, "thread", wanted)
        return _Place(position.seq, position.message), thread

    def _conversation(self, caller: Thread) -> bytes:
        """Whose read a message position belongs to: the caller's (a cursor is refused elsewhere)."""
        return _utf8(f"messages\0{caller.resource_id}\0{caller.id}")

    async def _messages(self, caller: Thread, request: RecallRequest) -> RecallResult:
        group: ObservationGroup | None = None
        thread: Thread | None = None
        cursor: Message | _Place | None = None
        if request.group_id:
            group, thread = await self.find_group(caller, request.group_id, request.thread_id)
        if request.cursor:
            cursor, cursor_thread = await self._cursor_message(caller, request.cursor)
            if group is not None and (
                cursor_thread.id != group.thread_id or not group.covers(cursor.seq or 0)
            ):
                raise InvalidInputError(
                    f"Message '{request.cursor}' is not one of the messages of group '{group.id}' "
                    f"(range {group.range}); drop the cursor or the group_id."
                )
            thread = cursor_thread
        if thread is None:
            wanted = caller.id if request.thread_id in (None, "", "current") else request.thread_id
            thread = await self._reachable(caller, wanted)
            if thread is None:
                raise self._not_found(caller, "thread", str(wanted))
        elif request.thread_id not in (None, "", "current", thread.id):
            raise InvalidInputError(
                f"thread_id '{request.thread_id}' does not match the thread of the group or cursor "
                f"('{thread.id}'); leave thread_id out."
            )
        primary, secondary = await self._directions(thread, group, cursor, request.anchor)
        read = thread
        listing = self._conversation(caller)

        def cursor_at(message: Message) -> str:
            """A cursor at ``message``: its place (the id itself where the thread's id is too long)."""
            return _MessagePosition.at(message, read, read.id == caller.id, listing) or message.id

        return await self._page(request, primary, secondary, group, cursor, cursor_at)

    async def _directions(
        self, thread: Thread, group: ObservationGroup | None, cursor: Message | _Place | None, anchor: Anchor
    ) -> tuple[Fetch, Fetch]:
        """The anchor's direction and the opposite one, each nearest-first from the anchor, each
        read by ``seq`` from the anchor within the group's span (the whole thread without a
        group): the anchor is the cursor, else the group's (or thread's) start or end."""
        floor = group.first_seq - 1 if group is not None else 0
        ceiling = group.last_seq + 1 if group is not None else None
        seq: int | None = (cursor.seq or 0) if cursor is not None else None
        if seq is None and group is not None:
            seq = group.first_seq if anchor == "start" else group.last_seq
        # the anchor message itself belongs to the anchor's direction
        after = floor if seq is None else max(floor, seq - 1 if anchor == "start" else seq)
        before = ceiling if seq is None else _lowest(ceiling, seq + 1 if anchor == "end" else seq)

        async def forward_from(n: int) -> list[Message]:
            return await self._run(thread, after=after, before=ceiling, forward=True, n=n)

        async def backward_from(n: int) -> list[Message]:
            return await self._run(thread, after=floor, before=before, forward=False, n=n)

        if anchor == "start":
            return forward_from, backward_from
        return backward_from, forward_from

    async def _page(
        self,
        request: RecallRequest,
        primary: Fetch,
        secondary: Fetch,
        group: ObservationGroup | None,
        cursor: Message | _Place | None,
        cursor_at: Callable[[Message], str],
    ) -> RecallResult:
        size = request.limit
        pages = abs(request.page)
        forward = (request.page > 0) == (request.anchor == "start")
        source = primary if request.page > 0 else secondary
        run = await _reach(
            source, request.page, size, "messages from where this read starts", " (or pass a message id as cursor)"
        )
        # the page in reading order: nearest its anchor first (shown oldest first)
        window = run[(pages - 1) * size : pages * size]
        has_more = len(run) > pages * size
        next_page = None
        if has_more:  # read on from the next message in this direction: one page's cost at any depth
            anchor = "start" if forward else "end"
            cursor_next = cursor_at(run[pages * size])
            next_page = {**request.arguments(), "cursor": cursor_next, "anchor": anchor, "page": 1}
        # The page is rendered and counted on a worker thread (the counter is thread-safe): a page
        # holding a pasted log or a large tool result counted megabytes on the event loop, holding
        # every other request (a recall is a model's tool call: one hand-off is nothing beside it).
        messages, truncated, continue_with, next_offset, used = await asyncio.to_thread(
            self._fit, request, window, cursor, forward, cursor_at
        )
        if continue_with is not None:
            # the budget cut the page: the next page starts at the first message not shown (where
            # continue_with starts), not after the whole page, or the cut messages are never read
            next_page = continue_with
        return RecallResult(
            mode="messages",
            detail=request.detail,
            page=request.page,
            limit=size,
            messages=tuple(sorted(messages, key=lambda m: m.seq)),
            group=self._describe(group) if group is not None else None,
            has_next_page=next_page is not None,
            has_prev_page=pages > 1,
            next_page=next_page,
            truncated=truncated,
            continue_with=continue_with,
            next_char_offset=next_offset,
            tokens=used,
        )

    def _fit(
        self,
        request: RecallRequest,
        window: list[Message],
        cursor: Message | _Place | None,
        forward: bool,
        cursor_at: Callable[[Message], str],
    ) -> tuple[list[RecalledMessage], bool, dict[str, Any] | None, int | None, int]:
        """Render ``window`` (in reading order: nearest the anchor first) at the requested detail
        within the token budget. The messages that fit are those nearest the anchor, so what the
        budget leaves out lies on the far side, in the reading direction; ``continue_with`` reads
        on from the first of them (the message cut short, at its ``char_offset``) the same way:
        forward (``anchor="start"``) or backward (``anchor="end"``, which includes the cursor)."""
        budget = request.token_budget
        anchor = "start" if forward else "end"
        out: list[RecalledMessage] = []
        used = 0
        for message in window:
            text = render_message(message, request.detail, self.counter.count_text)
            offset = request.char_offset if _is_cursor(message, cursor) else 0
            text = text[offset:]
            tokens = self.counter.count_text(text)
            if used + tokens <= budget:
                out.append(recalled(message, text))
                used += tokens
                continue
            base = {**request.arguments(), "cursor": cursor_at(message), "anchor": anchor, "page": 1}
            if out:
                return out, True, base, None, used
            keep = self._cut(text, budget)
            out.append(recalled(message, text[:keep], truncated=True))
            next_offset = offset + keep
            return out, True, {**base, "char_offset": next_offset}, next_offset, budget
        return out, False, None, None, used

    def _cut(self, text: str, budget: int) -> int:
        """How many leading characters of ``text`` fit in ``budget`` tokens (at least one)."""
        keep, total = len(text), self.counter.count_text(text)
        for _ in range(8):
            if total <= budget:
                break
            keep = max(1, int(keep * budget / max(total, 1) * 0.97))
            total = self.counter.count_text(text[:keep])
        return keep

    # -- threads ------------------------------------------------------------------------------
    async def _threads(self, caller: Thread, request: RecallRequest) -> RecallResult:
        """The reachable threads in the listing order (oldest first), a page from ``cursor`` (the
        position ``next_page`` gave, after the last thread shown; or a thread id, the first of the
        page; without one, the first thread). Read by key from the cursor, so a page costs its own
        threads and one more, plus those ``page`` skips (at most :data:`MAX_SKIPPED`; a page further
        is refused unless the threads run out first), and a thread deleted between pages, even one
        at the page's edge, shifts no other; ``next_page`` holds the position after this page."""
        page = max(1, request.page)
        size = request.limit
        start: Thread | _ThreadPosition | None = None
        if request.cursor is not None:
            start = await self._listing_start(caller, request.cursor)

        async def run(n: int) -> list[Thread]:
            """The first ``n`` reachable threads from the cursor (else the first), in listing order."""
            if self.config.scope == "thread":
                # the cursor, if any, is the caller (else it was not reachable) or the place after it
                return [] if isinstance(start, _ThreadPosition) else [caller][:n]
            if isinstance(start, _ThreadPosition):
                found = await self._from_position(caller, start, n)
            elif start is not None:
                found = [start, *await self._after(caller.resource_id, start, [], False, n - 1)]
            else:
                found = await self.store.list_threads(caller.resource_id, limit=n)
            return [t for t in found if t.resource_id == caller.resource_id][:n]

        listed = await _reach(run, page, size, "threads from where this listing starts")
        shown = listed[(page - 1) * size : page * size]
        next_page = None
        if len(listed) > page * size:
            position = _ThreadPosition.of(shown[-1], listed[page * size])
            cursor = position.encode(self._listing(caller))
            next_page = {"mode": "threads", "limit": size, "cursor": cursor, "page": 1}
        threads = tuple(
            RecalledThread(
                id=t.id,
                title=t.title,
                created_at=t.created_at.isoformat(),
                updated_at=t.updated_at.isoformat(),
                current=t.id == caller.id,
            )
            for t in shown
        )
        return RecallResult(
            mode="threads",
            detail=request.detail,
            page=page,
            limit=size,
            threads=threads,
            has_next_page=next_page is not None,
            has_prev_page=page > 1,
            next_page=next_page,
        )

    def _listing(self, caller: Thread) -> bytes:
        """Which listing a position belongs to (this resource's; in thread scope, the caller's
        alone): a cursor given to another user's agent is refused, never read in its listing."""
        if self.config.scope == "thread":
            return _utf8(f"thread\0{caller.resource_id}\0{caller.id}")
        return _utf8(f"resource\0{caller.resource_id}")

    async def _listing_start(self, caller: Thread, cursor: str) -> Thread | _ThreadPosition:
        """Where a threads listing starts: a position ``next_page`` gave, or a thread id (the
        first thread of the page: a cursor from before positions, or an id from a listing)."""
        position = _ThreadPosition.decode(cursor, self._listing(caller))
        if position is not None:
            return position
        thread = await self._reachable(caller, cursor)
        if thread is None:
            if cursor.startswith(_POSITION_PREFIX):
                raise _bad_cursor(cursor)
            raise self._not_found(caller, "thread", cursor)
        return thread

    async def _from_position(self, caller: Thread, position: _ThreadPosition, n: int) -> list[Thread]:
        """The first ``n`` threads of the caller's listing after ``position``: after the last thread
        the page showed while it is there (the same thread: a new chat under its id is another),
        else from the next page's first thread, else (both deleted) from the place they held
        (threads created at the same instant as the last one shown may then come again; none is
        skipped). The last one is read by its id where the position holds it (ids up to
        :data:`_ID_KEPT` bytes), else found by its digest among the threads read from its
        ``created_at`` on: ``n`` threads and itself, more only where threads created at that same
        instant come before it (only for a longer id: then those threads, MAX_SKIPPED at a time)."""
        resource_id = caller.resource_id
        if position.last_id is not None:
            last = await self._reachable(caller, position.last_id)
            if last is not None and position.is_last(last):
                return await self._after(resource_id, last, [], False, n)
        want = n + 1
        rows = await self.store.list_threads(resource_id, limit=want, since=position.since())
        complete = len(rows) < want
        while (
            not complete
            and _micros(rows[-1].created_at) == position.last_us
            and not any(position.is_last(t) for t in rows)
        ):  # all created at the last one's instant so far: it may lie further among them
            try:
                more = await self.store.list_threads(resource_id, limit=MAX_SKIPPED + 1, after=rows[-1].id)
            except ThreadNotFoundError:  # deleted this instant: read on from the place it held
                break
            rows += more
            complete = len(more) < MAX_SKIPPED + 1
        for i, thread in enumerate(rows):
            if position.is_last(thread):
                return await self._after(resource_id, thread, rows[i + 1 :], complete, n)
        for i, thread in enumerate(rows):
            if position.is_following(thread):
                return [thread, *await self._after(resource_id, thread, rows[i + 1 :], complete, n - 1)]
        return rows[:n]

    async def _after(
        self, resource_id: str, thread: Thread, known: list[Thread], complete: bool, n: int
    ) -> list[Thread]:
        """The first ``n`` threads after ``thread``, of which a read already found ``known`` (all
        there are when ``complete``). When ``thread`` is deleted meanwhile, from its created_at on
        (threads created at that same instant may then come again; none is skipped)."""
        if complete or len(known) >= n:
            return known[:n]
        try:
            return await self.store.list_threads(resource_id, limit=n, after=thread.id)
        except ThreadNotFoundError:
            edge = known[-1] if known else thread
            more = await self.store.list_threads(resource_id, limit=n + 1, since=edge.created_at)
            seen = {thread.id, *(t.id for t in known)}
            return [*known, *(t for t in more if t.id not in seen)][:n]

    # -- search -------------------------------------------------------------------------------
    async def _search(self, caller: Thread, request: RecallRequest) -> RecallResult:
        if self.group_index is None:
            raise InvalidInputError(
                "recall mode 'search' needs vector retrieval (retrieval={'vector': True} with an embedder "
                "and a vector index); use mode 'messages' with a group id instead."
            )
        query = (request.query or "").strip()
        if not query:
            raise InvalidInputError("recall mode 'search' needs a query: the words to look for.")
        prefix = (
            thread_namespace(caller.resource_id, caller.id)
            if self.config.scope == "thread"
            else resource_namespace(caller.resource_id)
        )
        hits = await self.group_index.search(query, namespace_prefix=prefix, k=request.limit)
        found: list[RecalledGroup] = []
        for hit in hits:
            if hit.resource_id != caller.resource_id:
                continue
            thread = await self._reachable(caller, hit.thread_id)
            if thread is None:
                continue
            group = await self._group_in_lineage(self.engine.lineage(thread), hit.group_id)
            if group is None or group.thread_id != thread.id:
                continue  # a stale vector (its group was dropped or reflected away)
            snippet = _snippet(group.body, query)
            found.append(self._describe(group, score=round(hit.score, 4), snippet=snippet))
        return RecallResult(
            mode="search",
            detail=request.detail,
            page=1,
            limit=request.limit,
            groups=tuple(found),
            note=None if found else "No observation group matched; try other words or mode 'messages'.",
        )


def _is_cursor(message: Message, cursor: Message | _Place | None) -> bool:
    """Whether ``message`` is the one the cursor names (where ``char_offset`` applies)."""
    if isinstance(cursor, _Place):
        return cursor.names(message)
    return cursor is not None and message.id == cursor.id


def _lowest(bound: int | None, seq: int) -> int:
    """The tighter of an upper ``seq`` bound (None: none) and ``seq``."""
    return seq if bound is None else min(bound, seq)


def _snippet(body: str, query: str) -> str:
    """The group's lines that share the most words with the query (in their order), else its start."""
    words = set(query.casefold().split())
    lines = [line.strip() for line in strip_groups(body).splitlines() if line.strip()]
    scored = [(len(words & set(line.casefold().split())), index) for index, line in enumerate(lines)]
    best = sorted(index for score, index in sorted(scored, key=lambda s: (-s[0], s[1]))[:3] if score > 0)
    chosen = [lines[i] for i in best] or lines[:3]
    return " … ".join(chosen)[:_SNIPPET_CHARS]


T = TypeVar("T")

async def _reach(
    read: Callable[[int], Awaitable[list[T]]], page: int, size: int, what: str, hint: str = ""
) -> list[T]:
    """What page ``page`` (negative: counted from the other end) of ``size`` needs from ``read(n)``
    (the first ``n`` items from where the read starts): its items and one more (whether another
    page follows). A page starting more than :data:`MAX_SKIPPED` items in is answered only when it
    lies past the end (empty; telling costs ``MAX_SKIPPED + 1`` items), else refused: reading on
    goes by ``next_page``, at one page's cost at any depth."""
    pages = abs(page)
    if (pages - 1) * size <= MAX_SKIPPED:
        return await read(pages * size + 1)
    run = await read(MAX_SKIPPED + 1)
    if len(run) > MAX_SKIPPED:
        raise InvalidInputError(
            f"page {page} starts {(pages - 1) * size} {what}; a page number reaches at most {MAX_SKIPPED}. "
            f"Read on with the arguments in the last answer's 'next_page'{hint} instead of a page number."
        )
    return run



_LAST_INSTANT = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


async def _newest_threads(store: Store, caller: Thread, n: int) -> list[Thread]:
    """The ``n`` most recently active threads of the caller's resource but the caller, newest
    first: one page of the store's newest-first listing (``list_threads(newest_first=True)``,
    from its activity index: ``n + 1`` threads, the caller may be among them). A thread's
    activity moves when it is created and whenever a message is saved into it, so a thread the
    user went back to is looked in before newer ones left idle.

    A store whose ``list_threads`` lacks ``newest_first`` (written before it) is read as before:
    the newest by creation (``created_at``, then creation order), without reading the listing
    (:func:`_newest_created`)."""
    if takes_keyword(store.list_threads, "newest_first"):
        page = await store.list_threads(caller.resource_id, limit=n + 1, newest_first=True)
        return [t for t in page if t.id != caller.id and t.resource_id == caller.resource_id][:n]
    return await _newest_created(store, caller, n)


async def _newest_created(store: Store, caller: Thread, n: int) -> list[Thread]:
    """The ``n`` newest threads of the caller's resource but the caller, newest first, in the
    listing's order (``created_at``, then creation order), read without reading the listing:
    each read takes at most ``n + 2`` threads from an instant on (``list_threads(since=...)``,
    from the stores' index), the instant found by halving the span between one with more than
    that many threads after it and one with fewer, until the threads of the span between were
    all read. So a call reads a few of those pages (at most one per bit of the span, in
    microseconds, between the oldest thread and now), however many threads the user has.

    Only where more than that many threads share the microsecond the newest start at, those are
    read on from the first (up to :data:`MAX_SKIPPED` of them; past that, the latest of those
    read stand in for the newest of that instant)."""
    resource_id = caller.resource_id
    want = n + 1  # the caller may be among them
    size = want + 1  # a read that comes back this full may have more after it

    async def read(at: datetime | None) -> list[Thread]:
        return await store.list_threads(resource_id, limit=size, since=at)

    def newest(threads: list[Thread]) -> list[Thread]:
        """``threads`` (in listing order, maybe repeated) without the caller, newest first."""
        seen: set[str] = {caller.id}
        out: list[Thread] = []
        for thread in reversed(threads):
            if thread.id not in seen and thread.resource_id == resource_id:
                seen.add(thread.id)
                out.append(thread)
        return out[:n]

    first = await read(None)
    if len(first) < size:
        return newest(first)  # the whole listing
    # low: an instant with at least ``size`` threads from it on (``low_rows``: the first of them);
    # high: one with fewer (``tail``: all of them; none after the last instant there is)
    last = _micros(_LAST_INSTANT)
    low, low_rows = _micros(first[0].created_at), first
    high, tail = last + 1, []
    after_now = min(max(_micros(datetime.now(UTC)), _micros(first[-1].created_at)) + 1, last)
    for at in (_micros(caller.created_at), after_now, last):  # where fewer are likely to follow
        if at <= low:
            continue
        rows = await read(_instant_at(at))
        if len(rows) < size:
            high, tail = at, rows
            break
        low, low_rows = _micros(rows[0].created_at), rows
    while _micros(low_rows[-1].created_at) < high:  # threads between low and high not read yet
        middle = (low + high) // 2
        if middle == low:  # more than ``size`` threads created at the instant ``low``
            return newest([*low_rows, *await _instant(store, resource_id, low_rows[-1], high), *tail])
        rows = await read(_instant_at(middle))
        if len(rows) < size:
            high, tail = middle, rows
        else:  # (none between ``middle`` and the first of them)
            low, low_rows = _micros(rows[0].created_at), rows
    # every thread from ``low`` on: those read from it before ``high``, then all from ``high`` on
    return newest([*(t for t in low_rows if _micros(t.created_at) < high), *tail])


async def _instant(store: Store, resource_id: str, thread: Thread, high: int) -> list[Thread]:
    """The threads after ``thread`` created before the instant ``high`` (microseconds), in the
    listing's order: the first :data:`MAX_SKIPPED` of them where there are more (a thread
    deleted meanwhile ends the read there)."""
    found: list[Thread] = []
    last = thread
    while len(found) < MAX_SKIPPED:
        try:
            rows = await store.list_threads(resource_id, limit=_FETCH_BATCH, after=last.id)
        except ThreadNotFoundError:
            break
        before = [t for t in rows if _micros(t.created_at) < high]
        found += before
        if len(before) < len(rows) or len(rows) < _FETCH_BATCH:
            break
        last = rows[-1]
    return found


_POSITION_PREFIX = "th1."
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_KEYS = struct.Struct(">Bq8sq8s")
"""A position's fixed bytes: whether the last thread's id follows, then the last thread shown
(created_at in microseconds, id digest) and the next page's first thread (the same); then that id
(when kept), then a check of it all with the listing it belongs to (:data:`_CHECK` bytes)."""
_CHECK = 8
_ID_KEPT = 96
"""The longest id (UTF-8 bytes) a position holds as it is, so a cursor is at most 200 characters
(the HTTP API's ids, a cursor among them, are at most 200); a longer one is found by its digest."""


def _micros(value: datetime) -> int:
    """Microseconds since the epoch: the stores' ordering key of a thread's ``created_at``."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def _instant_at(micros: int) -> datetime:
    """The instant ``micros`` microseconds after the epoch (:func:`_micros` undone)."""
    return _EPOCH + timedelta(microseconds=micros)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _digest(*parts: bytes) -> bytes:
    return hashlib.sha256(b"\0".join(parts)).digest()[:_CHECK]


def _bad_cursor(cursor: str, what: str = "conversation list") -> InvalidInputError:
    shown = cursor if len(cursor) <= 40 else cursor[:37] + "..."
    start = "the first conversation" if what == "conversation list" else "a message id, or leave cursor out"
    return InvalidInputError(
        f"cursor {shown!r} is not a position in this {what} (cut short, changed, or given for another "
        f"conversation): pass the cursor of the last answer's 'next_page' as it is, or start from {start}."
    )


def _position_fields(
    cursor: str, prefix: str, fixed: int, tag: bytes, listing: bytes, what: str = "conversation list"
) -> bytes | None:
    """The fields a position cursor (``prefix`` and base64: ``fixed`` bytes, an id of up to
    :data:`_ID_KEPT` bytes, the check) holds, checked against ``listing``: None when ``cursor`` is no
    such position at all (an id); InvalidInputError (:func:`_bad_cursor`) when its check fails (cut,
    changed, or given for another listing)."""
    if not cursor.startswith(prefix):
        return None
    body = cursor[len(prefix) :]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (ValueError, UnicodeError):
        return None
    if base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") != body:
        return None  # (a last character changed in bits base64 leaves unused: not as given)
    if not fixed + _CHECK <= len(raw) <= fixed + _ID_KEPT + _CHECK:
        return None
    fields, check = raw[:-_CHECK], raw[-_CHECK:]
    if check != _digest(tag, listing, fields):
        raise _bad_cursor(cursor, what)
    return fields


@dataclass(frozen=True, slots=True)
class _ThreadPosition:
    """A place in a threads listing, after the last thread a page showed: that thread's ordering
    key (``created_at`` in microseconds), a digest of its id and (up to :data:`_ID_KEPT` bytes)
    the id, and the key and digest of the next page's first thread. Opaque to the model (``th1.``
    and base64) and checked against the listing it was given for, so an edited, cut or another
    user's cursor is refused; one made up to pass the check names a place in the caller's own
    listing, which is all it is ever read from (a thread it names is re-read and must be
    reachable and the same thread)."""

    last_us: int
    last: bytes
    following_us: int
    following: bytes
    last_id: str | None = None

    @classmethod
    def of(cls, last: Thread, following: Thread) -> _ThreadPosition:
        kept = last.id if len(_utf8(last.id)) <= _ID_KEPT else None
        return cls(
            _micros(last.created_at), _digest(_utf8(last.id)),
            _micros(following.created_at), _digest(_utf8(following.id)), kept,
        )

    def since(self) -> datetime:
        return _EPOCH + timedelta(microseconds=self.last_us)

    def is_last(self, thread: Thread) -> bool:
        return _micros(thread.created_at) == self.last_us and _digest(_utf8(thread.id)) == self.last

    def is_following(self, thread: Thread) -> bool:
        return _micros(thread.created_at) == self.following_us and _digest(_utf8(thread.id)) == self.following

    def _fields(self) -> bytes:
        kept = self.last_id is not None
        keys = _KEYS.pack(kept, self.last_us, self.last, self.following_us, self.following)
        return keys + (b"" if self.last_id is None else _utf8(self.last_id))

    def encode(self, listing: bytes) -> str:
        fields = self._fields()
        raw = fields + _digest(b"recall-threads-position", listing, fields)
        return _POSITION_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, cursor: str, listing: bytes) -> _ThreadPosition | None:
        """The position ``cursor`` holds in ``listing``; None when it is no position at all (a
        thread id); InvalidInputError when it was cut, changed or given for another listing."""
        fields = _position_fields(cursor, _POSITION_PREFIX, _KEYS.size, b"recall-threads-position", listing)
        if fields is None:
            return None
        # (what follows holds for every cursor this code made; only a forged check fails it)
        kept, last_us, last, following_us, following = _KEYS.unpack(fields[: _KEYS.size])
        id_bytes = fields[_KEYS.size :]
        try:
            last_id = id_bytes.decode("utf-8", "surrogatepass") if kept == 1 else None
            position = cls(last_us, last, following_us, following, last_id)
            position.since()
        except (UnicodeError, OverflowError):
            raise _bad_cursor(cursor) from None
        if kept not in (0, 1) or (kept == 1) != bool(id_bytes) or (last_id is not None and "\x00" in last_id):
            raise _bad_cursor(cursor)
        return position


_MESSAGE_PREFIX = "ms1."
_MESSAGE_KEYS = struct.Struct(">Bq8sq")
"""A message position's fixed bytes: whether its thread's id follows (else it is the caller's),
the message's seq and its id's digest, the thread's created_at (microseconds); then that thread
id, then the check (:data:`_CHECK`)."""


@dataclass(frozen=True, slots=True)
class _Place:
    """The place of the message a position names: its ``seq`` and its id's digest (the message
    may have been deleted since)."""

    seq: int
    message: bytes

    def names(self, message: Message) -> bool:
        return message.seq == self.seq and _digest(_utf8(message.id)) == self.message


@dataclass(frozen=True, slots=True)
class _MessagePosition:
    """A message's place in its thread, for ``next_page`` and ``continue_with``: its ``seq`` and
    its id's digest, and the thread (None: the caller's own; else its id, up to
    :data:`_ID_KEPT` bytes: a thread with a longer id is read on by message id, as before).
    Opaque to the model (``ms1.`` and base64) and checked against the caller it was given to,
    so an edited, cut or another conversation's cursor is refused; the thread one made up names
    is re-read and must be reachable, like any id."""

    seq: int
    message: bytes
    thread_us: int
    thread_id: str | None = None

    @classmethod
    def at(cls, message: Message, thread: Thread, callers: bool, listing: bytes) -> str | None:
        """The cursor at ``message`` of ``thread`` (the caller's own when ``callers``); None where
        another thread's id is too long to hold."""
        thread_id = None if callers else _utf8(thread.id)
        if message.seq is None or (thread_id is not None and len(thread_id) > _ID_KEPT):
            return None
        fields = _MESSAGE_KEYS.pack(
            thread_id is not None, message.seq, _digest(_utf8(message.id)), _micros(thread.created_at)
        )
        fields += thread_id or b""
        raw = fields + _digest(b"recall-messages-position", listing, fields)
        return _MESSAGE_PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, cursor: str, listing: bytes) -> _MessagePosition | None:
        """The position ``cursor`` holds for ``listing``; None when it is no position at all (a
        message id); InvalidInputError when it was cut, changed or given to another caller."""
        fields = _position_fields(
            cursor, _MESSAGE_PREFIX, _MESSAGE_KEYS.size, b"recall-messages-position", listing, "conversation"
        )
        if fields is None:
            return None
        # (what follows holds for every cursor this code made; only a forged check fails it)
        kept, seq, message, thread_us = _MESSAGE_KEYS.unpack(fields[: _MESSAGE_KEYS.size])
        id_bytes = fields[_MESSAGE_KEYS.size :]
        try:
            thread_id = id_bytes.decode("utf-8", "surrogatepass") if kept == 1 else None
        except UnicodeError:
            raise _bad_cursor(cursor, "conversation") from None
        if (
            kept not in (0, 1) or (kept == 1) != bool(id_bytes) or not 0 < seq < 2**62
            or (thread_id is not None and "\x00" in thread_id)
        ):
            raise _bad_cursor(cursor, "conversation")
        return cls(seq, message, thread_us, thread_id)

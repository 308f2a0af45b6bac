"""What one ``obsmem serve`` process holds: the Memory, the key table, the knowledge store, the
upstream client for the gateway and the turns begun over REST that have not ended yet."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from obsmem import Memory, Turn
from obsmem.knowledge import Knowledge
from obsmem.server.access import Principal
from obsmem.server.errors import TurnNotFoundError
from obsmem.server.keys import KeyStore, key_store_for
from obsmem.storage.contract import lease_purge_before

__all__ = ["OpenTurn", "ServerSettings", "Service"]

#: Turns begun over REST and never ended are ended (and forgotten) after this long unused (since
#: their begin or their last step); their lease lasts as long from each use.
TURN_TTL_S = 600.0
MAX_OPEN_TURNS = 1000
#: The most REST turns one org holds open on a replica; past it, its own oldest is ended. At
#: :data:`MAX_OPEN_TURNS` the oldest of the org holding the most is: a tenant beginning turns in a
#: loop never ends another tenant's (it did: the oldest of all went, whoever's).
MAX_OPEN_TURNS_PER_ORG = 200
#: The most turns past their TTL one request ends (:meth:`Service._expire`): with many expired at
#: once, each request that begins or resumes a turn ends this many, not all of them in a row.
EXPIRE_PER_REQUEST = 8
#: The default bounds on a request body (``ServerSettings.max_body_bytes`` / ``max_import_bytes``).
MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_IMPORT_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class ServerSettings:
    """``upstream_url``: the base URL the gateway forwards to (``…/v1``); ``upstream_key``: its key,
    sent upstream only; ``upstream_kind``: ``"openai"`` (any OpenAI-compatible server) or
    ``"anthropic"`` (Chat Completions translated to the Messages API). ``dev``: no keys needed (loopback only).
    ``upstream_timeout_s``: the longest the gateway waits for one read from the upstream (connecting,
    the headers, each piece of the body); ``upstream_total_timeout_s``: the longest one upstream
    exchange may take in all, from the request to the answer's last byte (a stream kept alive with
    comments, a body sent a byte at a time). Past it a streamed answer ends with an error event and
    a whole one is answered 504; nothing of that answer is saved.

    ``max_body_bytes``: the largest request body (32 MiB: the size of Anthropic's own request
    limit); one declared larger is answered 413 before it is read or its key is checked, and one
    sent without a length is cut at the limit. ``max_import_bytes``: the same for
    ``POST /api/resources/import`` (64 MiB), whose export is larger than any other request.
    ``body_timeout_s``: the longest a request's body may take to arrive after its headers;
    past it the request is answered 408 (see :mod:`obsmem.server.limits`)."""

    upstream_url: str | None = None
    upstream_key: str | None = None
    upstream_kind: Literal["openai", "anthropic"] = "openai"
    dev: bool = False
    upstream_timeout_s: float = 120.0
    upstream_total_timeout_s: float = 600.0
    mcp: bool = True
    max_body_bytes: int = MAX_BODY_BYTES
    max_import_bytes: int = MAX_IMPORT_BYTES
    body_timeout_s: float = 60.0


@dataclass(slots=True)
class OpenTurn:
    turn: Turn
    principal: Principal
    thread_id: str
    started: float  # (monotonic) when it was begun or last used here: its TTL counts from it


@dataclass
class Service:
    memory: Memory
    keys: KeyStore
    settings: ServerSettings = field(default_factory=ServerSettings)
    knowledge: Knowledge | None = None
    owns_memory: bool = False
    turns: dict[str, OpenTurn] = field(default_factory=dict)
    http: httpx.AsyncClient | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: The REST turns an end is under way for here (its lease let go of until it is done), each
    #: with the event set when that end is done (see :meth:`ending`).
    ends: dict[str, asyncio.Event] = field(default_factory=dict)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after a response has gone (a stream the client left); awaited at stop."""
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    @classmethod
    def open(
        cls, store: str | None, *, settings: ServerSettings | None = None, knowledge: Knowledge | None = None,
        **memory_options: Any,
    ) -> Service:
        """A service over a new Memory on ``store`` (closed with the service)."""
        memory = Memory(store, knowledge=knowledge, **memory_options)
        return cls(memory, key_store_for(memory.store.url), settings or ServerSettings(), knowledge, True)

    async def start(self) -> None:
        await self.keys.setup()
        self.http = httpx.AsyncClient(timeout=self.settings.upstream_timeout_s)

    async def stop(self) -> None:
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self._leave_turns()
        if self.http is not None:
            await self.http.aclose()
        if self.owns_memory:
            await self.memory.aclose()
            if self.knowledge is not None:
                await self.knowledge.close()
        await self.keys.close()

    # -- REST turns --------------------------------------------------------------------------
    # A REST turn is open in the store, not only in the replica that began it: a lease
    # ``rest-turn:<turn id>`` (owner: the beginning key's org and resource, renewed by each step)
    # says it is open, and the turn id carries its thread, so any replica on the same store can
    # continue it (``Memory.resume_turn``). Ending it (anywhere) releases the lease; a replica
    # still holding the turn object then finds no lease and answers 404 like the others.
    async def _end_quietly(self, turn_id: str) -> None:
        entry = self.turns.pop(turn_id, None)
        if entry is not None:
            try:
                await entry.turn.end()
            except Exception:  # an abandoned turn: its input is saved; ending it only starts memory work
                pass
            await self._close_lease(turn_id)

    async def _leave_turns(self) -> None:
        """At stop: a turn still open in the store (its lease unexpired) is left to the other
        replicas, which continue it from the store (a rolling restart must not cut a client's
        tool loop off; this replica started again continues it too); one no longer open is ended
        (its memory work starts, as an end starts it), as is every turn when the store cannot say
        which."""
        now = self.memory.clock.now()
        for turn_id in list(self.turns):
            try:
                lease = await self.memory.store.get_lease(_turn_key(turn_id))
            except Exception:  # the store is failing: end the turn here, as a stop always did
                lease = None
            if lease is not None and not lease.is_expired(now):
                del self.turns[turn_id]  # still open: another replica (or this one again) goes on
            else:
                await self._end_quietly(turn_id)

    async def _expire(self) -> None:
        """End the oldest turns past their TTL, :data:`EXPIRE_PER_REQUEST` at most (the rest at
        the next requests). ``turns`` is in the order of their last use here, so the first not yet
        expired ends the look. A turn whose lease another replica renewed since is not ended: this
        replica only forgets its copy."""
        now = time.monotonic()
        for _ in range(EXPIRE_PER_REQUEST):
            turn_id = next(iter(self.turns), None)
            if turn_id is None or now - self.turns[turn_id].started <= TURN_TTL_S:
                break
            lease = await self.memory.store.get_lease(_turn_key(turn_id))
            entry = self.turns.get(turn_id)
            if entry is None or now - entry.started <= TURN_TTL_S:
                continue  # ended or used here meanwhile
            if lease is not None and not lease.is_expired(self.memory.clock.now()):
                # stepped on another replica since its last use here (which renewed its lease):
                # still open, and that replica's; only this replica's copy goes
                del self.turns[turn_id]
                continue
            await self._end_quietly(turn_id)

    async def _make_room(self, org_id: str | None) -> None:
        """End turns until ``org_id`` may open one more: its own oldest past
        :data:`MAX_OPEN_TURNS_PER_ORG`, then, at :data:`MAX_OPEN_TURNS`, the oldest turn of the org
        holding the most (``turns`` is in the order of their last use)."""
        while True:
            held: dict[str | None, list[str]] = {}
            for turn_id, entry in self.turns.items():
                held.setdefault(entry.principal.org_id, []).append(turn_id)
            own = held.get(org_id, [])
            if len(own) >= MAX_OPEN_TURNS_PER_ORG:
                await self._end_quietly(own[0])
            elif len(self.turns) >= MAX_OPEN_TURNS:
                await self._end_quietly(max(held.values(), key=len)[0])
            else:
                return

    async def hold(self, turn: Turn, principal: Principal, thread_id: str) -> str:
        await self._expire()
        await self._make_room(principal.org_id)
        encoded = base64.urlsafe_b64encode(thread_id.encode("utf-8")).decode("ascii").rstrip("=")
        turn_id = f"turn_{secrets.token_urlsafe(12)}.{encoded}"
        if turn.began_seq is not None:  # where the turn began: a replica resuming it knows its own calls
            turn_id += f".{turn.began_seq}"
        store = self.memory.store
        lease = await store.acquire_lease(_turn_key(turn_id), _owner(principal), ttl_s=TURN_TTL_S,
                                          now=self.memory.clock.now())  # fmt: skip
        if lease is None:  # a fresh random id: cannot be held already
            raise TurnNotFoundError(turn_id)
        self.turns[turn_id] = OpenTurn(turn, principal, thread_id, time.monotonic())
        return turn_id

    async def held(self, turn_id: str, principal: Principal) -> OpenTurn:
        """The open turn, only for the key that began it (or a key of the same scope), on any
        replica of the store: one this replica does not hold is resumed from the store."""
        store, now = self.memory.store, self.memory.clock.now()
        lease = await store.get_lease(_turn_key(turn_id))
        if (lease is None or lease.is_expired(now)) and (end := self.ends.get(turn_id)) is not None:
            # an end of it under way here let go of its lease: a refused end holds it again
            await end.wait()
            now = self.memory.clock.now()
            lease = await store.get_lease(_turn_key(turn_id))
        if lease is None or lease.is_expired(now):
            # past its TTL: ended here as the TTL would end it, and its row goes (else it stayed)
            if turn_id in self.turns:
                await self._end_quietly(turn_id)
            elif lease is not None and lease.expires_at <= lease_purge_before(now):
                # not held here: its row goes only once no replica's clock can still call it open
                # (the purge's margin); a replica behind this one's clock may hold it yet
                await store.release_lease(lease.key, lease.owner)
            raise TurnNotFoundError(turn_id)
        if principal.org_id is not None and lease.owner != _owner(principal):
            raise TurnNotFoundError(turn_id)
        entry = self.turns.get(turn_id)
        if entry is None:
            thread_id, since_seq = _thread_of(turn_id), _began_of(turn_id)
            if thread_id is None:
                raise TurnNotFoundError(turn_id)
            await self._expire()
            await self._make_room(principal.org_id)
            turn = await self.memory.resume_turn(thread_id=thread_id, since_seq=since_seq)
            entry = self.turns[turn_id] = OpenTurn(turn, principal, thread_id, time.monotonic())
        renewed = await store.renew_lease(_turn_key(turn_id), lease.owner, ttl_s=TURN_TTL_S, now=now)
        if renewed is None or self.turns.get(turn_id) is not entry:
            # ended meanwhile (its end, or its TTL, answered while the renewal was on its way)
            if renewed is None and self.turns.get(turn_id) is entry:
                await self._end_quietly(turn_id)
            raise TurnNotFoundError(turn_id)
        entry.started = time.monotonic()  # its TTL counts from this use, as its lease's does
        self.turns[turn_id] = self.turns.pop(turn_id)  # the newest used last: _expire looks oldest first
        return entry

    @contextlib.asynccontextmanager
    async def ending(self, turn_id: str) -> AsyncIterator[None]:
        """An end of ``turn_id`` under way: it lets go of the turn (:meth:`release`) before ending
        it and holds it again when the end is refused (:meth:`hold_again`). A step or an end of
        it that finds no lease meanwhile waits for it (:meth:`held`): before, it answered 404,
        'it ended', for a turn that stayed open."""
        event = self.ends[turn_id] = asyncio.Event()
        try:
            yield
        finally:
            if self.ends.get(turn_id) is event:
                del self.ends[turn_id]
            event.set()

    async def release(self, turn_id: str) -> None:
        self.turns.pop(turn_id, None)
        await self._close_lease(turn_id)

    async def hold_again(self, turn_id: str, entry: OpenTurn, principal: Principal) -> None:
        """Hold again a turn :meth:`release` let go of for an ``end`` that then saved nothing (its
        messages refused): the client may send the end again, corrected. Another end of it that
        came meanwhile gets 404, as it would have."""
        lease = await self.memory.store.acquire_lease(
            _turn_key(turn_id), _owner(principal), ttl_s=TURN_TTL_S, now=self.memory.clock.now()
        )
        if lease is not None:
            entry.started = time.monotonic()
            self.turns[turn_id] = entry

    async def _close_lease(self, turn_id: str) -> None:
        key = _turn_key(turn_id)
        lease = await self.memory.store.get_lease(key)
        if lease is not None:
            await self.memory.store.release_lease(key, lease.owner)

    async def settled(self) -> None:
        await asyncio.sleep(0)
        await self.memory.settled()


def _turn_key(turn_id: str) -> str:
    return f"rest-turn:{turn_id}"


def _owner(principal: Principal) -> str:
    """The scope a REST turn belongs to (the key that began it: its org and resource)."""
    return json.dumps([principal.org_id, principal.resource_id])


def _thread_of(turn_id: str) -> str | None:
    """The thread a turn id names (``turn_<random>.<base64url thread id>[.<began seq>]``), or None."""
    _, dot, encoded = turn_id.partition(".")
    encoded = encoded.partition(".")[0]
    if not dot or not encoded:
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def _began_of(turn_id: str) -> int | None:
    """The seq the turn began at, when its id carries one (ids from before it do not)."""
    began = turn_id.split(".")[2:3]
    if not began or not began[0].isascii() or not began[0].isdigit() or len(began[0]) > 18:
        return None
    return int(began[0]) or None

"""What one ``obsmem serve`` process holds: the Memory, the key table, the knowledge store, the
upstream client for the gateway and the turns begun over REST that have not ended yet."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from obsmem import Memory, Turn
from obsmem.knowledge import Knowledge
from obsmem.server.access import Principal
from obsmem.server.errors import TurnNotFoundError
from obsmem.server.keys import KeyStore, key_store_for

__all__ = ["OpenTurn", "ServerSettings", "Service"]

#: Turns begun over REST and never ended are ended (and forgotten) after this long.
TURN_TTL_S = 600.0
MAX_OPEN_TURNS = 1000


@dataclass(slots=True)
class ServerSettings:
    """``upstream_url``: the base URL the gateway forwards to (``…/v1``); ``upstream_key``: its key,
    sent upstream only; ``upstream_kind``: ``"openai"`` (any OpenAI-compatible server) or
    ``"anthropic"`` (Chat Completions translated to the Messages API). ``dev``: no keys needed (loopback only)."""

    upstream_url: str | None = None
    upstream_key: str | None = None
    upstream_kind: Literal["openai", "anthropic"] = "openai"
    dev: bool = False
    upstream_timeout_s: float = 120.0
    mcp: bool = True


@dataclass(slots=True)
class OpenTurn:
    turn: Turn
    principal: Principal
    thread_id: str
    started: float


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
        for turn_id in list(self.turns):
            await self._end_quietly(turn_id)
        if self.http is not None:
            await self.http.aclose()
        if self.owns_memory:
            await self.memory.aclose()
            if self.knowledge is not None:
                await self.knowledge.close()
        await self.keys.close()

    # -- REST turns --------------------------------------------------------------------------
    async def _end_quietly(self, turn_id: str) -> None:
        entry = self.turns.pop(turn_id, None)
        if entry is not None:
            try:
                await entry.turn.end()
            except Exception:  # an abandoned turn: its input is saved; ending it only starts memory work
                pass

    async def _expire(self) -> None:
        now = time.monotonic()
        for turn_id, entry in list(self.turns.items()):
            if now - entry.started > TURN_TTL_S:
                await self._end_quietly(turn_id)
        while len(self.turns) >= MAX_OPEN_TURNS:
            await self._end_quietly(next(iter(self.turns)))

    async def hold(self, turn: Turn, principal: Principal, thread_id: str) -> str:
        await self._expire()
        turn_id = "turn_" + secrets.token_urlsafe(12)
        self.turns[turn_id] = OpenTurn(turn, principal, thread_id, time.monotonic())
        return turn_id

    def held(self, turn_id: str, principal: Principal) -> OpenTurn:
        """The open turn, only for the key that began it (or a key of the same scope)."""
        entry = self.turns.get(turn_id)
        if entry is None or (
            principal.org_id is not None
            and (entry.principal.org_id, entry.principal.resource_id) != (principal.org_id, principal.resource_id)
        ):
            raise TurnNotFoundError(turn_id)
        return entry

    async def release(self, turn_id: str) -> None:
        self.turns.pop(turn_id, None)

    async def settled(self) -> None:
        await asyncio.sleep(0)
        await self.memory.settled()

"""``Memory.forget(value)`` landing between a reflection's new generation and its end marker (the
marker quotes the reflection). Seen from the user's side on SQLite; the forget runs on another
``Memory`` over the same file. The race is made deterministic with gates the test opens (the
reflector's call, one real store call), never with timing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.om.offline.reflector import OfflineReflector
from obsmem.om.protocols import ReflectionRequest, ReflectionResult
from obsmem.storage import SQLiteStore
from obsmem.types import DataPart
from tests.privacy.test_forget_races_observation import FILLER, SECRET

pytestmark = pytest.mark.anyio


class GatedReflector(OfflineReflector):
    """The offline reflector; its first call whose observations hold ``SECRET`` waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.gate = asyncio.Event(), asyncio.Event()

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        if not self.entered.is_set() and SECRET in request.observations:
            self.entered.set()
            await self.gate.wait()
        return await super().reflect(request)


class EndMarkerGate(SQLiteStore):
    """A SQLite store whose write of a reflection's end marker on its own (not with the
    generation) waits for ``gate``, once armed."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.armed = False
        self.entered, self.gate = asyncio.Event(), asyncio.Event()

    async def add_message_parts_marked(self, message_id: str, parts: list[DataPart], lineage: str) -> Any:
        if self.armed and any(p.name == "om-observation-end" and p.data.get("operation_type") == "reflection"
                              for p in parts):  # fmt: skip
            self.armed = False
            self.entered.set()
            await self.gate.wait()
        return await super().add_message_parts_marked(message_id, parts, lineage)


async def test_a_forget_between_a_reflection_and_its_end_marker_leaves_nothing(tmp_path: Path) -> None:
    """The reflection committed its generation; before its end marker (which quotes the
    reflection) was written, a forget ran from start to end. On main: the marker was written
    afterwards, quoting the value: 'ZEBRAQUUX42' in an ``om-observation-end`` part of a message."""
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          reflection={"observation_tokens": 150, "buffer_activation": None})  # fmt: skip
    store = EndMarkerGate(tmp_path / "m.db")
    reflector = GatedReflector()
    memory = Memory(store, config=config, reflector=reflector)

    async def talk() -> None:
        for i in range(40):
            text = f"My locker code is {SECRET}. " + FILLER[i % 5] if i == 0 else f"Turn {i}: " + FILLER[i % 5] * 2
            async with memory.turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)]) as turn:
                await turn.step([Message.assistant(f"Noted {i}.")])
            if reflector.entered.is_set():
                return

    talking = asyncio.create_task(talk())
    await asyncio.wait([talking, asyncio.create_task(reflector.entered.wait())], return_when=asyncio.FIRST_COMPLETED)
    assert reflector.entered.is_set(), "no reflection took the observations holding the value"
    store.armed = True
    reflector.gate.set()
    await asyncio.wait([talking, asyncio.create_task(store.entered.wait())], return_when=asyncio.FIRST_COMPLETED)
    async with Memory(f"sqlite:///{tmp_path / 'm.db'}", config=config) as other:
        await other.forget(SECRET)
    store.armed = False
    store.gate.set()
    await talking
    await memory.settled()

    messages = await memory.list_messages("t1")
    generations = await memory.list_generations("t1", limit=1000)
    assert [(m.id, p.type) for m in messages for p in m.parts if SECRET in p.model_dump_json()] == []
    assert [g.generation for g in generations if SECRET in g.active_observations] == []
    assert SECRET not in await memory.get_observations("t1")
    assert len(generations) >= 2, "the reflection made a generation"
    await memory.aclose()

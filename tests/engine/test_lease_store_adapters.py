"""A store adapter of the user's own that Python can neither weakly reference nor hash (a slotted
delegating wrapper, an ``eq=True`` dataclass): its turns work, as they did before the leases a
store outage left unreleased were kept per store in a weak-keyed dictionary; every begin_turn
then failed with 'StorageError: TypeError: cannot create weak reference' (or 'unhashable')."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message, MemoryConfig, ObservationConfig
from obsmem.om.offline import OfflineObserver
from obsmem.storage.sqlite.store import SQLiteStore

pytestmark = pytest.mark.anyio


class Slotted:
    """Delegates every call to the real store (a tracing wrapper, say); slotted."""

    __slots__ = ("_inner",)

    def __init__(self, inner: SQLiteStore) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclasses.dataclass
class Unhashable:
    """The same, a dataclass (``eq=True``: no hash)."""

    inner: SQLiteStore

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("adapter", [Slotted, Unhashable])
async def test_turns_work_on_a_store_adapter_without_weak_references_or_hash(tmp_path: Path, adapter: Any) -> None:
    config = MemoryConfig(observation=ObservationConfig(message_tokens=200, buffer_tokens=False))
    inner = SQLiteStore(tmp_path / "m.db")
    async with inner, Memory(adapter(inner), config=config, observer=OfflineObserver()) as memory:
        for i in range(6):
            text = f"Turn {i}: I moved to Berlin in {2000 + i}, my sister Ada lives in Oslo and I keep ferrets. " * 3
            turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
            await turn.end([Message.assistant("ok")])
        assert await inner.count_messages("t1") == 12

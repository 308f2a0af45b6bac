"""A forget whose knowledge store cannot be opened erases nothing.

``memory.forget(value)`` (and ``obsmem forget VALUE --knowledge ...``) erased the messages and
observations first and reached the knowledge store last: a knowledge store that could not be
opened (an empty file a failed restore left, a database down) failed the call after the memory
was forgotten and before the knowledge store noted the forgotten value, so the value could be
captured again (found by helper 206). The knowledge store is opened before anything is erased.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.errors import ObsmemError
from obsmem.knowledge import Knowledge


async def _seed(db: Path) -> None:
    async with Memory(f"sqlite:///{db}") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", [Message.user("Zaphod called."), Message.user("Fine weather.")])


async def _texts(db: Path) -> list[str]:
    async with Memory(f"sqlite:///{db}") as memory:
        return [m.text for m in await memory.list_messages("t1")]


@pytest.mark.anyio
async def test_the_library_erases_nothing(tmp_path: Path) -> None:
    db, graph = tmp_path / "m.db", tmp_path / "k.db"
    await _seed(db)
    graph.touch()  # an empty file: not a knowledge store
    knowledge = Knowledge.sqlite(graph)
    try:
        async with Memory(f"sqlite:///{db}", knowledge=knowledge) as memory:
            with pytest.raises(ObsmemError):
                await memory.forget("Zaphod", resource_id="alice")
    finally:
        await knowledge.close()
    assert await _texts(db) == ["Zaphod called.", "Fine weather."]


def test_the_command_erases_nothing(tmp_path: Path) -> None:
    import asyncio

    db, graph = tmp_path / "m.db", tmp_path / "k.db"
    asyncio.run(_seed(db))
    graph.touch()
    result = CliRunner().invoke(app, ["forget", "Zaphod", "--resource", "alice", "--yes", "--store", str(db),
                                      "--knowledge", str(graph)])  # fmt: skip
    assert result.exit_code == 1
    assert "empty file" in result.output
    assert asyncio.run(_texts(db)) == ["Zaphod called.", "Fine weather."]


@pytest.mark.anyio
async def test_delete_thread_deletes_nothing_either(tmp_path: Path) -> None:
    """delete_thread purged the thread's knowledge last: its rows were gone, then the call failed
    (found by helper 209; delete_resource checked first already)."""
    db, graph = tmp_path / "m.db", tmp_path / "k.db"
    await _seed(db)
    graph.touch()
    knowledge = Knowledge.sqlite(graph)
    try:
        async with Memory(f"sqlite:///{db}", knowledge=knowledge) as memory:
            with pytest.raises(ObsmemError):
                await memory.delete_thread("t1")
            assert await memory.store.get_thread("t1") is not None
    finally:
        await knowledge.close()
    assert await _texts(db) == ["Zaphod called.", "Fine weather."]

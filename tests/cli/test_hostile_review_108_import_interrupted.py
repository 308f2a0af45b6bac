"""``obsmem import`` is all or nothing, interrupted too (hostile review, helper-108).

Before the fix: Ctrl-C after the import's first writes (a real run: SIGINT 0.2 s into importing
the demo's 818 messages) left the thread and its messages without their observations, and the
same command run again was refused (``the store already holds threads of resource``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message, Thread
from obsmem.cli import app
from obsmem.storage.sqlite.store import SQLiteStore
from tests.cli.hostile_108 import seed as _seed

runner = CliRunner()


def _threads_of(db: Path, resource: str) -> list[str]:
    async def read() -> list[str]:
        async with Memory(f"sqlite:///{db}") as memory:
            return [t.id for t in await memory.list_threads(resource)]

    return asyncio.run(read())


def test_an_import_interrupted_after_its_first_writes_can_be_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the messages are written (here: as the observation records are), as a user
    presses it during a large import: nothing of the resource stays, and the same command then
    imports it whole."""
    source = tmp_path / "source.db"
    _seed(source)
    export = tmp_path / "alice.jsonl"
    assert runner.invoke(app, ["export", "-r", "alice", "--store", str(source), "-o", str(export)]).exit_code == 0
    target = tmp_path / "target.db"
    real_create_record = SQLiteStore.create_record

    async def interrupted(self: SQLiteStore, *args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(SQLiteStore, "create_record", interrupted)
    result = runner.invoke(app, ["import", str(export), "--store", str(target)])
    assert result.exit_code != 0
    assert _threads_of(target, "alice") == []  # all or nothing, interrupted too

    monkeypatch.setattr(SQLiteStore, "create_record", real_create_record)
    again = runner.invoke(app, ["import", str(export), "--store", str(target)])
    assert again.exit_code == 0, again.output
    assert _threads_of(target, "alice") == ["t1"]


def test_an_import_never_takes_back_a_thread_another_writer_made_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer creates a thread of the export's id between the import's check and its
    write (the store's create_thread then returns that thread as it is): the import is refused,
    and what it takes back is its own only, never the other writer's thread and messages."""
    source = tmp_path / "source.db"
    _seed(source)
    export = tmp_path / "alice.jsonl"
    assert runner.invoke(app, ["export", "-r", "alice", "--store", str(source), "-o", str(export)]).exit_code == 0
    target = tmp_path / "target.db"
    real_create_thread = SQLiteStore.create_thread

    async def raced(self: SQLiteStore, thread: Any) -> Any:
        if thread.id == "t1" and await self.get_thread("t1") is None:  # the other writer, first
            await real_create_thread(self, Thread(id="t1", resource_id="bob"))
            await self.save_messages("t1", [Message.user("Bob's own words.")])
        return await real_create_thread(self, thread)

    monkeypatch.setattr(SQLiteStore, "create_thread", raced)
    result = runner.invoke(app, ["import", str(export), "--store", str(target)])
    assert result.exit_code != 0
    monkeypatch.setattr(SQLiteStore, "create_thread", real_create_thread)
    assert _threads_of(target, "bob") == ["t1"]  # the other writer's thread is still there
    assert "already holds a thread 't1'" in result.output, result.output

    async def texts() -> list[str]:
        async with Memory(f"sqlite:///{target}") as memory:
            return [m.text for m in await memory.list_messages("t1")]

    assert asyncio.run(texts()) == ["Bob's own words."]

"""``obsmem export -o`` never writes over a database: on main ``-o`` naming the store itself
(``--store m.db -o m.db``, a slip between the two options) replaced the whole store, every
resource, by the JSON lines of one, and ``-o`` naming another SQLite database replaced it the
same way; exit 0 both times. Both are now refused before anything is written."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app

runner = CliRunner()


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            for resource in ("alice", "bob"):
                await memory.create_thread(f"t-{resource}", resource)
                await memory.save_messages(f"t-{resource}", [Message.user(f"hello from {resource}")])

    asyncio.run(run())


def _threads(db: Path) -> list[str]:
    async def run() -> list[str]:
        async with Memory(f"sqlite:///{db}") as memory:
            return sorted(t.id for t in await memory.list_threads(resource_id="alice") + await memory.list_threads(
                resource_id="bob"))

    return asyncio.run(run())


def test_export_over_the_store_itself_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    before = db.read_bytes()[:16]
    for target in (str(db), f"{tmp_path}/./m.db", f"{db}-wal"):
        result = runner.invoke(app, ["export", "-r", "alice", "--store", str(db), "-o", target])
        assert result.exit_code == 1, result.output
        said = " ".join(result.output.split())
        assert "is a SQLite database" in said or "belongs to the SQLite database" in said, said
    assert db.read_bytes()[:16] == before == b"SQLite format 3\x00"
    assert _threads(db) == ["t-alice", "t-bob"]


def test_export_over_another_database_is_refused_and_over_a_file_still_works(tmp_path: Path) -> None:
    db, other = tmp_path / "m.db", tmp_path / "other.db"
    _seed(db)
    shutil.copy(db, other)
    refused = runner.invoke(app, ["export", "-r", "alice", "--store", str(db), "-o", str(other)])
    assert refused.exit_code == 1, refused.output
    assert _threads(other) == ["t-alice", "t-bob"]
    old = tmp_path / "alice.jsonl"
    old.write_text("an older export\n")
    done = runner.invoke(app, ["export", "-r", "alice", "--store", str(db), "-o", str(old)])
    assert done.exit_code == 0, done.output
    assert "hello from alice" in old.read_text()


def test_bench_json_over_a_database_is_refused_before_the_run(tmp_path: Path) -> None:
    """On main ``obsmem bench survival --json m.db`` ran, then replaced the database by its report."""
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["bench", "survival", "--facts", "2", "--generations", "1", "--json", str(db)],
                           env={"COLUMNS": "300"})  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "is a SQLite database" in " ".join(result.output.replace("│", " ").split()), result.output
    assert _threads(db) == ["t-alice", "t-bob"]

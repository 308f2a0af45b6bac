"""Ids the CLI prints show what they hold: invisible Unicode controls (bidi overrides and
isolates, zero-width characters) in a thread id made it read as another one on the terminal
("t-\\u202elive" shows as "t-evil"), and ``obsmem queue retry`` printed a dead item's target with
its terminal control characters raw. Both are now shown escaped."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.storage import open_store

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
TRICK = "t-\u202elive"  # shown by a bidi terminal as "t-evil"
HIDDEN = "al\u200bice"  # reads as "alice"
INVISIBLE = ("\u202e", "\u200b")


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(TRICK, HIDDEN)
            await memory.save_messages(TRICK, [Message.user("hello")])

    asyncio.run(run())


def test_invisible_controls_in_ids_are_shown(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    listed = runner.invoke(app, ["threads", "--store", str(db)], env=WIDE)
    shown = runner.invoke(app, ["show", TRICK, "--store", str(db)], env=WIDE)
    missing = runner.invoke(app, ["show", "x\u2066y", "--store", str(db)], env=WIDE)
    for result in (listed, shown):
        assert result.exit_code == 0, result.output
        assert "t-\\u202elive" in result.stdout and "al\\u200bice" in result.stdout, result.stdout
        assert not any(c in result.stdout for c in INVISIBLE), result.stdout
    assert missing.exit_code == 1 and "no thread 'x\\u2066y'" in " ".join(missing.output.split())


def test_queue_retry_shows_the_target_on_one_line(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    evil = "chat\nFAKE\x1b[31m"

    async def work() -> int:
        now = datetime.now(UTC)
        async with open_store(f"sqlite:///{db}") as store:
            await store.enqueue_work("observe", evil, now=now)
            [item] = await store.claim_work("w1", ttl_s=60, now=now)
            await store.bury_work(item, now=now, error="boom")
            [dead] = await store.list_dead_work()
            return dead.id

    dead_id = asyncio.run(work())
    result = runner.invoke(app, ["queue", "retry", str(dead_id), "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert "chat\\x0aFAKE\\x1b[31m" in result.stdout and "\x1b" not in result.stdout, result.stdout


def test_a_folder_given_as_the_store_is_named_a_folder(tmp_path: Path) -> None:
    """On main ``--store <a folder>.db`` said "no database at <folder>", a path that exists."""
    folder = tmp_path / "memory.db"
    folder.mkdir()
    for command in (["threads"], ["show", "t"], ["delete-resource", "a", "--yes"]):
        result = runner.invoke(app, [*command, "--store", str(folder)], env=WIDE)
        assert result.exit_code == 1, result.output
        said = " ".join(result.output.split())
        assert f"{folder} is a folder, not a database" in said and "no database at" not in said, said


def test_the_confirmation_question_shows_ids_on_one_line(tmp_path: Path) -> None:
    """On main the question of ``delete-resource`` / ``forget`` (without --yes) printed the id as
    it was: a newline split the question, an ESC sequence reached the terminal."""
    db = tmp_path / "m.db"
    _seed(db)
    evil = "bob\nDelete everything? [y/N]\x1b[2K"
    for command in (["delete-resource", evil], ["forget", "x", "--thread", evil]):
        result = runner.invoke(app, [*command, "--store", str(db)], input="n\n", env=WIDE)
        assert result.exit_code == 1, result.output
        assert "bob\\x0aDelete everything? [y/N]\\x1b[2K" in result.output, result.output
        assert "\x1b" not in result.output

"""Ids the CLI prints stay on their line, and counts read as English.

A thread id (or resource id, dead-lettered target, lease key) holding a newline printed as two
table rows or two lines, so a second, made-up row could appear in ``obsmem threads`` or ``obsmem
queue``; ``obsmem queue`` printed terminal control characters raw. Every control character of an
id, newline and tab included, is now shown as ``\\xNN``, as the CLI shows them in stored text. And
counts said "1 messages" / "1 threads" / "818 message" / "1 migration(s)": now "1 message",
"2 messages"."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.storage import open_store

runner = CliRunner()

EVIL = "chat\nFAKE-ROW\x1b[31m\tz"
SHOWN = "chat\\x0aFAKE-ROW\\x1b[31m\\x09z"


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(EVIL, "alice\nbob")
            await memory.save_messages(EVIL, [Message.user("hello")])
            await memory.create_thread("t2", "alice\nbob")
            await memory.save_messages("t2", [Message.user("one"), Message.assistant("two")])

    asyncio.run(run())


def _lines_with(output: str, text: str) -> list[str]:
    return [line for line in output.splitlines() if text in line]


def test_a_thread_id_holding_a_newline_is_one_row_of_the_listing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    for command in (["threads", "--store", str(db)], ["threads", "--store", str(db), "--resource", "alice\nbob"]):
        result = runner.invoke(app, command, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        [row] = _lines_with(result.stdout, "FAKE-ROW")
        assert SHOWN in row and "alice\\x0abob" in row, result.stdout
        assert "\x1b" not in result.stdout and "\t" not in result.stdout
    shown = runner.invoke(app, ["show", EVIL, "--store", str(db)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert _lines_with(shown.stdout, "FAKE-ROW") == _lines_with(shown.stdout, SHOWN), shown.stdout
    assert "Unobserved tail (1 message after seq 0)" in shown.stdout


def test_the_queue_shows_a_target_and_a_lease_key_on_one_line(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)

    async def work() -> None:
        now = datetime.now(UTC)
        async with open_store(f"sqlite:///{db}") as store:
            await store.enqueue_work("observe", EVIL, now=now)
            [item] = await store.claim_work("w1", ttl_s=60, now=now)
            await store.bury_work(item, now=now, error="boom\nsecond line\x1b[2K")
            await store.acquire_lease(f"obs:{EVIL}", "w1", ttl_s=60, now=now)

    asyncio.run(work())
    result = runner.invoke(app, ["queue", "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert len(_lines_with(result.stdout, "FAKE-ROW")) == 2, result.stdout  # the dead item and the lease
    assert all(SHOWN in line for line in _lines_with(result.stdout, "FAKE-ROW"))
    assert "boom\\x0asecond line\\x1b[2K" in result.stdout and "\x1b" not in result.stdout


def test_counts_agree_with_their_number(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    dump = tmp_path / "alice.jsonl"
    exported = runner.invoke(app, ["export", "-r", "alice\nbob", "--store", str(db), "-o", str(dump)])
    assert exported.exit_code == 0, exported.output
    said = " ".join(exported.stderr.split())
    assert "2 threads, 3 messages" in said, said
    deleted = runner.invoke(app, ["delete-resource", "alice\nbob", "--store", str(db), "--yes"])
    assert deleted.exit_code == 0, deleted.output
    assert re.search(r"\b2 threads\b", deleted.stdout) and re.search(r"\b3 messages\b", deleted.stdout), deleted.stdout
    assert "(s)" not in deleted.stdout
    fresh = tmp_path / "fresh.db"
    migrated = runner.invoke(app, ["migrate", "--store", str(fresh), "--dry-run"])
    assert migrated.exit_code == 0, migrated.output
    assert re.search(r"\b\d+ migrations pending: ", migrated.stdout) and "(s)" not in migrated.stdout

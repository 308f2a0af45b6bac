"""``obsmem threads`` on a store of many threads prints one page of them.

It printed every thread of the store (or of the resource), and for each it read its window, its
newest message, its message count and every generation record, whole, only to count them: a
store of 300 threads printed 300 rows and read 300 threads' generations. It now prints
``--limit`` threads (default 50), oldest first, then a line naming the ``--after`` that shows
the next page; a thread's generations are counted from its head, none read."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.storage import SQLiteStore

runner = CliRunner()
THREADS = 300


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    db: Path = tmp_path_factory.mktemp("threads-listing") / "m.db"

    async def seed() -> None:
        config = MemoryConfig(observation=ObservationConfig(message_tokens=200))
        async with Memory(f"sqlite:///{db}", config=config) as memory:
            for n in range(THREADS):
                await memory.create_thread(f"t{n:04d}", "alice" if n % 3 else "bob")
            for n in range(3):  # a few with messages and generations
                thread_id = f"t{n + 1:04d}"
                for i in range(4):
                    turn = await memory.begin_turn(
                        thread_id=thread_id, messages=[Message.user(f"In {thread_id} I booked flight LX{i}00.")]
                    )
                    await turn.end([Message.assistant("Noted.")])
                await memory.observe(thread_id)
                await memory.reflect(thread_id)

    asyncio.run(seed())
    return f"sqlite:///{db}"


def _rows(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines() if line.strip().startswith("t0")]


def test_one_page_is_printed_and_the_next_is_named(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    generations_read: list[int] = []
    listing = SQLiteStore.list_generations

    async def counted(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        found = await listing(self, *args, **kwargs)
        generations_read.append(len(found))
        return found

    monkeypatch.setattr(SQLiteStore, "list_generations", counted)
    shown = runner.invoke(app, ["threads", "--store", store_url])
    assert shown.exit_code == 0, shown.output
    rows = _rows(shown.stdout)
    assert rows == [f"t{n:04d}" for n in range(50)], rows[:5]  # before: all 300
    assert "--after t0049" in " ".join(shown.stdout.split())
    assert sum(generations_read) == 0, generations_read  # counted from the head, none read

    after = runner.invoke(app, ["threads", "--store", store_url, "--limit", "100", "--after", "t0049"])
    assert after.exit_code == 0, after.output
    assert _rows(after.stdout) == [f"t{n:04d}" for n in range(50, 150)]

    last = runner.invoke(app, ["threads", "--store", store_url, "--limit", "100", "--after", "t0249"])
    assert last.exit_code == 0, last.output
    assert _rows(last.stdout) == [f"t{n:04d}" for n in range(250, 300)]
    assert "--after" not in last.stdout  # the last page names no next one


def test_a_resource_pages_its_own_threads_and_counts_generations(store_url: str) -> None:
    shown = runner.invoke(app, ["threads", "--store", store_url, "--resource", "alice", "--limit", "2"])
    assert shown.exit_code == 0, shown.output
    assert _rows(shown.stdout) == ["t0001", "t0002"]
    assert "--after t0002" in " ".join(shown.stdout.split())
    # the threads with a reflection show both generations (0 and 1), as `obsmem show` lists them
    listed = runner.invoke(app, ["show", "t0001", "--store", store_url])
    assert listed.exit_code == 0, listed.output
    row = next(line for line in shown.stdout.splitlines() if line.strip().startswith("t0001"))
    assert row.split()[5] == "2", row


def test_a_missing_cursor_is_refused_in_one_line(store_url: str) -> None:
    shown = runner.invoke(app, ["threads", "--store", store_url, "--after", "nope"])
    assert shown.exit_code != 0
    assert "nope" in shown.output and "Traceback" not in shown.output

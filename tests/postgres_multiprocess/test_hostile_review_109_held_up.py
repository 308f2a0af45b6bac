"""Several OS processes on one PostgreSQL database: what a hostile review tried that held up.

Each scenario runs real processes (``hostile_109_worker.py``) coordinated by files, then checks
from the user's side: every message stored once and in order, each tool call followed by its
result, the newest user message in the context, and nothing of an erased thread or value left
in any table. A hang fails the test (each process has a hard timeout).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psycopg
import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import TextPart

from . import harness
from .commit_cutter import CommitCutter
from .hostile_109_worker import SECRET, call, result, wait_for

pytestmark = pytest.mark.anyio


def tables_holding(url: str, needle: str) -> list[str]:
    """Every table of the database with a row whose text holds ``needle``."""
    found = []
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()]  # fmt: skip
        for table in tables:
            row = conn.execute(f'SELECT count(*) FROM "{table}" AS t WHERE strpos(t::text, %s) > 0', (needle,)).fetchone()
            if row and row[0]:
                found.append(f"{table}: {row[0]}")
    return found


async def seed(url: str) -> list[str]:
    """Thread ``shared`` past the observation threshold, every user message holding :data:`SECRET`."""
    history = []
    for i in range(12):
        history.append(Message(id=f"h-u{i}", role="user", parts=(TextPart(
            text=f"Message {i}: the code word is {SECRET}, and I like long walks by the river in spring."),)))
        history.append(Message(id=f"h-a{i}", role="assistant", parts=(TextPart(
            text=f"Reply {i}: noted, walks by the river are a fine way to spend the spring mornings."),)))
    async with Memory(url) as memory:
        await memory.create_thread(thread_id="shared", resource_id="u1")
        await memory.save_messages("shared", history)
    return [m.id for m in history]


async def stored(url: str, thread_id: str = "shared") -> list[Message]:
    async with PostgresStore(url) as store:
        return await store.list_messages(thread_id)


async def test_two_processes_interleave_tool_turns_on_one_thread(postgres_url: str, tmp_path: Path) -> None:
    (tmp_path / "peers").write_text("2")
    reports = harness.finish([harness.start("lockstep_tools", postgres_url, n, tmp_path, 4) for n in range(2)])
    messages = await stored(postgres_url)
    assert harness.sequence_problems(messages) == []
    for n, report in enumerate(reports):
        assert report["errors"] == [] and report["background_errors"] == []  # each input in its context
        assert f"p{n}-a3" in report["context"]
        mine = [m.id for m in messages if m.id.startswith(f"p{n}-") and "-res" not in m.id]
        assert mine == [i for i in report["done"] if "-res" not in i]  # each once, in its order


async def test_processes_on_threads_of_one_resource_interleave_tool_turns(postgres_url: str, tmp_path: Path) -> None:
    for name, text in (("peers", "3"), ("per-thread", "1"), ("resource-scope", "1")):
        (tmp_path / name).write_text(text)
    reports = harness.finish([harness.start("lockstep_tools", postgres_url, n, tmp_path, 6) for n in range(3)])
    for n, report in enumerate(reports):
        messages = await stored(postgres_url, f"t{n}")
        assert harness.sequence_problems(messages) == []
        assert [m.id for m in messages] == report["done"]
        assert report["errors"] == [] and report["background_errors"] == []  # each input in its context


@pytest.mark.parametrize("scope", ["thread", "resource"])
@pytest.mark.parametrize("action", ["delete", "forget"])
async def test_an_erase_while_another_process_observes(postgres_url: str, tmp_path: Path, action: str,
                                                       scope: str) -> None:
    await seed(postgres_url)
    if scope == "resource":
        (tmp_path / "resource-scope").write_text("1")
    observer = harness.start("observing_turn", postgres_url, 0, tmp_path)
    wait_for(tmp_path, "observing-0")  # its observer holds what it read, with the secret
    async with Memory(postgres_url, config=MemoryConfig(scope=scope)) as admin:
        if action == "delete":
            assert await admin.delete_thread("shared")
        else:
            await admin.forget(SECRET, thread_id="shared")
    (tmp_path / "release-0").write_text("1")
    [report] = harness.finish([observer])
    assert all(e.startswith("ThreadNotFoundError") for e in report["errors"])  # typed, when the thread went
    assert tables_holding(postgres_url, SECRET) == []
    if action == "delete":
        assert tables_holding(postgres_url, "walks by the river") == []


async def test_a_process_killed_mid_observation_holds_up_no_other(postgres_url: str, tmp_path: Path) -> None:
    history = await seed(postgres_url)
    killed = harness.start("observing_turn", postgres_url, 0, tmp_path)
    wait_for(tmp_path, "observing-0")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    (tmp_path / "release-1").write_text("1")
    (tmp_path / "bounded-1").write_text("1")  # the default max_turn_wait: its lease is still live
    [report] = harness.finish([harness.start("observing_turn", postgres_url, 1, tmp_path)])
    assert report["errors"] == []
    assert "p1-u" in report["context"]
    messages = await stored(postgres_url)
    assert [m.id for m in messages] == [*history, "p0-u", "p1-u", "p1-a"]


@pytest.mark.parametrize("cut", ["u0", "m-call", "m-res"])
async def test_a_commit_whose_answer_is_lost_stores_nothing_twice(postgres_url: str, cut: str) -> None:
    cutter = CommitCutter(postgres_url)
    answer = Message(id="m-ans", role="assistant", parts=(TextPart(text="ok"),))
    async with Memory(cutter.url()) as memory:
        await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello", id="u-1")])
        cutter.arm(cut)
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi", id="u0")])
        await turn.step([call("c1", "m-call")])
        context = await turn.step([result("c1", "m-res"), answer])
    assert cutter.cuts == 1
    assert [m.id for m in context.messages][-3:] == ["m-call", "m-res", "m-ans"]
    messages = await stored(postgres_url, "t")
    assert [m.id for m in messages] == ["u-1", "u0", "m-call", "m-res", "m-ans"]

"""``obsmem threads`` and ``obsmem show``: what is in a store, on every URL form, read through the
public store contract. The store is written the way a user writes one: ``run_demo`` into a file."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message, Thread
from obsmem.cli import app
from obsmem.demo.conversation import DEMO_RESOURCE_ID, DEMO_THREAD_ID
from obsmem.demo.runner import DemoReport, demo_config, run_demo
from obsmem.storage import ObservationRecord, open_store

runner = CliRunner()
WIDE = {"COLUMNS": "200"}  # rich measures the terminal from COLUMNS: one table row per line


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


class Written:
    """A demo store on disk and what the library itself says is in it."""

    def __init__(self, path: Path, report: DemoReport) -> None:
        self.path = path
        self.report = report
        self.head, self.generations, self.tail = asyncio.run(self._read())
        self.window_tokens = asyncio.run(self._window())

    async def _window(self) -> int:
        """The unobserved window as ``Memory.status`` counts it: what ``threads`` shows as pending."""
        async with Memory(str(self.path), config=demo_config(800, 400)) as memory:
            return (await memory.status(DEMO_THREAD_ID)).window_tokens

    async def _read(self) -> tuple[ObservationRecord, list[ObservationRecord], list[Message]]:
        async with open_store(str(self.path)) as store:
            head = await store.get_head(f"thread:{DEMO_THREAD_ID}")
            assert head is not None
            generations = await store.list_generations(head.lineage)
            tail = await store.list_messages(DEMO_THREAD_ID, after_seq=head.cursor(DEMO_THREAD_ID))
        return head, generations, tail


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    path = tmp_path_factory.mktemp("inspect") / "demo.db"
    report = asyncio.run(run_demo(path, config=demo_config(800, 400), turns=30))
    assert report.generations > 2 and report.observation_cycles > 2
    return Written(path, report)


def _url_forms(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.chdir(path.parent.parent)
    relative = f"{path.parent.name}/{path.name}"
    return [str(path), f"sqlite:///{relative}", f"sqlite:///{path}", relative]


def test_threads_lists_the_thread_on_every_sqlite_url_form(
    written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in _url_forms(written.path, monkeypatch):
        result = runner.invoke(app, ["threads", "--store", url, "--resource", DEMO_RESOURCE_ID], env=WIDE)
        assert result.exit_code == 0, (url, result.output)
        assert f"store: sqlite {written.path}" in result.output, url
        row = next(line for line in result.output.splitlines() if DEMO_THREAD_ID in line)
        cells = row.split()
        assert cells[:3] == [DEMO_THREAD_ID, DEMO_RESOURCE_ID, str(written.report.messages)], url
        observed, pending, generations = cells[3:6]
        assert observed == f"{written.head.total_tokens_observed:,}"
        # the unobserved window now (not the record's pending_message_tokens, as of its last observation)
        assert pending == f"{written.window_tokens:,}" and written.window_tokens > 0
        assert generations == str(written.report.generations)


def test_threads_of_an_unknown_resource_says_so(written: Written) -> None:
    result = runner.invoke(app, ["threads", "--store", str(written.path), "--resource", "nobody"])
    assert result.exit_code == 0, result.output
    assert "no threads for resource 'nobody'" in _flat(result.output)


def test_threads_without_a_resource_lists_every_thread(tmp_path: Path) -> None:
    path = tmp_path / "two.db"

    async def write() -> None:
        async with open_store(str(path)) as store:
            await store.create_thread(Thread(id="t-ann", resource_id="ann"))
            await store.create_thread(Thread(id="t-bob", resource_id="bob"))
            await store.save_messages("t-bob", [Message.user("hi")])

    asyncio.run(write())
    result = runner.invoke(app, ["threads", "--store", str(path)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "All threads" in result.output
    rows = [line.split() for line in result.output.splitlines() if line.split()[:1] in (["t-ann"], ["t-bob"])]
    assert [row[:3] for row in rows] == [["t-ann", "ann", "0"], ["t-bob", "bob", "1"]]


def test_threads_of_an_empty_store_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"

    async def migrate() -> None:
        async with open_store(str(path)) as store:
            await store.migrate()

    asyncio.run(migrate())
    result = runner.invoke(app, ["threads", "--store", str(path)])
    assert result.exit_code == 0, result.output
    assert "no threads in this store" in result.output


def test_show_draws_observations_tail_generations_and_markers(written: Written) -> None:
    result = runner.invoke(app, ["show", DEMO_THREAD_ID, "--store", str(written.path)], env=WIDE)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"store: sqlite {written.path}" in out
    for title in ("Observations", "Unobserved tail", "Generations", "Markers"):
        assert title in out, title
    first_line = next(line for line in written.head.active_observations.splitlines() if line.strip())
    assert first_line.strip()[:40] in out
    # the raw tail: every unobserved message, tool calls and results drawn, never "(no text)"
    assert f"Unobserved tail ({len(written.tail)} messages" in out
    assert "(no text)" not in out
    if any(m.tool_calls for m in written.tail):
        assert "→ " in out
    # every generation, newest first, the live one marked
    assert f"Generations ({len(written.generations)})" in out
    assert len(written.generations) == written.report.generations
    assert "live" in out
    # markers written by the cycles
    assert "observation-end" in out


def test_show_limits_the_tail_and_says_how_many_it_left_out(written: Written) -> None:
    result = runner.invoke(app, ["show", DEMO_THREAD_ID, "--store", str(written.path), "--tail", "1"],
                           env=WIDE)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"showing the newest 1; {len(written.tail) - 1} older" in _flat(result.output)


def test_show_an_unknown_thread_is_one_line(written: Written) -> None:
    result = runner.invoke(app, ["show", "nope", "--store", str(written.path)])
    assert result.exit_code == 1
    assert f"error: no thread 'nope' in sqlite {written.path}" in _flat(result.output)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [["threads", "--resource", "r"], ["show", "t1"]])
def test_memory_store_is_refused_in_one_line(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--store", "memory://"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "memory://" in lines[0] and "new process" in lines[0]


@pytest.mark.parametrize("command", [["threads", "--resource", "r"], ["show", "t1"]])
def test_a_missing_sqlite_file_is_not_created(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "typo.db"
    result = runner.invoke(app, [*command, "--store", str(missing)])
    assert result.exit_code == 1
    assert f"no database at {missing}" in _flat(result.output)
    assert not missing.exists()


def test_show_runs_as_a_real_process(written: Written) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "obsmem", "show", DEMO_THREAD_ID, "--store", f"sqlite:///{written.path}"],
        capture_output=True, text=True, check=False, timeout=120, env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"store: sqlite {written.path}" in done.stderr
    assert "Observations" in done.stdout and "Generations" in done.stdout


def test_threads_and_show_on_postgresql_mask_the_password(postgres_url: str) -> None:
    async def write() -> None:
        async with Memory(postgres_url) as memory:
            said = [Message.user("I moved to Lisbon last week.")]
            turn = await memory.begin_turn(thread_id="pg-t", resource_id="pg-u", messages=said)
            await turn.step([Message.assistant("How is Lisbon?")])
            await turn.end()

    asyncio.run(write())
    scheme, rest = postgres_url.split("://", 1)
    user, host = rest.split("@", 1)
    with_password = f"{scheme}://{user}:hunter2@{host}"
    listed = runner.invoke(app, ["threads", "--store", with_password, "--resource", "pg-u"])
    assert listed.exit_code == 0, listed.output
    assert f"store: {scheme}://{user}@{host}" in listed.output
    assert "pg-t" in listed.output and "hunter2" not in listed.output
    shown = runner.invoke(app, ["show", "pg-t", "--store", with_password])
    assert shown.exit_code == 0, shown.output
    assert "I moved to Lisbon last week." in shown.output and "hunter2" not in shown.output

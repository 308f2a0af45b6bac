"""``obsmem show`` of a long thread reads a bounded number of messages (rows, not time).

On main ``show`` read the whole thread (``list_messages(thread)``, every row decoded) to count it,
to find its unobserved tail and its markers, and ``Memory.status`` read the whole unobserved
window again: a thread of 2,500 messages saved without memory running read 7,500 rows, one of
5,000 read 15,000. It now reads the newest ``--tail`` messages, the unobserved window up to
``WINDOW_READ`` messages (to count its tokens) and markers in the newest ``MARKER_SCAN``, and
pages back with ``--before SEQ``. Rows are counted at the store class the command opens."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from obsmem import DataPart, Message, Thread
from obsmem.cli import app
from obsmem.storage import SQLiteStore

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
BATCH = 500
#: obsmem.cli.threads's WINDOW_READ and MARKER_SCAN (named here: main had neither)
WINDOW_READ, MARKER_SCAN = 2_000, 1_000


def _seed(db: Path, thread: str, count: int, *, marker_every: int = 0) -> None:
    async def run() -> None:
        store = SQLiteStore(db)
        try:
            await store.create_thread(Thread(id=thread, resource_id="alice"))
            for start in range(0, count, BATCH):
                batch = []
                for n in range(start, min(count, start + BATCH)):
                    message = Message.user(f"message {n} [red]not red[/red]")
                    if marker_every and n % marker_every == 0:
                        message = message.model_copy(update={"parts": (
                            *message.parts, DataPart(name="om-observation-end", data={"cycle_id": f"c{n}", "n": n}))})
                    batch.append(message)
                await store.save_messages(thread, batch)
        finally:
            await store.close()

    asyncio.run(run())


class _Rows:
    rows = 0


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Rows]]:
    """Counts the rows every SQLiteStore's ``list_messages`` hands out (the CLI opens its own)."""
    real = SQLiteStore.list_messages

    async def counted(self: SQLiteStore, *args: Any, **kwargs: Any) -> list[Message]:
        found = await real(self, *args, **kwargs)
        _Rows.rows += len(found)
        return found

    _Rows.rows = 0
    monkeypatch.setattr(SQLiteStore, "list_messages", counted)
    yield _Rows


def _show(db: Path, thread: str, *more: str) -> str:
    result = runner.invoke(app, ["show", thread, "--store", str(db), *more], env=WIDE)
    assert result.exit_code == 0, result.output
    return " ".join(result.stdout.replace("│", " ").split())


def test_show_reads_the_same_bounded_rows_however_long_the_thread(tmp_path: Path, rows: type[_Rows]) -> None:
    read, shown = {}, {}
    for count in (2_500, 5_000):
        db = tmp_path / f"{count}.db"
        _seed(db, "long", count)
        rows.rows = 0
        shown[count] = _show(db, "long")
        read[count] = rows.rows
    assert read[2_500] == read[5_000] <= WINDOW_READ + 1 + 21 + MARKER_SCAN, read  # main: 5,000 and 10,000
    for count, out in shown.items():
        assert f"messages {count:,} (observed up to seq 0)" in out, out[:2000]
        assert f"message {count - 1} [red]not red[/red]" in out  # the newest, markup printed as written
        assert f"Unobserved tail (over {WINDOW_READ:,} messages after seq 0; showing the newest 20" in out, out[:3000]


def test_show_pages_back_with_before(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db, "t", 60, marker_every=7)
    first = _show(db, "t", "--tail", "10")
    assert "message 59 " in first and "message 50 " in first and "message 49 " not in first
    hint = first.split("older: --before ", 1)[1].split(")", 1)[0]
    older = _show(db, "t", "--tail", "10", "--before", hint)
    assert f"Messages before seq {hint} (the newest 10 messages" in older, older[:2000]
    assert "message 49 " in older and "message 40 " in older
    assert "message 50 " not in older and "message 39 " not in older
    # markers: the thread's 9 (on messages 0, 7, ..., 56), and the 8 before the seq (up to 49)
    assert "Markers (9)" in first
    assert "Markers (8)" in older


def test_show_help_says_how_to_page() -> None:
    result = runner.invoke(app, ["show", "--help"], env=WIDE)
    assert result.exit_code == 0
    said = " ".join(result.stdout.replace("│", " ").split())
    assert "--before" in said and "bounded number of messages" in said


def test_a_count_or_seq_too_large_for_the_store_is_a_bad_option_not_a_traceback(tmp_path: Path) -> None:
    """``show --tail`` / ``--before`` now reach the store's query; 10**20 overflowed SQLite's
    64-bit integer (an OverflowError traceback), as ``queue retry 10**20`` did on main."""
    db = tmp_path / "m.db"
    _seed(db, "t", 3)
    huge = str(10**20)
    for command in (["show", "t", "--tail", huge], ["show", "t", "--before", huge], ["show", "t", "--markers", huge],
                    ["queue", "retry", huge]):  # fmt: skip
        result = runner.invoke(app, [*command, "--store", str(db)], env=WIDE)
        assert result.exit_code == 2, (command, result.output)
        assert "Invalid value" in " ".join(result.output.split()) and "Traceback" not in result.output, result.output
    fine = runner.invoke(app, ["show", "t", "--store", str(db), "--tail", str(10**9), "--before", str(2**63 - 1)],
                         env=WIDE)  # fmt: skip
    assert fine.exit_code == 0, fine.output
    assert "message 2 " in fine.stdout and "message 0 " in fine.stdout

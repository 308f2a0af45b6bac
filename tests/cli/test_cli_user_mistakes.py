"""A user's slips at the command line end in one clear line and change nothing (hostile review,
helper-100): a mistyped knowledge path, a blank value to forget, a demo database that holds the
user's own ``demo-thread``, a dry run of ``migrate``.

On main each of these "succeeded": ``forget``/``delete-resource``/``knowledge pending``/``export``
with a mistyped ``--knowledge`` created an empty knowledge file and reported 0 records erased
(the real store kept them), ``keys list`` created the store file, ``forget " "`` removed 603 of
818 messages, ``demo --db`` deleted the user's own ``demo-thread`` of ``demo-user``, and
``migrate --dry-run`` created the database file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import InvalidInputError, Memory, Message
from obsmem.cli import app

runner = CliRunner()


def _seed(db: Path, thread: str = "t1", resource: str = "alice", text: str = "Alice's notes about Kessler.") -> None:
    async def seed() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(thread, resource)
            await memory.save_messages(thread, [Message.user(text), Message.assistant("Noted.")])

    asyncio.run(seed())


def _texts(db: Path, thread: str = "t1") -> list[str]:
    async def read() -> list[str]:
        async with Memory(f"sqlite:///{db}") as memory:
            return [m.text for m in await memory.list_messages(thread)]

    return asyncio.run(read())


def _refused(result: object, needle: str) -> None:
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1 and needle in errors[0], result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "command",
    [
        ["forget", "Kessler", "--yes"],
        ["delete-resource", "alice", "--yes"],
        ["export", "-r", "alice", "-o", "-"],
    ],
)
def test_a_mistyped_knowledge_path_is_refused_not_created(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    typo = tmp_path / "knowlege.db"
    result = runner.invoke(app, [*command, "--store", str(db), "--knowledge", str(typo)])
    _refused(result, "no knowledge store at")
    assert not typo.exists()
    assert _texts(db) == ["Alice's notes about Kessler.", "Noted."]  # nothing erased either


@pytest.mark.parametrize("command", [["pending"], ["activity"]])
def test_knowledge_review_of_a_missing_file_is_refused_not_created(tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "knowlege.db"
    result = runner.invoke(app, ["knowledge", *command, "-k", str(typo), "--scope", "org:default/resource:alice"])
    _refused(result, "no knowledge store at")
    assert not typo.exists()


@pytest.mark.parametrize("command", [["keys", "list"], ["keys", "revoke", "k_abc"]])
def test_keys_of_a_missing_store_are_refused_not_created(tmp_path: Path, command: list[str]) -> None:
    pytest.importorskip("fastapi")
    typo = tmp_path / "typo.db"
    result = runner.invoke(app, [*command, "--store", str(typo)])
    _refused(result, "no database at")
    assert not typo.exists()


@pytest.mark.parametrize("value", [" ", "\t\n", "  "])
def test_a_blank_value_is_not_forgotten(tmp_path: Path, value: str) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["forget", value, "--store", str(db), "--yes"])
    _refused(result, "VALUE")
    assert _texts(db) == ["Alice's notes about Kessler.", "Noted."]

    async def library() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            with pytest.raises(InvalidInputError, match="blank"):
                await memory.forget(value)

    asyncio.run(library())
    assert _texts(db) == ["Alice's notes about Kessler.", "Noted."]


def test_demo_refuses_a_demo_thread_of_demo_user_it_did_not_make(tmp_path: Path) -> None:
    db = tmp_path / "mine.db"
    _seed(db, thread="demo-thread", resource="demo-user", text="My own ZEBRA-991 notes.")
    result = runner.invoke(app, ["demo", "--db", str(db), "--turns", "3", "--no-context"])
    _refused(result, "'demo-thread'")
    assert _texts(db, "demo-thread") == ["My own ZEBRA-991 notes.", "Noted."]
    again = tmp_path / "demo.db"  # its own thread it still replaces, run after run
    for _ in range(2):
        assert runner.invoke(app, ["demo", "--db", str(again), "--turns", "3", "--no-context"]).exit_code == 0


def test_migrate_dry_run_creates_nothing(tmp_path: Path) -> None:
    fresh = tmp_path / "sub" / "fresh.db"
    result = runner.invoke(app, ["migrate", "--store", f"sqlite:///{fresh}", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "pending" in result.stdout and "knowledge" in result.stdout
    assert not fresh.exists() and not fresh.parent.exists()
    db = tmp_path / "m.db"
    _seed(db)
    assert runner.invoke(app, ["migrate", "--store", f"sqlite:///{db}"]).exit_code == 0
    again = runner.invoke(app, ["migrate", "--store", f"sqlite:///{db}", "--dry-run"])
    assert again.exit_code == 0 and again.stdout.startswith("0 migrations pending"), again.output


@pytest.mark.parametrize("command", [["show"], ["threads", "--resource"], ["export", "-r"], ["usage", "--thread"]])
def test_an_argument_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path, command: list[str]) -> None:
    """On main: a 217-line ``UnicodeEncodeError: … surrogates not allowed`` traceback."""
    import subprocess
    import sys

    db = tmp_path / "m.db"
    _seed(db)
    argv = [sys.executable, "-m", "obsmem.cli", *command, b"bad\xff", "--store", str(db)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)  # noqa: S603 - our own CLI
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "not UTF-8" in done.stderr, done.stderr
    assert [line for line in done.stderr.splitlines() if line.strip()] == [done.stderr.strip()]


def test_a_key_store_in_a_new_folder_is_made_private(tmp_path: Path) -> None:
    """On main ``keys create --store new/k.db`` failed ("unable to open database file"), and
    ``obsmem serve`` on such a store died at startup with a 61-line traceback; a key store the
    key commands created took the umask's mode (0644), not the memory store's 0600."""
    pytest.importorskip("fastapi")
    db = tmp_path / "new" / "k.db"
    result = runner.invoke(app, ["keys", "create", "--org", "acme", "--store", str(db)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("om_")
    assert db.stat().st_mode & 0o777 == 0o600 and db.parent.stat().st_mode & 0o777 == 0o700
    listed = runner.invoke(app, ["keys", "list", "--store", str(db)])
    assert listed.exit_code == 0 and '"org_id": "acme"' in listed.stdout, listed.output


@pytest.mark.parametrize("bench", ["locomo", "longmemeval", "knowledge"])
@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b"[1, 2]", None])
def test_bench_data_a_user_gets_wrong_is_one_line(tmp_path: Path, bench: str, content: bytes | None) -> None:
    """On main: ``UnicodeDecodeError``, ``AttributeError: 'int' object has no attribute 'get'`` and
    ``IsADirectoryError`` tracebacks (None: --data names a folder)."""
    data = tmp_path / "data.json"
    if content is None:
        data.mkdir()
    else:
        data.write_bytes(content)
    result = runner.invoke(app, ["bench", bench, "--data", str(data)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)
    assert "--data" in result.output


def test_bench_json_in_a_missing_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    """On main: a ``FileNotFoundError`` traceback, after the whole run."""
    out = tmp_path / "missing" / "a.json"
    result = runner.invoke(app, ["bench", "survival", "--json", str(out)])
    assert result.exit_code == 2, result.output
    assert "does not exist" in " ".join(result.output.split()) and not out.parent.exists()


@pytest.mark.parametrize("command", [["forget", "Kessler"], ["delete-resource", "alice"]])
def test_an_erase_says_when_a_reader_keeps_the_erased_text_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Another process reading the file (an export, a long listing) keeps SQLite from truncating
    its write-ahead log: the erased text stays in ``-wal``. On main the CLI said nothing (exit 0,
    counts only) and, being one-shot, never retried (helper-99 #3, 3 of 3 runs). Now it retries
    for a while and then says so."""
    import sqlite3

    from obsmem.cli import forget as forget_command

    monkeypatch.setattr(forget_command, "WAL_RETRY_S", 0.6)
    db = tmp_path / "m.db"
    _seed(db)
    reader = sqlite3.connect(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()  # a read snapshot held open
    try:
        result = runner.invoke(app, [*command, "--store", str(db), "--yes"])
    finally:
        reader.close()
    assert result.exit_code == 0, result.output
    assert "still holds the erased text" in " ".join(result.stderr.split()), result.stderr
    _seed(tmp_path / "quiet.db")
    quiet = runner.invoke(app, [*command, "--store", str(tmp_path / "quiet.db"), "--yes"])
    assert quiet.exit_code == 0 and "write-ahead log" not in quiet.stderr, quiet.output


@pytest.mark.parametrize(("since", "until"), [("2025-03-05", "2025-03-01"), ("2025-03-05", "2025-03-05")])
def test_a_usage_window_that_ends_before_it_starts_is_refused(tmp_path: Path, since: str, until: str) -> None:
    """On main ``usage --since 2025-03-05 --until 2025-03-01`` printed an empty table with exit 0
    (and ``Memory.usage`` returned nothing): a swapped pair read as "no calls"."""
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["usage", "--store", str(db), "--since", since, "--until", until])
    _refused(result, "--since")

    async def api() -> None:
        from datetime import date

        async with Memory(f"sqlite:///{db}") as memory:
            with pytest.raises(InvalidInputError, match="since"):
                await memory.usage(since=date.fromisoformat(since), until=date.fromisoformat(until))

    asyncio.run(api())


@pytest.mark.parametrize("upstream", ["not-a-url", "ftp://models.example/v1", "http://"])
def test_serve_refuses_an_upstream_that_is_not_an_http_url(tmp_path: Path, upstream: str) -> None:
    """On main ``obsmem serve --upstream not-a-url`` started the server; every gateway request
    then failed. It now exits 2 before starting, naming the option (a subprocess with a time
    limit: on main the server would simply keep running)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "obsmem", "serve", "--dev", "--port", "0", "--store", str(tmp_path / "s.db"),
         "--upstream", upstream],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--upstream" in done.stderr and "Traceback" not in done.stderr


def test_a_worker_on_a_private_memory_store_is_refused() -> None:
    """On main ``obsmem worker --store memory://`` ran (and with --exit-when-idle reported
    "0 claimed" and exit 0): a store private to the worker's own process, which no application
    can write to, so the worker could never have work."""
    result = runner.invoke(app, ["worker", "--store", "memory://", "--exit-when-idle"])
    _refused(result, "memory://")


def test_importing_a_folder_says_it_is_a_folder(tmp_path: Path) -> None:
    """On main ``obsmem import <folder>`` said "no export file at <folder>", which exists."""
    folder = tmp_path / "exports"
    folder.mkdir()
    result = runner.invoke(app, ["import", str(folder), "--store", str(tmp_path / "m.db")])
    _refused(result, "is a folder")

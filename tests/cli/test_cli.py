"""The CLI on real SQLite files: the demo runs offline and reports compression; every command is
reachable from the ``obsmem`` script and ``python -m obsmem.cli``; ``migrate`` needs no dialect flag."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from typer.testing import CliRunner

import obsmem
import obsmem.cli
from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.storage import SQLiteStore

runner = CliRunner()


def test_demo_runs_and_reports(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = runner.invoke(app, ["demo", "--db", str(db), "--turns", "60", "--no-context"])
    assert result.exit_code == 0, result.output
    assert "compression" in result.output
    assert db.exists()
    match = re.search(r"compression\s*│\s*([\d.]+)×", result.output)
    assert match and float(match.group(1)) > 1.0


def _threads_in(db: Path) -> dict[str, tuple[str, str | None, list[str]]]:
    """Every thread of ``db``: its resource, org and message texts."""

    async def read() -> dict[str, tuple[str, str | None, list[str]]]:
        async with SQLiteStore(db) as store:
            return {
                t.id: (t.resource_id, t.org_id, [m.text for m in await store.list_messages(t.id)])
                for t in await store.list_all_threads()
            }

    return asyncio.run(read())


def test_demo_never_replaces_a_demo_thread_it_did_not_make(tmp_path: Path) -> None:
    """``demo --db`` on a real database that holds a ``demo-thread`` of another resource (or of an
    org) refuses in one line naming the thread, exit 1, and deletes nothing; into its own
    database it runs again, replacing only its own previous ``demo-thread``.

    On main the demo called ``delete_thread("demo-thread")`` whatever the thread was: alice's
    thread and its message were gone and the demo's took its place, with exit 0:
    ``AssertionError: … assert 0 == 1 where 0 = <Result okay>.exit_code``."""
    for resource_id, org_id in (("alice", None), ("demo-user", "acme")):
        db = tmp_path / f"{resource_id}.db"

        async def seed(db: Path = db, resource_id: str = resource_id, org_id: str | None = org_id) -> None:
            async with Memory(f"sqlite:///{db}") as memory:
                await memory.create_thread("demo-thread", resource_id, org_id=org_id)
                await memory.save_messages("demo-thread", [Message.user("alice's own words")])
                await memory.create_thread("other", resource_id="alice")

        asyncio.run(seed())
        before = _threads_in(db)
        result = runner.invoke(app, ["demo", "--db", str(db), "--turns", "3", "--no-context"])
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "'demo-thread'" in errors[0], result.stderr
        assert "Traceback" not in result.output
        assert _threads_in(db) == before

    own = tmp_path / "demo.db"
    runs = []
    for _ in range(2):
        again = runner.invoke(app, ["demo", "--db", str(own), "--turns", "3", "--no-context"])
        assert again.exit_code == 0, again.output
        runs.append(_threads_in(own))
    resource, org, texts = runs[1]["demo-thread"]
    assert runs[0] == runs[1] and (resource, org) == ("demo-user", None) and texts


def test_demo_rejects_bad_options() -> None:
    result = runner.invoke(app, ["demo", "--message-tokens", "0"])
    assert result.exit_code != 0


def test_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0 and result.output.strip()


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("worker", "migrate", "version", "demo", "bench"):
        assert re.search(rf"│ {command}\s", result.output), command


def test_the_console_script_and_python_m_run_the_same_app() -> None:
    (script,) = entry_points(group="console_scripts", name="obsmem")
    assert script.value == "obsmem.cli:main"
    assert script.load() is obsmem.cli.main
    result = subprocess.run([sys.executable, "-m", "obsmem.cli", "version"], capture_output=True, text=True,
                            check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stdout.strip() == obsmem.__version__


def test_migrate_a_plain_sqlite_path(tmp_path: Path) -> None:
    db = tmp_path / "nested" / "plain.db"  # no sqlite:/// prefix, and a folder that does not exist yet
    dry = runner.invoke(app, ["migrate", "--store", str(db), "--dry-run"])
    assert dry.exit_code == 0 and "14 migrations pending: m001_initial" in dry.output, dry.output
    done = runner.invoke(app, ["migrate", "--store", str(db)])
    assert done.exit_code == 0 and "14 migrations applied" in done.output
    again = runner.invoke(app, ["migrate", "--store", str(db)])
    assert again.exit_code == 0 and "0 migrations applied" in again.output


def test_migrate_refuses_a_store_without_a_schema_with_a_message() -> None:
    result = runner.invoke(app, ["migrate", "--store", "memory://"])
    assert result.exit_code == 1
    message = " ".join(result.output.split())  # rich wraps long lines at the terminal width
    assert message.startswith("error: 'memory://' has no schema to migrate")
    assert "Traceback" not in result.output

"""``obsmem forget`` and ``obsmem delete-resource`` on a SQLite file."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory
from obsmem.cli import app
from obsmem.knowledge import Knowledge
from obsmem.types import Message

from .scan import KNOWLEDGE_TABLES, MESSAGE_TABLES, scan_sqlite

runner = CliRunner()
SECRET = "QZXCLISECRET9"


def _plant(path: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{path}") as memory:
            await memory.create_thread("t1", "RES-" + SECRET)
            await memory.save_messages("t1", [Message.user(f"my code is {SECRET}"), Message.user("hello")])
            await memory.observe("t1")
            await memory.create_thread("t2", "u2")
            await memory.save_messages("t2", [Message.user(f"my code is {SECRET}")])

    asyncio.run(run())


def test_forget_asks_then_removes_the_value(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    _plant(path)
    refused = runner.invoke(app, ["forget", SECRET, "--store", str(path)], input="n\n")
    assert refused.exit_code != 0 and scan_sqlite(path, SECRET)
    result = runner.invoke(app, ["forget", SECRET, "--resource", "u2", "--store", str(path), "--yes"])
    assert result.exit_code == 0, result.output
    assert str(path) in result.output and "forgot" in result.output
    assert len(scan_sqlite(path, SECRET)) > 0  # the other resource still holds it
    result = runner.invoke(app, ["forget", SECRET, "--store", str(path)], input="y\n")
    assert result.exit_code == 0, result.output
    # The resource id itself is not a value of the text: delete the resource to remove it.
    assert all("RES-" in hit for hit in scan_sqlite(path, SECRET))


def test_delete_resource_removes_everything_of_it(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    _plant(path)
    result = runner.invoke(app, ["delete-resource", "RES-" + SECRET, "--store", str(path), "--yes"])
    assert result.exit_code == 0, result.output
    assert "deleted resource" in result.output and re.search(r"\b1 thread\b", result.output)
    assert [hit for hit in scan_sqlite(path, SECRET) if "RES-" in hit] == []


def _plant_knowledge(path: Path, resource: str) -> None:
    async def run() -> None:
        async with Knowledge.sqlite(path, actor="tester") as knowledge:
            jane = await knowledge.node("Jane", "person", f"org:default/resource:{resource}")
            await knowledge.append(jane.id, f"Jane's code is {SECRET}", f"org:default/resource:{resource}", reason="t")

    asyncio.run(run())


def test_forget_and_delete_resource_reach_the_knowledge_store(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    _plant(path)
    _plant_knowledge(path, "u2")
    _plant_knowledge(path, "RES-" + SECRET)
    without = runner.invoke(app, ["forget", SECRET, "--resource", "u2", "--store", str(path), "--yes"])
    assert without.exit_code == 0, without.output
    assert any("knowledge" in hit for hit in scan_sqlite(path, SECRET, KNOWLEDGE_TABLES))  # not asked to
    result = runner.invoke(
        app, ["forget", SECRET, "--resource", "u2", "--store", str(path), "--knowledge", str(path), "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert re.search(r"\b1 knowledge_record\b", result.output), result.output
    result = runner.invoke(
        app, ["delete-resource", "RES-" + SECRET, "--store", str(path), "--knowledge", f"sqlite:///{path}", "--yes"]
    )
    assert result.exit_code == 0, result.output
    assert scan_sqlite(path, SECRET, MESSAGE_TABLES + KNOWLEDGE_TABLES) == []


def test_a_mistyped_store_path_is_refused_not_created(tmp_path: Path) -> None:
    """``delete-resource`` or ``forget`` on a path with a typo created an empty database there and
    reported the deletion done (0 threads): the real data stayed, and the operator believed it gone."""
    typo = tmp_path / "typo.db"
    for args in (["delete-resource", "alice"], ["forget", SECRET]):
        result = runner.invoke(app, [*args, "--store", str(typo), "--yes"])
        assert result.exit_code != 0 and "no database at" in result.output, result.output
        assert not typo.exists(), "an empty database was created"


def test_deleting_a_resource_the_store_does_not_hold_says_so(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    _plant(path)
    result = runner.invoke(app, ["delete-resource", "RES-typo", "--store", str(path), "--yes"])
    assert result.exit_code == 0 and "holds no thread of resource 'RES-typo'" in result.output, result.output

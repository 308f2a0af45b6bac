"""``obsmem export`` / ``obsmem import`` on SQLite files: the round trip, the store lines, refusals."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli.app import app
from obsmem.storage import SQLiteStore

from .helpers import RESOURCE, THREADS, build_resource, snapshot

runner = CliRunner()


def _source(path: Path) -> dict[str, object]:
    async def run() -> dict[str, object]:
        async with SQLiteStore(path) as store:
            await build_resource(store)
            return await snapshot(store)

    return asyncio.run(run())


def _read(path: Path) -> dict[str, object]:
    async def run() -> dict[str, object]:
        async with SQLiteStore(path) as store:
            return await snapshot(store)

    return asyncio.run(run())


def test_export_to_a_file_then_import_is_exact(tmp_path: Path) -> None:
    source, target, dump = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    before = _source(source)

    exported = runner.invoke(app, ["export", "--resource", RESOURCE, "--store", str(source), "-o", str(dump)])
    assert exported.exit_code == 0, exported.output
    assert f"store: sqlite {source}" in exported.stderr
    assert f"{len(THREADS)} thread" in exported.stderr
    assert json.loads(dump.read_text(encoding="utf-8").splitlines()[0])["format"] == "obsmem-export"

    imported = runner.invoke(app, ["import", str(dump), "--store", str(target)])
    assert imported.exit_code == 0, imported.output
    assert f"store: sqlite {target}" in imported.stderr
    assert f"imported resource '{RESOURCE}'" in imported.stdout
    assert _read(target) == before

    again = runner.invoke(app, ["import", str(dump), "--store", str(target)])
    assert again.exit_code == 1
    assert "already holds threads of resource 'alice'" in " ".join(again.stderr.split())


def test_export_to_stdout_keeps_status_lines_on_stderr(tmp_path: Path) -> None:
    source, target, dump = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    before = _source(source)
    exported = runner.invoke(app, ["export", "--resource", RESOURCE, "--store", str(source)])
    assert exported.exit_code == 0, exported.output
    assert "store: sqlite" in exported.stderr and "store:" not in exported.stdout
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["resource_id"] == RESOURCE
    assert json.loads(lines[-1])["kind"] == "end"
    dump.write_text(exported.stdout, encoding="utf-8")
    imported = runner.invoke(app, ["import", str(dump), "--store", str(target)])
    assert imported.exit_code == 0, imported.output
    assert _read(target) == before


def test_a_broken_file_is_refused_in_one_line_and_nothing_written(tmp_path: Path) -> None:
    source, target, dump = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    _source(source)
    assert runner.invoke(app, ["export", "-r", RESOURCE, "--store", str(source), "-o", str(dump)]).exit_code == 0
    lines = dump.read_text(encoding="utf-8").splitlines()
    lines[2] = "{not json"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["import", str(dump), "--store", str(target)])
    assert result.exit_code == 1
    assert "line 3: not JSON" in " ".join(result.stderr.split())

    async def threads() -> int:
        async with SQLiteStore(target) as store:
            return len(await store.list_all_threads())

    assert asyncio.run(threads()) == 0
    missing = runner.invoke(app, ["export", "-r", "nobody", "--store", str(source)])
    assert missing.exit_code == 1 and "No threads for resource 'nobody'" in " ".join(missing.stderr.split())


def test_a_file_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    """Found by a hostile review: a binary file, or a valid header followed by bytes that are not
    UTF-8, ended ``obsmem import`` with a raw ``UnicodeDecodeError`` traceback (exit 1), where the
    same bytes on stdin gave ``error: line 1: not JSON``."""
    source, target, dump = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    _source(source)
    assert runner.invoke(app, ["export", "-r", RESOURCE, "--store", str(source), "-o", str(dump)]).exit_code == 0
    header = dump.read_bytes().split(b"\n", 1)[0]
    for name, content in (("binary.jsonl", b"\xff\xfe\x00garbage"), ("header-then-bad.jsonl", header + b"\n\xff\xfe\n")):
        broken = tmp_path / name
        broken.write_bytes(content)
        result = runner.invoke(app, ["import", str(broken), "--store", str(target)])
        assert result.exit_code == 1, result.output
        assert "not UTF-8" in " ".join(result.stderr.split()), result.stderr
        assert "Traceback" not in result.output and result.exception is None or isinstance(result.exception, SystemExit)


def test_an_empty_into_resource_is_refused_and_nothing_imported(tmp_path: Path) -> None:
    """``import --into-resource ''`` (or whitespace only) is refused in one ``error:`` line, exit 1,
    no traceback, and the target holds nothing: it never falls back to the exported resource.

    On main this already held (the test passes there; the reported silent fallback does not
    reproduce): ``import_resource`` refuses the value with
    ``error: into_resource must be a non-empty string.`` before anything is written."""
    source, target, dump = tmp_path / "source.db", tmp_path / "target.db", tmp_path / "alice.jsonl"
    _source(source)
    exported = runner.invoke(app, ["export", "-r", RESOURCE, "--store", str(source), "-o", str(dump)])
    assert exported.exit_code == 0, exported.output
    for value in ("", "   ", "\t"):
        result = runner.invoke(app, ["import", str(dump), "--store", str(target), "--into-resource", value])
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "into_resource" in errors[0], result.stderr
        assert "Traceback" not in result.output and "imported" not in result.stdout

    async def threads() -> int:
        async with SQLiteStore(target) as store:
            return len(await store.list_all_threads())

    assert not target.exists() or asyncio.run(threads()) == 0


def test_export_and_import_with_knowledge_for_a_user_without_an_org(tmp_path: Path) -> None:
    """``Memory()`` makes threads without an org, and their knowledge lives in ``org:default``
    (what Memory's knowledge agents use). On main ``obsmem export --knowledge`` refused every such
    user ("do not name one organisation … pass knowledge_scope=", an option the CLI does not
    have), so the README's round trip with knowledge could not be run from the command line."""
    from obsmem import Memory, Message
    from obsmem.knowledge import Knowledge

    source, kfile = tmp_path / "m.db", tmp_path / "k.db"
    target, ktarget, dump = tmp_path / "t.db", tmp_path / "kt.db", tmp_path / "alice.jsonl"

    async def seed() -> str:
        async with Memory(f"sqlite:///{source}") as memory, Knowledge.sqlite(kfile, actor="t") as knowledge:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [Message.user("I moved to Berlin.")])
            scope = "org:default/resource:alice"
            node = await knowledge.node("Alice", "person", scope)
            record = await knowledge.append(node.id, "Alice lives in Berlin", scope, reason="said so")
            return record.id

    record_id = asyncio.run(seed())
    exported = runner.invoke(
        app, ["export", "-r", "alice", "--store", str(source), "--knowledge", str(kfile), "-o", str(dump)]
    )
    assert exported.exit_code == 0, exported.output
    assert "1 knowledge_record" in exported.stderr
    imported = runner.invoke(app, ["import", str(dump), "--store", str(target), "--knowledge", str(ktarget)])
    assert imported.exit_code == 0, imported.output

    async def check() -> None:
        async with Knowledge.sqlite(ktarget, actor="t") as knowledge:
            found = await knowledge.store.get_record(record_id, "org:default/resource:alice")
            assert found is not None and found.text == "Alice lives in Berlin"

    asyncio.run(check())

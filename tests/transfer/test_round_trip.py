"""Export → import into an empty store → the same threads, messages, generations, working memory
and contexts, on every adapter; and the refusals that keep an import all-or-nothing."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Message, Store, TextPart, Thread
from obsmem.errors import InvalidInputError, ObsmemError
from obsmem.knowledge import Knowledge
from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.transfer import (
    ExportFormatError,
    ExportVersionError,
    ImportConflictError,
    export_resource,
    import_resource,
)

from ..postgres_fixtures import PostgresServer, database_url
from .helpers import RESOURCE, THREADS, build_resource, export_text, snapshot

pytestmark = pytest.mark.anyio

ADAPTERS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=ADAPTERS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Store]:
    """A factory of empty stores of one adapter (``name`` tells two apart)."""
    kind = request.param

    def make(name: str) -> Store:
        if kind == "memory":
            return MemoryStore()
        if kind == "sqlite":
            return SQLiteStore(tmp_path / f"{name}.db")
        return PostgresStore(request.getfixturevalue(f"postgres_url_{name}"), migrate=False)

    return make


@pytest.fixture
def postgres_url_source(postgres_server: PostgresServer) -> Iterator[str]:
    yield from _database(postgres_server)


@pytest.fixture
def postgres_url_target(postgres_server: PostgresServer) -> Iterator[str]:
    yield from _database(postgres_server)


def _database(server: PostgresServer) -> Iterator[str]:
    """Two fresh databases per PostgreSQL test (``postgres_url`` gives one): source and target."""
    name = server.create_database()
    try:
        yield database_url(server.url, name)
    finally:
        server.drop_database(name)


def _lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_round_trip_is_exact(make_store: Callable[[str], Store], scope: str) -> None:
    async with make_store("source") as source, make_store("target") as target:
        await build_resource(source, scope=scope)
        before = await snapshot(source, scope=scope)
        text = await export_text(source)
        summary = await import_resource(target, io.StringIO(text))
        after = await snapshot(target, scope=scope)

    # The resource really is what the issue asks for: observations and ≥ 2 reflections.
    lineages = before["generations"]
    reflected = [gens for gens in lineages.values() if len(gens) >= 3]
    assert reflected, {k: len(v) for k, v in lineages.items()}
    assert all(gens[0]["superseded_by"] is None for gens in lineages.values() if gens)
    kinds = {part["type"] for t in THREADS for m in before[f"messages:{t}"] for part in m["parts"]}
    assert {"text", "tool-call", "tool-result", "data"} <= kinds, kinds
    assert before["wm:resource"] and all(before[f"wm:{t}"] for t in THREADS)

    assert summary.seqs_preserved
    assert summary.counts["thread"] == len(THREADS)
    for key in before:
        assert after[key] == before[key], key
    assert after == before


async def test_export_header_items_and_trailer(tmp_path: Path) -> None:
    async with MemoryStore() as store:
        await build_resource(store)
        path = tmp_path / "alice.jsonl"
        summary = await export_resource(store, RESOURCE, path)
    lines = _lines(path.read_text(encoding="utf-8"))
    assert lines[0]["format"] == "obsmem-export" and lines[0]["version"] == 1
    assert lines[0]["resource_id"] == RESOURCE and "exported_at" in lines[0]
    assert lines[-1] == {"kind": "end", "data": {"counts": summary.counts}}
    kinds = [line["kind"] for line in lines[1:-1]]
    assert kinds.count("thread") == len(THREADS) == summary.counts["thread"]
    assert summary.counts["record"] > len(THREADS)  # older generations too


async def test_export_of_an_unknown_resource_is_refused() -> None:
    async with MemoryStore() as store:
        with pytest.raises(InvalidInputError, match="No threads for resource 'nobody'"):
            await export_resource(store, "nobody", io.StringIO())


async def test_renumbered_seqs_are_mapped_everywhere(tmp_path: Path) -> None:
    """A target whose seq counter has moved on still gets a working memory: cursors follow."""
    async with MemoryStore() as source, SQLiteStore(tmp_path / "t.db") as target:
        await build_resource(source)
        before = await snapshot(source)
        text = await export_text(source)
        other = await target.create_thread(Thread(id="bob-1", resource_id="bob"))
        filler = [Message(id=f"b{i}", role="user", parts=(TextPart(text="hi"),)) for i in range(7)]
        await target.save_messages(other.id, filler)
        summary = await import_resource(target, io.StringIO(text))
        after = await snapshot(target)
    assert not summary.seqs_preserved
    for thread in THREADS:
        assert _without_seq(after[f"messages:{thread}"]) == _without_seq(before[f"messages:{thread}"])
        assert [m["id"] for m in after[f"context:{thread}"]] == [m["id"] for m in before[f"context:{thread}"]]
        shift = {m["seq"]: n["seq"] for m, n in zip(before[f"messages:{thread}"], after[f"messages:{thread}"])}
        head_before = before["heads"][f"thread:{thread}"]
        head_after = after["heads"][f"thread:{thread}"]
        assert head_after["threads"][thread]["cursor"] == shift[head_before["threads"][thread]["cursor"]]
        assert head_after["active_observations"] == head_before["active_observations"]


def _without_seq(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "seq": None} for m in messages]


async def test_a_corrupted_line_names_its_number_and_writes_nothing(tmp_path: Path) -> None:
    async with MemoryStore() as source, SQLiteStore(tmp_path / "t.db") as target:
        await build_resource(source)
        lines = (await export_text(source)).splitlines()
        broken = list(lines)
        # a message whose role is not a role, far into the file (after threads were read)
        index = next(i for i, line in enumerate(lines) if json.loads(line).get("kind") == "record")
        item = json.loads(lines[index])
        item["data"]["generation"] = "many"
        broken[index] = json.dumps(item)
        with pytest.raises(ExportFormatError) as caught:
            await import_resource(target, broken)
        assert caught.value.line == index + 1
        assert f"line {index + 1}" in str(caught.value)
        assert await target.list_all_threads() == []

        not_json = list(lines)
        not_json[3] = not_json[3][:-5]
        with pytest.raises(ExportFormatError, match="line 4: not JSON"):
            await import_resource(target, not_json)
        with pytest.raises(ExportFormatError, match="without its end line"):
            await import_resource(target, lines[:-1])
        assert await target.list_all_threads() == []
        assert await target.get_working_memory(f"resource:{RESOURCE}") is None


async def test_a_future_version_is_refused_by_number() -> None:
    async with MemoryStore() as source, MemoryStore() as target:
        await build_resource(source)
        lines = (await export_text(source)).splitlines()
        header = json.loads(lines[0])
        header["version"] = 2
        lines[0] = json.dumps(header)
        with pytest.raises(ExportVersionError, match="version 2 is not supported") as caught:
            await import_resource(target, lines)
        assert caught.value.version == 2
        assert isinstance(caught.value, ObsmemError)
        assert await target.list_all_threads() == []


async def test_importing_twice_is_refused(tmp_path: Path) -> None:
    async with MemoryStore() as source, SQLiteStore(tmp_path / "t.db") as target:
        await build_resource(source)
        text = await export_text(source)
        await import_resource(target, io.StringIO(text))
        before = await snapshot(target)
        with pytest.raises(ImportConflictError, match="already holds threads of resource 'alice'"):
            await import_resource(target, io.StringIO(text))
        # under another resource id the thread ids still clash
        with pytest.raises(ImportConflictError, match="already holds a thread"):
            await import_resource(target, io.StringIO(text), into_resource="alice-2")
        assert await snapshot(target) == before


async def test_into_resource_moves_everything(tmp_path: Path) -> None:
    async with MemoryStore() as source, MemoryStore() as target:
        await build_resource(source)
        text = await export_text(source)
        summary = await import_resource(target, io.StringIO(text), into_resource="carol")
        assert summary.resource_id == "carol"
        threads = await target.list_threads("carol")
        assert [t.id for t in threads] == [t.id for t in await source.list_threads(RESOURCE)]
        assert await target.get_working_memory("resource:carol") == await source.get_working_memory(
            f"resource:{RESOURCE}"
        )
        head = await target.get_head(f"thread:{THREADS[0]}")
        assert head is not None and head.resource_id == "carol"


async def test_knowledge_is_exported_and_imported_or_skipped() -> None:
    async with MemoryStore() as source, MemoryStore() as target, Knowledge.in_memory(actor="t") as knowledge:
        await build_resource(source)
        scope = f"org:acme/resource:{RESOURCE}"
        jane = await knowledge.node("Jane", "person", scope)
        record = await knowledge.append(jane.id, "Jane moved to [[Berlin]]", scope, reason="said so",
                                        when="2026-07-01", attribute="city")
        await knowledge.node("Hidden", "person", "org:acme/resource:bob")
        # The threads name no organisation: their knowledge is org:default's (none here), not acme's.
        default = _lines(await export_text(source, knowledge=knowledge))[1:]
        assert not any(line["kind"].startswith("knowledge_") for line in default)
        text = await export_text(source, knowledge=knowledge, knowledge_scope=scope)
        lines = _lines(text)[1:]
        nodes = [line["data"] for line in lines if line["kind"] == "knowledge_node"]
        records = [line["data"] for line in lines if line["kind"] == "knowledge_record"]
        assert {n["name"] for n in nodes} == {"Jane", "Berlin"}  # not bob's node
        assert [r["id"] for r in records] == [record.id]
        assert records[0]["captured_at"] and records[0]["when"] and records[0]["max_scope"] == 0  # Level.ORG
        assert records[0]["mentions"]  # the edge to Berlin
        assert any(line["kind"] == "knowledge_activity" for line in lines)

        # Into the knowledge store it came from: its ids are taken, so nothing is imported.
        with pytest.raises(ImportConflictError, match="knowledge store already holds"):
            await import_resource(target, io.StringIO(text), knowledge=knowledge)
        assert await target.list_all_threads() == []
        summary = await import_resource(target, io.StringIO(text))
        assert summary.skipped["knowledge_record"] == 1
        assert len(await target.list_threads(RESOURCE)) == len(THREADS)
        async with MemoryStore() as other, Knowledge.in_memory(actor="t") as empty:
            summary = await import_resource(other, io.StringIO(text), knowledge=empty)
            assert summary.counts["knowledge_record"] == 1 and not summary.skipped
            assert await empty.store.get_record(record.id, scope) == await knowledge.store.get_record(record.id, scope)


def test_seq_map_moves_cursors_spans_and_group_ranges() -> None:
    from obsmem.transfer import _SeqMap

    seqs = _SeqMap(old=[3, 5, 9], new=[10, 11, 12])
    assert [seqs.upto(s) for s in (0, 3, 4, 5, 8, 9, 50)] == [0, 10, 10, 11, 11, 12, 12]
    assert [seqs.from_(s) for s in (1, 3, 4, 9)] == [10, 10, 11, 12]
    text = '<observation-group id="g1" thread="t1" range="3:9" first="a" last="c">\n* x range="3:9"\n</observation-group>'
    assert seqs.text(text) == text.replace('range="3:9" first', 'range="10:12" first', 1)

"""An import never writes a knowledge record broader than its ceiling (``max_scope``).

The README: "each record has a ``max_scope`` ceiling, checked on append and on every rescope".
An export is a file the user holds and may edit (or forge): a record kept at
``org:default/resource:alice`` whose ``max_scope`` says ``thread`` is not a record obsmem would
ever write, and the import refuses it (nothing is written). Found by a hostile review over REST
(``POST /api/resources/import`` answered 201); here through ``obsmem.transfer`` and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.cli.app import app
from obsmem.errors import ExportFormatError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.storage import SQLiteStore
from obsmem.transfer import export_resource, import_resource

SCOPE = "org:default/resource:alice"


async def _forged(tmp_path: Path) -> Path:
    """alice's export with one record's ceiling lowered to ``thread`` below where it is kept."""
    async with Knowledge.sqlite(tmp_path / "k.db") as knowledge, SQLiteStore(tmp_path / "m.db") as store:
        from obsmem.types import Thread

        await store.create_thread(Thread(id="t1", resource_id="alice"))
        node = await knowledge.node("alice", "person", SCOPE)
        await knowledge.append(node.id, "prefers tea over coffee", SCOPE, reason="said so", max_scope="resource")
        export = tmp_path / "alice.jsonl"
        await export_resource(store, "alice", export, knowledge=knowledge, knowledge_scope=SCOPE)
    lines = []
    for line in export.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item.get("kind") == "knowledge_record":
            assert Scope.parse(item["data"]["scope"]).level == Level.RESOURCE
            item["data"]["max_scope"] = int(Level.THREAD) if isinstance(item["data"]["max_scope"], int) else "thread"
        lines.append(json.dumps(item))
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return forged


@pytest.mark.anyio
async def test_an_import_refuses_a_record_above_its_ceiling(tmp_path: Path) -> None:
    """On main: the import succeeded and stored the record at resource scope with a thread
    ceiling (``[('org:default/resource:alice', <Level.THREAD: 3>)]`` above its ceiling)."""
    forged = await _forged(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    async with Knowledge.sqlite(target / "k.db") as knowledge, SQLiteStore(target / "m.db") as store:
        with pytest.raises(ExportFormatError, match="ceiling"):
            await import_resource(store, forged, knowledge=knowledge)
        dump = await knowledge.store.dump_scope(SCOPE)
        assert dump.records == [] and await store.list_threads("alice") == []  # nothing was written


def test_the_cli_refuses_it_too(tmp_path: Path) -> None:
    import asyncio

    forged = asyncio.run(_forged(tmp_path))
    target = tmp_path / "target"
    target.mkdir()
    result = CliRunner().invoke(app, ["import", str(forged), "--store", f"sqlite:///{target / 'm.db'}",
                                      "--knowledge", f"sqlite:///{target / 'k.db'}"])  # fmt: skip
    assert result.exit_code != 0 and "ceiling" in result.output, result.output

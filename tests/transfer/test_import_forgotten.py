"""Importing an export taken before a forget must not bring the forgotten value back.

The README: a forgotten value "cannot come back"; a forget leaves its digest in the knowledge
store, and a later capture, record, node, *restore* or rescope holding it is refused. An export
written before the forget still holds the value (in messages, observations, working memory and
knowledge rows). Restoring that export after the user was deleted must apply the forget again:
with a knowledge store, everything the import would write is checked against the forgotten values
that apply there (the target's and the export's own), and what holds one is left out the way the
forget removes it (a text part, a line, a field, a knowledge row), counted in
``ImportSummary.forgotten``. The rest of the user comes back.

On main:

* ``test_import_after_a_forget_leaves_the_forgotten_value_out``: the import succeeds and
  ``knowledge.search`` returns ``['their locker code is ZEBRAQUUX42']``; ``AssertionError: the
  import brought the forgotten value back: ['knowledge_records: ...', 'knowledge_events: ...']``
  (and ``messages``, ``observation_records`` in the message store).
* ``test_cli_import_after_a_forget_leaves_the_forgotten_value_out``: ``obsmem import FILE --store
  … --knowledge …`` exits 0 and the value is back in both stores (``AssertionError: ... ['messages:
  ...', 'observation_records: ...', 'knowledge_records: ...', 'knowledge_events: ...']``).
* ``test_a_forget_landing_during_the_import_refuses_the_restore``: ``Failed: DID NOT RAISE
  <class 'obsmem.errors.TombstonedValueError'>`` (``restore_dump`` never checked forgotten values).
* ``test_import_into_another_resource_after_a_forget_leaves_the_value_out``: ``AttributeError:
  'ImportSummary' object has no attribute 'forgotten'`` (and the value is back under carol).
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, MemoryConfig, Message
from obsmem.cli.app import app
from obsmem.errors import TombstonedValueError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import forget_value
from obsmem.knowledge.store.contract import KnowledgeDump
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import SQLiteStore
from obsmem.transfer import export_resource, import_resource

from ..lifecycle_delete.scan import KNOWLEDGE_TABLES, MESSAGE_TABLES, scan_sqlite

SECRET = "ZEBRAQUUX42"
FILLER = [
    "We talked about the weather in Lisbon and the train schedule for Monday.",
    "I need to buy groceries: apples, bread, oat milk and coffee beans.",
    "My sister Ana is visiting next weekend, she likes hiking in Sintra.",
    "Remind me to call the dentist about the appointment on Thursday at 3pm.",
]
runner = CliRunner()


def _config() -> MemoryConfig:
    return MemoryConfig(
        observation={"message_tokens": 120, "buffer_tokens": False},
        reflection={"observation_tokens": 200},
        knowledge={"trust": "verified"},
    )


async def _converse(memory: Memory, thread: str, resource: str, turns: int, secret_at: int | None) -> None:
    for i in range(turns):
        text = f"My locker code is {SECRET}." if i == secret_at else f"Turn {i}: {FILLER[i % len(FILLER)]}"
        async with memory.turn(thread_id=thread, resource_id=resource, messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant(f"Noted turn {i}. {FILLER[(i + 2) % len(FILLER)]}")])
    await memory.settled()


async def _build(db: Path, kdb: Path, export: Path) -> None:
    """alice says the value (captured into knowledge too), the export is written, then the value
    is forgotten store-wide and alice deleted; bob stays."""
    knowledge = Knowledge.sqlite(kdb)
    async with SQLiteStore(db) as store:
        memory = Memory(store, config=_config(), knowledge=knowledge)
        await _converse(memory, "t1", "alice", 12, secret_at=2)
        await _converse(memory, "t9", "bob", 3, secret_at=None)
        await export_resource(store, "alice", export, knowledge=knowledge, knowledge_scope="org:default/resource:alice")
        assert SECRET in export.read_text(encoding="utf-8")
        await memory.forget(SECRET)  # leaves a forgotten value (a digest) at org:default
        await memory.delete_resource("alice")
        await memory.aclose()
    await knowledge.close()
    assert scan_sqlite(db, SECRET, MESSAGE_TABLES) == [] and scan_sqlite(kdb, SECRET, KNOWLEDGE_TABLES) == []


def _leftovers(db: Path, kdb: Path) -> list[str]:
    return scan_sqlite(db, SECRET, MESSAGE_TABLES) + scan_sqlite(kdb, SECRET, KNOWLEDGE_TABLES)


async def _user_view(db: Path, kdb: Path) -> tuple[list[str], list[str], int, int]:
    """What alice's thread gets back after the import: knowledge hits and context text holding the
    value, and how many messages and observation lines came back at all."""
    knowledge = Knowledge.sqlite(kdb)
    async with SQLiteStore(db) as store:
        memory = Memory(store, config=_config(), knowledge=knowledge)
        hits = [h.text for h in await knowledge.search(f"locker code {SECRET}", "org:default/resource:alice/thread:t1")]
        context = await memory.get_context("t1")
        texts = [part.text for m in context.messages for part in m.parts if hasattr(part, "text")]
        messages = len(await memory.list_messages("t1"))
        head = await store.get_head("thread:t1")
        lines = len(head.active_observations.splitlines()) if head is not None else 0
        await memory.aclose()
    await knowledge.close()
    return [h for h in hits if SECRET in h], [t for t in texts if SECRET in t], messages, lines


@pytest.mark.anyio
async def test_import_after_a_forget_leaves_the_forgotten_value_out(tmp_path: Path) -> None:
    db, kdb, export = tmp_path / "data.db", tmp_path / "knowledge.db", tmp_path / "alice.jsonl"
    await _build(db, kdb, export)

    knowledge = Knowledge.sqlite(kdb)
    async with SQLiteStore(db) as store:
        summary = await import_resource(store, export, knowledge=knowledge)
    await knowledge.close()

    leftovers = _leftovers(db, kdb)
    assert leftovers == [], f"the import brought the forgotten value back: {leftovers}"
    hits, context, messages, lines = await _user_view(db, kdb)
    assert hits == [] and context == []
    # the rest of alice came back: her threads, the other messages, the other observations
    assert summary.counts["thread"] == 1 and messages >= 20 and lines > 0
    assert summary.forgotten.get("message", 0) + summary.forgotten.get("part", 0) >= 1
    assert summary.forgotten.get("knowledge_record", 0) >= 1


def test_cli_import_after_a_forget_leaves_the_forgotten_value_out(tmp_path: Path) -> None:
    db, kdb, export = tmp_path / "data.db", tmp_path / "knowledge.db", tmp_path / "alice.jsonl"
    asyncio.run(_build(db, kdb, export))

    result = runner.invoke(app, ["import", str(export), "--store", str(db), "--knowledge", str(kdb)])
    assert result.exit_code == 0, result.output
    assert "imported resource 'alice'" in result.stdout
    # the user is told what was left out (on main after the import fix: nothing said so)
    assert "left out (forgotten since the export):" in " ".join(result.stdout.split())

    leftovers = _leftovers(db, kdb)
    assert leftovers == [], f"the import brought the forgotten value back: {leftovers}"
    hits, context, messages, _ = asyncio.run(_user_view(db, kdb))
    assert hits == [] and context == [] and messages >= 20


class _ForgetDuringRestore(SQLiteKnowledgeStore):
    """Another process forgets the value after the import read the forgotten values and before
    its restoring write: the restore itself must refuse what the forget now covers."""

    async def restore_dump(self, dump: KnowledgeDump, *, subtree: str) -> dict[str, int]:
        await forget_value(self, SECRET, "org:default", actor="privacy", reason="user request")
        return await super().restore_dump(dump, subtree=subtree)


@pytest.mark.anyio
async def test_a_forget_landing_during_the_import_refuses_the_restore(tmp_path: Path) -> None:
    db, kdb, export = tmp_path / "data.db", tmp_path / "knowledge.db", tmp_path / "alice.jsonl"
    knowledge = Knowledge.sqlite(kdb)
    async with SQLiteStore(db) as store:
        memory = Memory(store, config=_config(), knowledge=knowledge)
        await _converse(memory, "t1", "alice", 12, secret_at=2)
        buffer = io.StringIO()
        await export_resource(store, "alice", buffer, knowledge=knowledge, knowledge_scope="org:default/resource:alice")
        await memory.delete_resource("alice")  # nothing forgotten yet: the import reads no digest
        await memory.aclose()
    await knowledge.close()

    racing = _ForgetDuringRestore(kdb)
    async with SQLiteStore(db) as store, racing:
        with pytest.raises(TombstonedValueError):
            await import_resource(store, io.StringIO(buffer.getvalue()), knowledge=Knowledge(racing))
        assert await store.list_threads("alice") == []  # all or nothing
    assert scan_sqlite(kdb, SECRET, KNOWLEDGE_TABLES) == []


@pytest.mark.anyio
async def test_import_into_another_resource_after_a_forget_leaves_the_value_out(tmp_path: Path) -> None:
    """``into_resource``: the export's rows move to carol's scopes, where the org's forgotten value
    applies as well."""
    db, kdb, export = tmp_path / "data.db", tmp_path / "knowledge.db", tmp_path / "alice.jsonl"
    await _build(db, kdb, export)
    knowledge = Knowledge.sqlite(kdb)
    async with SQLiteStore(db) as store:
        summary = await import_resource(store, export, knowledge=knowledge, into_resource="carol")
        assert [t.id for t in await store.list_threads("carol")] == ["t1"]
    await knowledge.close()
    assert summary.forgotten and _leftovers(db, kdb) == []

"""Restoring a backup after the same value was forgotten again in another case.

A second forget under the same key ("ann" after "Ann") adds its exact digest to the stored
forgotten value (0fba47f). A backup written between the two forgets holds the row as it was, and
restoring it beside the same knowledge store compared the two rows whole: an org's forgotten value
(above the restored resource) that differed only by the digest the second forget added made the
import fail (ImportConflictError), although the backup's row says nothing the store does not.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import forget_value
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.transfer import export_resource, import_resource
from obsmem.types import TextPart

from .test_round_trip import postgres_url_source, postgres_url_target

pytestmark = pytest.mark.anyio
_FIXTURES = (postgres_url_source, postgres_url_target)  # used by name (request.getfixturevalue)


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
async def test_a_backup_restores_after_the_org_forgot_the_value_again_in_another_case(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "memory":
        source, target = MemoryStore(), MemoryStore()
        knowledge = Knowledge(InMemoryKnowledgeStore(clock=FakeClock()))
    elif kind == "sqlite":
        source, target = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "b.db")
        knowledge = Knowledge(SQLiteKnowledgeStore(tmp_path / "k.db"))
    else:
        url, other = request.getfixturevalue("postgres_url_source"), request.getfixturevalue("postgres_url_target")
        source, target = PostgresStore(url), PostgresStore(other)
        knowledge = Knowledge(PostgresKnowledgeStore(url))
    memory = Memory(source, knowledge=knowledge)
    await memory.create_thread("t1", "alice", org_id="acme")
    await memory.save_messages("t1", [Message.user("Call Ann."), Message.user("call ann."), Message.user("Plan it.")])
    await forget_value(knowledge, "Ann", "org:acme")
    backup = io.StringIO()
    await export_resource(source, "alice", backup, knowledge=knowledge)
    await forget_value(knowledge, "ann", "org:acme")  # the org's row now matches both spellings
    await memory.aclose()

    summary = await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)

    texts = [p.text for m in await target.list_messages("t1") for p in m.parts if isinstance(p, TextPart)]
    assert texts == ["Plan it."]
    assert summary.forgotten == {"message": 2}
    [row] = await knowledge.store.list_forgotten("org:acme")
    assert row.exact_digests is not None and len(row.exact_digests) == 2
    for store in (source, target, knowledge.store):
        await store.close()

"""Restoring a backup after forgetting a value with no letter or digit in it.

Memory.forget removes such a value (a door code of symbols, an emoji password, '<<>>') from the
messages as any other, but the knowledge store keeps a forgotten value only by its key (letters
and digits): the key was empty, so no forgotten value was kept, and importing a backup written
before the forget brought every message holding it back. The value's exact digest (0fba47f) keeps
it now, and the import leaves those messages out as the forget did.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
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

VALUES = ["🦄🌈", "#$%&*!", "<<>>", "— ——"]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
@pytest.mark.parametrize("value", VALUES)
async def test_a_value_without_letters_or_digits_stays_forgotten_on_import(
    kind: str, value: str, tmp_path: Path, request: pytest.FixtureRequest
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
    await memory.create_thread("t1", "alice")
    await memory.save_messages("t1", [Message.user(f"My door code is {value}"), Message.user("Plan it.")])
    backup = io.StringIO()
    await export_resource(source, "alice", backup)
    await memory.forget(value, resource_id="alice")
    await memory.forget(value, resource_id="alice")  # twice: still one forgotten value
    await memory.aclose()

    summary = await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)

    texts = [p.text for m in await target.list_messages("t1") for p in m.parts if isinstance(p, TextPart)]
    assert texts == ["Plan it."]  # was both: the door code came back
    assert summary.forgotten == {"message": 1}
    assert len(await knowledge.store.list_forgotten("org:default/resource:alice")) == 1
    for store in (source, target, knowledge.store):
        await store.close()


async def test_a_value_of_symbols_leaves_the_messages_holding_other_symbols() -> None:
    source, target = MemoryStore(), MemoryStore()
    knowledge = Knowledge(InMemoryKnowledgeStore(clock=FakeClock()))
    memory = Memory(source, knowledge=knowledge)
    await memory.create_thread("t1", "alice")
    await memory.save_messages("t1", [Message.user("code #$%&*!"), Message.user("wow!!! #1 & more")])
    backup = io.StringIO()
    await export_resource(source, "alice", backup)
    await memory.forget("#$%&*!", resource_id="alice")
    await memory.aclose()

    await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)

    texts = [p.text for m in await target.list_messages("t1") for p in m.parts if isinstance(p, TextPart)]
    assert texts == ["wow!!! #1 & more"]

"""A database written before 15fe659 keeps one user's self-facts at org scope: upgraded, the
other users of the org must no longer see them.

Before 15fe659, capture with ``node_level="org"`` and ``record_level="org"`` made the speaker's
node (``User``) one node for the whole org and filed what each user said about themselves under
it at org scope: alice's "my phone number is …" became an org record, and its audit event's
reason quoted it. New captures are correct, but an existing database kept those rows, and bob
was still reminded of alice's number (worded as his own), found it by search, read it in the
audit log and in his own export. The knowledge store alone cannot tell whose fact it was (it
holds the source thread's id, not its resource), so the upgrade marks such rows and the store
shows them only to the org itself (an administrator may rescope each to its owner's resource).

The old shape is written here directly, as an old version wrote it, and the file (or database)
is made to look older by removing the new migration's row.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.errors import KnowledgeNotFoundError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import RecordDraft, TrustState

pytestmark = pytest.mark.anyio

PHONE = "+49 151 5550 7720"
ORG = "org:default"
BOB = "org:default/resource:bob/thread:b1"
BOB_RESOURCE = "org:default/resource:bob"
ASK = "What is my phone number? Put it in my signature."
REASON = f"The user stated it: “their phone number is {PHONE}, please note it”."
CONFIG = MemoryConfig(
    observation={"message_tokens": 120, "buffer_tokens": False},
    knowledge={"trust": "verified", "record_level": "org", "node_level": "org", "ceiling": "org"},
)


async def _write_old_shape(knowledge: Knowledge) -> str:
    """What capture wrote before 15fe659 for alice's "My phone number is …" in thread a1."""
    store = knowledge.store
    user = await store.create_node(
        "User", "person", ORG, actor="capture", reason="capture: first fact about User"
    )
    record = await store.append_record(
        RecordDraft(user.id, f"their phone number is {PHONE}, please note it", ORG, source_thread_id="a1",
                    attribute="phone number", trust=TrustState.VERIFIED, metadata={"agent": "capture"}),
        actor="capture", reason=REASON,
    )
    await knowledge.drain()  # its vector indexed, at org scope
    return record.id


@pytest.fixture(params=["sqlite", "postgres"])
async def old_database(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Knowledge]]:
    if request.param == "sqlite":
        path = tmp_path / "knowledge.db"
        opener: Callable[[], Knowledge] = lambda: Knowledge.sqlite(path)  # noqa: E731
        import sqlite3

        def forget_new_step() -> None:
            with sqlite3.connect(path) as db:
                db.execute("DELETE FROM _obsmem_knowledge_migrations WHERE name LIKE '%unowned_speaker%'")
    else:
        url = request.getfixturevalue("postgres_url")
        opener = lambda: Knowledge.postgres(url)  # noqa: E731
        import psycopg

        def forget_new_step() -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("DELETE FROM _obsmem_knowledge_migrations WHERE name LIKE '%unowned_speaker%'")

    async with opener() as knowledge:
        await _write_old_shape(knowledge)
    forget_new_step()
    yield opener


async def _reminded(memory: Memory, thread_id: str, resource_id: str) -> str:
    turn = await memory.begin_turn(thread_id=thread_id, resource_id=resource_id, messages=[Message.user(ASK)])
    shown = "\n".join(
        m.text for m in turn.context.messages
        if m.metadata.get("obsmem") in ("knowledge-reminder", "knowledge-pins")
    )
    await turn.end()
    return shown


async def test_bob_is_not_reminded_of_alices_phone_number(old_database: Callable[[], Knowledge]) -> None:
    async with old_database() as knowledge:
        async with Memory("memory://", config=CONFIG, knowledge=knowledge) as memory:
            bob = await _reminded(memory, "b1", "bob")
    assert PHONE not in bob, f"bob was reminded of alice's number: {bob!r}"


async def test_bob_finds_alices_phone_number_nowhere(old_database: Callable[[], Knowledge]) -> None:
    async with old_database() as knowledge:
        store = knowledge.store
        searched = [hit.record.text for hit in await knowledge.search("phone number", BOB)]
        lexical = [hit.record.text for hit in await store.search_lexical("phone", BOB)]
        activity = json.dumps([e.model_dump(mode="json") for e in (await store.list_activity(BOB)).items])
        user = await store.resolve_node("User", BOB)
        assert user is not None
        about = [r.text for r in (await store.list_about(user.id, BOB)).items]
        dump = await store.dump_scope(BOB_RESOURCE)
        exported = json.dumps([r.model_dump(mode="json") for r in dump.records + dump.events])
        # The org itself still holds and sees it (nothing lost): its administrator may rescope it.
        org_records = (await store.list_about(user.id, ORG)).items
        org_about = [r.text for r in org_records]
        try:  # nor can bob take it into his own scope, knowing its id (no write from below reaches it)
            await knowledge.rescope(org_records[0].id, BOB_RESOURCE, BOB_RESOURCE, reason="mine now")
            taken = True
        except KnowledgeNotFoundError:
            taken = False
    leaks = {
        "taken": taken,
        "search": PHONE in " ".join(searched), "lexical": PHONE in " ".join(lexical),
        "activity": PHONE in activity, "about": PHONE in " ".join(about), "export": PHONE in exported,
    }
    assert leaks == dict.fromkeys(leaks, False)
    assert any(PHONE in text for text in org_about)

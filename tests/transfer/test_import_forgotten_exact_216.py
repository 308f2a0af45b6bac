"""Restoring a backup after a forget leaves out what the forget removed, and no more.

Memory.forget matches the value as a case-sensitive substring (in every spelling obsmem stores
it in). The import knew the forgotten value only by the knowledge store's digest of its key
(case-folded, letters and digits only), so after ``forget("Ann")`` it also matched "ann" inside
"planning", "channel", "annual" and "announcement": a backup of four messages, two holding
"Ann", came back empty (``ImportSummary.forgotten == {"message": 4}``). A forget now keeps,
beside that digest, a digest of the value as the forget matched it, and the import matches
messages, observations and working memory with it. A row without it (an older obsmem's) is
still matched broadly.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, Store
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import forget_value
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.memory import InMemoryKnowledgeStore
from obsmem.knowledge.store.postgres import PostgresKnowledgeStore
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore
from obsmem.knowledge.store.values import exact_digest, exact_form
from obsmem.storage import MemoryStore, SQLiteStore, lineage_key
from obsmem.storage.postgres.store import PostgresStore
from obsmem.transfer import ImportSummary, export_resource, import_resource
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

from .test_round_trip import postgres_url_source, postgres_url_target  # noqa: F401

pytestmark = pytest.mark.anyio

RESOURCE = "alice"
PLAIN = [
    "Ann said the annual planning meeting moved.",
    "Let's plan the channel announcement.",
    "Call Ann tomorrow.",
    "The planning doc is ready.",
]

# the source's message store and the knowledge store, then the target's message store
Stores = tuple[Store, KnowledgeStore, Store]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Stores]:
    kind = request.param

    def make() -> Stores:
        if kind == "memory":
            return MemoryStore(), InMemoryKnowledgeStore(clock=FakeClock()), MemoryStore()
        if kind == "sqlite":
            return SQLiteStore(tmp_path / "a.db"), SQLiteKnowledgeStore(tmp_path / "k.db"), SQLiteStore(tmp_path / "b.db")
        source = request.getfixturevalue("postgres_url_source")
        target = request.getfixturevalue("postgres_url_target")
        return PostgresStore(source), PostgresKnowledgeStore(source), PostgresStore(target)

    return make


def _texts(messages: list[Message]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, TextPart)]


@asynccontextmanager
async def _opened(make: Callable[[], Stores]) -> AsyncIterator[tuple[Store, Knowledge, Store]]:
    source, kstore, target = make()
    knowledge = Knowledge(kstore)
    try:
        yield source, knowledge, target
    finally:
        await source.close()
        await target.close()
        await kstore.close()


async def _forget_and_restore(
    make: Callable[[], Stores], messages: list[Message], value: str, *, config: MemoryConfig | None = None,
    export_knowledge: bool = False,
) -> tuple[list[Message], list[Message], ImportSummary, dict[str, Any]]:
    """alice's thread t1 holding ``messages``, exported, ``value`` forgotten, the backup imported
    into an empty store beside the same knowledge store: the thread as the forget left it, as the
    import restored it, the import's summary, and the active observations (live, restored)."""
    async with _opened(make) as (source, knowledge, target):
        memory = Memory(source, knowledge=knowledge, config=config)
        await memory.create_thread("t1", RESOURCE)
        if config is None:
            await memory.save_messages("t1", messages)
        else:
            for message in messages:
                async with memory.turn(thread_id="t1", resource_id=RESOURCE, messages=[message]) as turn:
                    await turn.step([Message.assistant("Noted.")])
            await memory.settled()
        backup = io.StringIO()
        await export_resource(source, RESOURCE, backup, knowledge=knowledge if export_knowledge else None)
        await memory.forget(value, resource_id=RESOURCE)
        live = await memory.list_messages("t1")
        await memory.aclose()
        summary = await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)
        restored = await target.list_messages("t1")
        lineage = lineage_key("thread", "t1", RESOURCE)
        heads = [await store.get_head(lineage) for store in (source, target)]
        observations = {
            "live": heads[0].active_observations if heads[0] else None,
            "restored": heads[1].active_observations if heads[1] else None,
        }
    return live, restored, summary, observations


async def test_forgetting_a_short_name_restores_the_unrelated_messages(make_stores: Callable[[], Stores]) -> None:
    live, restored, summary, _ = await _forget_and_restore(make_stores, [Message.user(t) for t in PLAIN], "Ann")
    assert _texts(live) == ["Let's plan the channel announcement.", "The planning doc is ready."]
    assert _texts(restored) == _texts(live)
    assert summary.forgotten == {"message": 2}


async def test_a_value_in_a_tool_result_and_arguments_is_matched_as_the_forget_did(
    make_stores: Callable[[], Stores],
) -> None:
    messages = [
        Message.user("Look up the planning doc."),
        Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="find", args={"q": "planning"}),)),
        Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="find", result={"owner": "Ann"}),)),
        Message(role="assistant", parts=(ToolCallPart(tool_call_id="c2", tool_name="find", args={"q": "Ann"}),)),
        Message(role="tool", parts=(ToolResultPart(tool_call_id="c2", tool_name="find", result="channel planning"),)),
    ]
    live, restored, summary, _ = await _forget_and_restore(make_stores, messages, "Ann")
    assert [(m.role, m.parts) for m in restored] == [(m.role, m.parts) for m in live]
    assert [p.result for m in restored for p in m.parts if isinstance(p, ToolResultPart)] == [
        "[forgotten]", "channel planning"
    ]
    assert [p.args for m in restored for p in m.parts if isinstance(p, ToolCallPart)] == [
        {"q": "planning"}, "[forgotten]"
    ]
    assert summary.forgotten == {"part": 2}


def _observing() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 30, "buffer_tokens": False},
                        reflection={"observation_tokens": 100_000})  # fmt: skip


SAID = [
    "My colleague Ann moved the annual planning meeting to Friday.",
    "I finished the planning doc for the launch.",
    "I will call Ann tomorrow about the budget.",
    "I need to write the channel announcement by Monday.",
]


async def test_an_observation_line_is_matched_as_the_forget_did(make_stores: Callable[[], Stores]) -> None:
    live, restored, summary, observations = await _forget_and_restore(
        make_stores, [Message.user(t) for t in SAID], "Ann", config=_observing()
    )
    assert [(m.role, m.parts) for m in restored] == [(m.role, m.parts) for m in live]
    assert [t for t in _texts(live) if t != "Noted."] == [SAID[1], SAID[3]]
    kept = observations["live"]
    assert "planning doc" in kept and "Ann" not in kept
    assert observations["restored"] == kept
    assert summary.forgotten["message"] == 2 and summary.forgotten["record"] == 1


async def test_a_value_with_an_angle_bracket_is_found_in_every_spelling(make_stores: Callable[[], Stores]) -> None:
    """Observations hold "<" as "‹" (and a model may write "&lt;"); the forget finds each."""
    texts = ["I need to prove x<y by Friday.", "I will show x‹y again tomorrow.", "I need to check x&lt;y by Monday.",
             "I need to test xy, x y and X<Y by Friday."]  # fmt: skip
    live, restored, summary, observations = await _forget_and_restore(
        make_stores, [Message.user(t) for t in texts], "x<y", config=_observing()
    )
    assert [t for t in _texts(live) if t != "Noted."] == [texts[3]]
    assert [(m.role, m.parts) for m in restored] == [(m.role, m.parts) for m in live]
    assert observations["restored"] == observations["live"]
    assert summary.forgotten["message"] == 3 and summary.forgotten["record"] == 1


async def test_a_row_without_the_exact_digest_is_still_matched_broadly(make_stores: Callable[[], Stores]) -> None:
    """A forgotten value an older obsmem wrote (no exact digest): "ann" anywhere, case folded."""
    async with _opened(make_stores) as (source, knowledge, target):
        memory = Memory(source, knowledge=knowledge)
        await memory.create_thread("t1", RESOURCE)
        await memory.save_messages("t1", [Message.user(t) for t in PLAIN])
        backup = io.StringIO()
        await export_resource(source, RESOURCE, backup)
        await memory.forget("Ann", resource_id=RESOURCE)
        await memory.aclose()
        scope = f"org:default/resource:{RESOURCE}"
        rows = await knowledge.store.list_forgotten(scope)
        assert [r.exact_digests for r in rows] == [((exact_digest("Ann"), 3),)]
        await _rewrite_without_exact(knowledge.store, rows[0])
        assert [r.exact_digests for r in await knowledge.store.list_forgotten(scope)] == [None]
        summary = await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)
        assert await target.list_messages("t1") == []
        assert summary.forgotten == {"message": 4}


async def _rewrite_without_exact(store: KnowledgeStore, row: Any) -> None:
    """The row as an older obsmem stored it: the knowledge export/restore carries it as is."""
    from obsmem.knowledge.store.contract import KnowledgeDump

    old = row.model_copy(update={"exact_digests": None})
    await store.purge_scope(row.scope, actor="test", reason="legacy row")
    await store.restore_dump(KnowledgeDump(forgotten=[old]), subtree=row.scope)


async def test_the_exact_digest_travels_with_the_knowledge_store(make_stores: Callable[[], Stores]) -> None:
    """Exported with the knowledge store and restored into an empty one, the forgotten value keeps
    its exact digest: a second restore of the old backup still keeps the unrelated messages."""
    async with _opened(make_stores) as (source, knowledge, target):
        memory = Memory(source, knowledge=knowledge)
        await memory.create_thread("t1", RESOURCE)
        await memory.save_messages("t1", [Message.user(t) for t in PLAIN])
        before = io.StringIO()
        await export_resource(source, RESOURCE, before)
        await memory.forget("Ann", resource_id=RESOURCE)
        after = io.StringIO()
        await export_resource(source, RESOURCE, after, knowledge=knowledge)
        await memory.aclose()
        assert '"exact_digests":[["' + exact_digest("Ann") + '",3]]' in after.getvalue().replace(" ", "")
        # the knowledge store lost: the later backup restores it (forgotten value included)
        await knowledge.store.purge_scope(f"org:default/resource:{RESOURCE}", actor="test", reason="lost")
        await import_resource(target, io.StringIO(after.getvalue()), knowledge=knowledge)
        rows = await knowledge.store.list_forgotten(f"org:default/resource:{RESOURCE}")
        assert [r.exact_digests for r in rows] == [((exact_digest("Ann"), 3),)]
        await target.delete_thread("t1")
        summary = await import_resource(target, io.StringIO(before.getvalue()), knowledge=knowledge)
        assert _texts(await target.list_messages("t1")) == [
            "Let's plan the channel announcement.", "The planning doc is ready."
        ]
        assert summary.forgotten == {"message": 2}


async def test_forgetting_the_same_key_in_another_case_keeps_both_values(make_stores: Callable[[], Stores]) -> None:
    """"Ann" then "ann": one key (one forgotten value row), two exact values; the import leaves
    out what each forget did. A phone number forgotten under the key makes the row broad."""
    texts = [*PLAIN, "ann wrote back.", "ANN is away."]
    async with _opened(make_stores) as (source, knowledge, target):
        memory = Memory(source, knowledge=knowledge)
        await memory.create_thread("t1", RESOURCE)
        await memory.save_messages("t1", [Message.user(t) for t in texts])
        backup = io.StringIO()
        await export_resource(source, RESOURCE, backup)
        await memory.forget("Ann", resource_id=RESOURCE)
        counts = await memory.forget("ann", resource_id=RESOURCE)
        live = await memory.list_messages("t1")
        await memory.aclose()
        assert _texts(live) == ["ANN is away."]
        assert counts["knowledge_forgotten"] == 0
        rows = await knowledge.store.list_forgotten(f"org:default/resource:{RESOURCE}")
        assert [r.exact_digests for r in rows] == [((exact_digest("Ann"), 3), (exact_digest("ann"), 3))]
        summary = await import_resource(target, io.StringIO(backup.getvalue()), knowledge=knowledge)
        assert _texts(await target.list_messages("t1")) == ["ANN is away."]
        assert summary.forgotten == {"message": 5}


def test_the_exact_form_is_the_forgets_spelling() -> None:
    assert exact_form("x<y") == exact_form("x&lt;y") == exact_form("x‹y") == "x‹y"
    assert exact_form("Ann") == "Ann"
    assert exact_form("+49 151 2345678") is None  # a phone number: matched by its digits


async def test_a_phone_number_forgotten_under_the_key_makes_the_row_broad() -> None:
    """A phone number is matched by its digits in any spelling: no exact value stands for it."""
    knowledge = Knowledge.in_memory()
    scope = f"org:default/resource:{RESOURCE}"
    await forget_value(knowledge, "1512345678", scope, reason="asked")
    assert [r.exact_digests for r in await knowledge.store.list_forgotten(scope)] == [
        ((exact_digest("1512345678"), 10),)
    ]
    await forget_value(knowledge, "+49 151 2345678", scope, reason="asked")
    assert [r.exact_digests for r in await knowledge.store.list_forgotten(scope)] == [None]

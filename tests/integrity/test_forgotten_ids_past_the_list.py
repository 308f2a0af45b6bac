"""A forget that changes more than 1,000 messages of a thread (a user's name in a long chat).

The ids of the messages a forget changed are what keeps a copy of one, saved back by the app or
its framework (the history as it held it), from bringing the value back. The thread's row keeps
only the newest 1,000 of them (it is read at every turn boundary): past that, the copies of the
oldest came back, the forgotten name with them. The stores now keep every id in a table of their
own (ids only, gone with the thread), read only for a thread whose list is full."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import InvalidInputError, Memory, Message
from obsmem.transfer import export_resource, import_resource
from tests.lifecycle_delete.scan import scan_memory, scan_postgres, scan_sqlite

pytestmark = pytest.mark.anyio

NAME = "Zaphod Quux"
SAID = 1_100  # messages holding the name: more than the thread's row keeps ids of


def _history() -> list[Message]:
    said = [Message(id=f"msg_zq{i:05d}", role="user", parts=[{"type": "text", "text": f"Note {i}: I am {NAME}."}])
            for i in range(SAID)]  # fmt: skip
    # one message that keeps something once the name is gone: rewritten, not deleted
    both = Message(id="msg_zq_both", role="user", parts=[
        {"type": "text", "text": f"Call me {NAME}."}, {"type": "text", "text": "I like tea."},
    ])
    return [*said, both]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, object]]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/m.db"}.get(request.param)
    if url is None:
        url = request.getfixturevalue("postgres_url")
    async with Memory(url, max_turn_wait=None) as memory:
        yield memory, (tmp_path / "m.db" if request.param == "sqlite" else url)


async def _forgotten_thread(memory: Memory) -> list[Message]:
    history = _history()
    await memory.create_thread("t1", "u1")
    for start in range(0, len(history), 250):
        await memory.save_messages("t1", history[start : start + 250])
    counts = await memory.forget(NAME, thread_id="t1")
    assert counts["messages"] == SAID and counts["parts"] == 1
    return history


def _holding(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if NAME in (m.text or "")]


async def test_copies_saved_back_do_not_bring_the_name_back(world: tuple[Memory, object]) -> None:
    memory, _ = world
    history = await _forgotten_thread(memory)
    await memory.save_messages("t1", history)  # the app's old history, saved back
    turn = await memory.begin_turn(thread_id="t1", messages=[*history, Message.user("Hi again.")])
    assert _holding(turn.context.messages) == []
    await turn.end([Message.assistant("Hello.")])
    stored = await memory.list_messages("t1")
    assert _holding(stored) == []
    assert [m.text for m in stored if m.id == "msg_zq_both"] == ["I like tea."]  # the rewrite stands
    assert [m.text for m in stored[-2:]] == ["Hi again.", "Hello."]


async def test_the_oldest_forgotten_id_as_new_input_is_refused(world: tuple[Memory, object]) -> None:
    memory, _ = world
    history = await _forgotten_thread(memory)
    with pytest.raises(InvalidInputError, match="msg_zq00000"):
        await memory.begin_turn(thread_id="t1", messages=[history[0]])
    assert _holding(await memory.list_messages("t1")) == []


async def test_the_ids_go_with_the_thread(world: tuple[Memory, object]) -> None:
    memory, where = world
    await _forgotten_thread(memory)
    assert await memory.delete_thread("t1")
    if isinstance(where, Path):
        found = scan_sqlite(where, "msg_zq")
    elif where == "memory://":
        found = scan_memory(memory.store, "msg_zq")
    else:
        found = scan_postgres(str(where), "msg_zq")
    assert found == []
    # a new conversation under the id starts with nothing forgotten
    again = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[_history()[0]])
    await again.end([Message.assistant("Hello.")])
    assert _holding(await memory.list_messages("t1")) == [_history()[0].id]


async def test_an_export_carries_every_id_and_the_import_keeps_them(world: tuple[Memory, object], tmp_path: Path) -> None:
    memory, _ = world
    history = await _forgotten_thread(memory)
    await export_resource(memory.store, "u1", tmp_path / "u1.jsonl")
    async with Memory(f"sqlite:///{tmp_path / 'imported.db'}") as other:
        await import_resource(other.store, tmp_path / "u1.jsonl")
        thread = await other.get_thread("t1")
        assert len(thread.metadata["obsmem"]["forgotten"]) == 1_000  # the row keeps the newest
        await other.save_messages("t1", history)  # the app's old history, saved back
        assert _holding(await other.list_messages("t1")) == []


async def test_ids_the_row_held_before_the_store_kept_them_are_not_lost(world: tuple[Memory, object]) -> None:
    """Ids noted before the store kept every one (a store written by an older obsmem) are only on
    the row: a later forget that fills the list keeps them in the store first."""
    memory, _ = world
    history = _history()
    await memory.create_thread("t1", "u1")
    for start in range(0, len(history), 250):
        await memory.save_messages("t1", history[start : start + 250])
    early = history[:600]
    await memory.forget("Note 1", thread_id="t1")  # "Note 1", "Note 10"..., "Note 1099": 211 messages
    thread = await memory.get_thread("t1")
    old = thread.metadata["obsmem"]["forgotten"]
    forget_table = getattr(memory.store, "_forgotten", None)
    if isinstance(forget_table, dict):  # as an older obsmem left it: the ids on the row only
        forget_table.clear()
    elif isinstance(memory.store.url, str) and memory.store.url.startswith("sqlite"):
        import sqlite3
        with sqlite3.connect(memory.store.path) as conn:
            conn.execute("DELETE FROM forgotten_ids")
    else:
        import psycopg
        with psycopg.connect(memory.store.url) as conn:
            conn.execute("DELETE FROM forgotten_ids")
    await memory.forget(NAME, thread_id="t1")  # 1,100 more: the row keeps the newest 1,000
    assert not set(old) <= set((await memory.get_thread("t1")).metadata["obsmem"]["forgotten"])
    await memory.save_messages("t1", early)
    assert not [m for m in await memory.list_messages("t1") if m.id in set(old)]

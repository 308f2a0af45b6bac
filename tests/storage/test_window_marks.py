"""Window marks (:data:`~obsmem.storage.contract.WindowMark`) on SQLite: the mark moves with every
change to what a thread's window holds, by any path, and two reads at one mark read the same
window. A store without marks (memory, PostgreSQL) answers None and is read every time."""

from __future__ import annotations

import functools
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, ObservationRecord, SQLiteStore, ThreadState
from obsmem.errors import StorageError
from obsmem.storage.contract import read_marked_window, read_window, save_marked, update_record_marking, window_mark
from obsmem.types import DataPart, Message, Thread

pytestmark = pytest.mark.anyio

LINEAGE = "thread:t1"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


async def _store(tmp_path: Path) -> SQLiteStore:
    store = SQLiteStore(tmp_path / "marks.db")
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    await store.create_thread(Thread(id="t2", resource_id="u1"))
    return store


async def test_every_change_to_a_window_moves_its_mark(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    marks = [await window_mark(store, LINEAGE, "t1")]

    async def moved() -> None:
        mark = await window_mark(store, LINEAGE, "t1")
        assert mark is not None and mark not in marks, marks
        marks.append(mark)

    one, two = await store.save_messages("t1", [Message.user("one"), Message.user("two")])
    await moved()
    await store.save_messages("t1", [one.model_copy(update={"parts": Message.user("one, edited").parts})])
    await moved()  # the same id saved again with new content
    await store.add_message_parts(two.id, [DataPart(name="marker", data={"x": 1})])
    await moved()
    await store.delete_messages([two.id])
    await moved()
    created = await store.create_record(
        ObservationRecord(
            id="om-1", lineage=LINEAGE, scope="thread", thread_id="t1", resource_id="u1",
            created_at=T0, updated_at=T0, threads={"t1": ThreadState(cursor=one.seq or 0)},
        )
    )
    await moved()  # a head appeared
    assert created.record is not None
    await store.update_record(created.record.model_copy(update={"active_observations": "* x"}), expected_version=1)
    await moved()  # the head moved on
    # Another thread's messages, and a write by hand (another program), are seen as they are.
    await store.save_messages("t2", [Message.user("elsewhere")])
    assert await window_mark(store, LINEAGE, "t1") == marks[-1]
    with sqlite3.connect(tmp_path / "marks.db") as conn:
        conn.execute("UPDATE messages SET parts = parts WHERE thread_id = 't1'")
    await moved()
    assert await window_mark(store, LINEAGE, "nobody") is None
    await store.close()


async def test_one_mark_one_window_and_a_marked_save_knows_the_window_after_it(tmp_path: Path) -> None:
    store = await _store(tmp_path)
    await store.save_messages("t1", [Message.user("a")])
    head, messages, mark = await read_marked_window(store, LINEAGE, "t1")
    assert (head, messages) == await read_window(store, LINEAGE, "t1")
    assert mark == await window_mark(store, LINEAGE, "t1")

    saved, before, after = await save_marked(store, LINEAGE, "t1", [Message.assistant("b")])
    assert before == mark and after != mark
    again = await read_marked_window(store, LINEAGE, "t1")
    assert again == (head, [*messages, *saved], after)
    await store.close()


async def test_a_store_without_marks_answers_none(tmp_path: Path) -> None:
    store = MemoryStore()
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    assert await window_mark(store, LINEAGE, "t1") is None
    saved, before, after = await save_marked(store, LINEAGE, "t1", [Message.user("a")])
    assert (before, after) == (None, None) and [m.text for m in saved] == ["a"]
    head, messages, mark = await read_marked_window(store, LINEAGE, "t1")
    assert head is None and messages == saved and mark is None


async def test_a_thread_deleted_and_created_again_never_has_an_old_mark(tmp_path: Path) -> None:
    """Same id, same number of writes, no head: still another thread, so another mark (a kept
    window of the deleted thread must never be taken for the new one's)."""
    store = await _store(tmp_path)
    await store.save_messages("t1", [Message.user("my old address is 4 Elm Row"), Message.user("b")])
    old = await window_mark(store, LINEAGE, "t1")
    assert await store.delete_thread("t1")
    assert await window_mark(store, LINEAGE, "t1") is None
    await store.create_thread(Thread(id="t1", resource_id="u1"))
    await store.save_messages("t1", [Message.user("a"), Message.user("b")])
    new = await window_mark(store, LINEAGE, "t1")
    assert new is not None and old is not None and new != old
    assert new[1:] == old[1:]  # what differs is the thread itself
    await store.close()


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_head_write_with_markers_is_one_write_and_never_lost_to_them(tmp_path: Path, kind: str) -> None:
    """``update_record_marking``: on SQLite the compare-and-set and the markers on a covered message
    commit together (the window's marks around the markers returned); a stale write writes
    neither; a message gone, or markers that fail, never undo the record. A store without the
    native method writes the record alone and says so (no message)."""
    store: SQLiteStore | MemoryStore = await _store(tmp_path) if kind == "sqlite" else MemoryStore()
    if kind == "memory":
        await store.create_thread(Thread(id="t1", resource_id="u1"))
    one, head = await _message_and_head(store)
    marker = DataPart(name="om-activation", data={"cycle_id": "c1"})
    head = head.model_copy(update={"active_observations": "* one", "threads": {"t1": ThreadState(cursor=one.seq or 0)}})
    before_all = await window_mark(store, LINEAGE, "t1")

    result, message, before, after = await update_record_marking(
        store, head, expected_version=1, message_id=one.id, parts=[marker], lineage=LINEAGE
    )
    assert result.status == "applied" and result.record is not None and result.record.version == 2
    stored = (await store.get_messages([one.id]))[0]
    if kind == "sqlite":
        assert message == stored and marker in stored.parts
        assert before is not None and before != before_all  # the head moved first
        assert after == await window_mark(store, LINEAGE, "t1") and after != before
    else:  # no native method: the record alone, and the caller writes the markers
        assert (message, before, after) == (None, None, None) and marker not in stored.parts

    # Stale: neither the record nor the markers.
    other = DataPart(name="om-activation", data={"cycle_id": "c2"})
    stale, message, _, _ = await update_record_marking(
        store, head, expected_version=1, message_id=one.id, parts=[other], lineage=LINEAGE
    )
    assert stale.status == "stale" and message is None
    assert other not in (await store.get_messages([one.id]))[0].parts

    # The message is gone: the record is written all the same.
    assert result.record is not None
    gone, message, _, _ = await update_record_marking(
        store, result.record.model_copy(update={"active_observations": "* two"}), expected_version=2,
        message_id="msg-nobody", parts=[other], lineage=LINEAGE,
    )
    assert gone.status == "applied" and message is None
    assert gone.record is not None and gone.record.active_observations == "* two"
    await store.close()


@pytest.mark.parametrize("failure", ["store error", "sqlite error"])
async def test_markers_that_fail_never_undo_the_head_write(tmp_path: Path, failure: str) -> None:
    """The markers' part of the write fails, by obsmem's own error or by a real SQLite error (a
    trigger that refuses any change to a message's parts): the head is written all the same,
    the markers alone are left out."""
    store = await _store(tmp_path)
    one, head = await _message_and_head(store)
    if failure == "store error":
        def failing(conn: object, message_id: str, parts: list[DataPart]) -> Message:
            raise StorageError("the parts could not be written")

        store._add_parts = failing  # type: ignore[method-assign,assignment]
    else:
        with sqlite3.connect(tmp_path / "marks.db") as conn:
            conn.execute(
                "CREATE TRIGGER refuse_parts BEFORE UPDATE OF parts ON messages "
                "BEGIN SELECT RAISE(ABORT, 'parts refused'); END"
            )
    result, message, _, _ = await update_record_marking(
        store, head.model_copy(update={"active_observations": "* kept"}), expected_version=1,
        message_id=one.id, parts=[DataPart(name="om-activation", data={"cycle_id": "c1"})], lineage=LINEAGE,
    )
    assert result.status == "applied" and message is None
    stored = await store.get_head(LINEAGE)
    assert stored is not None and stored.active_observations == "* kept" and stored.version == 2
    assert (await store.get_messages([one.id]))[0].parts == one.parts
    await store.close()


async def test_a_store_method_replaced_on_the_instance_is_never_bypassed(tmp_path: Path) -> None:
    """The combined writes stand in for ``update_record`` / ``add_message_parts`` / ``save_messages``
    only while those are the store's own: one replaced on the instance (a wrapper, a test's
    failure injection) is called."""
    store = await _store(tmp_path)
    one, head = await _message_and_head(store)
    calls: list[str] = []
    update, save = store.update_record, store.save_messages

    async def wrapped_update(record: ObservationRecord, *, expected_version: int) -> object:
        calls.append("update_record")
        return await update(record, expected_version=expected_version)

    async def wrapped_save(thread_id: str, messages: list[Message]) -> list[Message]:
        calls.append("save_messages")
        return await save(thread_id, messages)

    store.update_record = wrapped_update  # type: ignore[method-assign,assignment]
    store.save_messages = wrapped_save  # type: ignore[method-assign]
    result, message, _, _ = await update_record_marking(
        store, head.model_copy(update={"active_observations": "* x"}), expected_version=1,
        message_id=one.id, parts=[DataPart(name="om-activation", data={"cycle_id": "c1"})], lineage=LINEAGE,
    )
    assert result.status == "applied" and message is None  # the replaced method wrote; the caller marks
    await save_marked(store, LINEAGE, "t1", [Message.user("two")])
    assert calls == ["update_record", "save_messages"]
    await store.close()


async def test_a_watching_wrapper_keeps_the_combined_writes(tmp_path: Path) -> None:
    """A wrapper that names what it wraps (``functools.wraps``: a counter, a timer) only watches:
    the combined save still runs (with the window's marks), and the wrapper is not called."""
    store = await _store(tmp_path)
    calls: list[str] = []
    save = store.save_messages

    @functools.wraps(save)
    async def watched(thread_id: str, messages: list[Message]) -> list[Message]:
        calls.append("save_messages")
        return await save(thread_id, messages)

    store.save_messages = watched  # type: ignore[method-assign]
    saved, before, after = await save_marked(store, LINEAGE, "t1", [Message.user("one")])
    assert before is not None and after is not None and after != before and saved[0].seq
    assert calls == []
    await store.close()


async def _message_and_head(store: SQLiteStore | MemoryStore) -> tuple[Message, ObservationRecord]:
    """An assistant message in t1 and the lineage's first head (cursor 0)."""
    (one,) = await store.save_messages("t1", [Message.assistant("one")])
    created = await store.create_record(
        ObservationRecord(
            id="om-1", lineage=LINEAGE, scope="thread", thread_id="t1", resource_id="u1",
            created_at=T0, updated_at=T0, threads={"t1": ThreadState(cursor=0)},
        )
    )
    assert created.record is not None
    return one, created.record

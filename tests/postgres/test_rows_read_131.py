"""PostgreSQL: what a turn reads stays bounded by its own thread, counted on the server.

Rows are counted from the server's statistics (pg_stat_user_indexes / pg_stat_user_tables), which
a session sends when it ends: the memory is closed and its sessions waited out before counting.
"""

from __future__ import annotations

import psycopg
import pytest

from obsmem import Memory, Message
from obsmem.types import TextPart, ToolCallPart, ToolResultPart


pytestmark = pytest.mark.anyio

OTHERS, PER_OTHER = 20, 1_000  # 20,000 messages of other users, all newer than the old thread's


def messages_rows_read(url: str) -> int:
    """Rows of ``messages`` read so far by the database's sessions that ended (index and table scans)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(600):  # until every other session of the database has ended (its stats sent)
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()").fetchone()
            if row is not None and row[0] == 0:
                break
            conn.execute("SELECT pg_sleep(0.05)")
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce((SELECT sum(idx_tup_read) FROM pg_stat_user_indexes "
            "WHERE relname = 'messages'), 0) FROM pg_stat_user_tables WHERE relname = 'messages'"
        ).fetchone()
        assert row is not None
        return int(row[0])


async def test_a_turn_on_an_old_thread_does_not_read_every_newer_message_of_the_store(postgres_url: str) -> None:
    """A user comes back to a thread whose last message is older than everyone else's: each save
    of their turn checked for newer tool messages in the thread with ``thread_id = … AND seq > …``,
    which PostgreSQL's generic plan (a statement prepared after a few runs, as on a busy replica's
    connections) serves by walking the primary key (seq) over every newer message of every thread:
    on a large store, every message written since the user was last there, under the thread's
    row lock and statement_timeout."""
    async with Memory(postgres_url) as memory:
        await memory.create_thread(thread_id="old", resource_id="alice")
        await memory.save_messages("old", [Message.user("Hello from last week.", id="old-u0")])
        for t in range(OTHERS):
            await memory.create_thread(thread_id=f"busy-{t}", resource_id=f"user-{t}")
            await memory.save_messages(f"busy-{t}", [
                Message(id=f"b{t}-{i}", role="user", parts=(TextPart(text=f"Note {i}."),)) for i in range(PER_OTHER)
            ])
        await memory.create_thread(thread_id="recent", resource_id="alice")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE messages")
    before = messages_rows_read(postgres_url)
    # One pooled connection, as a busy replica's: its turns on another thread run each statement
    # often enough for psycopg to prepare it and the server to plan it generically.
    async with Memory(postgres_url + "?pool_max_size=1") as memory:
        for i in range(12):
            await tool_turn(memory, "recent", f"recent-{i}")
        await tool_turn(memory, "old", "old-1")  # alice comes back
        assert [m.id for m in await memory.store.list_messages("old")][:2] == ["old-u0", "old-1-u"]
    read = messages_rows_read(postgres_url) - before
    # Thirteen turns on threads of at most 48 messages may read those a few times over, but not
    # the 20,000 messages of other users.
    assert read < OTHERS * PER_OTHER, f"{read} message rows read for 13 turns"


async def tool_turn(memory: Memory, thread: str, tag: str) -> None:
    """A turn that calls a tool and answers: three guarded saves."""
    turn = await memory.begin_turn(thread_id=thread, resource_id="alice", messages=[
        Message.user(f"Question {tag}.", id=f"{tag}-u")])
    await turn.step([Message(id=f"{tag}-c", role="assistant", parts=(
        ToolCallPart(tool_call_id=f"call-{tag}", tool_name="lookup", args={"q": tag}),))])
    await turn.step([
        Message(id=f"{tag}-r", role="tool", parts=(
            ToolResultPart(tool_call_id=f"call-{tag}", tool_name="lookup", result="found"),)),
        Message(id=f"{tag}-a", role="assistant", parts=(TextPart(text="Here it is."),)),
    ])
    await turn.end()


async def test_counting_a_small_threads_messages_does_not_read_the_others(postgres_url: str) -> None:
    """``obsmem threads``, the REST thread listing and the inspector count each thread's messages
    (Store.count_messages); on a busy connection that count may not scan other threads' messages."""
    async with Memory(postgres_url) as memory:
        await memory.create_thread(thread_id="small", resource_id="alice")
        await memory.save_messages("small", [Message.user(f"Hello {i}.", id=f"s{i}") for i in range(3)])
        for t in range(OTHERS):
            await memory.create_thread(thread_id=f"busy-{t}", resource_id=f"user-{t}")
            await memory.save_messages(f"busy-{t}", [
                Message(id=f"b{t}-{i}", role="user", parts=(TextPart(text=f"Note {i}."),)) for i in range(PER_OTHER)
            ])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("ANALYZE messages")
    before = messages_rows_read(postgres_url)
    async with Memory(postgres_url + "?pool_max_size=1") as memory:
        counts = [await memory.store.count_messages("small") for _ in range(12)]
    read = messages_rows_read(postgres_url) - before
    assert counts == [3] * 12
    assert read < PER_OTHER, f"{read} message rows read to count 3 messages 12 times"

"""Deleting a thread released the leases of other threads whose id starts with its own and a ':'.

Seen from two app replicas and an admin on one PostgreSQL database. Thread ``chat:2``: a turn
calls two tools at once, another turn closes both calls as unanswered, and each replica then
gets one real result late. Each result takes its unanswered part's place by rewriting the
closing message under the thread's late-result lease, so the second rewrite reads the first's.
Meanwhile an admin deletes thread ``chat`` (another thread). ``Memory.delete_thread`` released
every lease whose key *contained* ``:thread:chat:`` — that is ``late-results:thread:chat:2`` too —
so the second replica got the lease while the first was mid-rewrite, and the first then wrote
back its stale read: one real tool result replaced by "No result" again, lost.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import TextPart, ToolResultPart

from . import harness

pytestmark = pytest.mark.anyio


def first_of(folder: Path, *names: str) -> str:
    """Wait (bounded) until one of the coordination files exists; its name."""
    deadline = time.monotonic() + harness.PROCESS_TIMEOUT_S
    while time.monotonic() < deadline:
        for name in names:
            if (folder / name).exists():
                return name
        time.sleep(0.01)
    raise AssertionError(f"none of {names} appeared in {folder}")


async def test_deleting_a_thread_keeps_the_late_result_lease_of_a_thread_named_after_it(
    postgres_url: str, tmp_path: Path
) -> None:
    async with Memory(postgres_url) as admin:
        await admin.create_thread(thread_id="chat", resource_id="u1")
        await admin.save_messages("chat", [Message(id="x-u", role="user", parts=(TextPart(text="Old chat."),))])
        first = harness.start("late_first", postgres_url, 0, tmp_path)
        first_of(tmp_path, "called")
        # Another turn of chat:2 goes on: both calls are closed as unanswered.
        await admin.begin_turn(thread_id="chat:2", resource_id="u1",
                               messages=[Message(id="n-u", role="user", parts=(TextPart(text="Never mind."),))])
        (tmp_path / "closed").write_text("1")
        first_of(tmp_path, "rewriting")  # the first replica holds the lease, mid-rewrite
        assert await admin.delete_thread("chat")
        second = harness.start("late_second", postgres_url, 1, tmp_path)
        first_of(tmp_path, "lease-got", "lease-busy")
        (tmp_path / "go").write_text("1")
        harness.finish([first, second])

    async with PostgresStore(postgres_url) as store:
        messages = await store.list_messages("chat:2")
    results = {p.tool_call_id: p for m in messages for p in m.parts if isinstance(p, ToolResultPart)}
    assert harness.sequence_problems(messages) == []
    assert {c: results[c].result for c in ("c1", "c2")} == {"c1": "answer for c1", "c2": "answer for c2"}, (
        "a real tool result was lost (replaced by the unanswered answer again)"
    )

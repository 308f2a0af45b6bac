"""Late tool results for calls that one closing message answered as unanswered, arriving at
once from two replicas, are all kept.

A turn's model makes two parallel tool calls; before their results come back, another tab of the
chat begins a turn, which closes both calls as unanswered (one closing message, two "no result"
parts). Then the two real results arrive, each through another replica (a server behind a load
balancer, say), at the same moment. Each takes its "no result" part's place in the closing
message, right after its call.

On main (388d5d7) each replica read the closing message and saved it back with its own result in
place: a read-modify-write of one row, so the replica that saved second put the first one's
"no result" back and a real tool result was lost (5 of 30 rounds on SQLite, 12 of
30 on PostgreSQL, ``test_two_replicas_answering_calls_of_one_closing_message_at_once``). Now the rewrite runs
under a store lease of the thread's late results and reads the row again inside it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from obsmem import Memory, Message
from obsmem.turn import Turn
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def calls(*ids: str) -> Message:
    return Message(
        role="assistant", parts=tuple(ToolCallPart(tool_call_id=i, tool_name="lookup", args={}) for i in ids)
    )


def result(call_id: str, text: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="lookup", result=text),))


def answers(messages: list[Message]) -> dict[str, object]:
    return {part.tool_call_id: part.result for m in messages for part in m.tool_results}


@pytest.fixture(params=["sqlite", "postgres"])
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, Memory]]:
    """Two replicas: two Memory objects (own engines, own caches) on one database. (The in-memory
    store is one process's: its read and write of a row run without a pause between them.)"""
    url = f"sqlite:///{tmp_path / 'om.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    async with Memory(url) as one, Memory(url) as two:
        yield one, two


async def test_two_replicas_answering_calls_of_one_closing_message_at_once(replicas: tuple[Memory, Memory]) -> None:
    one, two = replicas
    rng = random.Random(7)
    rounds, lost = 30, []

    async def late(turn: Turn, call_id: str) -> None:
        await asyncio.sleep(rng.uniform(0, 0.01))  # the two tools finish about together
        await turn.step([result(call_id, f"real {call_id}")])

    for index in range(rounds):
        chat = f"chat-{index}"
        a = await one.begin_turn(thread_id=chat, resource_id="u1", messages=[Message.user("Oslo and Rome?")])
        await a.step([calls("oslo", "rome")])  # two parallel tool calls, still running
        await two.begin_turn(thread_id=chat, resource_id="u1", messages=[Message.user("another tab")])  # closes both
        elsewhere = await two.resume_turn(thread_id=chat)  # the replica the second result reaches
        await asyncio.gather(late(a, "oslo"), late(elsewhere, "rome"))
        stored = answers(await one.list_messages(chat))
        if stored != {"oslo": "real oslo", "rome": "real rome"}:
            lost.append(stored)
    assert lost == [], f"{len(lost)} of {rounds} rounds lost a real tool result"


async def test_a_late_result_waits_for_the_lease_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that never lets go (a replica stuck mid-rewrite) holds the step at most
    ``LATE_LEASE_WAIT_S``: then the step fails with nothing saved, and its retry succeeds once
    the lease is free (it expires by itself after ``LATE_LEASE_TTL_S``)."""
    import obsmem.turn
    from obsmem.clock import SystemClock
    from obsmem.errors import StorageError

    monkeypatch.setattr(obsmem.turn, "LATE_LEASE_WAIT_S", 0.2)
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}") as memory:
        a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("Oslo?")])
        await a.step([calls("oslo")])
        await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("another tab")])
        held = await memory.store.acquire_lease("late-results:thread:chat", "stuck", ttl_s=60, now=SystemClock().now())
        assert held is not None
        with pytest.raises(StorageError, match="retry the step") as caught:
            await a.step([result("oslo", "4 C")])
        assert getattr(caught.value, "input_saved", None) is False
        assert "no result" in str(answers(await memory.list_messages("chat"))["oslo"]).lower()
        assert await memory.store.release_lease("late-results:thread:chat", "stuck")
        await a.step([result("oslo", "4 C")])  # the same step again
        assert answers(await memory.list_messages("chat")) == {"oslo": "4 C"}


async def test_the_late_result_lease_never_outlives_its_step(tmp_path: Path) -> None:
    """Hostile review (helper-102) of the lease: a step cancelled by an anyio cancel scope (a web
    framework's timeout) while rewriting the closing message left the lease held, so the thread's
    next late result waited its 10 s TTL; and deleting the thread left the lease row, naming the
    thread, in the store for good. Now the release runs to its end whatever cancels the step, and
    the key ends with the thread's lineage, so delete_thread releases it."""
    from obsmem.clock import SystemClock
    from obsmem.storage import SQLiteStore

    gate = asyncio.Event()

    class SlowDisk(SQLiteStore):
        """A store whose rewrites of stored messages (the closing message) wait for ``gate``."""

        async def save_messages(self, thread_id: str, messages: list[Message], **kwargs: object) -> list[Message]:
            if any(m.metadata.get("obsmem_answered_late") for m in messages) and not gate.is_set():
                await gate.wait()
            return await super().save_messages(thread_id, messages, **kwargs)  # type: ignore[arg-type]

    async with Memory(SlowDisk(tmp_path / "om.db")) as memory:
        a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("Oslo and Rome?")])
        await a.step([calls("oslo", "rome")])
        await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("another tab")])
        scope = anyio.CancelScope()

        async def step_within_a_deadline() -> None:  # as anyio.move_on_after (a web framework's timeout) runs it
            with scope:
                await a.step([result("oslo", "4 C")])

        stuck = asyncio.create_task(step_within_a_deadline())
        while not [lease for lease in await memory.store.list_leases() if lease.key.startswith("late-results:")]:
            await asyncio.sleep(0.01)  # the step holds the lease, its rewrite waiting on the disk
        scope.cancel()
        await asyncio.gather(stuck, return_exceptions=True)
        gate.set()
        for _ in range(100):  # the release finishes on its own
            if not [lease for lease in await memory.store.list_leases() if lease.key.startswith("late-results:")]:
                break
            await asyncio.sleep(0.01)
        assert [lease.key for lease in await memory.store.list_leases() if lease.key.startswith("late-results:")] == []
        resumed = await memory.resume_turn(thread_id="chat")
        await resumed.step([result("rome", "19 C")])  # no leftover lease to wait for (none is listed above)
        assert answers(await memory.list_messages("chat"))["rome"] == "19 C"

        held = await memory.store.acquire_lease("late-results:thread:chat", "crashed", ttl_s=60, now=SystemClock().now())
        assert held is not None  # a replica died holding it
        await memory.delete_thread("chat")
        assert [lease.key for lease in await memory.store.list_leases() if "chat" in lease.key] == []


async def test_another_tab_saves_while_a_late_result_waits_for_the_lease(tmp_path: Path) -> None:
    """While one tab's late result waits for the thread's late-result lease (a replica holds it,
    stuck mid-rewrite), another tab of the same thread in this process goes on: its turn saves
    and gets its context at once. On main (8397ce8) the wait ran inside the process's save lock
    of the thread, so the other tab's begin_turn waited too, up to ``LATE_LEASE_WAIT_S`` (12 s)."""
    from obsmem.clock import SystemClock
    from obsmem.storage import SQLiteStore

    waiting = asyncio.Event()

    class Watched(SQLiteStore):
        async def acquire_lease(self, key: str, owner: str, **kwargs: object) -> object:
            held = await super().acquire_lease(key, owner, **kwargs)  # type: ignore[arg-type]
            if key.startswith("late-results:") and owner != "stuck" and held is None:
                waiting.set()  # a step found the lease held: it waits for it
            return held

    async with Memory(Watched(tmp_path / "om.db")) as memory:
        a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("Oslo?")])
        await a.step([calls("oslo")])
        await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("another tab")])
        stuck = await memory.store.acquire_lease("late-results:thread:chat", "stuck", ttl_s=60, now=SystemClock().now())
        assert stuck is not None
        late = asyncio.create_task(a.step([result("oslo", "4 C")]))
        await waiting.wait()
        b = await memory.begin_turn(thread_id="chat", messages=[Message.user("a third tab asks: and Rome?")])
        assert b.context.raw_messages[-1].text == "a third tab asks: and Rome?"
        assert not late.done()  # the late result still waits for the lease; the other tab did not
        assert await memory.store.release_lease("late-results:thread:chat", "stuck")
        await late
        assert answers(await memory.list_messages("chat")) == {"oslo": "4 C"}
        await b.end()

"""The blocking facade drives the same implementation as the async API."""

from __future__ import annotations

import asyncio

import pytest

from obsmem import InvalidInputError, Message, SyncMemory

from .engine.helpers import Conversation, chat_turns, fake_clock, small_config


def test_sync_and_async_agree() -> None:
    conv_sync, conv_async = Conversation(), Conversation()
    with SyncMemory("memory://", config=small_config(), clock=fake_clock()) as sync_memory:
        for user_text, reply in chat_turns(12):
            turn = sync_memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv_sync.user(user_text)])
            turn.step([conv_sync.assistant(reply)])
            turn.end()
        sync_record = sync_memory.get_record("t1")
        sync_context = [m.text for m in sync_memory.get_context("t1").messages]

    async def run_async() -> tuple[object, list[str]]:
        from obsmem import Memory

        async with Memory("memory://", config=small_config(), clock=fake_clock()) as memory:
            for user_text, reply in chat_turns(12):
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv_async.user(user_text)])
                await turn.step([conv_async.assistant(reply)])
                await turn.end()
            return await memory.get_record("t1"), [m.text for m in (await memory.get_context("t1")).messages]

    async_record, async_context = asyncio.run(run_async())
    assert sync_record is not None and async_record is not None
    assert sync_record.active_observations == async_record.active_observations  # type: ignore[attr-defined]
    assert sync_context == async_context


def test_sync_facade_refuses_to_block_a_running_loop() -> None:
    with SyncMemory("memory://") as memory:

        async def inside() -> None:
            with pytest.raises(InvalidInputError, match="await"):
                memory.create_thread("t", "u")

        asyncio.run(inside())
        assert memory.create_thread("t", "u").id == "t"


def test_sync_turn_context_manager() -> None:
    with SyncMemory("memory://") as memory:
        with memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")]) as turn:
            assert [m.text for m in turn.context.messages] == ["hello"]
        assert len(memory.list_messages("t")) == 1


def test_a_program_that_forgets_close_still_exits(tmp_path: object) -> None:
    import subprocess
    import sys

    code = (
        "from obsmem import SyncMemory, Message\n"
        "m = SyncMemory('memory://')\n"
        "m.begin_turn(thread_id='t', resource_id='u', messages=[Message.user('hello')])\n"
        "print('done')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "done" in result.stdout


def test_sync_recall_returns_a_groups_messages() -> None:
    from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig, RetrievalConfig
    from obsmem.om.text.groups import parse_groups

    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
        retrieval=RetrievalConfig(enabled=True),
    )
    conv = Conversation()
    with SyncMemory("memory://", config=config, clock=fake_clock()) as memory:
        for user_text, reply in chat_turns(20):
            turn = memory.begin_turn(
                thread_id="t1", resource_id="u1", messages=[conv.user(user_text)]
            )
            turn.step([conv.assistant(reply)])
            turn.end()
        record = memory.get_record("t1")
        assert record is not None
        group = next(g for g in parse_groups(record.active_observations) if g.last_seq >= g.first_seq)
        result = memory.recall("t1", group_id=group.id, limit=20)
        seqs = [m.seq for m in result.messages]
        assert seqs and seqs[0] == group.first_seq and max(seqs) <= group.last_seq
        answer = memory.call_recall_tool("t1", {"group_id": group.id})
        assert "error" not in answer and answer["messages"]
        assert memory.recall_tool()["name"] == "recall"


def test_sync_status_watch_receipt_and_usage_match_the_async_api() -> None:
    from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig, RetrievalConfig
    from obsmem.om.receipts import RECEIPT_KEY

    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
        retrieval=RetrievalConfig(enabled=True),
    )
    conv = Conversation()
    with SyncMemory("memory://", config=config, clock=fake_clock()) as memory:
        memory.create_thread("t1", "u1")
        watching = memory.watch("t1", interval_s=0.01)
        first = next(watching)
        assert first.phase == "idle" and first.window_tokens == 0 and first.record_id is None
        for user_text, reply in chat_turns(20):
            turn = memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)])
            turn.step([conv.assistant(reply)])
            turn.end()
        changed = next(watching)  # the state changed since the first status: the next one comes
        assert not changed.same_state(first) and changed.record_id is not None
        watching.close()
        status = memory.status("t1")
        record = memory.get_record("t1")
        assert record is not None and status.record_id == record.id and status.generation == record.generation
        assert status.observation_tokens == record.observation_tokens > 0

        reply = [m for m in memory.list_messages("t1") if m.role == "assistant"][-1]
        assert RECEIPT_KEY in reply.metadata
        receipt = memory.receipt(reply.id)
        assert receipt is not None and receipt.data() == reply.metadata[RECEIPT_KEY]
        assert receipt.groups, "retrieval mode: the reply's context showed observation groups"
        sources = memory.receipt_sources(receipt)
        assert set(sources) == {g.id for g in receipt.groups} | {"raw"}
        for group in receipt.groups:
            assert sources[group.id] and all(group.first_seq <= (m.seq or 0) <= group.last_seq for m in sources[group.id])
        assert sorted(m.id for m in sources["raw"]) == sorted(receipt.raw_message_ids)
        assert memory.receipt("no-such-message") is None
        with pytest.raises(InvalidInputError):
            memory.receipt_sources("not a receipt")  # type: ignore[arg-type]

        report = memory.usage(thread_id="t1")
        assert report.total().calls == 0  # the offline roles make no model call
        assert memory.usage(resource_id="u1").rows == report.rows

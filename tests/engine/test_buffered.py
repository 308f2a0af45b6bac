"""Buffered observation and reflection: background chunks, instant activation, no loss."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.om.activation import covered_until
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.storage.contract import BufferedChunk
from obsmem.storage.memory import MemoryStore
from obsmem.types import DataPart

from .helpers import Conversation, chat_turns, fake_clock
from .test_lifecycle import assert_each_message_once

pytestmark = pytest.mark.anyio


def buffered_config(message_tokens: int = 1000, **observation: object) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, **observation),  # type: ignore[arg-type]
        reflection=ReflectionConfig(observation_tokens=100_000),
    )


class CountingObserver(OfflineObserver):
    """The offline observer, counting buffered (background) and synchronous calls apart."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer_calls = 0
        self.sync_calls = 0
        self.hold_buffers: asyncio.Event | None = None

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        if not request.buffered:
            self.sync_calls += 1
        else:
            self.buffer_calls += 1
            if self.hold_buffers is not None:
                await self.hold_buffers.wait()
        return await super().observe(request)


async def run_turns(memory: Memory, conv: Conversation, turns: int, *, start: int = 0, settle: bool = True) -> list[bool]:
    waited = []
    for user_text, reply in list(chat_turns(start + turns))[start:]:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)])
        await turn.step([conv.assistant(reply)])
        await turn.end()
        waited.append(turn.waited)
        if settle:
            await memory.settled()
    return waited


async def test_a_buffer_persists_its_chunk_before_any_activation() -> None:
    observer = CountingObserver()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 3)
        record = await memory.get_record("t1")
        assert record is not None
        assert observer.buffer_calls >= 1 and observer.sync_calls == 0
        assert record.buffered_chunks, "the chunk is stored inactive"
        chunk = record.buffered_chunks[0]
        assert chunk.message_ids and chunk.message_tokens > 0 and chunk.first_seq <= chunk.last_seq
        assert record.cursor("t1") == 0, "nothing is active before the threshold"
        context = await memory.get_context("t1")
        assert not context.has_observations
        assert set(chunk.message_ids) <= {m.id for m in context.raw_messages}


async def test_threshold_activates_chunks_without_waiting_and_keeps_a_tail() -> None:
    observer = CountingObserver()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    async with memory:
        waited = await run_turns(memory, Conversation(), 14)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        assert observer.sync_calls == 0, "buffers kept up: no synchronous observation"
        assert not any(waited)
        assert "--- message boundary" in record.active_observations or len(record.active_observations) > 0
        context = await memory.get_context("t1")
        assert context.raw_messages
        await assert_each_message_once(memory)
        assert (
            memory.counter.count_messages(context.raw_messages)
            < memory.config.effective_message_threshold(record.observation_tokens)
        )


async def test_when_buffers_fall_behind_the_tail_is_observed_synchronously_in_the_same_step() -> None:
    observer = CountingObserver()
    observer.hold_buffers = asyncio.Event()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    async with memory:
        try:
            waited = await run_turns(memory, Conversation(), 20, settle=False)
        finally:
            observer.hold_buffers.set()
        # under block_after (1.2 × the threshold) a stuck buffer does not block the turn ...
        assert not any(waited[:12])
        # ... past it the turn observes the unbuffered tail itself
        assert any(waited), "a turn had to wait once the buffers were stuck"
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        assert observer.sync_calls >= 1
        context = await memory.get_context("t1")
        assert (
            memory.counter.count_messages(context.raw_messages)
            < memory.config.effective_message_threshold(record.observation_tokens)
        )
        await memory.settled()
        await assert_each_message_once(memory)
        record = await memory.get_record("t1")
        assert record is not None
        assert all(c.first_seq > record.cursor("t1") for c in record.buffered_chunks), "no chunk covers observed messages"


async def until(predicate: Callable[[], bool]) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def test_a_chunk_wholly_covered_by_the_cursor_is_never_appended() -> None:
    observer = CountingObserver()
    hold = observer.hold_buffers = asyncio.Event()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    async with memory:
        try:
            await run_turns(memory, Conversation(), 3, settle=False)
            await until(lambda: observer.buffer_calls == 1)
            outcome = await memory.observe("t1")  # manual sync observation overtakes the buffer
            assert outcome.applied
        finally:
            hold.set()
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks == ()
        await assert_each_message_once(memory)


async def test_activation_keeps_a_chunk_appended_concurrently() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 5)
        thread = await memory.get_thread("t1")
        head = await memory.engine.head(thread)
        chunks = head.buffered_chunks
        assert len(chunks) >= 1
        # activate exactly one chunk; any later chunk must survive in order
        outcome = await memory.engine.activate(thread, count=1)
        assert outcome.applied and outcome.record is not None
        assert outcome.record.buffered_chunks == chunks[1:]
        assert outcome.record.cursor("t1") == chunks[0].last_seq


async def test_reflection_rollover_carries_buffered_chunks() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 5)
        before = await memory.get_record("t1")
        assert before is not None and before.buffered_chunks
        await memory.observe("t1")  # activates the chunks and observes the rest
        await run_turns(memory, conv, 4, start=5)
        head = await memory.get_record("t1")
        assert head is not None and head.buffered_chunks
        outcome = await memory.reflect("t1")
        assert outcome.applied and outcome.record is not None
        assert outcome.record.buffered_chunks == head.buffered_chunks, "no chunk stranded on the retired generation"
        assert outcome.record.cursor("t1") == head.cursor("t1")


async def test_buffered_reflection_activates_and_keeps_lines_appended_after_its_slice() -> None:
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=600),
        reflection=ReflectionConfig(observation_tokens=900, buffer_activation=0.5),
    )
    events: list[str] = []
    memory = Memory("memory://", config=config, clock=fake_clock(), on_event=lambda e: events.append(e.kind))
    async with memory:
        await run_turns(memory, Conversation(), 60)
        assert "reflection-buffered" in events
        assert "reflection-activated" in events
        generations = await memory.list_generations("t1")
        assert len(generations) >= 2
        await assert_each_message_once(memory)


async def test_idle_activation_after_the_ttl() -> None:
    clock = fake_clock()
    config = MemoryConfig(observation=ObservationConfig(message_tokens=1000), activate_after_idle="5m",
                          reflection=ReflectionConfig(observation_tokens=100_000))
    memory = Memory("memory://", config=config, clock=clock)
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 3)
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks and record.cursor("t1") == 0
        # a turn right away does not activate
        clock.advance((conv.at - clock.now()).total_seconds() + 60)
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("quick one")])
        await turn.end()
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
        # after the TTL the buffered chunks activate even below the threshold
        clock.advance((conv.at - clock.now()).total_seconds() + 6 * 60)
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("back after a break")])
        assert turn.context.has_observations
        assert any(o.operation == "activation" and o.applied for o in turn.outcomes)


@pytest.mark.parametrize(("previous", "current", "activates"), [
    ("openai:gpt-4o", "openai.responses:gpt-4o", False),
    ("openai:gpt-4o", "openai:gpt-4o", False),
    ("openai:gpt-4o", "anthropic:claude-sonnet-4", True),
    ("openai:gpt-4o", "openai:gpt-5", True),
])
async def test_provider_change_activation_normalises_provider_ids(previous: str, current: str, activates: bool) -> None:
    config = MemoryConfig(observation=ObservationConfig(message_tokens=1000), activate_on_provider_change=True,
                          reflection=ReflectionConfig(observation_tokens=100_000))
    memory = Memory("memory://", config=config, clock=fake_clock())
    async with memory:
        conv = Conversation()
        for user_text, reply in chat_turns(3):
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)], model=previous)
            await turn.step([conv.assistant(reply)])
            await turn.end()
            await memory.settled()
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("next")], model=current)
        activated = any(o.operation == "activation" and o.applied for o in turn.outcomes)
        assert activated == activates


async def test_aclose_cancels_background_work_and_leaves_no_lease() -> None:
    observer = CountingObserver()
    observer.hold_buffers = asyncio.Event()
    store = MemoryStore()
    memory = Memory(store, config=buffered_config(), observer=observer, clock=fake_clock())
    await run_turns(memory, Conversation(), 3, settle=False)
    await until(lambda: observer.buffer_calls == 1)
    assert memory.background.pending == 1
    await memory.aclose(cancel=True)
    assert memory.background.pending == 0
    assert memory.background.errors == []
    assert await store.list_leases() == []


async def test_a_crashed_buffers_lease_expires_and_another_engine_takes_over() -> None:
    clock = fake_clock()
    store = MemoryStore()
    config = buffered_config()
    crashed = Memory(store, config=config, clock=clock)
    await crashed.create_thread("t1", "u1")
    # a worker took the lease and died without releasing it
    await store.acquire_lease("buffer-observation:thread:t1", "dead-worker", ttl_s=60, now=clock.now())
    survivor = Memory(store, config=config, clock=clock)
    conv = Conversation()
    await run_turns(survivor, conv, 3)
    record = await survivor.get_record("t1")
    assert record is not None and record.buffered_chunks == (), "lease held: no duplicate buffer started"
    clock.advance(120)
    await run_turns(survivor, conv, 6, start=3)
    record = await survivor.get_record("t1")
    assert record is not None and (record.buffered_chunks or record.cursor("t1") > 0)
    await survivor.aclose()


async def test_chunks_stay_in_order_and_continue_the_cursor() -> None:
    memory = Memory("memory://", config=buffered_config(message_tokens=3000), clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 28)
        record = await memory.get_record("t1")
        assert record is not None and len(record.buffered_chunks) >= 2
        last = record.cursor("t1")
        for chunk in record.buffered_chunks:
            assert isinstance(chunk, BufferedChunk)
            assert chunk.first_seq > last
            last = chunk.last_seq
        assert covered_until(record, "t1") == last


async def test_idle_buffering_at_turn_end_skips_the_minimum_and_tolerates_failure() -> None:
    observer = CountingObserver()
    memory = Memory("memory://", config=buffered_config(buffer_on_idle=True), observer=observer, clock=fake_clock())
    async with memory:
        conv = Conversation()
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("I live in Munich.")])
        await turn.end([conv.assistant("Noted: Munich.")])  # far below one buffer interval
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and len(record.buffered_chunks) == 1
        assert observer.buffer_calls == 1
        assert set(record.buffered_chunks[0].message_ids) == {m.id for m in await memory.list_messages("t1")}


@pytest.mark.parametrize("options", [{"buffer_on_idle": False}, {"buffer_tokens": False}])
async def test_no_idle_buffering_when_off(options: dict[str, Any]) -> None:
    observer = CountingObserver()
    memory = Memory("memory://", config=buffered_config(**options), observer=observer, clock=fake_clock())
    async with memory:
        conv = Conversation()
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("I live in Munich.")])
        await turn.end([conv.assistant("Noted.")])
        await memory.settled()
        assert observer.buffer_calls == 0


async def test_a_failing_idle_buffer_never_reaches_the_caller() -> None:
    class Failing(CountingObserver):
        async def observe(self, request: ObservationRequest) -> ObservationResult:
            raise RuntimeError("observer down")

    memory = Memory("memory://", config=buffered_config(buffer_on_idle=True), observer=Failing(), clock=fake_clock())
    async with memory:
        conv = Conversation()
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("I live in Munich.")])
        await turn.end([conv.assistant("Noted.")])
        await memory.settled()
        assert memory.background.errors == []
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks == () and record.cursor("t1") == 0
        failed = [p for m in await memory.list_messages("t1") for p in m.parts
                  if isinstance(p, DataPart) and p.name == "om-buffering-failed"]
        assert failed and "observer down" in failed[0].data["error"]
        assert await memory.store.list_leases() == []


async def test_continue_policy_keeps_the_tail_pending_when_the_sync_observation_fails() -> None:
    class BrokenSync(CountingObserver):
        async def observe(self, request: ObservationRequest) -> ObservationResult:
            if not request.buffered:
                raise RuntimeError("sync path down")
            raise RuntimeError("buffers down too")

    # No backoff: the failing buffers would otherwise leave the observer alone by block_after.
    memory = Memory("memory://", config=buffered_config(failure_backoff=False), observer=BrokenSync(),
                    failure_policy="continue", clock=fake_clock())
    async with memory:
        waited = await run_turns(memory, Conversation(), 14)
        assert any(waited)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
        await assert_each_message_once(memory)

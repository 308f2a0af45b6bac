"""The original's proven loss and duplication bugs (P1–P7, H1–H8), each as a scenario.

Every test here describes an interleaving that lost, duplicated or misplaced work in the
reference design; on obsmem each must keep every message exactly once. P7 (processes) is
covered by tests/lifecycle/test_multiprocess.py.
"""

from __future__ import annotations

import asyncio

import pytest

from obsmem import Memory
from obsmem.errors import StorageError
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest, ReflectionResult
from obsmem.storage.contract import ObservationRecord, WriteResult
from obsmem.storage.memory import MemoryStore
from obsmem.types import DataPart

from .helpers import Conversation, fake_clock
from .test_buffered import buffered_config, run_turns
from .test_lifecycle import assert_each_message_once

pytestmark = pytest.mark.anyio


async def test_p1_reflection_rollover_carries_chunks() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 5)
        await memory.observe("t1")
        await run_turns(memory, conv, 4, start=5)
        head = await memory.get_record("t1")
        assert head is not None and head.buffered_chunks
        outcome = await memory.reflect("t1")
        assert outcome.record is not None and outcome.record.buffered_chunks == head.buffered_chunks
        retired = (await memory.list_generations("t1"))[1]
        assert retired.superseded_by == outcome.record.id
        await memory.observe("t1")
        await assert_each_message_once(memory)


async def test_p2_a_chunk_overlapping_the_cursor_is_dropped_not_retargeted() -> None:
    observer = HeldObserver()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    async with memory:
        conv = Conversation()
        try:
            await run_turns(memory, conv, 3, settle=False)
            await observer.started.wait()
            # the window grows and a manual observation covers part of what the buffer holds
            await run_turns(memory, conv, 1, start=3, settle=False)
            await memory.observe("t1")
        finally:
            observer.release.set()
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None
        assert all(c.first_seq > record.cursor("t1") for c in record.buffered_chunks)
        await assert_each_message_once(memory)


async def test_p4_activation_never_commits_to_a_retired_generation() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 5)
        await memory.observe("t1")
        await run_turns(memory, conv, 4, start=5)
        thread = await memory.get_thread("t1")
        stale = await memory.engine.head(thread)
        await memory.reflect("t1")  # retires `stale`
        write = await memory.store.update_record(
            stale.model_copy(update={"buffered_chunks": ()}), expected_version=stale.version
        )
        assert write.status == "stale" and write.record is not None and write.record.id != stale.id
        outcome = await memory.engine.activate(thread, count=None)
        assert outcome.applied and outcome.record is not None and outcome.record.is_live
        await assert_each_message_once(memory)


class InterleavingStore(MemoryStore):
    """A real in-memory store that runs one injected write just before a chosen update."""

    def __init__(self) -> None:
        super().__init__()
        self.before_next_update: asyncio.Future[None] | None = None
        self.inject: list[ObservationRecord] = []

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        if self.inject:
            injected = self.inject.pop()
            current = await self.get_head(injected.lineage)
            assert current is not None
            await super().update_record(injected.model_copy(update={"version": current.version}),
                                        expected_version=current.version)
        return await super().update_record(record, expected_version=expected_version)


async def test_p5_activation_keeps_a_chunk_appended_between_read_and_write() -> None:
    store = InterleavingStore()
    memory = Memory(store, config=buffered_config(message_tokens=3000), clock=fake_clock())
    conv = Conversation()
    await run_turns(memory, conv, 28)
    thread = await memory.get_thread("t1")
    head = await memory.engine.head(thread)
    assert len(head.buffered_chunks) >= 2
    first, *rest = head.buffered_chunks
    # Pretend the head had one chunk less when activation read it: the last chunk is appended
    # "concurrently", between activation's read and its write.
    trimmed = head.model_copy(update={"buffered_chunks": head.buffered_chunks[:-1]})
    write = await store.update_record(trimmed, expected_version=head.version)
    assert write.applied
    store.inject.append(head)  # the concurrent append of the last chunk
    outcome = await memory.engine.activate(thread, count=1)
    assert outcome.applied and outcome.record is not None
    assert outcome.record.buffered_chunks == tuple(rest), "the concurrently appended chunk survives"
    assert outcome.record.cursor("t1") == first.last_seq
    await memory.aclose()


async def test_p6_sync_reflection_keeps_observations_appended_while_it_ran() -> None:
    holder: dict[str, Memory] = {}

    class SlowReflector(OfflineReflector):
        async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
            memory = holder["m"]
            thread = await memory.get_thread("t1")
            head = await memory.engine.head(thread)
            appended = head.active_observations + "\n* 🔴 (23:59) User stated the late fact is kiwi."
            write = await memory.store.update_record(
                head.model_copy(update={"active_observations": appended}), expected_version=head.version
            )
            assert write.applied
            return await super().reflect(request)

    memory = Memory("memory://", config=buffered_config(), reflector=SlowReflector(), clock=fake_clock())
    holder["m"] = memory
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 12)
        await memory.observe("t1")
        outcome = await memory.reflect("t1")
        assert outcome.applied and outcome.record is not None
        assert "late fact is kiwi" in outcome.record.active_observations


async def test_h1_the_store_refuses_a_cursor_moving_backward() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 14)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        back = record.threads["t1"].model_copy(update={"cursor": record.cursor("t1") - 1})
        with pytest.raises(StorageError):
            await memory.store.update_record(
                record.model_copy(update={"threads": {"t1": back}}), expected_version=record.version
            )


async def test_h2_a_stale_write_never_overwrites() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 3)
        record = await memory.get_record("t1")
        assert record is not None
        first = await memory.store.update_record(record.model_copy(update={"metadata": {"a": 1}}),
                                                 expected_version=record.version)
        second = await memory.store.update_record(record.model_copy(update={"metadata": {"b": 2}}),
                                                  expected_version=record.version)
        assert first.applied and second.status == "stale"
        head = await memory.get_record("t1")
        assert head is not None and head.metadata == {"a": 1}


async def test_h4_an_empty_observation_never_moves_the_cursor_past_unseen_messages() -> None:
    conv = Conversation()
    holder: dict[str, Memory] = {}

    class NothingObserver:
        name = "nothing"

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            # a message arrives while the (empty) observation runs
            await holder["m"].save_messages("t1", [conv.user("arrived during the observation")])
            return ObservationResult(observations="")

    memory = Memory("memory://", config=buffered_config(buffer_tokens=False), observer=NothingObserver(),
                    clock=fake_clock())
    holder["m"] = memory
    async with memory:
        await run_turns(memory, conv, 14)
        record = await memory.get_record("t1")
        assert record is not None
        context = await memory.get_context("t1")
        assert any(m.text == "arrived during the observation" for m in context.raw_messages)
        await assert_each_message_once(memory)


async def test_h5_h6_markers_only_on_observed_assistant_messages() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    async with memory:
        await run_turns(memory, Conversation(), 14)
        record = await memory.get_record("t1")
        assert record is not None
        for message in await memory.list_messages("t1"):
            markers = [p for p in message.parts if isinstance(p, DataPart)]
            if message.role != "assistant":
                assert not markers
            for part in markers:
                if part.name in ("om-observation-end", "om-activation"):
                    assert message.seq is not None and message.seq <= record.cursor("t1")


class HeldObserver(OfflineObserver):
    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.buffer_calls = 0

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        if request.buffered:
            self.buffer_calls += 1
            self.started.set()
            await self.release.wait()
        return await super().observe(request)


async def test_h8_two_engines_never_buffer_the_same_messages_twice() -> None:
    store = MemoryStore()
    observer_a, observer_b = HeldObserver(), HeldObserver()
    config = buffered_config()
    a = Memory(store, config=config, observer=observer_a, clock=fake_clock())
    b = Memory(store, config=config, observer=observer_b, clock=fake_clock())
    conv = Conversation()
    thread = await a.create_thread("t1", "u1")
    await a.save_messages("t1", [conv.user("I live in Munich and work at Helio. " * 8),
                                 conv.assistant("Noted, Munich and Helio. " * 8)])
    assert a.engine.buffered is not None and b.engine.buffered is not None
    await asyncio.gather(
        a.engine.buffered.maybe_start_buffer(thread, idle=True),
        b.engine.buffered.maybe_start_buffer(thread, idle=True),
    )
    for _ in range(50):
        await asyncio.sleep(0)
    observer_a.release.set()
    observer_b.release.set()
    await a.settled()
    await b.settled()
    assert observer_a.buffer_calls + observer_b.buffer_calls == 1
    record = await store.get_head("thread:t1")
    assert record is not None and len(record.buffered_chunks) == 1


async def test_a_buffer_landing_inside_a_sync_batch_is_replaced_not_the_other_way_round() -> None:
    class LandDuringSync(HeldObserver):
        def __init__(self) -> None:
            super().__init__()
            self.memory: Memory | None = None

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            if not request.buffered and self.memory is not None:
                self.release.set()  # the held buffer lands while the synchronous call runs
                for _ in range(200):
                    await asyncio.sleep(0)
                    head = await self.memory.store.get_head("thread:t1")
                    if head is not None and head.buffered_chunks:
                        break
            return await super().observe(request)

    observer = LandDuringSync()
    memory = Memory("memory://", config=buffered_config(), observer=observer, clock=fake_clock())
    observer.memory = memory
    async with memory:
        conv = Conversation()
        await run_turns(memory, conv, 3, settle=False)
        await observer.started.wait()
        outcome = await memory.observe("t1")
        assert outcome.applied, "the synchronous result is committed, not thrown away"
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks == ()
        await assert_each_message_once(memory)

"""Failures never lose messages: typed errors, pending messages, failed markers, write guards."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from obsmem import Memory, ObservationError, ThreadNotFoundError
from obsmem.errors import ModelUnavailableError
from obsmem.models.base import ModelRequest, ModelResponse
from obsmem.models.testing import FunctionModel, ScriptedModel
from obsmem.om.engine import Engine
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.types import DataPart, Message

from .helpers import Conversation, fake_clock, replay, small_config

pytestmark = pytest.mark.anyio


class FailingObserver:
    name = "failing"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.calls += 1
        raise self.exc


async def test_a_failing_observer_raises_a_typed_error_and_keeps_messages_pending() -> None:
    observer = FailingObserver(ModelUnavailableError("upstream 503", status_code=503))
    memory = Memory("memory://", config=small_config(), observer=observer, clock=fake_clock())
    async with memory:
        conv = Conversation()
        with pytest.raises(ObservationError, match="stay pending") as info:
            await replay(memory, conv, 12)
        assert isinstance(info.value.__cause__, ModelUnavailableError)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0 and record.active_observations == ""
        stored = await memory.list_messages("t1")
        context = await memory.get_context("t1")
        visible = {m.id for m in stored if not m.is_marker_only}
        assert visible == {m.id for m in context.raw_messages}, "nothing is dropped from the actor's view"
        failed = [p for m in stored for p in m.parts if isinstance(p, DataPart) and p.name == "om-observation-failed"]
        assert failed and "upstream 503" in failed[0].data["error"]
        assert all(m.role == "assistant" for m in stored if any(isinstance(p, DataPart) for p in m.parts))


async def test_warn_policy_keeps_the_turn_going_and_retries_next_cycle() -> None:
    observer = FailingObserver(RuntimeError("model exploded"))
    memory = Memory("memory://", config=small_config(), observer=observer, failure_policy="warn", clock=fake_clock())
    async with memory:
        conv = Conversation()
        await replay(memory, conv, 14)
        assert observer.calls >= 2, "each later step retries the same pending messages"
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
        # a working observer later picks every pending message up
        memory.engine.observer = OfflineObserver(count_tokens=memory.counter.count_text)
        outcome = await memory.observe("t1")
        assert outcome.applied
        assert outcome.record is not None and outcome.record.cursor("t1") > 0


async def test_malformed_llm_output_is_not_committed() -> None:
    model = ScriptedModel(["<observations>\n</observations>"], repeat_last=True)
    memory = Memory("memory://", config=small_config(), observer=model, reflector="offline", clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 12)
        record = await memory.get_record("t1")
        assert record is not None
        assert record.active_observations == ""


async def test_a_model_that_times_out_is_a_typed_error() -> None:
    async def slow(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
        await asyncio.sleep(30)
        return ModelResponse(text="never")

    memory = Memory("memory://", config=small_config(), observer=FunctionModel(slow), reflector="offline",
                    clock=fake_clock())
    memory.engine.model_timeout_s = 0.05
    async with memory:
        with pytest.raises(ObservationError, match="did not finish"):
            await replay(memory, Conversation(), 12)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0


async def test_thread_deleted_mid_observation_is_not_resurrected() -> None:
    memory_holder: dict[str, Memory] = {}

    class DeletingObserver:
        name = "deleting"

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            await memory_holder["m"].delete_thread("t1")
            return ObservationResult(observations="Date: Jun 15, 2025\n* 🔴 (09:01) User stated x.")

    memory = Memory("memory://", config=small_config(), observer=DeletingObserver(), clock=fake_clock())
    memory_holder["m"] = memory
    async with memory:
        conv = Conversation()
        # The input is observed at the boundary after the actor saw it (issue 12, item 1).
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                       messages=[conv.user("I like long walks by the river. " * 80)])
        with pytest.raises(ThreadNotFoundError):
            await turn.step([conv.assistant("Walks by the river it is.")])
        assert await memory.store.get_thread("t1") is None
        assert await memory.store.get_head("thread:t1") is None


async def test_two_engines_racing_never_duplicate_an_observation() -> None:
    from obsmem.storage.memory import MemoryStore

    store = MemoryStore()
    gate = asyncio.Event()
    started = 0

    class GatedObserver(OfflineObserver):
        async def observe(self, request: ObservationRequest) -> ObservationResult:
            nonlocal started
            started += 1
            if started == 2:
                gate.set()
            await gate.wait()
            return await super().observe(request)

    config = small_config()
    first = Memory(store, config=config, observer=GatedObserver(), clock=fake_clock())
    second = Memory(store, config=config, observer=GatedObserver(), clock=fake_clock())
    conv = Conversation()
    thread = await first.create_thread("t1", "u1")
    await first.save_messages("t1", [conv.user("I live in Munich. " * 40), conv.assistant("Noted. " * 40)])
    outcomes = await asyncio.gather(first.engine.observe(thread, force=True), second.engine.observe(thread, force=True))
    assert sorted(o.applied for o in outcomes) == [False, True]
    record = await store.get_head("thread:t1")
    assert record is not None
    assert record.active_observations.count("Munich") == 1
    generations = await store.list_generations("thread:t1")
    assert len(generations) == 1


async def test_empty_reflection_never_replaces_observations() -> None:
    reflector_model = ScriptedModel(["<observations>\n</observations>"], repeat_last=True)
    memory = Memory("memory://", config=small_config(message_tokens=300, observation_tokens=400),
                    observer="offline", reflector=reflector_model, clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 30)
        generations = await memory.list_generations("t1")
        assert len(generations) == 1
        assert generations[0].active_observations.strip()
        assert reflector_model.calls >= 1


async def _reflect_engine(reflector_outputs: list[str]) -> tuple[Engine, ScriptedModel, Any]:
    model = ScriptedModel(reflector_outputs, repeat_last=True)
    memory = Memory("memory://", config=small_config(observation_tokens=60), observer="offline",
                    reflector=model, clock=fake_clock())
    thread = await memory.create_thread("t1", "u1")
    head = await memory.engine.head(thread)
    text = "Date: Jun 15, 2025\n" + "\n".join(f"* 🔴 (09:{i:02d}) User stated fact number {i} about the trip." for i in range(12))
    write = await memory.store.update_record(
        head.model_copy(update={"active_observations": text, "observation_tokens": memory.counter.count_text(text)}),
        expected_version=head.version,
    )
    assert write.applied
    return memory.engine, model, thread


async def test_best_effort_reflection_is_committed_once_then_suppressed() -> None:
    long_output = "<observations>\nDate: Jun 15, 2025\n" + "\n".join(
        f"* 🔴 (09:{i:02d}) User stated fact number {i} about the trip, still long." for i in range(12)
    ) + "\n</observations>"
    engine, model, thread = await _reflect_engine([long_output])
    first = await engine.maybe_reflect(thread)
    assert first.applied
    calls = model.calls
    second = await engine.maybe_reflect(thread)
    assert not second.applied and "suppressed" in second.reason
    assert model.calls == calls, "the same input is not reflected again"


async def test_failed_reflection_is_suppressed_until_the_count_changes() -> None:
    engine, model, thread = await _reflect_engine(["<observations>\n</observations>"])
    outcome = await engine.maybe_reflect(thread)
    assert not outcome.applied and outcome.error is not None
    calls = model.calls
    again = await engine.maybe_reflect(thread)
    assert model.calls == calls and "suppressed" in again.reason
    head = await engine.head(thread)
    bumped = head.model_copy(update={"active_observations": head.active_observations + "\n* 🟡 (10:00) more",
                                     "observation_tokens": head.observation_tokens + 10})
    assert (await engine.store.update_record(bumped, expected_version=head.version)).applied
    await engine.maybe_reflect(thread)
    assert model.calls > calls


async def test_suppression_is_per_thread() -> None:
    engine, model, thread = await _reflect_engine(["<observations>\n</observations>"])
    await engine.maybe_reflect(thread)
    other = await engine.store.create_thread(thread.model_copy(update={"id": "t2"}))
    head = await engine.head(other)
    text = (await engine.head(thread)).active_observations
    assert (await engine.store.update_record(
        head.model_copy(update={"active_observations": text, "observation_tokens": engine.counter.count_text(text)}),
        expected_version=head.version,
    )).applied
    calls = model.calls
    await engine.maybe_reflect(other)
    assert model.calls > calls


async def test_offline_reflector_round_trip_keeps_high_priority_facts() -> None:
    memory = Memory("memory://", config=small_config(message_tokens=300, observation_tokens=500),
                    observer=OfflineObserver(), reflector=OfflineReflector(), clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 40)
        record = await memory.get_record("t1")
        assert record is not None
        for fact in ("Munich", "peanuts", "Nopa"):
            assert fact in record.active_observations

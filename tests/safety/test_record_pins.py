"""What each transition WRITES, pinned through the public side (Memory, its store, the turn API).

Every other lifecycle test checks sizes, cursors or invariants; these check the stored record
field by field after each transition: a synchronous observation, a buffered chunk, the
activation of chunks, a buffered reflection and its activation, and a synchronous reflection.
Scripted observer and reflector answers make every expected value computable from the request
the engine sent, so the pins hold however the engine is organised inside.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest, ReflectionResult
from obsmem.om.text.format import append_with_boundary
from obsmem.storage.contract import ObservationRecord, ThreadState
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio

START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)


class ScriptedObserver:
    """Answers each request with ``answer(request, call_number)`` and keeps every request."""

    name = "scripted-observer"

    def __init__(self, answer: Callable[[ObservationRequest, int], ObservationResult]) -> None:
        self.answer = answer
        self.requests: list[ObservationRequest] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.requests.append(request)
        return self.answer(request, len(self.requests))

    @property
    def sync_requests(self) -> list[ObservationRequest]:
        return [r for r in self.requests if not r.buffered]

    @property
    def buffer_requests(self) -> list[ObservationRequest]:
        return [r for r in self.requests if r.buffered]


class ScriptedReflector:
    name = "scripted-reflector"

    def __init__(self, answer: Callable[[ReflectionRequest], ReflectionResult]) -> None:
        self.answer = answer
        self.requests: list[ReflectionRequest] = []

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.requests.append(request)
        return self.answer(request)


def _never_reflect(request: ReflectionRequest) -> ReflectionResult:
    raise AssertionError(f"no reflection expected here, got {len(request.observations)} chars")


class Conversation:
    def __init__(self) -> None:
        self.at = START
        self.count = 0

    def message(self, role: str, text: str) -> Message:
        self.at += timedelta(minutes=1)
        self.count += 1
        return Message(id=f"{role[0]}{self.count}", role=role, parts=(TextPart(text=text),), created_at=self.at)  # type: ignore[arg-type]

    def exchange(self, i: int) -> tuple[Message, Message]:
        return (
            self.message("user", f"Question {i}: how does step {i} of the migration plan move table t{i}?"),
            self.message("assistant", f"Step {i} copies table t{i}, checks the row counts and then switches reads."),
        )


def sync_config(**observation: Any) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=False, **observation),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )


async def _record(memory: Memory) -> ObservationRecord:
    record = await memory.get_record("t1")
    assert record is not None
    return record


def _tokens(memory: Memory, messages: Any) -> int:
    return sum(memory.counter.count_message(m) for m in messages)


# --------------------------------------------------------------------------------------------
# Synchronous observation
# --------------------------------------------------------------------------------------------

FIRST = ObservationResult(
    observations="\n* 🔴 (09:01) User is migrating the orders database to a new cluster.\n",
    current_task="Explain each migration step",
    suggested_response="Offer the rollback plan next",
    thread_title="Orders database migration",
    extracted={"budget": 100, "owner": "Alex"},
)
SECOND = ObservationResult(
    observations="* 🟡 (09:05) User asked how row counts are verified.",
    current_task="Describe the verification",
    suggested_response=None,
    thread_title=None,
    extracted={"budget": 250, "region": "eu"},
)


async def test_a_synchronous_observation_stores_the_observer_output_and_hints_exactly() -> None:
    results = [FIRST, SECOND]
    observer = ScriptedObserver(lambda request, n: results[n - 1])
    conv = Conversation()
    memory = Memory(
        "memory://", config=sync_config(thread_title=True), observer=observer,
        reflector=ScriptedReflector(_never_reflect), clock=FakeClock(START),
    )
    async with memory:
        await memory.create_thread("t1", "u1")
        saved = await memory.save_messages("t1", [*conv.exchange(1), *conv.exchange(2)])
        outcome = await memory.observe("t1")
        assert outcome.applied
        first_request = observer.requests[0]
        observed = list(first_request.messages)
        assert observed, "the observer was given the messages to observe"
        record = await _record(memory)

        text = FIRST.observations.strip()
        assert record.active_observations == text
        assert record.observation_tokens == memory.counter.count_text(text)
        assert record.cursor("t1") == observed[-1].seq  # exactly past the last observed message
        assert record.total_tokens_observed == _tokens(memory, observed)
        assert record.pending_message_tokens == _tokens(memory, saved) - _tokens(memory, observed)
        assert record.threads["t1"] == ThreadState(
            cursor=observed[-1].seq or 0, current_task=FIRST.current_task,
            suggested_response=FIRST.suggested_response, thread_title=FIRST.thread_title,
            extracted=FIRST.extracted,
        )
        assert record.generation == 0 and record.origin == "initial" and record.buffered_chunks == ()
        assert (await memory.get_thread("t1")).title == FIRST.thread_title

        # the next cycle is handed what the first one wrote ...
        more = await memory.save_messages("t1", list(conv.exchange(3)))
        assert (await memory.observe("t1")).applied
        second_request = observer.requests[1]
        assert second_request.previous_observations == text
        assert second_request.current_task == FIRST.current_task
        assert second_request.suggested_response == FIRST.suggested_response
        assert second_request.thread_title == FIRST.thread_title
        assert second_request.extracted == FIRST.extracted
        second_batch = list(second_request.messages)
        assert second_batch and all((m.seq or 0) > (observed[-1].seq or 0) for m in second_batch)
        assert {m.id for m in second_batch} <= {m.id for m in [*saved, *more]}

        # ... and its own result is appended after a boundary, merging the extracted values
        after = await _record(memory)
        expected = append_with_boundary(text, SECOND.observations, second_batch[-1].created_at)
        assert after.active_observations == expected
        assert after.observation_tokens == memory.counter.count_text(expected)
        assert after.cursor("t1") == second_batch[-1].seq
        assert after.total_tokens_observed == _tokens(memory, observed) + _tokens(memory, second_batch)
        state = after.threads["t1"]
        assert state.current_task == SECOND.current_task
        assert state.suggested_response is None
        assert state.thread_title == FIRST.thread_title  # no new title: the old one stays
        assert state.extracted == {"budget": 250, "owner": "Alex", "region": "eu"}
        assert after.generation == 0


async def test_without_the_title_option_no_title_is_written() -> None:
    observer = ScriptedObserver(lambda request, n: FIRST)
    memory = Memory(
        "memory://", config=sync_config(), observer=observer, reflector=ScriptedReflector(_never_reflect),
        clock=FakeClock(START),
    )
    async with memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", list(Conversation().exchange(1)))
        assert (await memory.observe("t1")).applied
        record = await _record(memory)
        assert record.threads["t1"].thread_title is None
        assert (await memory.get_thread("t1")).title is None
        assert record.threads["t1"].extracted == FIRST.extracted


# --------------------------------------------------------------------------------------------
# Synchronous reflection
# --------------------------------------------------------------------------------------------

OBSERVED_LINES = "\n".join(f"* 🟡 (09:{i:02d}) User described detail {i} of the migration plan." for i in range(12))
REFLECTED = "* 🔴 (09:00) User is migrating the orders database; twelve details were discussed."


async def test_a_synchronous_reflection_stores_the_reflected_text_as_a_new_generation() -> None:
    observer = ScriptedObserver(lambda request, n: ObservationResult(
        observations=OBSERVED_LINES, current_task="Keep going", thread_title="Migration", extracted={"k": 1},
    ))
    reflector = ScriptedReflector(lambda request: ReflectionResult(
        observations=REFLECTED, suggested_response="Summarise the plan",
    ))
    memory = Memory(
        "memory://", config=sync_config(thread_title=True), observer=observer, reflector=reflector,
        clock=FakeClock(START),
    )
    async with memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", list(Conversation().exchange(1)))
        await memory.observe("t1")
        before = await _record(memory)

        outcome = await memory.reflect("t1")
        assert outcome.applied
        assert reflector.requests[0].observations == before.active_observations
        after = await _record(memory)

        assert after.id != before.id
        assert after.generation == before.generation + 1
        assert after.origin == "reflection"
        assert after.active_observations == REFLECTED  # the text, not only a smaller token count
        assert after.observation_tokens == memory.counter.count_text(REFLECTED)
        assert after.cursor("t1") == before.cursor("t1")
        assert after.total_tokens_observed == before.total_tokens_observed
        assert after.threads["t1"] == before.threads["t1"].model_copy(
            update={"suggested_response": "Summarise the plan"}
        )
        assert after.buffered_reflection is None and after.reflection_suppressed_at is None

        generations = await memory.list_generations("t1")
        by_id = {g.id: g for g in generations}
        assert set(by_id) == {before.id, after.id}
        assert by_id[before.id].superseded_by == after.id
        assert by_id[before.id].active_observations == before.active_observations


# --------------------------------------------------------------------------------------------
# Buffered chunks and their activation
# --------------------------------------------------------------------------------------------


def _buffering_answer(request: ObservationRequest, n: int) -> ObservationResult:
    if not request.buffered:  # the synchronous (manual) cycle
        return ObservationResult(
            observations="* 🔴 (09:01) User started the migration.", current_task="Walk through the steps",
            suggested_response="Ask which step is next", thread_title="Orders migration",
            extracted={"owner": "Alex", "step": 0},
        )
    last = request.messages[-1].id
    return ObservationResult(observations=f"* 🟡 buffered note {n} up to {last}", extracted={"step": n, f"seen{n}": last})


async def test_buffered_chunks_store_their_observer_output_and_activation_applies_it_exactly() -> None:
    observer = ScriptedObserver(_buffering_answer)
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=1000, thread_title=True),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    conv = Conversation()
    memory = Memory(
        "memory://", config=config, observer=observer, reflector=ScriptedReflector(_never_reflect),
        clock=FakeClock(START),
    )
    async with memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", list(conv.exchange(0)))
        assert (await memory.observe("t1")).applied
        titled = await _record(memory)
        assert titled.threads["t1"].thread_title == "Orders migration"

        activated_once = False
        checked_chunks: set[str] = set()
        for i in range(1, 40):
            before = await _record(memory)
            sync_calls = len(observer.sync_requests)
            turn = await memory.begin_turn(thread_id="t1", messages=[conv.exchange(i)[0]])
            await turn.step([conv.message("assistant", f"Step {i} copies table t{i} and checks the row counts.")])
            await turn.end()
            await memory.settled()
            after = await _record(memory)
            assert len(observer.sync_requests) == sync_calls, "the buffers kept up: no synchronous observation"

            # every new chunk is the observer's answer over exactly the messages it was asked about
            for chunk in after.buffered_chunks:
                if chunk.id in checked_chunks:
                    continue
                checked_chunks.add(chunk.id)
                request_index, request = next(
                    (n, r) for n, r in enumerate(observer.requests, start=1)
                    if r.buffered and tuple(m.id for m in r.messages) == chunk.message_ids
                )
                answer = _buffering_answer(request, request_index)
                assert chunk.thread_id == "t1"
                assert chunk.observations == answer.observations
                assert chunk.observation_tokens == memory.counter.count_text(answer.observations)
                assert chunk.message_tokens == _tokens(memory, request.messages)
                assert (chunk.first_seq, chunk.last_seq) == (request.messages[0].seq, request.messages[-1].seq)
                assert chunk.extracted == answer.extracted
                assert chunk.created_at == request.messages[-1].created_at

            if after.cursor("t1") == before.cursor("t1"):
                # buffering alone never changes what is active
                assert after.active_observations == before.active_observations
                assert after.threads["t1"] == before.threads["t1"]
                continue

            mine = [c for c in before.buffered_chunks if c.thread_id == "t1"]
            remaining = {c.id for c in after.buffered_chunks}
            activated = [c for c in mine if c.id not in remaining]
            assert activated and activated == mine[: len(activated)], "a prefix of the stored chunks"
            expected_text = before.active_observations
            for c in activated:
                expected_text = append_with_boundary(expected_text, c.observations, c.created_at)
            assert after.active_observations == expected_text
            assert after.observation_tokens == memory.counter.count_text(expected_text)
            assert after.cursor("t1") == activated[-1].last_seq
            assert after.total_tokens_observed == before.total_tokens_observed + sum(c.message_tokens for c in activated)
            extracted = dict(before.threads["t1"].extracted)
            for c in activated:
                extracted.update(c.extracted)
            state = after.threads["t1"]
            assert state.extracted == extracted
            assert state.thread_title == "Orders migration"  # the title survives activation
            assert state.current_task is None and state.suggested_response is None
            assert after.generation == before.generation and after.id == before.id
            activated_once = True
            break
        assert activated_once, "the scenario reaches an activation"
        assert checked_chunks


# --------------------------------------------------------------------------------------------
# Buffered reflection and its activation
# --------------------------------------------------------------------------------------------

LINE = "* 🟡 (10:{:02d}) User listed requirement number {} for the reporting dashboard."
CONDENSED = "* 🔴 (10:00) User listed the reporting dashboard requirements one to ten."


async def test_a_buffered_reflection_is_stored_as_text_and_activates_as_the_next_generation() -> None:
    reflector = ScriptedReflector(lambda request: ReflectionResult(observations=CONDENSED))
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=1000),
        reflection=ReflectionConfig(observation_tokens=400, buffer_activation=0.5),
    )
    memory = Memory(
        "memory://", config=config, observer=ScriptedObserver(lambda r, n: ObservationResult(observations="")),
        reflector=reflector, clock=FakeClock(START),
    )
    conv = Conversation()
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.message("user", "Hi")])
        await turn.end()
        head = await _record(memory)
        # Seed the stored state: observations between the buffer start (200) and the threshold (400).
        lines = [LINE.format(i, i) for i in range(16)]
        text = "\n".join(lines)
        tokens = memory.counter.count_text(text)
        assert 200 <= tokens < 400, tokens
        state = ThreadState(cursor=head.cursor("t1"), current_task="Collect requirements",
                            thread_title="Dashboard", extracted={"owner": "Mia"})
        seeded = head.model_copy(update={"active_observations": text, "observation_tokens": tokens,
                                         "threads": {"t1": state}})
        assert (await memory.store.update_record(seeded, expected_version=head.version)).applied

        turn = await memory.begin_turn(thread_id="t1", messages=[conv.message("user", "Anything else?")])
        await turn.end()
        await memory.settled()

        assert len(reflector.requests) == 1
        request = reflector.requests[0]
        stored = await _record(memory)
        buffered = stored.buffered_reflection
        assert buffered is not None, "the background reflection was stored"
        assert buffered.text == CONDENSED  # the reflected text itself is stored
        assert buffered.tokens == memory.counter.count_text(CONDENSED)
        assert 0 < buffered.line_count < len(lines)
        assert request.observations == "\n".join(lines[: buffered.line_count])
        assert buffered.input_tokens == memory.counter.count_text(request.observations)
        assert request.target_tokens == max(1, round(0.75 * buffered.input_tokens))
        assert stored.active_observations == text, "storing a reflection activates nothing"
        assert stored.generation == head.generation and stored.reflection_boundary_tokens == tokens

        # More observations arrive (past the threshold): the next step activates the reflection.
        extra = [LINE.format(30 + i, 30 + i) for i in range(8)]
        grown = "\n".join([*lines, *extra])
        grown_tokens = memory.counter.count_text(grown)
        assert grown_tokens >= 400
        current = await _record(memory)
        bigger = current.model_copy(update={"active_observations": grown, "observation_tokens": grown_tokens})
        assert (await memory.store.update_record(bigger, expected_version=current.version)).applied
        before = await _record(memory)

        turn = await memory.begin_turn(thread_id="t1", messages=[conv.message("user", "Ready?")])
        await turn.end()
        await memory.settled()
        after = await _record(memory)

        remainder = "\n".join([*lines[buffered.line_count:], *extra])
        expected = f"{CONDENSED}\n\n{remainder}"
        assert after.active_observations == expected
        assert after.observation_tokens == memory.counter.count_text(expected)
        assert after.generation == before.generation + 1, "activation makes a new generation"
        assert after.origin == "reflection" and after.id != before.id
        assert after.buffered_reflection is None
        assert after.threads["t1"].thread_title == "Dashboard"
        assert after.threads["t1"].extracted == {"owner": "Mia"}
        assert after.threads["t1"].current_task == "Collect requirements"
        assert after.cursor("t1") >= before.cursor("t1")
        assert after.total_tokens_observed >= before.total_tokens_observed
        assert len(reflector.requests) == 1, "activation calls no model"

        generations = {g.id: g for g in await memory.list_generations("t1")}
        assert generations[before.id].superseded_by == after.id
        assert generations[before.id].active_observations == grown

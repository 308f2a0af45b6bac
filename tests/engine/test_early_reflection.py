"""``reflection.activate_after_idle`` / ``reflection.activate_on_provider_change``: at a turn's
start, a stored buffered reflection activates below the threshold — after idleness, or when the
actor's model changed — if the guards of ``early_reflection_allowed`` hold. The top-level
options (inherited by observations) never trigger it, and it never reflects synchronously.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.outcomes import EngineEvent
from obsmem.storage.contract import BufferedReflection

from .helpers import Conversation, fake_clock

pytestmark = pytest.mark.anyio

LINES = [f"* 🔴 (09:{i:02d}) User stated fact number {i} about the trip to Oslo." for i in range(24)]
SHORT = "* 🔴 (09:00) User stated facts 0 to 7 about the Oslo trip."
THRESHOLD = 600


def config(**reflection: Any) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=1000),
        reflection=ReflectionConfig(observation_tokens=THRESHOLD, **reflection),
    )


async def seeded(
    cfg: MemoryConfig, *, text: str = SHORT, line_count: int = 8, last_model: str | None = None
) -> tuple[Memory, FakeClock, Conversation, list[EngineEvent]]:
    """A thread whose observed record holds 24 lines and a buffered reflection of the first
    ``line_count`` of them, below the reflection threshold."""
    clock = fake_clock()
    events: list[EngineEvent] = []
    memory = Memory("memory://", config=cfg, clock=clock, on_event=events.append)
    conv = Conversation()
    thread = await memory.create_thread("t1", "u1")
    saved = await memory.save_messages("t1", [conv.user("Let's plan the Oslo trip."), conv.assistant("Sure.")])
    head = await memory.engine.head(thread)
    active = "\n".join(LINES)
    count = memory.counter.count_text
    seeded_record = head.model_copy(update={
        "active_observations": active,
        "observation_tokens": count(active),
        "threads": {"t1": head.threads["t1"].model_copy(update={"cursor": saved[-1].seq})},
        "buffered_reflection": BufferedReflection(
            cycle_id="rbuf-1", text=text, tokens=count(text), input_tokens=count("\n".join(LINES[:line_count])),
            line_count=line_count, created_at=conv.at,
        ),
        "metadata": {"last_model": last_model} if last_model else {},
    })
    assert (await memory.store.update_record(seeded_record, expected_version=head.version)).applied
    tokens = count(active)
    assert 0.75 * THRESHOLD * 0.5 <= tokens < THRESHOLD, "below the threshold, above the size floor"
    return memory, clock, conv, events


def idle_for(clock: FakeClock, conv: Conversation, minutes: float) -> None:
    clock.advance((conv.at + timedelta(minutes=minutes) - clock.now()).total_seconds())


async def test_a_buffered_reflection_activates_after_the_reflection_idle_ttl() -> None:
    memory, clock, conv, events = await seeded(config(activate_after_idle="5m"))
    async with memory:
        idle_for(clock, conv, 6)
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Back again.")])
        await turn.end()
        assert any(o.operation == "reflection" and o.applied for o in turn.outcomes)
        generations = await memory.list_generations("t1")
        assert len(generations) == 2
        head = generations[0]
        assert head.generation == 1 and head.buffered_reflection is None
        assert head.active_observations == SHORT + "\n\n" + "\n".join(LINES[8:])
        activated = [e for e in events if e.kind == "reflection-activated"]
        assert activated and activated[0].data["triggered_by"] == "ttl"


async def test_before_the_ttl_nothing_activates() -> None:
    memory, clock, conv, _ = await seeded(config(activate_after_idle="5m"))
    async with memory:
        idle_for(clock, conv, 4)
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Quick one.")])
        await turn.end()
        assert len(await memory.list_generations("t1")) == 1


@pytest.mark.parametrize(
    "cfg",
    [
        pytest.param(config(), id="reflection options off"),
        pytest.param(
            MemoryConfig(observation=ObservationConfig(message_tokens=1000), activate_after_idle="5m",
                         activate_on_provider_change=True,
                         reflection=ReflectionConfig(observation_tokens=THRESHOLD)),
            id="top-level options are never inherited by reflection",
        ),
    ],
)
async def test_without_the_reflection_options_nothing_activates_early(cfg: MemoryConfig) -> None:
    memory, clock, conv, _ = await seeded(cfg, last_model="openai:gpt-4o")
    async with memory:
        idle_for(clock, conv, 24 * 60)
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Hi.")], model="anthropic:claude-sonnet-4")
        await turn.end()
        generations = await memory.list_generations("t1")
        assert len(generations) == 1 and generations[0].buffered_reflection is not None


async def test_the_guards_keep_a_reflection_that_would_dominate_the_log() -> None:
    long_text = "\n".join(f"* 🔴 (09:{i:02d}) User stated fact number {i}, condensed a little." for i in range(20))
    memory, clock, conv, _ = await seeded(config(activate_after_idle="5m"), text=long_text, line_count=20)
    async with memory:
        idle_for(clock, conv, 60)
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Hi.")])
        await turn.end()
        generations = await memory.list_generations("t1")
        assert len(generations) == 1, "composition guard: the 4-line tail is smaller than the reflection"
        assert generations[0].buffered_reflection is not None, "kept for the threshold"


@pytest.mark.parametrize(
    ("current", "activates"),
    [("anthropic:claude-sonnet-4", True), ("openai.responses:gpt-4o", False), ("openai:gpt-4o", False)],
)
async def test_a_provider_change_activates_a_buffered_reflection(current: str, activates: bool) -> None:
    memory, _, conv, events = await seeded(config(activate_on_provider_change=True), last_model="openai:gpt-4o")
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Hi.")], model=current)
        await turn.end()
        assert (len(await memory.list_generations("t1")) == 2) is activates
        if activates:
            assert [e.data["triggered_by"] for e in events if e.kind == "reflection-activated"] == ["provider_change"]

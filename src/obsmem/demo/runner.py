"""Replays the bundled conversation through the Turn API and measures what memory did.

This is the library function behind ``obsmem demo``; the CLI only draws it. It uses nothing a
user would not: a ``Memory`` on SQLite, driven turn by turn the way an agent loop drives it,
with the offline observer by default or any model (``"openai:gpt-4o-mini"``, a ChatModel).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from obsmem import (
    ChatModel,
    ContextWindow,
    EngineEvent,
    InvalidInputError,
    Memory,
    MemoryConfig,
    Message,
    ObservationConfig,
    ObservationRecord,
    ReflectionConfig,
)
from obsmem.clock import FakeClock
from obsmem.demo.conversation import DEMO_RESOURCE_ID, DEMO_THREAD_ID, DemoTurn, demo_conversation

__all__ = ["DemoReport", "demo_config", "run_demo"]

DEMO_MESSAGE_TOKENS = 2_000
DEMO_OBSERVATION_TOKENS = 3_000


@dataclass(frozen=True, slots=True)
class DemoReport:
    turns: int
    messages: int
    raw_tokens: int
    context_tokens: int
    observation_cycles: int
    reflections: int
    generations: int
    observation_lines: int
    seconds: float
    database: Path
    context: ContextWindow
    model: str = "offline"

    @property
    def compression(self) -> float:
        return self.raw_tokens / max(1, self.context_tokens)


def demo_config(message_tokens: int = DEMO_MESSAGE_TOKENS, observation_tokens: int = DEMO_OBSERVATION_TOKENS) -> MemoryConfig:
    """Small thresholds so a few hundred turns show many observations and reflections."""
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
    )


async def run_demo(
    database: Path,
    *,
    config: MemoryConfig | None = None,
    model: ChatModel | str | None = None,
    turns: int | None = None,
    on_turn: Callable[[int, int], None] | None = None,
) -> DemoReport:
    """Replay the demo conversation into a fresh thread in ``database``; return the numbers.

    A ``demo-thread`` an earlier run left there is replaced; one the demo did not make (of another
    resource, or of an org) is left alone and :class:`InvalidInputError` ends the run before
    anything changes.

    ``model`` (a ChatModel or a ``provider:model`` spec) observes and reflects; None is offline.
    """
    conversation: list[DemoTurn] = demo_conversation()
    if turns is not None:
        conversation = conversation[:turns]
    events: list[EngineEvent] = []
    # The demo happens in March 2025 and is replayed on its own time: "tomorrow" and "3 days ago"
    # are counted from the conversation's day, not the day someone runs the demo.
    clock = FakeClock(start=conversation[0].user.created_at) if conversation else FakeClock()
    memory = Memory(f"sqlite:///{database}", config=config or demo_config(), model=model,
                    on_event=events.append, clock=clock)  # fmt: skip
    started = time.perf_counter()
    async with memory:
        await _clear_own_demo_thread(memory, database)
        await memory.create_thread(DEMO_THREAD_ID, DEMO_RESOURCE_ID, metadata={DEMO_MARK: True})
        for index, demo_turn in enumerate(conversation):
            clock.advance_to(demo_turn.user.created_at)
            turn = await memory.begin_turn(
                thread_id=DEMO_THREAD_ID, resource_id=DEMO_RESOURCE_ID, messages=[demo_turn.user]
            )
            for step in _steps(demo_turn):
                clock.advance_to(step[-1].created_at)
                await turn.step(step)
            await turn.end()
            if on_turn is not None:
                on_turn(index + 1, len(conversation))
        context = await memory.get_context(DEMO_THREAD_ID)
        messages = await memory.list_messages(DEMO_THREAD_ID)
        generations = await _all_generations(memory)
        record = generations[0] if generations else None
    counter = memory.counter
    lines = sum(
        1 for line in (record.active_observations.splitlines() if record else []) if line.lstrip().startswith("*")
    )
    return DemoReport(
        turns=len(conversation),
        messages=len(messages),
        raw_tokens=counter.count_messages(messages),
        context_tokens=counter.count_messages(context.messages),
        observation_cycles=sum(1 for e in events if e.kind == "observation-end"),
        reflections=sum(1 for e in events if e.kind == "reflection-end"),
        generations=len(generations),
        observation_lines=lines,
        seconds=time.perf_counter() - started,
        database=database,
        context=context,
        model=_model_name(model),
    )


#: On the demo's own thread (its metadata): what a later run may replace.
DEMO_MARK = "obsmem_demo"


async def _clear_own_demo_thread(memory: Memory, database: Path) -> None:
    """Delete the demo thread a previous run left in ``database``; a thread of that id that the
    demo did not make is someone's data: refuse, deleting nothing. The demo's own carries
    :data:`DEMO_MARK` (one an older obsmem made, unmarked, starts with the demo's first message)."""
    thread = await memory.store.get_thread(DEMO_THREAD_ID)
    if thread is None:
        return
    own = thread.resource_id == DEMO_RESOURCE_ID and thread.org_id is None
    if own and thread.metadata.get(DEMO_MARK) is not True:
        first = await memory.store.list_messages(DEMO_THREAD_ID, limit=1)
        own = bool(first) and first[0].text == demo_conversation()[0].user.text
    if not own:
        owner = f"resource '{thread.resource_id}'" + (f" of org '{thread.org_id}'" if thread.org_id else "")
        raise InvalidInputError(
            f"{database} already holds a thread '{DEMO_THREAD_ID}' of {owner} that the demo did not make; "
            "the demo replaces only its own, so it changed nothing. Use another database.",
            argument="database",
        )
    await memory.delete_thread(DEMO_THREAD_ID)


async def _all_generations(memory: Memory) -> list[ObservationRecord]:
    """Every generation of the demo thread, newest first. ``Memory.list_generations`` returns one
    page of ``limit`` (default 100) and has no offset: widen the page until it is not full."""
    limit = 128
    while True:
        generations = await memory.list_generations(DEMO_THREAD_ID, limit=limit)
        if len(generations) < limit:
            return generations
        limit *= 4


def _model_name(model: ChatModel | str | None) -> str:
    if model is None:
        return "offline"
    return model if isinstance(model, str) else model.name


def _steps(demo_turn: DemoTurn) -> list[list[Message]]:
    """Group a turn's responses into model calls: a tool call travels with its results."""
    steps: list[list[Message]] = []
    for message in demo_turn.responses:
        if message.role == "tool" and steps:
            steps[-1].append(message)
        else:
            steps.append([message])
    return steps

"""Issue 18, resource scope at scale: observer batching across the threads of a resource, other
threads' tokens toward the threshold when sharing is on, buffered reflection in resource scope,
and the reflector's "now" on the user's clock (issue 15 leftover)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.models.testing import ScriptedModel
from obsmem.om.llm.reflector import LLMReflector
from obsmem.om.activation import reflection_slice
from obsmem.om.offline.reflector import OfflineReflector
from obsmem.om.outcomes import EngineEvent
from obsmem.om.protocols import ReflectionRequest, ReflectionResult
from obsmem.om.sections import split_sections
from obsmem.om.text.format import is_boundary_line

from .helpers import Conversation, chat_turns, fake_clock

pytestmark = pytest.mark.anyio

TOKYO = timezone(timedelta(hours=9))
SHORT = "<observations>\nDate: Jun 15, 2025\n* 🔴 (23:30) User lives in Munich.\n</observations>"


def _now_line(model: ScriptedModel) -> str:
    text = model.requests[-1][0][-1].text
    return next(line for line in text.splitlines() if "The current date and time is" in line)


# --------------------------------------------------------------------------------------------
# 4. The LLM reflector states "now" on the user's clock
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("configured", [None, "Asia/Tokyo"])
async def test_reflection_states_now_in_the_newest_observed_messages_offset_or_the_configured_zone(
    configured: str | None,
) -> None:
    """The LLM observer shows "now" in the newest message's own offset (or ``timezone=``); the
    reflector did in UTC: 14:xx UTC instead of 23:xx in Tokyo (main: fails)."""
    start = datetime(2025, 6, 15, 14, 0, tzinfo=timezone.utc)  # 23:00 in Tokyo
    model = ScriptedModel([SHORT], repeat_last=True)
    config = MemoryConfig(
        timezone=configured,
        observation=ObservationConfig(message_tokens=400, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    clock = FakeClock(start + timedelta(minutes=40))
    memory = Memory("memory://", config=config, clock=clock, reflector=LLMReflector(model, count_tokens=len))
    async with memory:
        conv = Conversation(start)
        for user_text, reply in chat_turns(6):
            user, assistant = conv.user(user_text), conv.assistant(reply)
            if configured is None:  # the messages carry the user's offset
                user = user.model_copy(update={"created_at": user.created_at.astimezone(TOKYO)})
                assistant = assistant.model_copy(update={"created_at": assistant.created_at.astimezone(TOKYO)})
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
            await turn.step([assistant])
            await turn.end()
        await memory.observe("t1")
        outcome = await memory.reflect("t1")
        assert outcome.applied, outcome.reason
    line = _now_line(model)
    assert "23:40" in line, line
    assert "14:40" not in line


# --------------------------------------------------------------------------------------------
# 3. Buffered reflection works in resource scope
# --------------------------------------------------------------------------------------------


def buffered_resource_config(*, observation_tokens: int = 600, shared: bool = False) -> MemoryConfig:
    return MemoryConfig(
        scope="resource", share_threads_in_resource=shared,
        observation=ObservationConfig(message_tokens=400),
        reflection=ReflectionConfig(observation_tokens=observation_tokens, buffer_activation=0.5),
    )


async def talk(memory: Memory, conv: Conversation, thread_id: str, turns: int, topic: str) -> None:
    for user_text, reply in chat_turns(turns):
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="u1", messages=[conv.user(f"[{topic}] {user_text}")])
        await turn.step([conv.assistant(f"[{topic}] {reply}")])
        await turn.end()
        await memory.settled()


async def test_buffered_reflection_runs_and_activates_in_resource_scope_with_sections_kept() -> None:
    """The background reflection is stored and swapped in at the threshold, and every line stays
    in its thread's section (main: resource scope always reflected synchronously)."""
    events: list[EngineEvent] = []
    memory = Memory("memory://", config=buffered_resource_config(), clock=fake_clock(), on_event=events.append)
    async with memory:
        conv = Conversation()
        for _ in range(3):
            await talk(memory, conv, "work", 8, "work")
            await talk(memory, conv, "home", 8, "home")
        kinds = [e.kind for e in events]
        assert "reflection-buffered" in kinds, kinds
        assert "reflection-activated" in kinds, kinds
        head = await memory.store.get_head("resource:u1")
        assert head is not None and head.generation >= 1
        sections = [(tid, body) for tid, body in split_sections(head.active_observations) if tid is not None]
        assert {tid for tid, _ in sections} == {"work", "home"}
        for tid, body in sections:
            other = "home" if tid == "work" else "work"
            assert f"[{other}]" not in body, (tid, body)
        outside = [body for tid, body in split_sections(head.active_observations) if tid is None]
        assert all(is_boundary_line(body) for body in outside), outside


class GatedReflector:
    """The offline reflector, held at its first call until released."""

    def __init__(self) -> None:
        self.inner = OfflineReflector()
        self.name = "gated"
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.entered.set()
        await self.release.wait()
        return await self.inner.reflect(request)


async def test_a_thread_deleted_while_a_buffered_reflection_runs_leaves_nothing_behind() -> None:
    """The background reflection condensed the deleted thread's section: it must neither be
    stored nor activated (the successor would bring the thread's text back)."""
    reflector = GatedReflector()
    memory = Memory("memory://", config=buffered_resource_config(), clock=fake_clock(), reflector=reflector,
                    max_turn_wait=None)
    async with memory:
        conv = Conversation()
        for topic in ("home", "work") * 6:
            for user_text, reply in chat_turns(4):
                turn = await memory.begin_turn(thread_id=topic, resource_id="u1",
                                               messages=[conv.user(f"[{topic}] {user_text}")])
                await turn.step([conv.assistant(f"[{topic}] {reply}")])
                await turn.end()
                for _ in range(50):  # let the observation buffers land (they never wait on the gate)
                    await asyncio.sleep(0)
            if reflector.entered.is_set():
                break
        assert reflector.entered.is_set(), "a buffered reflection started"
        head = await memory.store.get_head("resource:u1")
        assert head is not None and '<thread id="home">' in head.active_observations
        assert await memory.delete_thread("home")
        reflector.release.set()
        await memory.settled()
        for _ in range(3):
            await talk(memory, conv, "work", 8, "work")
        head = await memory.store.get_head("resource:u1")
        assert head is not None
        assert "[home]" not in head.active_observations and '<thread id="home">' not in head.active_observations
        assert head.buffered_reflection is None or "[home]" not in head.buffered_reflection.text
        generations = await memory.store.list_generations("resource:u1")
        assert len(generations) >= 2, "the work thread went on reflecting"


def test_a_resource_scope_reflection_slice_is_whole_sections() -> None:
    text = "\n".join(
        [
            '<thread id="a">', "* a1", "* a2", "* a3", "</thread>", "", "--- message boundary (x) ---", "",
            '<thread id="b">', "* b1", "* b2", "* b3", "</thread>",
        ]
    )
    lines = text.split("\n")
    for budget_lines in range(1, len(lines) + 1):
        taken, count = reflection_slice(text, len(lines), budget_lines, sections=True)
        assert count in (5, 6, 7, 8, len(lines)), (budget_lines, count)
        opened = sum(1 for line in taken.split("\n") if line.startswith("<thread"))
        closed = sum(1 for line in taken.split("\n") if line == "</thread>")
        assert opened == closed >= 1
    assert reflection_slice(text, len(lines), 3, sections=False)[1] == 3  # thread scope: lines as before

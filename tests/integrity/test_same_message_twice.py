"""The same message twice in one batch (same id) is stored once, and every later context of the
same Memory holds it once, as a new Memory on the file does (found by review: the kept window's
append path took both copies)."""
from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.context import ContextWindow

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=40_000),
)


def texts(ctx: ContextWindow) -> list[str]:
    return [m.text for m in ctx.messages]


async def test_same_message_twice_in_a_step(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    memory = Memory(url, config=QUIET)
    async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q0")]) as turn:
        await turn.step([Message.assistant("a0")])
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q1")])
    a = Message.assistant("a1")
    ctx = await turn.step([a, a])
    await turn.end()
    other = Memory(url, config=QUIET)
    assert texts(await other.get_context("t1")) == ["q0", "a0", "q1", "a1"]
    assert texts(ctx) == ["q0", "a0", "q1", "a1"]
    await other.aclose()
    await memory.aclose()


async def test_same_message_twice_in_begin_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    memory = Memory(url, config=QUIET)
    async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q0")]) as turn:
        await turn.step([Message.assistant("a0")])
    u = Message.user("q1")
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[u, u])
    assert texts(turn.context) == ["q0", "a0", "q1"]
    ctx = await turn.step([Message.assistant("a1")])
    assert texts(ctx) == ["q0", "a0", "q1", "a1"]
    await turn.end()
    nxt = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q2")])
    assert texts(nxt.context) == ["q0", "a0", "q1", "a1", "q2"]
    await memory.aclose()

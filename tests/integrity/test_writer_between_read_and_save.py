"""Another Memory on the same file (another process, in effect) writes between begin_turn's first
read of the window and its save: the context begin_turn returns holds that message (the save's
marks say the window changed, so it is read again). Found by review; failed before the fix."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=40_000),
)


@pytest.mark.parametrize("observed_first", [False, True])
async def test_other_writer_between_read_and_save(tmp_path: Path, observed_first: bool) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    mine, other = Memory(url, config=QUIET), Memory(url, config=QUIET)
    for i in range(2):
        async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"q{i} " + "word " * 30)]) as turn:
            await turn.step([Message.assistant(f"a{i}")])
    if observed_first:
        assert (await mine.observe("t1")).applied
        async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q2")]) as turn:
            await turn.step([Message.assistant("a2")])
    real = mine.engine.check_input
    fired = False

    async def check_input(*args: Any, **kwargs: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            t = await other.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("from the other process")])
            await t.end()
        return await real(*args, **kwargs)

    mine.engine.check_input = check_input  # type: ignore[method-assign]
    turn = await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("mine")])
    shown = [m.text for m in turn.context.raw_messages]
    fresh = [m.text for m in (await other.get_context("t1")).raw_messages]
    assert "from the other process" in shown and shown == fresh
    await mine.aclose()
    await other.aclose()

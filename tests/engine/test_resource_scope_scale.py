"""Issue 18, resource scope at scale: observer batching across the threads of a resource, other
threads' tokens toward the threshold when sharing is on, buffered reflection in resource scope,
and the reflector's "now" on the user's clock (issue 15 leftover)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.models.testing import ScriptedModel
from obsmem.om.llm.reflector import LLMReflector

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

"""Issue 15: with buffering on, the current task survives activation of buffered observations.

An agent loop (Memory, the Turn API, the offline observer, a fake clock) runs requests that
need a tool, with the default buffering: most messages reach the record through buffered
chunks, not a synchronous observation. Main cleared the thread's hints at every activation
(chunks carried none), so the stored current task was mostly gone and ``<current-task>`` rarely
reached the actor; with the buffer's observer writing hints into its chunk, the thread holds
the hint for its newest observed request, and never one that asks for work already done.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.context import ContextWindow
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

START = datetime(2025, 6, 16, 9, 0, tzinfo=UTC)

# (request, a word every hint about it names, tool, arguments, result, final reply)
TASKS: list[tuple[str, str, str, dict[str, Any], Any, str]] = [
    ("Please book a table at Nopa for Friday at 19:00 for four people.", "Nopa", "book_table",
     {"restaurant": "Nopa", "day": "Friday"}, {"status": "confirmed", "confirmation": "NP-4411", "notes": "window " * 40},
     "I've booked a table at Nopa for Friday at 19:00 for four people, confirmation NP-4411."),
    ("Can you draft an email to my landlord about the broken heating?", "landlord", "draft_email",
     {"to": "landlord"}, {"draft": "Dear Mr Weber, the heating in flat 3B has not worked for a week. " * 12},
     "I've drafted the email to your landlord: it asks Mr Weber to repair the heating in 3B in 3 days."),
    ("What's the weather in Oslo tomorrow?", "Oslo", "get_weather", {"city": "Oslo"},
     {"forecast": [{"hour": h, "temp_c": 14, "rain_mm": 0.4} for h in range(24)]},
     "Tomorrow in Oslo: 14 °C all day with light rain in the afternoon, so take a jacket."),
    ("Please order a new charger for my ThinkPad X1 Carbon.", "ThinkPad", "order_item", {"item": "charger"},
     {"order": "A-77120", "delivery": "Thursday", "items": ["65 W USB-C charger"] * 20},
     "I've ordered a 65 W USB-C charger for your ThinkPad, order A-77120, arriving Thursday."),
]  # fmt: skip


class Loop:
    """Messages stamped by a fake clock that moves one minute per message."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.count = 0

    def message(self, role: str, *parts: Any) -> Message:
        self.clock.advance(60)
        self.count += 1
        return Message(id=f"m{self.count}", role=role, parts=parts, created_at=self.clock.now())  # type: ignore[arg-type]


def _task_hint(context: ContextWindow) -> str:
    return next((m.text for m in context.system_messages if m.metadata.get("obsmem") == "current-task"), "")


def _asks_for_another(hint: str, word: str) -> bool:
    """The hint asks the assistant to act on a request other than the one in progress."""
    return "waiting for the assistant" in hint and any(t[1] in hint for t in TASKS if t[1] != word)


@pytest.mark.parametrize("message_tokens", [300, 600, 1000])
async def test_the_current_task_survives_buffered_activation(message_tokens: int) -> None:
    clock = FakeClock(START)
    config = MemoryConfig(  # buffering on (the default)
        observation=ObservationConfig(message_tokens=message_tokens),
        reflection=ReflectionConfig(observation_tokens=20_000),
    )
    loop = Loop(clock)
    missing: list[tuple[int, str]] = []  # (turn, the request the stored hint should name)
    stale: list[str] = []
    async with Memory("memory://", config=config, clock=clock) as memory:
        for round_ in range(3):
            for n, (request, word, tool, args, result, reply) in enumerate(TASKS):
                call_id = f"c{round_}-{n}"
                turn = await memory.begin_turn(
                    thread_id="t", resource_id="u", messages=[loop.message("user", TextPart(text=request))]
                )
                contexts = [turn.context]
                contexts.append(await turn.step([loop.message(
                    "assistant", ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args))]))  # fmt: skip
                contexts.append(await turn.step([loop.message(
                    "tool", ToolResultPart(tool_call_id=call_id, tool_name=tool, result=json.dumps(result)))]))  # fmt: skip
                contexts.append(await turn.step([loop.message("assistant", TextPart(text=reply))]))
                await turn.end()
                await memory.settled()
                contexts.append(await memory.get_context("t"))
                stale.extend(hint for c in contexts if _asks_for_another(hint := _task_hint(c), word))
                record = await memory.get_record("t")
                assert record is not None
                cursor = record.cursor("t")
                observed = [m for m in await memory.list_messages("t") if (m.seq or 0) <= cursor]
                asked = [m.text for m in observed if m.role == "user"]
                if asked:
                    latest_word = next(t[1] for t in TASKS if t[0] == asked[-1])
                    hint = record.threads["t"].current_task or ""
                    if latest_word not in hint:
                        missing.append((round_ * len(TASKS) + n, latest_word))
    assert missing == []  # main: the hint was cleared at (almost) every turn
    assert stale == []  # a hint never asks for an older request than the one being worked on

"""Continuation hints never ask for work the conversation already shows done.

``<current-task>`` and ``<suggested-response>`` are written by the observer for the moment of its
last observed message. A real agent loop (Memory, the Turn API, the offline observer, a fixed
clock) runs requests that need a tool, with thresholds that make observation land at every kind
of boundary; every context the actor gets is checked against the messages the hints were
written from.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.context import ContextWindow
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

START = datetime(2025, 6, 16, 9, 0, tzinfo=UTC)

# (request, tool, tool arguments, tool result, final reply)
TASKS: list[tuple[str, str, dict[str, Any], Any, str]] = [
    (
        "Please book a table at Nopa for Friday at 19:00 for four people.",
        "book_table",
        {"restaurant": "Nopa", "day": "Friday", "time": "19:00", "people": 4},
        {"status": "confirmed", "confirmation": "NP-4411", "notes": "window table " * 40},
        "I've booked a table at Nopa for Friday at 19:00 for four people, confirmation NP-4411.",
    ),
    (
        "Can you draft an email to my landlord about the broken heating?",
        "draft_email",
        {"to": "landlord", "subject": "Heating"},
        {"draft": "Dear Mr Weber, the heating in flat 3B has not worked for a week. " * 12},
        "I've drafted the email to your landlord: it asks Mr Weber to repair the heating in 3B in 3 days.",
    ),
    (
        "What's the weather in Oslo tomorrow?",
        "get_weather",
        {"city": "Oslo", "day": "tomorrow"},
        {"forecast": [{"hour": h, "temp_c": 14, "rain_mm": 0.4} for h in range(24)]},
        "Tomorrow in Oslo: 14 °C all day with light rain in the afternoon, so take a jacket.",
    ),
    (
        "Please order a new charger for my ThinkPad X1 Carbon.",
        "order_item",
        {"item": "ThinkPad X1 Carbon charger"},
        {"order": "A-77120", "delivery": "Thursday", "items": ["65 W USB-C charger"] * 20},
        "I've ordered a 65 W USB-C charger for your ThinkPad, order A-77120, arriving Thursday.",
    ),
]


class Loop:
    """Messages stamped by a fake clock that moves one minute per message."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.count = 0

    def _at(self) -> datetime:
        self.clock.advance(60)
        self.count += 1
        return self.clock.now()

    def user(self, text: str) -> Message:
        part = TextPart(text=text)
        return Message(id=f"m{self.count + 1}", role="user", parts=(part,), created_at=self._at())

    def assistant(self, text: str) -> Message:
        part = TextPart(text=text)
        return Message(id=f"m{self.count + 1}", role="assistant", parts=(part,), created_at=self._at())

    def call(self, call_id: str, tool: str, args: dict[str, Any]) -> Message:
        part = ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args)
        return Message(id=f"m{self.count + 1}", role="assistant", parts=(part,), created_at=self._at())

    def result(self, call_id: str, tool: str, value: Any) -> Message:
        part = ToolResultPart(tool_call_id=call_id, tool_name=tool, result=json.dumps(value))
        return Message(id=f"m{self.count + 1}", role="tool", parts=(part,), created_at=self._at())


def _hints(context: ContextWindow) -> tuple[str, str]:
    def text(key: str) -> str:
        return next((m.text for m in context.system_messages if m.metadata.get("obsmem") == key), "")

    return text("current-task"), text("suggested-response")


def _asks_to_act(context: ContextWindow) -> bool:
    """The hints tell the assistant that a request or question of the user is still open."""
    task, suggestion = _hints(context)
    return "waiting for the assistant" in task or "Continue with the user's request" in suggestion or (
        "Answer the user's question" in suggestion
    )


def _is_final_reply(message: Message) -> bool:
    return message.role == "assistant" and bool(message.text.strip()) and not any(
        isinstance(p, ToolCallPart) for p in message.parts
    )


async def _observed_state_is_answered(memory: Memory, thread_id: str) -> bool:
    """Whether, among the observed messages, the newest user message already has a final reply."""
    record = await memory.get_record(thread_id)
    cursor = record.cursor(thread_id) if record else 0
    observed = [m for m in await memory.list_messages(thread_id) if (m.seq or 0) <= cursor]
    users = [i for i, m in enumerate(observed) if m.role == "user"]
    return bool(users) and any(_is_final_reply(m) for m in observed[users[-1] + 1 :])


# Padding that moves where the observation boundaries fall: a longer request, a longer reply.
REQUEST_PAD = " For context, my week has been busy with the move, the new job and the kita, so thanks."
REPLY_PAD = " It should all go smoothly from here, and I will keep an eye on it for you."


@pytest.mark.parametrize(
    ("message_tokens", "request_pad", "reply_pad"), [(150, 0, 8), (220, 0, 0), (300, 2, 3), (420, 5, 3)]
)
async def test_hints_never_ask_for_a_request_the_observed_messages_show_done(
    message_tokens: int, request_pad: int, reply_pad: int
) -> None:
    """After an observation that saw the answer, the hint no longer asks for it (main: the
    previous cycle's "waiting for the assistant to do it" was carried forward unchanged)."""
    clock = FakeClock(START)
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=20_000),
    )
    loop = Loop(clock)
    stale: list[tuple[str, str, str]] = []
    async with Memory("memory://", config=config, clock=clock) as memory:

        async def check(context: ContextWindow) -> None:  # against the state it was built from
            if _asks_to_act(context) and await _observed_state_is_answered(memory, "t"):
                stale.append((request, *_hints(context)))

        for round_ in range(3):
            for n, (request, tool, args, result, reply) in enumerate(TASKS):
                call_id = f"c{round_}-{n}"
                asked = loop.user(request + REQUEST_PAD * request_pad)
                turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[asked])
                await check(turn.context)
                await check(await turn.step([loop.call(call_id, tool, args)]))
                await check(await turn.step([loop.result(call_id, tool, result)]))
                await check(await turn.step([loop.assistant(reply + REPLY_PAD * reply_pad)]))
                await turn.end()
                await check(await memory.get_context("t"))
    assert stale == []


async def test_an_answer_in_a_later_batch_closes_the_carried_over_request() -> None:
    """The observer is told the previous cycle's hints; a reply in its batch answers them."""
    loop = Loop(FakeClock(START))
    observer = OfflineObserver()
    first = await observer.observe(ObservationRequest(messages=(loop.user(TASKS[0][0]),)))
    assert first.current_task is not None and "waiting for the assistant to do it" in first.current_task
    second = await observer.observe(
        ObservationRequest(
            messages=(loop.assistant(TASKS[0][4]), loop.user("I live in Oslo, by the way.")),
            previous_observations=first.observations,
            current_task=first.current_task,
            suggested_response=first.suggested_response,
        )
    )
    assert second.current_task is not None and "waiting for the assistant" not in second.current_task
    assert "book a table at Nopa" in second.current_task  # what was last worked on stays known
    assert second.suggested_response is None


async def test_a_reply_to_the_assistants_question_in_a_later_batch_is_understood() -> None:
    """A question of the assistant left open by one cycle is answered in the next one."""
    loop = Loop(FakeClock(START))
    observer = OfflineObserver()
    first = await observer.observe(
        ObservationRequest(messages=(loop.user("Find me a hotel in Porto."),
                                     loop.assistant("Should I look for something near the river?")))
    )  # fmt: skip
    assert first.current_task is not None and "Waiting for the user's reply" in first.current_task
    second = await observer.observe(
        ObservationRequest(
            messages=(loop.user("Yes, please."),),
            previous_observations=first.observations,
            current_task=first.current_task,
            suggested_response=first.suggested_response,
        )
    )
    assert "User agreed to: Should I look for something near the river?" in second.observations
    assert second.current_task is not None and "Waiting for the user's reply" not in second.current_task
    assert second.suggested_response is None or "Wait for the user's reply" not in second.suggested_response
    assert "waiting for the assistant to continue" in second.current_task  # the reply is the user's
    third = await observer.observe(
        ObservationRequest(
            messages=(loop.assistant("Here are two hotels by the river: Pestana Vintage and Casa do Rio."),),
            previous_observations=f"{first.observations}\n{second.observations}",
            current_task=second.current_task,
            suggested_response=second.suggested_response,
        )
    )
    assert third.current_task == (
        "No open request; last topic: User asked the assistant to find them a hotel in Porto (answered)"
    )
    assert third.suggested_response is None



def _waits_for_user(context: ContextWindow) -> bool:
    task, suggestion = _hints(context)
    return "Waiting for the user's reply" in task or "Wait for the user's reply" in suggestion


@pytest.mark.parametrize(
    ("message_tokens", "request_pad", "reply_pad"), [(150, 0, 8), (220, 0, 0), (300, 2, 3), (420, 5, 3)]
)
async def test_hints_never_contradict_the_raw_tail(message_tokens: int, request_pad: int, reply_pad: int) -> None:
    """The actor sees the hints and, after them, the unobserved messages: a hint waiting for the
    assistant is gone once the tail holds the assistant's reply, one waiting for the user once
    the tail holds the user's message (main: "Continue with the user's request: book a table…"
    above "I've booked a table…")."""
    clock = FakeClock(START)
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=20_000),
    )
    loop = Loop(clock)
    contradicted: list[tuple[str, str, list[str]]] = []
    async with Memory("memory://", config=config, clock=clock) as memory:

        def check(context: ContextWindow) -> None:
            tail = context.raw_messages
            if (_asks_to_act(context) and any(_is_final_reply(m) for m in tail)) or (
                _waits_for_user(context) and any(m.role == "user" and m.text.strip() for m in tail)
            ):
                contradicted.append((*_hints(context), [m.text[:40] for m in tail]))

        for round_ in range(3):
            for n, (request, tool, args, result, reply) in enumerate(TASKS):
                call_id = f"c{round_}-{n}"
                turn = await memory.begin_turn(
                    thread_id="t", resource_id="u", messages=[loop.user(request + REQUEST_PAD * request_pad)]
                )
                check(turn.context)
                check(await turn.step([loop.call(call_id, tool, args)]))
                check(await turn.step([loop.result(call_id, tool, result)]))
                if n == 1:  # one question back to the user before the reply
                    check(await turn.step([loop.assistant("Should I mention the week without heat?")]))
                    await turn.end()
                    turn = await memory.begin_turn(thread_id="t", messages=[loop.user("Yes, please do.")])
                    check(turn.context)
                check(await turn.step([loop.assistant(reply + REPLY_PAD * reply_pad)]))
                await turn.end()
                check(await memory.get_context("t"))
    assert contradicted == []

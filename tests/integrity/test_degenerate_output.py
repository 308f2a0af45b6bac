"""Degenerate output never replaces memory (issue 12, item 4).

Seen from the user's side: a ``Memory`` whose observer (or reflector) model falls into a loop of
whole observation lines. Before the fix a loop of one phrase was caught but a loop of whole lines
was not: 300 (or 2,000) copies of one observation line were committed and the cursor moved past
the real messages, whose content was lost. Now such an answer is degenerate for observer and
reflector alike: nothing of it is stored, the messages stay pending (unobserved, still shown raw
to the actor) and the observations in memory stay what they were.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.engine.helpers import Conversation, fake_clock, replay, small_config

from obsmem import Memory
from obsmem.models.base import ModelRequest
from obsmem.models.testing import FunctionModel, ScriptedModel
from obsmem.om.llm.degenerate import degeneracy_report
from obsmem.types import DataPart, Message, TextPart

pytestmark = pytest.mark.anyio

LOOP_TEXT = "User stated they live in Munich"
LOOP_LINE = f"* 🔴 (09:01) {LOOP_TEXT} with their partner Alex."


def observations(lines: list[str]) -> str:
    return "<observations>\nDate: Jun 15, 2025\n" + "\n".join(lines) + "\n</observations>"


def exact_loop(copies: int) -> str:
    return observations([LOOP_LINE] * copies)


def near_duplicate_loop(copies: int) -> str:
    """The same statement with the minute counting up: a loop that a model 'dates' as it goes."""
    return observations(
        [f"* 🔴 ({9 + i // 60 % 12:02d}:{i % 60:02d}) {LOOP_TEXT} with Alex." for i in range(copies)]
    )


LOOPS: dict[str, Callable[[], str]] = {
    "one line x300": lambda: exact_loop(300),
    "one line x2000": lambda: exact_loop(2000),
    "one line x300, minutes counting up": lambda: near_duplicate_loop(300),
    "two lines alternating x150": lambda: observations(
        [LOOP_LINE, "* 🟡 (09:02) User asked how step 3 of the migration plan works."] * 150
    ),
}


def _all_text(messages: list[Message]) -> str:
    chunks: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                chunks.append(part.text)
            elif isinstance(part, DataPart):
                chunks.append(str(part.data))
    return "\n".join(chunks)


@pytest.mark.parametrize("loop", LOOPS.values(), ids=LOOPS.keys())
async def test_a_line_loop_from_the_observer_is_never_stored_and_the_messages_stay_pending(
    loop: Callable[[], str],
) -> None:
    model = ScriptedModel([loop()], repeat_last=True)
    memory = Memory(
        "memory://", config=small_config(), observer=model, reflector="offline", clock=fake_clock()
    )
    async with memory:
        await replay(memory, Conversation(), 12)
        assert model.calls >= 2, "the observer was asked (and asked again once per cycle)"
        record = await memory.get_record("t1")
        assert record is not None
        assert record.cursor("t1") == 0, "the cursor never moves past messages nobody observed"
        assert record.active_observations == ""
        stored = await memory.list_messages("t1")
        context = await memory.get_context("t1")
        visible = {m.id for m in stored if not m.is_marker_only}
        assert visible == {m.id for m in context.raw_messages}, "every message is still shown raw"
        assert not context.has_observations
        # nothing from the loop reached storage or the context, not even inside a failure marker
        assert LOOP_TEXT not in _all_text(stored)
        assert LOOP_TEXT not in _all_text(context.messages)


async def test_after_the_loop_a_working_observer_picks_every_pending_message_up() -> None:
    calls = 0

    def answer(messages: list[Message], settings: ModelRequest | None) -> str:
        nonlocal calls
        calls += 1
        if calls <= 2:
            return exact_loop(300)
        return observations([f"* 🔴 (09:01) User lives in Munich with their partner Alex (cycle {calls})."])

    memory = Memory("memory://", config=small_config(), observer=FunctionModel(answer), reflector="offline",
                    clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 12)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0
        assert "(cycle 3)" in record.active_observations, "the first good answer was committed"
        assert LOOP_TEXT not in record.active_observations


async def test_a_line_loop_from_the_reflector_never_replaces_the_observations() -> None:
    loop_text = "User is planning a trip to Lisbon in May on a budget of 2400 euros"
    reflector_model = ScriptedModel([observations([f"* 🔴 (09:01) {loop_text}."] * 300)], repeat_last=True)
    memory = Memory("memory://", config=small_config(message_tokens=300, observation_tokens=400),
                    observer="offline", reflector=reflector_model, clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 30)
        assert reflector_model.calls >= 1
        generations = await memory.list_generations("t1")
        assert len(generations) == 1, "no reflection generation was created from the loop"
        record = await memory.get_record("t1")
        assert record is not None
        assert record.active_observations.strip()
        assert loop_text not in record.active_observations


@pytest.mark.parametrize("loop", LOOPS.values(), ids=LOOPS.keys())
def test_each_loop_is_degenerate_for_an_input_of_forty_lines(loop: Callable[[], str]) -> None:
    assert degeneracy_report(loop(), input_lines=40) is not None


@pytest.mark.parametrize("copies", [300, 2000])
def test_copies_of_one_dated_line_are_degenerate_whatever_the_input(copies: int) -> None:
    report = degeneracy_report(exact_loop(copies))
    assert report is not None and report.startswith("duplicate lines")

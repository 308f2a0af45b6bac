"""Cache-friendly observer and reflector requests: stable parts first, each its own part, the
same bytes between requests of one record, breakpoints after them and a per-thread cache key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem.clock import FakeClock
from obsmem.models.base import ModelRequest
from obsmem.models.testing import ScriptedModel
from obsmem.om import buffering
from obsmem.om.llm.observer import BUFFERED_SEPARATOR, LLMObserver, cache_key, split_stable
from obsmem.om.llm.prompts import observer_user_prompt_v1
from obsmem.om.llm.reflector import LLMReflector
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.types import Message, TextPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 14, 30, tzinfo=UTC)
ACTIVE = "Date: Jun 15, 2025\n* 🔴 (14:00) User lives in Berlin.\n* 🟡 (14:05) User asked about trains."
CHUNK_1 = "* 🔴 (14:10) User prefers night trains."
CHUNK_2 = "* 🟡 (14:20) User asked about Vienna."
ANSWER = "<observations>\nDate: Jun 15, 2025\n* 🔴 (14:30) User booked a ticket.\n</observations>"


def observer(model: ScriptedModel) -> LLMObserver:
    return LLMObserver(model, count_tokens=len, clock=FakeClock())


def request(previous: str, text: str, minutes: int, thread_id: str | None = "t1") -> ObservationRequest:
    now = T0 + timedelta(minutes=minutes)
    return ObservationRequest(
        messages=[Message.user(text, created_at=now)],
        previous_observations=previous,
        now=now,
        thread_id=thread_id,
        resource_id="r1",
    )


def texts(message: Message) -> list[str]:
    return [p.text for p in message.parts if isinstance(p, TextPart)]


def test_split_stable_parts_join_back_byte_for_byte() -> None:
    text = "head\n<a>\nx\n--- B ---\ny\n</a>\n\n## task\nnew"
    parts = split_stable(text, [("--- B ---", False), ("</a>", True)])
    assert parts == ("head\n<a>\nx", "--- B ---\ny\n</a>", "\n## task\nnew")
    assert "\n".join(parts) == text
    # A needle that is missing, or without a line break where the cut falls, cuts nothing.
    assert split_stable("a</a>b", [("</a>", True), ("zz", False)]) == ("a</a>b",)
    assert split_stable("", [("</a>", True)]) == ("",)


def test_the_separator_is_the_one_buffering_writes() -> None:
    assert buffering._BUFFERED_SEPARATOR == BUFFERED_SEPARATOR


async def test_buffered_requests_share_their_stable_parts_byte_for_byte() -> None:
    model = ScriptedModel([ANSWER], repeat_last=True)
    first_previous = f"{ACTIVE}\n\n{BUFFERED_SEPARATOR}\n\n{CHUNK_1}"
    second_previous = f"{first_previous}\n\n{CHUNK_2}"
    await observer(model).observe(request(first_previous, "Which train goes to Vienna?", 0))
    await observer(model).observe(request(second_previous, "And back on Sunday?", 7))
    (first, settings_1), (second, settings_2) = model.requests
    assert first[0].text == second[0].text  # the system prompt
    one, two = texts(first[1]), texts(second[1])
    assert len(one) == len(two) == 3
    assert one[0] == two[0] and one[0].endswith(ACTIVE + "\n")  # the active observations: identical
    assert two[1].startswith(one[1].removesuffix("</previous-observations>"))  # chunks only grow
    assert "Vienna?" in one[2] and "Sunday?" in two[2]  # the new transcript: last
    assert "New message history" not in one[0] + one[1]
    # The parts joined are exactly the prompt as a single text.
    assert first[1].text == observer_user_prompt_v1(
        transcript=one[2].split("<message-history>\n", 1)[1].rsplit("\n</message-history>", 1)[0],
        previous_observations=first_previous,
        now=T0,
    )
    for settings in (settings_1, settings_2):
        assert isinstance(settings, ModelRequest)
        assert settings.cache_breakpoints == ((0, 0), (1, 0), (1, 1))
        assert settings.cache_key == cache_key("observer", "t1")
        assert settings.temperature == 0.3  # the observer's own settings are kept


async def test_without_previous_observations_only_the_system_prompt_is_marked() -> None:
    model = ScriptedModel([ANSWER], repeat_last=True)
    await observer(model).observe(request("", "Hello there", 0, thread_id=None))
    messages, settings = model.requests[0]
    assert len(texts(messages[1])) == 1
    assert isinstance(settings, ModelRequest)
    assert settings.cache_breakpoints == ((0, 0),)
    assert settings.cache_key == cache_key("observer", "r1")  # no thread: the resource
    assert cache_key("observer", None) is None
    assert cache_key("observer", "t1") != cache_key("reflector", "t1") != cache_key("observer", "t2")


async def test_reflector_puts_the_observations_first_for_every_attempt() -> None:
    long_answer = "<observations>\n" + ACTIVE + "\n</observations>"
    model = ScriptedModel([long_answer, long_answer, "<observations>\n* 🔴 x\n</observations>"])
    reflector = LLMReflector(model, count_tokens=len, clock=FakeClock())
    request = ReflectionRequest(observations=ACTIVE, target_tokens=20, now=T0, thread_id="t1", resource_id="r1")
    await reflector.reflect(request)
    assert len(model.requests) == 3
    firsts = {texts(messages[1])[0] for messages, _ in model.requests}
    assert len(firsts) == 1 and next(iter(firsts)).endswith("</observations-to-reflect>")
    lasts = [texts(messages[1])[1] for messages, _ in model.requests]
    assert len(set(lasts)) == 3  # the compression level changes only the tail
    for _, settings in model.requests:
        assert isinstance(settings, ModelRequest)
        assert settings.cache_breakpoints == ((0, 0), (1, 0))
        assert settings.cache_key == cache_key("reflector", "t1")

"""The user's newest message is always visible (issue 12, item 1).

The input of a turn (the messages passed to ``begin_turn``, and the newest user message in any
case) is never observed away before the actor has seen it: it reaches the actor verbatim, and is
observed at a later boundary. A message larger than ``observation.max_tokens_per_batch`` is
observed in pieces, one observer request each, and a huge message costs token counting linear in
its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.tokens import TokenCounter

from tests.engine.helpers import Conversation, fake_clock

pytestmark = pytest.mark.anyio

LOG_LINE = (
    "2025-06-15T09:00:{sec:02d}Z ERROR worker[{pid}]: connection reset by peer while reading the response "
    "header from upstream api-{n}.internal:8443, retrying (attempt {attempt} of 5)\n"
)
QUESTION = "Why does the worker keep failing like this, and what should I change first?"


def pasted_log(target_tokens: int, counter: TokenCounter) -> str:
    """Here is their error log: … + a question, about ``target_tokens`` tokens."""
    lines: list[str] = []
    size = 0
    n = 0
    while size < target_tokens:
        line = LOG_LINE.format(sec=n % 60, pid=1000 + n % 97, n=n % 13, attempt=1 + n % 5)
        lines.append(line)
        size += counter.count_text(line)
        n += 1
    return "Here is their error log:\n" + "".join(lines) + "\n" + QUESTION


def huge_text(chars: int) -> str:
    line = LOG_LINE.format(sec=1, pid=1234, n=3, attempt=2)
    return ("Here is the full dump:\n" + line * (chars // len(line) + 1))[:chars] + "\n" + QUESTION


class RecordingObserver(OfflineObserver):
    """The offline observer, keeping every request."""

    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(count_tokens=counter.count_text)
        self.requests: list[ObservationRequest] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.requests.append(request)
        return await super().observe(request)


class CheapObserver:
    """An observer that reads nothing: one line per request (so a huge message costs only the engine)."""

    name = "cheap"

    def __init__(self) -> None:
        self.requests: list[ObservationRequest] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.requests.append(request)
        chars = sum(len(m.text) for m in request.messages)
        return ObservationResult(observations=f"* 🟡 (09:00) User pasted {chars} characters of a log")


class CountingCounter(TokenCounter):
    """A token counter that adds up how many characters it was asked to count."""

    def __init__(self) -> None:
        super().__init__()
        self.chars = 0
        self.calls = 0

    def count_text(self, text: str | None) -> int:
        self.calls += 1
        self.chars += len(text or "")
        return super().count_text(text)


def config(buffered: bool, **observation: Any) -> MemoryConfig:
    if not buffered:
        observation.setdefault("buffer_tokens", False)
    return MemoryConfig(observation=ObservationConfig(**observation))


def raw_ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages if "obsmem" not in m.metadata]


def message_tokens(counter: TokenCounter, request: ObservationRequest) -> int:
    return sum(counter.count_message(m) for m in request.messages)


@pytest.mark.parametrize("buffered", [False, True], ids=["sync", "buffered"])
async def test_a_pasted_log_and_its_question_reach_the_actor_verbatim(buffered: bool) -> None:
    """47k tokens of log plus a question, default thresholds: the actor gets the message itself,
    not "User asked: Here is their error log…"; it is observed at the next step."""
    counter = TokenCounter()
    observer = RecordingObserver(counter)
    memory = Memory("memory://", config=config(buffered), observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    text = pasted_log(47_000, counter)
    question = conv.user(text)
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[question])
        shown = [m for m in turn.context.messages if m.id == question.id]
        assert shown and shown[0].text == text, "the actor sees the whole message, question included"
        assert not turn.context.has_observations
        assert observer.requests == [], "nothing was observed before the actor saw its input"

        context = await turn.step([conv.assistant("The upstream resets connections; raise its keepalive.")])
        assert question.id not in raw_ids(context.messages), "observed at the next boundary"
        assert context.has_observations
        await turn.end()


@pytest.mark.parametrize("buffered", [False, True], ids=["sync", "buffered"])
async def test_the_newest_user_message_is_kept_when_it_was_saved_before_the_turn(buffered: bool) -> None:
    """The newest user message is the turn's input in any case, even when the application saved it
    itself and begins the turn with no messages."""
    counter = TokenCounter()
    memory = Memory(
        "memory://", config=config(buffered, message_tokens=2000), observer=RecordingObserver(counter),
        counter=counter, clock=fake_clock(),
    )
    conv = Conversation()
    question = conv.user(pasted_log(3000, counter))
    async with memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [question])
        turn = await memory.begin_turn(thread_id="t1", messages=[])
        assert question.id in raw_ids(turn.context.messages)
        await turn.step([conv.assistant("Noted.")])
        assert question.id not in raw_ids(turn.context.messages)


async def test_a_huge_message_is_never_answered_with_an_empty_context() -> None:
    """Several megabytes in one message: begin_turn returns the message (today: no message at all)."""
    counter = TokenCounter()
    observer = CheapObserver()
    memory = Memory("memory://", config=config(False), observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    text = huge_text(2_000_000)
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(text)])
        users = [m for m in turn.context.messages if m.role == "user" and "obsmem" not in m.metadata]
        assert [m.text for m in users] == [text]


async def test_a_buffered_chunk_over_the_input_is_not_activated_before_the_actor_saw_it() -> None:
    """A worker buffered the newest user message (queue mode falls behind and buffers above the
    threshold); the turn that starts now must still show that message, not its observations."""
    counter = TokenCounter()
    cfg = MemoryConfig(
        observation=ObservationConfig(message_tokens=1000, buffer_tokens=200),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    memory = Memory("memory://", config=cfg, observer=RecordingObserver(counter), counter=counter, clock=fake_clock())
    conv = Conversation()
    question = conv.user(pasted_log(1500, counter))
    async with memory:
        thread = await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [question])
        assert memory.engine.buffered is not None
        await memory.engine.buffered.maybe_start_buffer(thread, idle=True, above_threshold=True)
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks, "the worker's chunk covers the question"

        turn = await memory.begin_turn(thread_id="t1", messages=[])
        assert question.id in raw_ids(turn.context.messages)
        await turn.step([conv.assistant("Noted.")])
        assert question.id not in raw_ids(turn.context.messages), "activated at the next boundary"


@pytest.mark.parametrize("buffered", [False, True], ids=["sync", "buffered"])
async def test_a_message_larger_than_the_batch_limit_is_observed_in_pieces(buffered: bool) -> None:
    """Each observer request holds at most ``max_tokens_per_batch`` message tokens; the pieces
    together are the message, in order, nothing lost or repeated."""
    counter = TokenCounter()
    observer = RecordingObserver(counter)
    memory = Memory("memory://", config=config(buffered), observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    text = pasted_log(47_000, counter)
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(text)])
        await turn.step([conv.assistant("Raise the keepalive.")])
        limit = memory.config.observation.max_tokens_per_batch
        assert len(observer.requests) >= 5
        assert max(message_tokens(counter, r) for r in observer.requests) <= limit
        pieces = [m.text for r in observer.requests for m in r.messages if m.role == "user"]
        assert "".join(pieces) == text


async def test_a_buffer_over_a_large_message_takes_pieces_too() -> None:
    """Background buffers honour the same limit: a message larger than it is several requests."""
    counter = TokenCounter()
    observer = RecordingObserver(counter)
    cfg = MemoryConfig(
        observation=ObservationConfig(message_tokens=5000, buffer_tokens=1000, max_tokens_per_batch=500),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    memory = Memory("memory://", config=cfg, observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    text = pasted_log(2000, counter)
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(text)])
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and record.buffered_chunks, "the message was buffered"
        assert len(observer.requests) >= 4
        assert max(message_tokens(counter, r) for r in observer.requests) <= 500
        assert "".join(m.text for r in observer.requests for m in r.messages) == text
        await turn.end()


async def test_a_huge_message_costs_token_counting_linear_in_its_size() -> None:
    """begin_turn, the step that observes the message in pieces, and the next turn together count
    a small multiple of the message's characters (no count per candidate cut, no re-count per piece)."""
    counter = CountingCounter()
    observer = CheapObserver()
    memory = Memory("memory://", config=config(False), observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    text = huge_text(1_000_000)
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user(text)])
        await turn.step([conv.assistant("That is a lot of log.")])
        await turn.end()
        nxt = await memory.begin_turn(thread_id="t1", messages=[conv.user("And now?")])
        await nxt.step([conv.assistant("Now it is observed.")])
        await nxt.end()
        limit = memory.config.observation.max_tokens_per_batch
        assert len(observer.requests) >= 1_000_000 // (6 * limit), "observed in pieces"
        assert max(message_tokens(TokenCounter(), r) for r in observer.requests) <= limit
        assert counter.chars <= 6 * len(text), f"counted {counter.chars} characters for {len(text)}"
        record = await memory.get_record("t1")
        assert record is not None and record.active_observations

"""The pure parts of durable backoff (the schedule, the stored entry) and of the raw-window trim."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from obsmem import MemoryConfig
from obsmem.clock import FakeClock
from obsmem.om.cycle import BACKOFF_KEY, Backoff, backoff_wait_s, without_backoff
from obsmem.om.engine import Engine
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.storage import MemoryStore
from obsmem.storage.contract import ObservationRecord
from obsmem.tokens import TokenCounter
from obsmem.types import Message, Thread

from .helpers import Conversation

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("first", "failures", "wait"),
    [
        (30.0, 0, 0.0),
        (30.0, 1, 0.0),  # one failure may be bad luck: the next due step tries again
        (30.0, 2, 30.0),
        (30.0, 3, 60.0),
        (30.0, 4, 120.0),
        (30.0, 6, 480.0),
        (30.0, 7, 900.0),  # capped at 15 minutes
        (30.0, 500, 900.0),
        (5.0, 2, 5.0),
        (900.0, 2, 900.0),
        (900.0, 9, 900.0),
    ],
)
def test_the_backoff_schedule(first: float, failures: int, wait: float) -> None:
    assert backoff_wait_s(first, failures) == wait


def record(metadata: dict[str, Any]) -> ObservationRecord:
    return ObservationRecord(
        id="omr_1", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1",
        created_at=NOW, updated_at=NOW, metadata=metadata,
    )


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, None),
        ({BACKOFF_KEY: "garbage"}, None),
        ({BACKOFF_KEY: {"observation": {"failures": "x", "until": NOW.isoformat()}}}, None),
        ({BACKOFF_KEY: {"observation": {"failures": 2, "until": "2025-06-15T12:00:00"}}}, None),  # naive: ignored
        ({BACKOFF_KEY: {"reflection": {"failures": 2, "until": NOW.isoformat()}}}, None),
        (
            {BACKOFF_KEY: {"observation": {"failures": 2, "until": NOW.isoformat(), "kind": "degenerate",
                                           "error": "loop"}}},
            Backoff(2, NOW, "degenerate", "loop"),
        ),
    ],
)
def test_a_stored_backoff_is_read_tolerantly(metadata: dict[str, Any], expected: Backoff | None) -> None:
    assert Backoff.of(record(metadata), "observation") == expected


def test_clearing_one_role_keeps_the_other_and_the_rest() -> None:
    entry = {"failures": 2, "until": NOW.isoformat()}
    both = {"last_model": "m", BACKOFF_KEY: {"observation": entry, "reflection": entry}}
    assert without_backoff(both, "observation") == {"last_model": "m", BACKOFF_KEY: {"reflection": entry}}
    assert without_backoff(without_backoff(both, "observation"), "reflection") == {"last_model": "m"}
    plain = {"last_model": "m"}
    assert without_backoff(plain, "observation") is plain


def engine(message_tokens: int = 300) -> Engine:
    counter = TokenCounter()
    return Engine(
        store=MemoryStore(), observer=OfflineObserver(count_tokens=counter.count_text),
        reflector=OfflineReflector(count_tokens=counter.count_text),
        config=MemoryConfig(observation={"message_tokens": message_tokens, "buffer_tokens": False}),
        counter=counter, clock=FakeClock(),
    )


def stored(messages: list[Message]) -> list[Message]:
    return [m.model_copy(update={"seq": i + 1, "thread_id": "t1"}) for i, m in enumerate(messages)]


THREAD = Thread(id="t1", resource_id="u1")
LONG = "The migration moves every table to the new cluster and verifies the row counts twice. " * 4


def test_a_window_under_the_limit_is_kept_whole() -> None:
    conv = Conversation()
    window = stored([conv.user("hi"), conv.assistant("hello")])
    trim = engine().trim_window(THREAD, None, window)
    assert (trim.kept, trim.trimmed) == (window, 0)
    assert trim.limit == 600  # twice the message threshold


def test_the_oldest_messages_go_first_and_the_newest_question_stays() -> None:
    conv = Conversation()
    window = stored([m for _ in range(12) for m in (conv.user(LONG), conv.assistant(LONG))] + [conv.user(LONG * 20)])
    eng = engine()
    trim = eng.trim_window(THREAD, None, window)
    assert trim.trimmed > 0
    assert trim.kept == window[trim.trimmed:], "a prefix is cut, nothing else"
    assert trim.kept[-1] is window[-1], "the newest user message stays, however large"
    before = sum(eng.counter.count_message(m) for m in trim.kept[:-1])
    assert before <= trim.limit
    assert trim.tokens == sum(eng.counter.count_message(m) for m in window[: trim.trimmed])


def test_a_cut_never_separates_a_call_from_its_result_nor_takes_instructions_or_the_input() -> None:
    conv = Conversation()
    instructions = Message.system("Answer in French.")
    head = [instructions, conv.user(LONG), conv.call("c1", city="Paris"), conv.result("c1", LONG * 3)]
    tail = [conv.assistant(LONG), conv.user(LONG), conv.assistant(LONG), conv.user("and now?")]
    window = stored(head + tail)
    eng = engine(message_tokens=100)
    trim = eng.trim_window(THREAD, None, window)
    assert trim.trimmed > 0
    kept_ids = [m.id for m in trim.kept]
    assert window[0].id in kept_ids, "the application's instructions are never cut"
    call, result = window[2].id, window[3].id
    assert (call in kept_ids) == (result in kept_ids), "a call and its result go (or stay) together"
    assert window[-1].id in kept_ids
    # the input of this boundary stays too, even before the newest user message
    keep = [window[5]]
    kept = [m.id for m in eng.trim_window(THREAD, None, window, keep=keep).kept]
    assert all(m.id in kept for m in window[5:])


def test_the_kept_conversation_begins_with_a_user_turn_when_a_cut_allows_it() -> None:
    conv = Conversation()
    # Long questions, short replies: the smallest cut that fits falls before a reply; the cut
    # taken is the next one, which begins an exchange.
    window = stored([m for _ in range(8) for m in (conv.user(LONG), conv.assistant("Noted."))] + [conv.user("now?")])
    eng = engine(message_tokens=150)
    trim = eng.trim_window(THREAD, None, window)
    assert trim.trimmed > 0 and trim.kept[0].role == "user"
    smallest = next(
        cut for cut in range(1, len(window))
        if sum(eng.counter.count_message(m) for m in window[cut:]) <= trim.limit
    )
    assert window[smallest].role == "assistant", "the case this test is about"
    assert trim.trimmed == smallest + 1, "one message more than the smallest cut, no more"
    # No user message at all (a tool loop's replies): any cut, as before.
    replies = stored([conv.assistant(LONG) for _ in range(8)])
    only = eng.trim_window(THREAD, None, replies)
    assert only.trimmed > 0 and only.kept[0].role == "assistant"

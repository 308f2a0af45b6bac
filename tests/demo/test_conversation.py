"""The bundled demo conversation: shape, timing, tool pairing, facts and determinism."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from obsmem.demo.conversation import (
    DEMO_RESOURCE_ID,
    DEMO_THREAD_ID,
    DemoFact,
    DemoTurn,
    demo_conversation,
    demo_facts,
)
from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart


@pytest.fixture(scope="module")
def turns() -> list[DemoTurn]:
    return demo_conversation()


def _messages(turns: list[DemoTurn]) -> list[Message]:
    return [m for t in turns for m in t.messages]


def _tool_turns(turns: list[DemoTurn]) -> list[DemoTurn]:
    return [t for t in turns if any(m.tool_calls for m in t.responses)]


def _digest(turns: list[DemoTurn]) -> str:
    dump = [m.model_dump(mode="json") for m in _messages(turns)]
    return hashlib.sha256(json.dumps(dump, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# --- size and span ---------------------------------------------------------------------------


def test_at_least_300_turns(turns: list[DemoTurn]) -> None:
    assert len(turns) >= 300


def test_spans_at_least_six_days(turns: list[DemoTurn]) -> None:
    days = {t.user.created_at.date() for t in turns}
    assert len(days) >= 6


def test_conversation_is_long(turns: list[DemoTurn]) -> None:
    text = sum(len(p.text) for m in _messages(turns) for p in m.parts if isinstance(p, TextPart))
    payload = 0
    for m in _messages(turns):
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                payload += len(json.dumps(p.args, ensure_ascii=False))
            elif isinstance(p, ToolResultPart):
                payload += len(json.dumps(p.result, ensure_ascii=False))
    assert text >= 160_000
    assert text + payload >= 200_000


# --- ids and timestamps ----------------------------------------------------------------------


def test_timestamps_strictly_increasing_and_aware(turns: list[DemoTurn]) -> None:
    messages = _messages(turns)
    for m in messages:
        assert m.created_at.utcoffset() is not None
    for earlier, later in zip(messages, messages[1:], strict=False):
        assert earlier.created_at < later.created_at, (earlier.id, later.id)


def test_sessions_have_realistic_gaps(turns: list[DemoTurn]) -> None:
    gaps = [
        (b.user.created_at - a.responses[-1].created_at).total_seconds()
        for a, b in zip(turns, turns[1:], strict=False)
    ]
    assert min(gaps) >= 30  # nobody replies within seconds of a long answer
    assert sum(1 for g in gaps if g >= 3 * 3600) >= 10  # many breaks between sessions
    assert any(g >= 24 * 3600 for g in gaps)  # at least one day without conversation


def test_message_ids_unique_and_stable(turns: list[DemoTurn]) -> None:
    ids = [m.id for m in _messages(turns)]
    assert len(ids) == len(set(ids))
    assert turns[0].user.id == "demo-u-0001"
    assert turns[0].responses[0].id == "demo-a-0001-1"
    for number, turn in enumerate(turns, start=1):
        assert turn.user.id == f"demo-u-{number:04d}"
        assert all(m.id.endswith(tuple(f"-{number:04d}-{k}" for k in range(1, 20))) for m in turn.responses)


def test_messages_belong_to_demo_thread(turns: list[DemoTurn]) -> None:
    for m in _messages(turns):
        assert m.thread_id == DEMO_THREAD_ID
        assert m.resource_id == DEMO_RESOURCE_ID
        assert m.seq is None  # assigned by the store, not by the demo


# --- turn shape and tools --------------------------------------------------------------------


def test_turn_shape(turns: list[DemoTurn]) -> None:
    for turn in turns:
        assert turn.user.role == "user"
        assert turn.user.text.strip()
        *steps, final = turn.responses
        assert final.role == "assistant"
        assert final.text.strip()
        assert not final.tool_calls
        assert len(steps) % 2 == 0
        for call_msg, result_msg in zip(steps[::2], steps[1::2], strict=True):
            assert call_msg.role == "assistant" and call_msg.tool_calls
            assert result_msg.role == "tool" and result_msg.tool_results
            assert all(isinstance(p, ToolResultPart) for p in result_msg.parts)


def test_every_tool_call_has_exactly_one_result_in_the_next_message(turns: list[DemoTurn]) -> None:
    messages = _messages(turns)
    for index, message in enumerate(messages):
        if message.tool_calls:
            following = messages[index + 1]
            results = Counter(p.tool_call_id for p in following.tool_results)
            calls = Counter(p.tool_call_id for p in message.tool_calls)
            assert results == calls, message.id
            names = {p.tool_call_id: p.tool_name for p in message.tool_calls}
            assert all(names[r.tool_call_id] == r.tool_name for r in following.tool_results)
        if message.tool_results:
            previous = messages[index - 1]
            called = {p.tool_call_id for p in previous.tool_calls}
            assert {p.tool_call_id for p in message.tool_results} == called


def test_tool_call_ids_unique(turns: list[DemoTurn]) -> None:
    ids = [p.tool_call_id for m in _messages(turns) for p in m.tool_calls]
    assert len(ids) == len(set(ids))


def test_enough_varied_tool_use(turns: list[DemoTurn]) -> None:
    tool_turns = _tool_turns(turns)
    assert len(tool_turns) >= 40
    names = {p.tool_name for m in _messages(turns) for p in m.tool_calls}
    assert {"get_weather", "search_flights", "calendar_create_event", "calendar_update_event"} <= names
    assert {"convert_currency", "search_files", "run_tests", "send_email"} <= names
    results = [p for m in _messages(turns) for p in m.tool_results]
    assert any(r.is_error for r in results)
    assert any(len(json.dumps(r.result)) > 2_000 for r in results)  # some long results to compress
    # some turns call several tools at once, some go through several rounds
    assert any(len(m.tool_calls) > 1 for m in _messages(turns))
    assert any(sum(1 for m in t.responses if m.tool_calls) > 1 for t in turns)


def test_generated_flight_results_are_consistent(turns: list[DemoTurn]) -> None:
    for m in _messages(turns):
        for r in m.tool_results:
            if r.tool_name == "search_flights":
                rows = r.result["results"]
                assert len(rows) == r.result["result_count"] >= 10
                assert len({row["flight"] for row in rows}) == len(rows)
                departs = [row["depart"] for row in rows]
                assert departs == sorted(departs)


# --- facts and plans -------------------------------------------------------------------------


def test_facts_counts_and_keys() -> None:
    facts = demo_facts()
    assert all(isinstance(f, DemoFact) for f in facts)
    assert len({f.key for f in facts}) == len(facts)
    assert sum(1 for f in facts if f.superseded_values) >= 8
    assert sum(1 for f in facts if not f.superseded_values) >= 20


def test_final_values_stated_by_the_user(turns: list[DemoTurn]) -> None:
    for fact in demo_facts():
        assert 0 <= fact.turn_index < len(turns)
        assert fact.final_value in turns[fact.turn_index].user.text, fact.key


def test_superseded_values_stated_earlier(turns: list[DemoTurn]) -> None:
    for fact in demo_facts():
        for old in fact.superseded_values:
            assert old != fact.final_value
            earlier = [i for i, t in enumerate(turns[: fact.turn_index]) if old in t.user.text]
            assert earlier, (fact.key, old)


def test_changes_are_stated_with_change_words(turns: list[DemoTurn]) -> None:
    words = ("moved to", "switched to", "now", "changed", "correction", "cancelled", "instead")
    for fact in demo_facts():
        if fact.superseded_values:
            text = turns[fact.turn_index].user.text.lower()
            assert any(w in text for w in words), fact.key


def test_plans_with_relative_dates(turns: list[DemoTurn]) -> None:
    text = "\n".join(t.user.text for t in turns)
    for phrase in ("tomorrow", "next Friday", "in about two weeks", "March 14th", "on Tuesday"):
        assert phrase in text, phrase


# --- determinism -----------------------------------------------------------------------------


def test_deterministic_within_a_process() -> None:
    first, second = demo_conversation(), demo_conversation()
    assert first == second
    assert _digest(first) == _digest(second)
    assert demo_facts() == demo_facts()


def test_returns_a_fresh_list() -> None:
    first = demo_conversation()
    first.clear()
    assert len(demo_conversation()) >= 300


def test_deterministic_across_processes(turns: list[DemoTurn]) -> None:
    code = (
        "import hashlib, json\n"
        "from obsmem.demo.conversation import demo_conversation\n"
        "dump = [m.model_dump(mode='json') for t in demo_conversation() for m in t.messages]\n"
        "print(hashlib.sha256(json.dumps(dump, sort_keys=True, ensure_ascii=False).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == _digest(turns)

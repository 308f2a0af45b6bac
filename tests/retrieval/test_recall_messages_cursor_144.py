"""Recall's messages mode reads on with ``next_page`` past a deleted message (helper-144).

``next_page`` (and ``continue_with``) carried the id of the first message not shown. When that
very message was deleted before the agent read on (``forget`` of a value that was all it said; an
OpenAI Agents session's ``pop_item``), the next call answered "No message ... is within reach"
instead of the next page, and the rest of the conversation could not be read on from there. The
cursor now records the message's place in its thread (opaque to the model), so reading on
continues with the messages around it, in either direction; it stays bound to the caller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message

from .helpers import retrieval_config

pytestmark = pytest.mark.anyio

SAID = [f"line {i:02d}" for i in range(12)]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/recall.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def memory(url: str) -> AsyncIterator[Memory]:
    config = retrieval_config(scope="resource", message_tokens=1_000_000)
    async with Memory(url, config=config) as memory:
        for thread_id in ("t1", "t2"):
            for i in range(0, len(SAID), 2):
                turn = await memory.begin_turn(
                    thread_id=thread_id, resource_id="alice", messages=[Message.user(SAID[i])]
                )
                await turn.end([Message.assistant(SAID[i + 1])])
        yield memory


async def _read_on(memory: Memory, args: dict[str, Any], caller: str = "t1") -> list[str]:
    """Every text from ``args`` on, following next_page; an error fails with its text."""
    seen: list[str] = []
    for _ in range(30):
        answer = await memory.call_recall_tool(caller, args)
        assert "error" not in answer, answer
        seen += [m["text"] for m in answer["messages"]]
        if not answer.get("next_page"):
            return seen
        args = answer["next_page"]
        assert len(args["cursor"]) <= 200, args  # what the HTTP API takes
    raise AssertionError("next_page never ended")


async def test_reading_on_when_the_next_pages_first_message_was_deleted(memory: Memory) -> None:
    first = await memory.call_recall_tool("t1", {"limit": 3})
    assert [m["text"] for m in first["messages"]] == SAID[:3]
    assert (await memory.forget("line 03", thread_id="t1"))["messages"] == 1
    # was: {"error": "No message 'msg_…' is within reach of this recall ..."}
    assert await _read_on(memory, first["next_page"]) == SAID[4:]


async def test_reading_back_from_the_end_when_the_next_message_back_was_deleted(memory: Memory) -> None:
    last = await memory.call_recall_tool("t1", {"limit": 3, "anchor": "end"})
    assert [m["text"] for m in last["messages"]] == SAID[-3:]
    assert (await memory.forget("line 08", thread_id="t1"))["messages"] == 1
    assert await _read_on(memory, last["next_page"]) == [*SAID[5:8], *SAID[2:5], *SAID[:2]]


async def test_continue_with_after_the_message_cut_short_was_deleted(memory: Memory) -> None:
    long = "word " * 400
    turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user("and then?")])
    await turn.end([Message.assistant(long), Message.assistant("the very end")])
    answer = await memory.call_recall_tool(
        "t1", {"cursor": (await memory.list_messages("t1"))[-2].id, "detail": "high"}, token_budget=120
    )
    assert answer["truncated"] and answer["continue_with"].get("char_offset")
    assert (await memory.forget(long.strip(), thread_id="t1"))["messages"] == 1
    rest = await memory.call_recall_tool("t1", answer["continue_with"], token_budget=120)
    assert [m["text"] for m in rest.get("messages", [])] == ["the very end"], rest


async def test_a_message_cursor_is_opaque_and_bound_to_its_caller(memory: Memory) -> None:
    first = await memory.call_recall_tool("t1", {"limit": 3})
    cursor = first["next_page"]["cursor"]
    ids = [m.id for m in await memory.list_messages("t1")]
    assert not any(i in cursor for i in ids)  # no message id for the model to edit or reuse
    # another conversation's agent (same user) given t1's cursor: refused, not read in its thread
    other = await memory.call_recall_tool("t2", first["next_page"])
    assert "error" in other and "cursor" in other["error"], other
    changed = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    for i in range(len("ms1."), len(cursor)):  # any one character changed
        edited = cursor[:i] + ("A" if cursor[i] != "A" else "B") + cursor[i + 1 :]
        answer = await memory.call_recall_tool("t1", {**first["next_page"], "cursor": edited})
        assert "error" in answer and "cursor" in answer["error"], (edited, answer)
    for bad in (cursor[:-3], changed, "ms1.", "ms1.!!", "ms1." + "A" * 64):
        answer = await memory.call_recall_tool("t1", {**first["next_page"], "cursor": bad})
        assert "error" in answer and "cursor" in answer["error"], (bad, answer)
    # a message id from an answer still works as a cursor
    again = await memory.call_recall_tool("t1", {"cursor": ids[3], "limit": 2})
    assert [m["text"] for m in again["messages"]] == SAID[3:5]


async def test_reading_on_in_another_conversation_of_the_user_past_a_deleted_message(memory: Memory) -> None:
    first = await memory.call_recall_tool("t1", {"thread_id": "t2", "limit": 4})
    assert [m["text"] for m in first["messages"]] == SAID[:4]
    assert (await memory.forget("line 04", thread_id="t2"))["messages"] == 1
    assert await _read_on(memory, first["next_page"]) == SAID[5:]
    assert (await memory.call_recall_tool("t1", {"limit": 12}))["messages"][4]["text"] == "line 04"  # t1 kept it


async def test_reading_on_stops_when_a_new_conversation_began_under_the_threads_id(memory: Memory) -> None:
    first = await memory.call_recall_tool("t1", {"thread_id": "t2", "limit": 4})
    assert await memory.delete_thread("t2")
    turn = await memory.begin_turn(thread_id="t2", resource_id="alice", messages=[Message.user("a new chat")])
    await turn.end([Message.assistant("hello again")])
    answer = await memory.call_recall_tool("t1", first["next_page"])
    assert "error" in answer and "t2" in answer["error"], answer  # not the new chat as if read on
    assert "a new chat" not in str(answer)

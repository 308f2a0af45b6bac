"""``memory.forget(value)`` leaves obsmem's own bookkeeping on a message alone: a reply's receipt
(ids, numbers and a hash: which memory made the answer) and the marks of a call answered "no
result" (what lets its late result take that answer's place) are no text anyone said. A
message's metadata was matched string by string with its keys, so forgetting a user's name that
is part of the thread's id ("zaphod-chat") dropped every reply's receipt, and forgetting a word
that is part of obsmem's key names ("answered", "receipt") dropped those entries, counted as
forgotten parts. Without its mark a late result was stored at the thread's end, a second result
for a call already answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def _url(kind: str, tmp_path: Path) -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}"


async def _chat(memory: Memory, thread: str, first: str) -> list[str]:
    replies = []
    for said, answer in ((first, "Hello."), ("What is 2 + 2?", "4.")):
        turn = await memory.begin_turn(thread_id=thread, resource_id="u1", messages=[Message.user(said)])
        reply = Message.assistant(answer)
        await turn.end([reply])
        replies.append(reply.id)
    return replies


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_name_in_the_thread_id_leaves_the_receipts(tmp_path: Path, kind: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        replies = await _chat(memory, "zaphod-chat", "Hi there.")
        before = [await memory.receipt(r) for r in replies]
        assert all(before)
        counts = await memory.forget("zaphod", thread_id="zaphod-chat")
        assert counts["messages"] == 0 and counts["parts"] == 0, counts
        assert [await memory.receipt(r) for r in replies] == before


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("value", ["receipt", "obsmem", "tokens", "hash"])
async def test_a_word_of_obsmem_s_key_names_leaves_the_receipts(tmp_path: Path, kind: str, value: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        replies = await _chat(memory, "t1", "Hi there.")
        before = [await memory.receipt(r) for r in replies]
        counts = await memory.forget(value, thread_id="t1")
        assert counts["messages"] == 0 and counts["parts"] == 0, counts
        assert [await memory.receipt(r) for r in replies] == before


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_what_was_said_still_goes_and_the_receipt_stays(tmp_path: Path, kind: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        replies = await _chat(memory, "zaphod-chat", "My name is Zaphod.")
        before = [await memory.receipt(r) for r in replies]
        counts = await memory.forget("Zaphod", thread_id="zaphod-chat")
        assert counts["messages"] == 1, counts
        stored = await memory.list_messages("zaphod-chat")
        assert not any("Zaphod" in (m.text or "") for m in stored)
        assert [await memory.receipt(r) for r in replies] == before


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("value", ["answered", "unanswered", "obsmem", "true"])
async def test_a_late_result_still_takes_its_place_after_a_forget(tmp_path: Path, kind: str, value: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("delete old.log")])
        await turn.end([Message(role="assistant", parts=(ToolCallPart(tool_call_id="d1", tool_name="rm", args={}),))])
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[Message.user("wait, first list it")])
        await turn.end([Message.assistant("It is 2 MB.")])
        counts = await memory.forget(value, thread_id="h")
        # "answered" is in the words of the "no result" answer (obsmem's): that result is forgotten
        assert counts["messages"] == 0 and counts["parts"] == (value == "answered"), counts
        late = Message(role="tool", parts=(ToolResultPart(tool_call_id="d1", tool_name="rm", result="deleted"),))
        turn = await memory.begin_turn(thread_id="h", resource_id="u", messages=[late])
        await turn.end([Message.assistant("Done.")])
        results = [p.result for m in await memory.list_messages("h") for p in m.tool_results if p.tool_call_id == "d1"]
        assert results == ["deleted"], results


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("value", ["x", "model", "tokens", "scope"])
async def test_a_setting_s_name_leaves_the_observation_record(tmp_path: Path, kind: str, value: str) -> None:
    # The record keeps the settings it was made under (obsmem's names): not what anyone said.
    async with Memory(_url(kind, tmp_path)) as memory:
        await _chat(memory, "t1", "Hi there.")
        counts = await memory.forget(value, thread_id="t1")
        assert counts["records"] == 0 and counts["generations"] == 0, counts

"""``memory.forget(value)`` leaves a reply's receipt whose numbers, times and hash happen to hold
the value. A receipt (which memory made the answer) holds ids, counts, token numbers, sequence
numbers, a creation time and a context hash: no one's words. It was matched by every scalar but
the thread it names, so forgetting a year ("2026", in every receipt's time), a number ("1": a
count, a sequence number) or a few letters of a hex hash dropped the receipts of the thread,
counted as forgotten parts. A receipt is now matched by the ids it lists (a message id the app
gave holding the value still takes it: control)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio


def _url(kind: str, tmp_path: Path) -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}"


async def _chat(memory: Memory, ids: tuple[str, str] | None = None) -> list[str]:
    replies = []
    for index, (said, answer) in enumerate((("Hi there.", "Hello."), ("What is 2 + 2?", "4."))):
        question = Message.user(said) if ids is None else Message(id=ids[index], role="user", parts=Message.user(said).parts)
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[question])
        reply = Message.assistant(answer)
        await turn.end([reply])
        replies.append(reply.id)
    return replies


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("which", ["year", "number", "hash"])
async def test_a_receipt_s_numbers_and_hash_say_nothing(tmp_path: Path, kind: str, which: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        replies = await _chat(memory)
        before = [await memory.receipt(r) for r in replies]
        first = before[0]
        assert first is not None and first.created_at is not None
        value = {"year": str(first.created_at.year), "number": "1", "hash": first.context_hash[20:26]}[which]
        counts = await memory.forget(value, thread_id="t1")
        assert [await memory.receipt(r) for r in replies] == before
    assert counts["parts"] == 0 and counts["messages"] == 0, counts


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_control_an_app_s_message_id_holding_the_value_takes_the_receipt(tmp_path: Path, kind: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        replies = await _chat(memory, ("zaphod-q1", "zaphod-q2"))
        assert all([await memory.receipt(r) for r in replies])
        await memory.forget("zaphod", thread_id="t1")
        assert [await memory.receipt(r) for r in replies] == [None, None]

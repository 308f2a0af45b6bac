"""helper-133: a page cut by the token budget ("truncated": true) still carries next_page, and
next_page's cursor is the message after the whole page: an agent that reads on with next_page
(as the recall instructions say: 'to read on, call recall again with the arguments in next_page')
never sees the messages the budget cut. next_page should start at the first message not shown
(continue_with's), or be left out while truncated."""
from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Message
from obsmem.om.selection import observable_messages
from obsmem.types import TextPart
from tests.retrieval.helpers import memory_for, retrieval_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_next_page_of_a_truncated_page_skips_no_message(tmp_path: Path) -> None:
    config = retrieval_config(message_tokens=1_000_000)
    async with memory_for(tmp_path / "m.db", config) as memory:
        await memory.create_thread("t1", "alice")
        msgs = [
            Message(id=f"m{i:03d}", role="user" if i % 2 == 0 else "assistant",
                    parts=(TextPart(text=f"message {i}: " + "lorem ipsum dolor sit amet " * 40),))
            for i in range(40)
        ]
        await memory.save_messages("t1", msgs)
        ids = [m.id for m in observable_messages(await memory.list_messages("t1"))]
        answer = await memory.call_recall_tool("t1", {"limit": 20, "detail": "high"})
        assert answer["truncated"], answer  # the default budget (2000 tokens) cuts the page
        shown = [m["id"] for m in answer["messages"]]
        assert "next_page" in answer
        resumed = await memory.call_recall_tool("t1", answer["next_page"])  # (the cursor is opaque: read on)
        resumed_at = ids.index(resumed["messages"][0]["id"])
        first_unseen = len(shown) - (1 if answer["messages"][-1].get("truncated") else 0)
        # next_page must not jump over the messages the budget left out
        assert resumed_at <= first_unseen, (shown, answer["next_page"])


async def _follow(memory: object, args: dict[str, object]) -> list[list[str]]:
    pages: list[list[str]] = []
    next_args: dict[str, object] | None = args
    while next_args is not None:
        answer = await memory.call_recall_tool("t1", next_args)  # type: ignore[attr-defined]
        assert answer["tokens"] <= 2000
        assert not any(m.get("truncated") for m in answer["messages"])  # each message fits alone
        ids = [m["id"] for m in answer["messages"]]
        assert ids == sorted(ids)  # a page is shown oldest first, whichever way it reads
        pages.append(ids)
        assert answer["has_next_page"] == ("next_page" in answer)
        next_args = answer.get("next_page")
        assert len(pages) < 100
    return pages


async def test_next_page_reads_every_message_of_truncated_pages_either_way(tmp_path: Path) -> None:
    """helper-135: following next_page over pages the budget cuts shows each message once, in
    order, reading forward from the start or backward from the end (a backward page keeps the
    messages nearest its anchor, so what was cut is where next_page reads on)."""
    config = retrieval_config(message_tokens=1_000_000)
    async with memory_for(tmp_path / "m.db", config) as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", [
            Message(id=f"m{i:03d}", role="user" if i % 2 == 0 else "assistant",
                    parts=(TextPart(text=f"message {i}: " + "lorem ipsum dolor sit amet " * 40),))
            for i in range(45)
        ])
        ids = [m.id for m in observable_messages(await memory.list_messages("t1"))]
        forward = await _follow(memory, {"limit": 20, "detail": "high"})
        assert len(forward) > 3  # the budget cut pages
        assert [mid for page in forward for mid in page] == ids
        backward = await _follow(memory, {"limit": 20, "detail": "high", "anchor": "end"})
        assert len(backward) > 3
        assert backward[0][-1] == ids[-1]  # the latest message is on the first backward page
        assert [mid for page in reversed(backward) for mid in page] == ids
        at = ids.index("m030")
        before = await _follow(memory, {"cursor": "m030", "limit": 20, "detail": "high", "page": -1})
        assert [mid for page in reversed(before) for mid in page] == ids[:at]


async def test_a_long_message_read_backward_continues_by_char_offset(tmp_path: Path) -> None:
    """helper-135: reading back up to a message too long for the budget, continue_with (and
    next_page) go on with that message's rest, then the messages before it, nothing repeated."""
    from datetime import timedelta

    from tests.retrieval.helpers import START, dated_messages

    long_text = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog {i}" for i in range(200))
    async with memory_for(tmp_path / "m.db", retrieval_config(message_tokens=1_000_000)) as memory:
        await memory.create_thread("t1", "alice")
        earlier = dated_messages(6, "x")
        await memory.save_messages("t1", [
            *earlier,
            Message(id="huge", role="assistant", parts=(TextPart(text=long_text),),
                    created_at=START + timedelta(days=1)),
        ])
        args: dict[str, object] | None = {"cursor": "huge", "anchor": "end", "detail": "high", "limit": 20}
        pieces: list[str] = []
        seen: list[list[str]] = []
        while args is not None:
            answer = await memory.call_recall_tool("t1", args, token_budget=400)
            assert answer["tokens"] <= 400
            seen.append([m["id"] for m in answer["messages"] if m["id"] != "huge"])
            pieces += [m["text"] for m in answer["messages"] if m["id"] == "huge"]
            assert (answer.get("continue_with") is not None) == answer["truncated"]
            if answer["truncated"]:
                assert answer["next_page"] == answer["continue_with"]
            args = answer.get("next_page")
            assert len(seen) < 100
        assert "".join(pieces) == long_text
        assert [mid for page in reversed(seen) for mid in page] == [m.id for m in earlier]

"""LangChain: ``memory.forget`` and the provider's content blocks obsmem keeps beside a message's
parts (helper 201).

``from_langchain`` keeps a block that carries more than its part (a thinking block's signature,
which Anthropic needs back; a text block's citations) in ``metadata["langchain"]["blocks"]``,
keyed by the part's index, and a block obsmem has no part for (``redacted_thinking``) in a data
part. Two ways a forget broke them:

* the entry was matched with its field names and type tags: forgetting a word said by no one
  ("signature", "type", "thinking", "data") took every block (the thinking block went back without
  its signature, a redacted thinking block was dropped) and counted a forgotten part;
* a forget that removed an earlier part left the blocks keyed by the old indexes: the thinking
  block went back without its signature (or with another block's).

A value said in a block (the thinking, a citation) is still forgotten everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from obsmem import Memory, Message
from obsmem.integrations.langchain import ObservationalMemoryMiddleware, from_langchain, to_langchain
from obsmem.types import ReasoningPart
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio

THINKING = {"type": "thinking", "thinking": "Let me think about the weather.", "signature": "EqQBCkYIBxgCKkA"}
LATER = {"type": "thinking", "thinking": "Now the answer.", "signature": "ErUBCkYIBxgCKkB"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
CITED = {"type": "text", "text": "It is sunny.",
         "citations": [{"type": "char_location", "cited_text": "Zaphod's forecast: sun", "document_index": 0}]}


def _url(kind: str, tmp_path: Path) -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}"


async def _saved(memory: Memory, answer: list[Any]) -> None:
    await memory.create_thread("t", "u")
    await memory.save_messages("t", from_langchain([HumanMessage("hello"), AIMessage(content=answer)]))


async def _answer(memory: Memory) -> Any:
    return to_langchain(await memory.list_messages("t"))[-1].content


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("word", ["signature", "type", "thinking", "redacted_thinking", "data", "langchain", "blocks"])
async def test_a_word_said_by_no_one_leaves_the_providers_blocks(tmp_path: Path, kind: str, word: str) -> None:
    answer = [THINKING, REDACTED, {"type": "text", "text": "Hi."}]
    async with Memory(_url(kind, tmp_path)) as memory:
        await _saved(memory, answer)
        counts = await memory.forget(word, thread_id="t")
        assert counts["parts"] == 0 and counts["messages"] == 0, counts
        assert await _answer(memory) == answer


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_value_said_in_the_thinking_is_forgotten_with_its_block(tmp_path: Path, kind: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        await _saved(memory, [THINKING, REDACTED, {"type": "text", "text": "Hi."}])
        await memory.forget("weather", thread_id="t")
        stored = (await memory.list_messages("t"))[-1]
        assert "weather" not in json.dumps(stored.model_dump(mode="json"))
        assert await _answer(memory) == [REDACTED, {"type": "text", "text": "Hi."}]


async def test_a_value_said_only_in_a_citation_takes_the_citation() -> None:
    async with Memory("memory://") as memory:
        await _saved(memory, [THINKING, CITED])
        await memory.forget("Zaphod", thread_id="t")
        stored = (await memory.list_messages("t"))[-1]
        assert "Zaphod" not in json.dumps(stored.model_dump(mode="json"))
        assert await _answer(memory) == [THINKING, {"type": "text", "text": "It is sunny."}]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_after_an_earlier_part_is_forgotten_each_block_keeps_its_own_payload(tmp_path: Path, kind: str) -> None:
    async with Memory(_url(kind, tmp_path)) as memory:
        await _saved(memory, [{"type": "text", "text": "Zaphod, hi."}, THINKING, {"type": "text", "text": "Bye."}, LATER])
        await memory.forget("Zaphod", thread_id="t")
        assert await _answer(memory) == [THINKING, {"type": "text", "text": "Bye."}, LATER]


def _image(url: str) -> dict[str, Any]:
    return {"type": "image", "url": url, "mime_type": "image/png"}


@pytest.mark.parametrize("word", ["Zaphod", "final", "files", "true"])
async def test_a_tool_messages_attachments_keep_their_places(word: str) -> None:
    content = ["Two charts.", _image("https://example.com/zaphod.png?who=Zaphod"), _image("https://example.com/b.png")]
    call = AIMessage("", tool_calls=[{"type": "tool_call", "id": "c1", "name": "charts", "args": {}}])
    async with Memory("memory://") as memory:
        await memory.create_thread("t", "u")
        result = ToolMessage(content=content, tool_call_id="c1", name="charts")
        converted = from_langchain([HumanMessage("charts?"), call, result])
        tool = converted[-1]
        await memory.save_messages("t", [*converted[:-1], tool.model_copy(
            update={"metadata": {**tool.metadata, "langchain": {**tool.metadata["langchain"], "final": True}}})])
        await memory.forget(word, thread_id="t")
        stored = (await memory.list_messages("t"))[-1]
        back = to_langchain([stored])
    assert len(back) == 1 and isinstance(back[0], ToolMessage)
    if word == "Zaphod":  # the first chart goes, the second stays in its place
        assert back[0].content == ["Two charts.", "[image/png attachment]", _image("https://example.com/b.png")]
    else:  # obsmem's own words: nothing goes
        assert back[0].content == content
        assert stored.metadata["langchain"]["final"] is True


async def test_the_model_gets_the_thinking_signature_back_after_a_forget() -> None:
    """The agent loop: after forgetting the user's name (an earlier text part of the answer) and a
    word said by no one, the model's next request holds the thinking block with its signature."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if len(messages) < 3:
            return AIMessage(content=[{"type": "text", "text": "Hello Zaphod."}, THINKING,
                                      {"type": "text", "text": "It is sunny."}])
        return AIMessage("ok")

    model = recording(answer)
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [("user", "I am Zaphod. Weather?")]}, config("t"))
        for word in ("Zaphod", "signature"):
            await memory.forget(word, thread_id="t")
        await agent.ainvoke({"messages": [("user", "Thanks.")]}, config("t"))
    sent = [m for m in model.requests[-1] if isinstance(m, AIMessage)]
    assert [m.content for m in sent] == [[THINKING, {"type": "text", "text": "It is sunny."}]]


def test_a_block_left_under_an_old_index_is_not_sent_for_another_part() -> None:
    """A message as a forget before the fix left it: the text part 0 went, the two thinking blocks
    stayed keyed 1 and 2. The second thinking part is not sent as the first one's block (its text
    and signature); each part goes with what it says."""
    stored = Message(role="assistant", parts=(ReasoningPart(text=THINKING["thinking"]), ReasoningPart(text=LATER["thinking"])),
                     metadata={"langchain": {"blocks": {"1": THINKING, "2": LATER}}})
    assert to_langchain([stored])[0].content == [
        {"type": "reasoning", "reasoning": THINKING["thinking"]}, {"type": "reasoning", "reasoning": LATER["thinking"]},
    ]

"""LangChain with a checkpointer whose checkpoints are serialised and read back by another process
(helper 195). ``InMemorySaver`` kept across processes hands the next middleware the very objects
the last one wrote; a SQLite or Postgres checkpointer hands it what its serializer read back. Here
each restart gets a fresh saver holding a pickled copy of the old one's serialised checkpoints
(LangGraph's own serde: msgpack), so obsmem's private state keys (``obsmem_saved``,
``obsmem_pending``) have to survive that round trip for a new middleware to store nothing twice
and nothing of a deleted thread."""

from __future__ import annotations

import pickle
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import PENDING_STATE_KEY, SAVED_STATE_KEY
from tests.integrations.test_langchain_failed_run_184 import Process, flaky, said, texts
from tests.integrations.test_langchain_review import config, recording
from tests.integrations.test_langchain_stopped_answer_189 import SECRET, note, sent, stored_calls

pytestmark = pytest.mark.anyio


def restarted(saver: InMemorySaver) -> InMemorySaver:
    """A fresh saver holding what ``saver`` wrote, through bytes: a new process over the same database."""
    dumped = pickle.dumps((
        {k: {ns: dict(v) for ns, v in d.items()} for k, d in saver.storage.items()},
        dict(saver.writes), dict(saver.blobs),
    ))
    storage, writes, blobs = pickle.loads(dumped)
    fresh = InMemorySaver()
    for thread, namespaces in storage.items():
        fresh.storage[thread] = defaultdict(dict, namespaces)
    fresh.writes.update(writes)
    fresh.blobs.update(blobs)
    return fresh


async def test_the_private_keys_survive_the_checkpointers_serializer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = recording(lambda messages: AIMessage(f"re: {messages[-1].content}")), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
    fresh = restarted(saver)
    values = (await fresh.aget_tuple(config("t"))).checkpoint["channel_values"]  # type: ignore[union-attr]
    assert len(values[SAVED_STATE_KEY]) == 2 and all(len(mark) == 16 for mark in values[SAVED_STATE_KEY])
    assert not values.get(PENDING_STATE_KEY)
    async with Process(url, model, fresh) as agent:
        await agent.ainvoke({"messages": [("user", "again")]}, config("t"))
    assert await texts(url) == ["hello", "re: hello", "again", "re: again"]  # nothing stored twice


async def test_a_deleted_thread_stays_deleted_through_a_serialised_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = recording(lambda messages: AIMessage(f"re: {messages[-1].content}")), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    before = len(model.requests)
    async with Process(url, model, restarted(saver)) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert "tulipsun" not in said(model, before)
    assert await texts(url) == ["third", "re: third"]


async def test_a_failed_runs_input_stays_deleted_through_a_serialised_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError, match="provider down"):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    before = len(model.requests)
    async with Process(url, model, restarted(saver)) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert "tulipsun" not in said(model, before)
    assert await texts(url) == ["third", "re: third"]


async def test_a_failed_run_retried_through_a_serialised_checkpoint_is_sent_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    down = [True]
    model, saver = flaky(lambda text: down[0] and "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    down[0] = False
    before = len(model.requests)
    async with Process(url, model, restarted(saver)) as agent:
        await agent.ainvoke(None, config("t"))
    assert await texts(url) == ["hello", "re: hello", SECRET, f"re: {SECRET}"]
    assert [m.content for m in model.requests[before] if isinstance(m, HumanMessage)] == ["hello", SECRET]


async def test_an_interrupted_call_stays_deleted_through_a_serialised_checkpoint(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "secret" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "note", "args": {"text": "tulipsun"}, "id": "c1"}])
        return AIMessage(f"re: {last.content}")

    model, saver = recording(answer), InMemorySaver()

    def gate() -> dict[str, Any]:
        return {"tools": [note], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"note": True})]}

    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        stopped = await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    assert stopped.get("__interrupt__")
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    before = len(model.requests)
    async with Process(url, model, restarted(saver), **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert "tulipsun" not in sent(model, before)
    assert "tulipsun" not in await stored_calls(url)
    assert (await texts(url))[-2:] == ["third", "re: third"]

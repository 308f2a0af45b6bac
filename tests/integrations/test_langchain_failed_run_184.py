"""LangChain with a checkpointer: a run that never reaches its end (the provider raised at the
model call, or a human-in-the-loop interrupt stopped it) and a thread deleted afterwards
(helper-184, gap found by helper-182).

A new process is a new ``Memory`` over the same SQLite file and a new
``ObservationalMemoryMiddleware`` over the same checkpointer (``InMemorySaver`` kept across stands
in for SqliteSaver/PostgresSaver). The failed run saved its input, but the ids it saved were kept
in the state only at the run's end, which it never reached: after ``memory.delete_thread`` and a
restart, the input came back from the checkpointed state, was stored again and sent to the model.
The controls: a thread that was not deleted keeps the failed run's input (stored once, after a
restart and a retry), and what is said after a delete is stored and sent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from obsmem import Memory
from obsmem.errors import StorageError, ThreadNotFoundError
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import RecordingModel, config, recording

pytestmark = pytest.mark.anyio

SECRET = "my secret is tulipsun"


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: nothing found"


def flaky(down: Callable[[str], bool]) -> RecordingModel:
    """A model that raises while ``down(newest text)`` holds, else answers ``re: <newest text>``."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        text = str(messages[-1].content)
        if down(text):
            raise RuntimeError("provider down")
        return AIMessage(f"re: {text}")

    return recording(answer)


def said(model: RecordingModel, since: int = 0) -> str:
    return "\n".join(str(m.content) for request in model.requests[since:] for m in request)


async def texts(url: str, thread: str = "t") -> list[str]:
    async with Memory(url) as memory:
        try:
            return [m.text for m in await memory.list_messages(thread)]
        except ThreadNotFoundError:
            return []


class Process:
    """One process: a Memory over ``url`` and an agent with a new middleware, over ``saver``."""

    def __init__(self, url: str, model: RecordingModel, saver: InMemorySaver, **agent: Any) -> None:
        self.url, self.model, self.saver, self.agent_args = url, model, saver, agent

    async def __aenter__(self) -> Any:
        self.memory = Memory(self.url)
        await self.memory.__aenter__()
        middleware = [ObservationalMemoryMiddleware(self.memory), *self.agent_args.pop("middleware", [])]
        return create_agent(self.model, middleware=middleware, checkpointer=self.saver, **self.agent_args)

    async def __aexit__(self, *exc: object) -> None:
        await self.memory.__aexit__(*exc)


async def test_a_failed_runs_input_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError, match="provider down"):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")

    before = len(model.requests)
    async with Process(url, model, saver) as agent:
        result = await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert result["messages"][-1].content == "re: third"
    # before: the failed run's input was stored again and sent to the model
    assert await texts(url) == ["third", "re: third"]
    assert "tulipsun" not in said(model, before)
    assert "third" in said(model, before)


async def test_a_failed_runs_input_stays_deleted_for_another_worker() -> None:
    """Two workers (each its own middleware) over one checkpointer and one Memory: the run that
    failed was the other worker's; the one that ran the thread before goes on after the delete."""
    model, saver = flaky(lambda text: "secret" in text), InMemorySaver()
    async with Memory("memory://") as memory:
        one, two = (
            create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver)
            for _ in range(2)
        )
        await one.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError):
            await two.ainvoke({"messages": [("user", SECRET)]}, config("t"))
        assert await memory.delete_thread("t")
        before = len(model.requests)
        await one.ainvoke({"messages": [("user", "third")]}, config("t"))
        assert [m.text for m in await memory.list_messages("t")] == ["third", "re: third"]
    assert "tulipsun" not in said(model, before)


async def test_a_failed_run_after_a_delete_keeps_its_input_and_the_deleted_one_stays_gone(
    tmp_path: Path,
) -> None:
    """A second failed run after the delete (and a restart): its input is the thread's (stored,
    and kept after another restart); the first one's stays deleted."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: "secret" in text or text == "again down"), InMemorySaver()
    async with Process(url, model, saver) as agent:
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    async with Process(url, model, saver) as agent:
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", "again down")]}, config("t"))
    assert await texts(url) == ["again down"]

    before = len(model.requests)
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "fourth")]}, config("t"))
    assert await texts(url) == ["again down", "fourth", "re: fourth"]
    assert "tulipsun" not in said(model, before)
    assert "again down" in said(model, before)


async def test_an_interrupted_runs_input_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    """Human in the loop: the run stops at the approval of a tool call; the thread is deleted; a
    new process resumes the run with the approval. The approved call runs (LangGraph's), but
    neither it nor its result goes to the model or into memory: they belong to the deleted run,
    so the model has nothing to answer and the resume raises ThreadNotFoundError (helper 195)."""
    url = f"sqlite:///{tmp_path / 'm.db'}"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else None
        if isinstance(last, HumanMessage) and "secret" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "flowers"}, "id": "c1"}])
        return AIMessage(f"re: {last.content if last is not None else ''}")

    model, saver = recording(answer), InMemorySaver()

    def gate() -> dict[str, Any]:
        return {"tools": [lookup], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"lookup": True})]}

    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        stopped = await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    assert stopped.get("__interrupt__")
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")

    before = len(model.requests)
    async with Process(url, model, saver, **gate()) as agent:
        with pytest.raises(ThreadNotFoundError, match="deleted during this run"):
            await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config("t"))
        state = await agent.aget_state(config("t"))
        assert isinstance(state.values["messages"][-1], ToolMessage)  # the approved call ran
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    stored = await texts(url)
    assert "tulipsun" not in said(model, before)
    assert "flowers" not in said(model, before)  # the deleted run's call and its result neither
    assert not any("tulipsun" in text or "flowers" in text for text in stored)
    assert stored[-2:] == ["third", "re: third"]


async def test_a_failed_runs_input_is_kept_once_after_a_restart_and_a_retry(tmp_path: Path) -> None:
    """Control: the thread is not deleted. The failed run's input was saved; a new process retries
    the run (``ainvoke(None)``: LangGraph runs the failed model call again) and the model gets it
    once, with what came before."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    down = [True]
    model, saver = flaky(lambda text: down[0] and "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    assert await texts(url) == ["hello", "re: hello", SECRET]

    down[0] = False
    before = len(model.requests)
    async with Process(url, model, saver) as agent:
        result = await agent.ainvoke(None, config("t"))
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert result["messages"][-1].content == f"re: {SECRET}"
    assert await texts(url) == ["hello", "re: hello", SECRET, f"re: {SECRET}", "third", "re: third"]
    retried = model.requests[before]
    assert [m.content for m in retried if isinstance(m, HumanMessage)] == ["hello", SECRET]


async def test_a_first_run_that_failed_keeps_its_input_after_a_restart(tmp_path: Path) -> None:
    """Control: the thread's first run failed (the thread holds only its input); not deleted, a new
    process sends the input with the next one."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    before = len(model.requests)
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert await texts(url) == [SECRET, "third", "re: third"]
    assert "tulipsun" in said(model, before)


async def test_an_interrupted_run_is_kept_after_a_restart_and_the_approval(tmp_path: Path) -> None:
    """Control: the thread is not deleted; a new process resumes the interrupted run."""
    url = f"sqlite:///{tmp_path / 'm.db'}"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], HumanMessage) and "weather" in str(messages[-1].content):
            return AIMessage("", tool_calls=[{"name": "lookup", "args": {"topic": "rain"}, "id": "c1"}])
        return AIMessage(f"re: {messages[-1].content}")

    model, saver = recording(answer), InMemorySaver()

    def gate() -> dict[str, Any]:
        return {"tools": [lookup], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"lookup": True})]}

    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "what is the weather?")]}, config("t"))
    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config("t"))
    async with Memory(url) as memory:
        stored = await memory.list_messages("t")
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert (stored[0].text, stored[-1].text) == ("what is the weather?", "re: rain: nothing found")


async def test_what_is_said_after_a_delete_is_stored_and_sent(tmp_path: Path) -> None:
    """Control: after a failed run, a delete and a restart, the new conversation is the thread's."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: "secret" in text), InMemorySaver()
    async with Process(url, model, saver) as agent:
        with pytest.raises(RuntimeError):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    for question in ("third", "fourth"):
        async with Process(url, model, saver) as agent:
            await agent.ainvoke({"messages": [("user", question)]}, config("t"))
    assert await texts(url) == ["third", "re: third", "fourth", "re: fourth"]
    last = said(model, len(model.requests) - 1)
    assert "third" in last and "fourth" in last and "tulipsun" not in last


async def test_the_state_keeps_one_short_mark_per_message() -> None:
    """What the state keeps of the messages saved is one 16-character mark per message of the
    state (not the 36-character ids, two for some messages): it shrinks when the app removes
    messages, and nothing stays pending after a run that ended."""
    model, saver = flaky(lambda text: False), InMemorySaver()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver)
        for n in range(5):
            await agent.ainvoke({"messages": [("user", f"q{n}")]}, config("t"))
        values = (await agent.aget_state(config("t"))).values
        assert len(values["obsmem_saved"]) == len(values["messages"]) == 10
        assert {len(mark) for mark in values["obsmem_saved"]} == {16}
        assert values["obsmem_pending"] == []
        old = values["messages"][:4]
        await agent.aupdate_state(config("t"), {"messages": [RemoveMessage(id=str(m.id)) for m in old]})
        await agent.ainvoke({"messages": [("user", "q5")]}, config("t"))
        values = (await agent.aget_state(config("t"))).values
        assert len(values["obsmem_saved"]) == len(values["messages"]) == 8
        assert [m.text for m in await memory.list_messages("t")][:2] == ["q2", "re: q2"]


@pytest.mark.parametrize("first", [False, True], ids=["later run", "first run"])
async def test_an_input_the_store_failed_to_save_is_saved_after_a_restart(
    tmp_path: Path, first: bool,
) -> None:
    """Control: the run failed at the save of its input (the store down), not at the model; the
    thread is not deleted. The input is kept as pending in the state though it was never stored: a
    new process stores it and sends it, also when it was the thread's first run."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = flaky(lambda text: False), InMemorySaver()
    if not first:
        async with Process(url, model, saver) as agent:
            await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
    earlier = [] if first else ["hello", "re: hello"]
    async with Memory(url) as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver)
        store = memory.store
        working = {name: getattr(store, name) for name in ("create_thread", "save_messages")}

        async def down(*args: Any, **kwargs: Any) -> Any:
            raise OSError("disk full")

        for name in working:  # the store takes no writes
            setattr(store, name, down)
        with pytest.raises((StorageError, OSError), match="disk full"):
            await agent.ainvoke({"messages": [("user", "second")]}, config("t"))
        for name, method in working.items():
            setattr(store, name, method)
    assert await texts(url) == earlier

    before = len(model.requests)
    async with Process(url, model, saver) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert await texts(url) == [*earlier, "second", "third", "re: third"]
    assert "second" in said(model, before)

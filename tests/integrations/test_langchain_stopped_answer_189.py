"""LangChain with a checkpointer: the model's answer of a run that stopped before its next model
call (a tool raised, or a human-in-the-loop interrupt was never resumed) and a thread deleted
afterwards (helper-189, review of 0a5e89e).

The answer (a tool call quoting the user's secret) is saved at the run's next model call or its
end, which the run never reached: it was only in the checkpointed state. After
``memory.delete_thread`` the next run (in the same process or after a restart) saved it as a new
message and sent it to the model. The control: a thread that was not deleted keeps the call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_failed_run_184 import Process, said, texts
from tests.integrations.test_langchain_review import RecordingModel, config, recording

pytestmark = pytest.mark.anyio

SECRET = "my secret is tulipsun, note it"


@tool
def save_note(text: str) -> str:
    """Save a note."""
    raise RuntimeError("notes service down")


@tool
def note(text: str) -> str:
    """Save a note (asks for approval)."""
    return f"noted: {text}"


def noting(name: str) -> RecordingModel:
    """A model that calls ``name`` with the secret when the newest message holds it, else answers
    ``re: <newest text>``."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "secret" in str(last.content):
            return AIMessage("", tool_calls=[{"name": name, "args": {"text": "tulipsun"}, "id": "c1"}])
        return AIMessage(f"re: {last.content}")

    return recording(answer)


def sent(model: RecordingModel, since: int) -> str:
    """What the model got since request ``since``, tool call arguments included."""
    return "\n".join(
        f"{m.content} {getattr(m, 'tool_calls', '')}" for request in model.requests[since:] for m in request
    )


async def stored_calls(url: str) -> str:
    async with Memory(url) as memory:
        if await memory.store.get_thread("t") is None:
            return ""
        stored = await memory.list_messages("t")
    return "\n".join(f"{m.text} {[c.args for c in m.tool_calls]}" for m in stored)


async def deleted_and_going_on(model: Any, before: int, url: str) -> None:
    """Nothing of the deleted secret was sent since request ``before`` or is stored, and the
    thread went on with the user's new question ("third") and its answer."""
    assert "tulipsun" not in sent(model, before)
    assert "tulipsun" not in await stored_calls(url)
    assert (await texts(url))[-2:] == ["third", "re: third"]


@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restart"])
async def test_a_call_whose_tool_raised_stays_deleted(tmp_path: Path, restart: bool) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = noting("save_note"), InMemorySaver()
    async with Memory(url) as memory:
        agent = create_agent(
            model, tools=[save_note], middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver
        )
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        with pytest.raises(RuntimeError, match="notes service down"):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
        assert await memory.delete_thread("t")
        before = len(model.requests)
        if not restart:
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    if restart:
        async with Process(url, model, saver, tools=[save_note]) as agent:
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    # before: the call quoting the secret was stored again and sent to the model
    await deleted_and_going_on(model, before, url)


async def test_an_interrupted_call_stays_deleted_when_the_user_asks_anew(tmp_path: Path) -> None:
    """Human in the loop: the run stops at the approval of the call; the thread is deleted; after a
    restart the user asks something new instead of answering the approval."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = noting("note"), InMemorySaver()

    def gate() -> dict[str, Any]:
        return {"tools": [note], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"note": True})]}

    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        stopped = await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    assert stopped.get("__interrupt__")
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")

    before = len(model.requests)
    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    await deleted_and_going_on(model, before, url)


@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restart"])
async def test_a_call_whose_tool_raised_is_kept_when_not_deleted(tmp_path: Path, restart: bool) -> None:
    """Control: the thread is not deleted; the next run stores the call once and sends it."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = noting("save_note"), InMemorySaver()
    async with Memory(url) as memory:
        agent = create_agent(
            model, tools=[save_note], middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=saver
        )
        with pytest.raises(RuntimeError, match="notes service down"):
            await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
        before = len(model.requests)
        if not restart:
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    if restart:
        async with Process(url, model, saver, tools=[save_note]) as agent:
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert "tulipsun" in sent(model, before)
    assert (await stored_calls(url)).count("'tulipsun'") == 1
    assert (await texts(url))[0] == SECRET
    assert (await texts(url))[-2:] == ["third", "re: third"]
    assert "third" in said(model, before)

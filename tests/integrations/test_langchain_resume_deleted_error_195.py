"""LangChain, human in the loop: a run stopped at an interrupt, its thread deleted with
``memory.delete_thread``, then resumed (the call approved or rejected), in the same process or
after a restart (helper 195).

Nothing of the deleted run is stored or sent (ad26d00), so the resumed run has nothing to send the
model: before, the model was called with an empty request, which a provider refuses with its own
error (after a restart), or the run failed with obsmem's "begin a new turn" (in the same process).
Now both fail the same way, before the model is called: ``ThreadNotFoundError`` naming the thread,
saying the run is over and how to go on. The thread then goes on with the user's next message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from obsmem import Memory
from obsmem.errors import ThreadNotFoundError
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_failed_run_184 import Process, texts
from tests.integrations.test_langchain_review import RecordingModel, config, recording
from tests.integrations.test_langchain_stopped_answer_189 import SECRET, note, sent, stored_calls

pytestmark = pytest.mark.anyio


def provider() -> RecordingModel:
    """Calls ``note`` with the secret when asked to note it, else answers ``re: <newest text>``;
    refuses a request without a message, as providers do."""

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if not [m for m in messages if not isinstance(m, SystemMessage)]:
            raise ValueError("provider: 'messages' must contain at least one message")
        last = messages[-1]
        if isinstance(last, HumanMessage) and "secret" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "note", "args": {"text": "tulipsun"}, "id": "c1"}])
        return AIMessage(f"re: {last.content}")

    return recording(answer)


def gate() -> dict[str, Any]:
    return {"tools": [note], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"note": True})]}


@pytest.mark.parametrize("decision", ["approve", "reject"])
@pytest.mark.parametrize("restart", [False, True], ids=["same process", "restart"])
async def test_resuming_a_deleted_run_raises_a_clear_error_and_the_thread_goes_on(
    tmp_path: Path, decision: str, restart: bool
) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = provider(), InMemorySaver()
    resume = Command(resume={"decisions": [{"type": decision}]})
    async with Memory(url) as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory), *gate().pop("middleware")],
            tools=[note], checkpointer=saver,
        )
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        stopped = await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
        assert stopped.get("__interrupt__")
        assert await memory.delete_thread("t")
        before = len(model.requests)
        if not restart:
            with pytest.raises(ThreadNotFoundError, match=r"'t' was deleted during this run") as caught:
                await agent.ainvoke(resume, config("t"))
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    if restart:
        async with Process(url, model, saver, **gate()) as agent:
            with pytest.raises(ThreadNotFoundError, match=r"'t' was deleted during this run") as caught:
                await agent.ainvoke(resume, config("t"))
            await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert caught.value.thread_id == "t"
    assert "new message" in str(caught.value)
    assert len(model.requests) == before + 1  # only "third": no empty request was sent
    assert "tulipsun" not in sent(model, before)
    assert "tulipsun" not in await stored_calls(url)
    assert await texts(url) == ["third", "re: third"]


async def test_control_a_resume_of_a_thread_not_deleted_goes_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    model, saver = provider(), InMemorySaver()
    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Process(url, model, saver, **gate()) as agent:
        result = await agent.ainvoke(Command(resume={"decisions": [{"type": "approve"}]}), config("t"))
    assert result["messages"][-1].content == "re: noted: tulipsun"
    assert await texts(url) == [SECRET, "", "", "re: noted: tulipsun"]  # the call, its result (no text)
    assert "tulipsun" in await stored_calls(url)

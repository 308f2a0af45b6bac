"""An interrupted run resumed (its call approved, or rejected) after memory.delete_thread and a
restart stored and sent the model's call quoting the deleted secret, with its result (helper 189).
They belong to the deleted run: neither is stored nor sent now, so the model has nothing to answer
and the resume raises ThreadNotFoundError (helper 195)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from obsmem import Memory
from obsmem.errors import ThreadNotFoundError
from tests.integrations.test_langchain_failed_run_184 import Process
from tests.integrations.test_langchain_review import config, recording
from tests.integrations.test_langchain_stopped_answer_189 import SECRET, note, sent, stored_calls

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_a_resumed_call_of_a_deleted_run_stays_deleted(tmp_path: Path, decision: str) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1] if messages else None
        if isinstance(last, HumanMessage) and "secret" in str(last.content):
            return AIMessage("", tool_calls=[{"name": "note", "args": {"text": "tulipsun"}, "id": "c1"}])
        return AIMessage(f"re: {last.content if last else ''}")

    model, saver = recording(answer), InMemorySaver()

    def gate() -> dict[str, Any]:
        return {"tools": [note], "middleware": [HumanInTheLoopMiddleware(interrupt_on={"note": True})]}

    async with Process(url, model, saver, **gate()) as agent:
        await agent.ainvoke({"messages": [("user", "hello")]}, config("t"))
        await agent.ainvoke({"messages": [("user", SECRET)]}, config("t"))
    async with Memory(url) as memory:
        assert await memory.delete_thread("t")
    before = len(model.requests)
    async with Process(url, model, saver, **gate()) as agent:
        with pytest.raises(ThreadNotFoundError, match="deleted during this run"):
            await agent.ainvoke(Command(resume={"decisions": [{"type": decision}]}), config("t"))
        await agent.ainvoke({"messages": [("user", "third")]}, config("t"))
    assert "tulipsun" not in sent(model, before)
    assert "tulipsun" not in await stored_calls(url)

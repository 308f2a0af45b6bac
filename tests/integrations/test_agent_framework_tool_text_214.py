"""Microsoft Agent Framework: text that is not Unicode (a lone surrogate) in what a run makes, a
tool's result or the model's answer, as an app meets it (helper 214).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Content, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from obsmem.types import ToolCallPart, ToolResultPart
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


def _texts(messages: list[Any]) -> list[str]:
    return [str(p.result) for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


# -- a lone surrogate in a tool's result ------------------------------------------------------------

BROKEN = {
    "json-escape": "bad \ud800 text",  # '"\\ud800"' in a JSON answer json.loads kept
    "surrogateescape": b"bad \xff\xfe text".decode("utf-8", "surrogateescape"),  # bytes that were not UTF-8
    "split-pair": "half \ud83d an emoji",  # a client that cut a string between two UTF-16 units
}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("broken", list(BROKEN))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_tool_result_holding_a_lone_surrogate_keeps_its_call(
    client_kind: str, stream: bool, broken: str, store: str, tmp_path: Path
) -> None:
    """The tool ran (and may have done something): the run is not failed for what it returned,
    its call and result are stored as valid text, and the next request to the model holds both."""
    ran: list[int] = []

    @tool
    def fetch() -> str:
        """Fetch the page."""
        ran.append(1)
        return BROKEN[broken]

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "go":
            return AFMessage("assistant", [Content.from_function_call("f1", "fetch", arguments="{}")])
        return AFMessage("assistant", ["read it"])

    client = STREAMS[client_kind](model)
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path}/m.db"
    async with Memory(url, config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[fetch],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await _run(agent, "go", session, stream)
        await _run(agent, "thanks", session, stream)
        assert ran == [1]
        stored = await memory.list_messages("c1")
        calls = [p.tool_call_id for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        assert calls == ["f1"]
        [result] = _texts(stored)
        result.encode("utf-8")  # valid text, which every answer, export and request can carry
        assert result.startswith(("bad ", "half ")) and result.endswith(("text", "emoji"))
        sent = client.calls[-1]
        assert _problems(sent) == []
        assert [str(r) for r in _results(sent)] == [result]
        for message in sent:
            for content in message.contents:
                (content.text or "").encode("utf-8")


async def test_the_text_the_model_sent_holding_a_lone_surrogate_is_stored_valid() -> None:
    """A model server's answer (JSON) can carry '\\ud800' too: the answer is kept, made valid."""
    async def model(sent: list[AFMessage]) -> AFMessage:
        return AFMessage("assistant", ["the answer \udc80 here"])

    client = STREAMS["chat-middleware"](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await _run(agent, "hi", session, False)
        [question, answer] = await memory.list_messages("c1")
        assert answer.text.encode("utf-8") and answer.text.startswith("the answer ")


@pytest.mark.parametrize("broken", list(BROKEN))
@pytest.mark.parametrize("stream", [False, True])
async def test_the_model_call_after_a_tool_returned_a_lone_surrogate_can_be_sent(stream: bool, broken: str) -> None:
    """A provider's client writes its request as UTF-8 (the OpenAI SDK, httpx), which fails on a
    lone surrogate after the tool ran. With the chat-middleware layer (all of Agent Framework's
    clients have it) the model is told the result as obsmem stores it, and the run answers."""
    @tool
    def fetch() -> str:
        """Fetch the page."""
        return BROKEN[broken]

    async def model(sent: list[AFMessage]) -> AFMessage:
        body = json.dumps([m.to_dict() for m in sent], ensure_ascii=False, default=str)
        body.encode("utf-8")  # what the OpenAI SDK and httpx do with a request
        if sent[-1].role == "user" and sent[-1].text == "go":
            return AFMessage("assistant", [Content.from_function_call("f1", "fetch", arguments="{}")])
        return AFMessage("assistant", ["read it"])

    client = STREAMS["chat-middleware"](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[fetch],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        answer = await _run(agent, "go", session, stream)
        assert answer.text.strip() == "read it"
        told = [str(r) for r in _results(client.calls[-1])]
        assert told == _texts(await memory.list_messages("c1"))


@pytest.mark.parametrize("where", ["call id", "tool name"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_tool_call_whose_id_or_name_holds_a_lone_surrogate_is_stored(
    client_kind: str, stream: bool, where: str
) -> None:
    """A model server's JSON answer can carry '\\ud800' in a call's id or name (half an emoji):
    the run answers, the call and its result are stored as valid text, the next request holds
    both."""
    @tool
    def fetch() -> str:
        """Fetch the page."""
        return "page"

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "go":
            call_id, name = ("c\ud800", "fetch") if where == "call id" else ("c1", "fetch\ud83d")
            return AFMessage("assistant", [Content.from_function_call(call_id, name, arguments="{}")])
        return AFMessage("assistant", ["read it"])

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[fetch],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])
        session = agent.create_session(session_id="c1")
        await _run(agent, "go", session, stream)
        await _run(agent, "thanks", session, stream)
        stored = await memory.list_messages("c1")
        calls = [p for m in stored for p in m.parts if isinstance(p, ToolCallPart)]
        assert len(calls) == 1 and len(_texts(stored)) == 1
        (calls[0].tool_call_id + calls[0].tool_name).encode("utf-8")
        assert _problems(client.calls[-1]) == []
        assert len(_results(client.calls[-1])) == 1

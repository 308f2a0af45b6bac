"""Microsoft Agent Framework: the app's chat middleware edits the model's earlier response in
each request (masks a card number in the text the model sent with its call, and in the call's
arguments) before the model sees it (helper-210). The step stores that response as the request
carries it; the run's end stored the text again, as the model first gave it: the thread held
the text twice, once with the card number, and later runs told the model it twice."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_framework import Agent, ChatContext, ChatMiddleware, Content, ContextProvider, SessionContext
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_hostile_192 import WordStream, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems
from tests.integrations.test_agent_framework_redacting_middleware_207 import CARD, _in_store, card_on_file
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


async def _model(sent: list[AFMessage]) -> AFMessage:
    if sent[-1].role == "user" and sent[-1].text == "which card?":
        return AFMessage("assistant", [Content.from_text(f"checking {CARD}"), Content.from_function_call(
            "k1", "card_on_file", arguments=json.dumps({"hint": CARD}))])
    return AFMessage("assistant", ["ok"])


def _masked(content: Content) -> Content:
    if content.type == "text" and content.text:
        return Content.from_text(content.text.replace(CARD, "[card]"))
    if content.type == "function_call":
        return Content.from_function_call(content.call_id or "", content.name or "",
                                          arguments=str(content.arguments).replace(CARD, "[card]"))
    if content.type == "function_result":
        return Content.from_function_result(content.call_id or "", result=str(content.result).replace(CARD, "[card]"))
    return content


class Scrub(ChatMiddleware):
    """The app's chat middleware: masks the card number everywhere in each request."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        context.messages = [AFMessage(m.role, [_masked(c) for c in m.contents], message_id=m.message_id,
                                      additional_properties=dict(m.additional_properties or {}))
                            for m in context.messages]
        await call_next()


class Scrubbing(ContextProvider):
    """The app's context provider, listed after obsmem's: :class:`Scrub` within obsmem's step."""

    def __init__(self) -> None:
        super().__init__("scrubbing")

    async def before_run(self, *, agent: Any, session: Any, context: SessionContext, state: Any) -> None:
        context.extend_middleware(self.source_id, Scrub())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "client", "provider"])
async def test_the_text_sent_with_a_call_that_the_apps_chat_middleware_edits_is_stored_once(
    where: str, stream: bool
) -> None:
    client = WordStream(_model, middleware=[Scrub()] if where == "client" else None)
    async with Memory("memory://", config=QUIET) as memory:
        providers: list[Any] = [ObservationalMemoryProvider(memory, resource_id="u")]
        agent = Agent(client, "APP", tools=[card_on_file], middleware=[Scrub()] if where == "agent" else None,
                      context_providers=[*providers, *([Scrubbing()] if where == "provider" else [])])
        session = agent.create_session(session_id="c1")
        await _run(agent, "which card?", session, stream)
        stored = await memory.list_messages("c1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert [m.text.strip() for m in stored if m.role == "assistant"] == ["checking [card]", "ok"]
        assert CARD not in _in_store(stored)
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert [(m.text or "").strip() for m in client.calls[-1] if m.role == "assistant"] == ["checking [card]", "ok"]


class FewShot(ChatMiddleware):
    """The app's chat middleware: puts a worked example (a question and its answer) before each
    request, which is no part of the conversation."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        context.messages = [AFMessage("user", ["example: what is 2+2?"]), AFMessage("assistant", ["example: 4"]),
                            *context.messages]
        await call_next()


class Examples(ContextProvider):
    """The app's context provider, listed after obsmem's: :class:`FewShot` within obsmem's step."""

    def __init__(self) -> None:
        super().__init__("examples")

    async def before_run(self, *, agent: Any, session: Any, context: SessionContext, state: Any) -> None:
        context.extend_middleware(self.source_id, FewShot())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "client", "provider"])
async def test_an_example_answer_the_apps_chat_middleware_puts_before_each_request_is_not_stored(
    where: str, stream: bool
) -> None:
    """4c1a003 left out the system and user messages such a middleware adds; its assistant
    message was stored as the model's, after the question, once per run."""
    client = WordStream(_model, middleware=[FewShot()] if where == "client" else None)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[card_on_file], middleware=[FewShot()] if where == "agent" else None,
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u"),
                                         *([Examples()] if where == "provider" else [])])
        session = agent.create_session(session_id="c1")
        for question in ["which card?", "thanks", "bye"]:
            await _run(agent, question, session, stream)
        stored = await memory.list_messages("c1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                                            "assistant"]
        assert "example" not in _in_store(stored)
        assert [(m.text or "").strip() for m in client.calls[-1]].count("example: 4") == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "provider"])
async def test_an_example_answer_is_not_stored_when_the_apps_middleware_also_masks_the_question(
    where: str, stream: bool
) -> None:
    """The request does not hold the question as the run got it (masked): the step finds where
    the run's own messages begin by the last user message before them."""

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "is [card] mine?":
            return AFMessage("assistant", [Content.from_function_call("k1", "card_on_file", arguments="{}")])
        return AFMessage("assistant", ["ok"])

    client = WordStream(model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[card_on_file],
                      middleware=[FewShot(), Scrub()] if where == "agent" else None,
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u"),
                                         *([Examples(), Scrubbing()] if where == "provider" else [])])
        session = agent.create_session(session_id="c1")
        await _run(agent, f"is {CARD} mine?", session, stream)
        await _run(agent, "thanks", session, stream)
        stored = await memory.list_messages("c1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert "example" not in _in_store(stored)
        assert _problems(client.calls[-1]) == []

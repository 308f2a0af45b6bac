"""Microsoft Agent Framework: the app's own chat middleware rewrites the tool results a model
request carries (masks a card number) before the model sees them (helper-208). It runs around
obsmem's step in each model call (or within it: a context provider's listed after obsmem's),
after the tool returned: obsmem stores what the model was told, once, whether the middleware
is the client's, the agent's, the run's or a provider's, streamed or not. And what such a
middleware adds to a request for that request only is not stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from agent_framework import Agent, ChatContext, ChatMiddleware, Content, ContextProvider, SessionContext
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_hostile_192 import WordStream, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_redacting_middleware_207 import (
    CARD,
    _agent,
    _in_store,
    _model,
    card_on_file,
)
from tests.integrations.test_agent_framework_review import QUIET
from tests.integrations.test_agent_framework_stopped_stream_restart_202 import _stored

pytestmark = pytest.mark.anyio


class RedactRequest(ChatMiddleware):
    """The app's chat middleware: masks the card number in the results each request carries."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        context.messages = [
            AFMessage(m.role, [Content.from_function_result(c.call_id, result=str(c.result).replace(CARD, "[card]"))
                               if c.type == "function_result" else c for c in m.contents],
                      message_id=m.message_id, additional_properties=dict(m.additional_properties or {}))
            for m in context.messages
        ]
        await call_next()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "run", "client"])
async def test_a_result_the_apps_chat_middleware_redacts_is_stored_redacted_once(where: str, stream: bool) -> None:
    client = WordStream(_model("which card?", "card_on_file"),
                        middleware=[RedactRequest()] if where == "client" else None)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [card_on_file], [RedactRequest()] if where == "agent" else None)
        session = agent.create_session(session_id="c1")
        if where == "run":
            response: Any = agent.run("which card?", session=session, middleware=[RedactRequest()], stream=stream)
            if stream:
                async for _ in response:
                    pass
            else:
                await response
        else:
            await _run(agent, "which card?", session, stream)
        assert _results(client.calls[-1]) == ["card [card]"]
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["k1"], ["card [card]"])
        assert CARD not in _in_store(stored)
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert _stored(await memory.list_messages("c1")) == (["k1"], ["card [card]"])


class Retrieve(ChatMiddleware):
    """The app's chat middleware: puts the documents it retrieved for this request before it."""

    def __init__(self) -> None:
        self.requests = 0

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.requests += 1
        context.messages = [AFMessage("system", [f"retrieved doc #{self.requests}"]), *context.messages]
        await call_next()


class Instructed(WordStream):
    """:class:`WordStream` noting the instructions of each request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instructions: list[str] = []

    def _inner_get_response(self, *, messages: Any, stream: bool, options: Any, **kwargs: Any) -> Any:
        self.instructions.append(str(options.get("instructions")))
        return super()._inner_get_response(messages=messages, stream=stream, options=options, **kwargs)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "client"])
async def test_context_the_apps_chat_middleware_adds_to_each_request_is_not_stored(where: str, stream: bool) -> None:
    """What the app's middleware adds to a request for that request only (retrieved documents)
    is not a message of the conversation: stored, it came back in later runs (obsmem gives a
    thread's system messages as instructions) beside that run's own."""
    retrieve = Retrieve()
    client = Instructed(_model("which card?", "card_on_file"), middleware=[retrieve] if where == "client" else None)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [card_on_file], [retrieve] if where == "agent" else None)
        session = agent.create_session(session_id="c1")
        for question in ["which card?", "thanks", "bye"]:
            await _run(agent, question, session, stream)
        stored = await memory.list_messages("c1")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                                            "assistant"]
        assert "retrieved" not in _in_store(stored)
        sent = [m.text for m in client.calls[-1] if "retrieved" in (m.text or "")] + [
            line for line in client.instructions[-1].splitlines() if "retrieved" in line]
        assert sent == [f"retrieved doc #{retrieve.requests}"]


class Masking(ContextProvider):
    """The app's context provider, listed after obsmem's: adds :class:`RedactRequest` to each run,
    within obsmem's chat middleware."""

    def __init__(self) -> None:
        super().__init__("masking")

    async def before_run(self, *, agent: Any, session: Any, context: SessionContext, state: Any) -> None:
        context.extend_middleware(self.source_id, RedactRequest())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model_fails", [False, True])
async def test_a_result_a_later_providers_chat_middleware_redacts_is_stored_redacted(
    model_fails: bool, stream: bool
) -> None:
    answer = _model("which card?", "card_on_file")

    async def model(sent: list[AFMessage]) -> AFMessage:
        if model_fails and sent[-1].role == "tool" and not any(m.text == "thanks" for m in sent):
            raise RuntimeError("provider 500")  # told the result, no answer
        return await answer(sent)

    client = WordStream(model)
    async with Memory("memory://", config=QUIET) as memory:
        agent = Agent(client, "APP", tools=[card_on_file],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="u"), Masking()])
        session = agent.create_session(session_id="c1")
        if model_fails:
            with pytest.raises(Exception, match="provider 500"):
                await _run(agent, "which card?", session, stream)
        else:
            await _run(agent, "which card?", session, stream)
        assert _results(client.calls[-1]) == ["card [card]"]
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["k1"], ["card [card]"])
        assert CARD not in _in_store(stored)
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert _stored(await memory.list_messages("c1")) == (["k1"], ["card [card]"])

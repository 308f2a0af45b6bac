"""Microsoft Agent Framework: the app's own function middleware rewrites a tool's result (masks a
card number) before the model sees it (helper-204's finding, helper-207). obsmem's function
middleware is the innermost (a context provider's comes after the client's, the agent's and the
run's): what it sees the tool return is not what the model is told. obsmem stores what the model
was told, on both client kinds, streamed or not, with the app's middleware at any level; with
none, each tool's result is still stored as the tool returns (see the 202 tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Content, FunctionInvocationContext, FunctionMiddleware, tool
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_late_approval_171 import _problems, _results
from tests.integrations.test_agent_framework_review import QUIET
from tests.integrations.test_agent_framework_stopped_stream_restart_202 import _stop_after_results, _stored

pytestmark = pytest.mark.anyio

CARD = "4111 1111 1111 1111"


class Redact(FunctionMiddleware):
    """The app's middleware: masks the card number in what a tool returns."""

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()
        result = context.result
        contents = result if isinstance(result, list) else [Content.from_text(str(result))]
        context.result = [Content.from_text(c.text.replace(CARD, "[card]"))
                          if c.type == "text" and c.text else c for c in contents]


class Fallback(FunctionMiddleware):
    """The app's middleware: a tool that fails is answered with the app's own words."""

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        try:
            await call_next()
        except RuntimeError:
            context.result = "the card service is down, try later"


@tool
def card_on_file() -> str:
    """The user's card."""
    return f"card {CARD}"


@tool
def broken_card_service() -> str:
    """The user's card (a service that fails)."""
    raise RuntimeError(f"timeout reading {CARD}")


def _model(question: str, tool_name: str) -> Callable[[list[AFMessage]], Awaitable[AFMessage]]:
    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == question:
            return AFMessage("assistant", [Content.from_function_call("k1", tool_name, arguments="{}")])
        return AFMessage("assistant", ["ok"])
    return model


def _in_store(messages: list[Any]) -> str:
    return repr([m.model_dump() for m in messages])


def _agent(memory: Memory, client: Any, tools: list[Any], middleware: list[Any] | None = None) -> Agent[Any]:
    return Agent(client, "APP", tools=tools, middleware=middleware,
                 context_providers=[ObservationalMemoryProvider(memory, resource_id="u")])


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["agent", "run", "client"])
async def test_a_result_the_app_redacts_is_stored_redacted(where: str, stream: bool, client_kind: str) -> None:
    client = STREAMS[client_kind](_model("which card?", "card_on_file"),
                                  middleware=[Redact()] if where == "client" else None)
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [card_on_file], [Redact()] if where == "agent" else None)
        session = agent.create_session(session_id="c1")
        if where == "run":
            response: Any = agent.run("which card?", session=session, middleware=[Redact()], stream=stream)
            if stream:
                async for _ in response:
                    pass
            else:
                await response
        else:
            await _run(agent, "which card?", session, stream)
        assert _results(client.calls[-1]) == ["card [card]"]
        await _run(agent, "thanks", session, stream)
        assert _problems(client.calls[-1]) == []
        assert _results(client.calls[-1]) == ["card [card]"]
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["k1"], ["card [card]"])
        assert CARD not in _in_store(stored)


@pytest.mark.parametrize("client_kind", list(STREAMS))
@pytest.mark.parametrize("stream", [False, True])
async def test_a_failure_the_app_answers_is_stored_as_its_answer(stream: bool, client_kind: str) -> None:
    client = STREAMS[client_kind](_model("which card?", "broken_card_service"))
    async with Memory("memory://", config=QUIET) as memory:
        agent = _agent(memory, client, [broken_card_service], [Fallback()])
        session = agent.create_session(session_id="c1")
        await _run(agent, "which card?", session, stream)
        await _run(agent, "thanks", session, stream)
        said = "the card service is down, try later"
        assert _results(client.calls[-1]) == [said]
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["k1"], [said])
        assert CARD not in _in_store(stored)


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_stopped_stream_under_the_apps_middleware_stores_no_raw_result(
    client_kind: str, tmp_path: Path
) -> None:
    """The trade-off: with the app's function middleware, a run the app stops reading once the
    result shows (no next model call, no run's end) leaves the result unstored rather than stored
    as the tool returned it; the question stays."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    kept: list[Any] = []
    async with Memory(url, config=QUIET) as memory:
        client = STREAMS[client_kind](_model("which card?", "card_on_file"))
        await _stop_after_results(_agent(memory, client, [card_on_file], [Redact()]), "which card?", kept)
        assert CARD not in _in_store(await memory.list_messages("c1"))
    async with Memory(url, config=QUIET) as memory:  # a new process
        client = STREAMS[client_kind](_model("which card?", "card_on_file"))
        agent = _agent(memory, client, [card_on_file], [Redact()])
        await agent.run("thanks", session=agent.create_session(session_id="c1"))
        assert _problems(client.calls[-1]) == []
        stored = await memory.list_messages("c1")
        assert [m.text.strip() for m in stored if m.role == "user"] == ["which card?", "thanks"]
        assert CARD not in _in_store(stored)


@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_a_run_of_the_same_client_begun_meanwhile_stores_no_raw_result(client_kind: str) -> None:
    """Two agents over one client: the second run begins while the first (under the app's
    middleware) waits for its model; the first's tool then runs, and is stored redacted."""
    waiting, go = asyncio.Event(), asyncio.Event()
    first = _model("which card?", "card_on_file")

    async def model(sent: list[AFMessage]) -> AFMessage:
        if sent[-1].role == "user" and sent[-1].text == "which card?":
            waiting.set()
            await go.wait()
        return await first(sent)

    client = STREAMS[client_kind](model)
    async with Memory("memory://", config=QUIET) as memory:
        redacting = _agent(memory, client, [card_on_file], [Redact()])
        plain = _agent(memory, client, [card_on_file])
        task = asyncio.create_task(_run(redacting, "which card?", redacting.create_session(session_id="c1"), False))
        await waiting.wait()
        await _run(plain, "hello", plain.create_session(session_id="c2"), False)
        go.set()
        await task
        stored = await memory.list_messages("c1")
        assert _stored(stored) == (["k1"], ["card [card]"])
        assert CARD not in _in_store(stored)

"""LangChain v1 / LangGraph: an agent that removes messages from its state (``RemoveMessage``,
``REMOVE_ALL_MESSAGES``), as LangChain's short-term-memory docs show for trimming. The middleware
kept every removed message and sent it to the model again (as raw tail), so the app's removal
did nothing. A message the app removes from a checkpointed state is the app's removal: obsmem
deletes it from the thread (observations already made from it stay), and a tool call goes with
its results, so the model never gets one without the other. Without a checkpointer, earlier
runs' messages are not in the state: their absence removes nothing.

The agent is LangChain's own (``create_agent``); the model records what it gets.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import after_model, before_model
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

from .test_langchain_review import RecordingModel

pytestmark = pytest.mark.anyio


class Recording(RecordingModel):
    """test_langchain_review's recording model, answering on the event loop."""

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._generate(messages)  # on the event loop (no thread): runs at once interleave the same way each time


def numbered() -> Recording:
    def answer(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(f"answer to {messages[-1].text}")

    return Recording(answer=answer, requests=[])


def said(messages: list[BaseMessage]) -> list[str]:
    """The conversation the model got (obsmem's system message aside)."""
    return [m.text for m in messages if isinstance(m, HumanMessage | AIMessage | ToolMessage)]


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


async def ask(agent: Any, thread: str, text: str) -> dict[str, Any]:
    result: dict[str, Any] = await agent.ainvoke({"messages": [("user", text)]}, config(thread))
    return result


@after_model
def keep_last_two(state: Any, runtime: Any) -> dict[str, Any] | None:
    """LangChain's docs: delete the earliest messages once there are more than two."""
    messages = state["messages"]
    if len(messages) > 2:
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:-2]]}
    return None


@before_model
def first_and_recent(state: Any, runtime: Any) -> dict[str, Any] | None:
    """LangChain's docs: trim to the first message and the most recent ones before each call."""
    messages = state["messages"]
    if len(messages) <= 3:
        return None
    recent = messages[-3:] if len(messages) % 2 == 0 else messages[-4:]
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), messages[0], *recent]}


async def test_messages_deleted_after_the_model_call_are_not_sent_again() -> None:
    model = numbered()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[keep_last_two, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        for question in ["q1", "q2", "q3"]:
            await ask(agent, "lc-rm1", question)
        assert said(model.requests[-1]) == ["q2", "answer to q2", "q3"]  # q1 and its answer were removed
        assert [m.text for m in await memory.list_messages("lc-rm1")] == ["q3", "answer to q3"]


async def test_a_trimmed_state_is_what_the_model_gets_and_nothing_is_stored_twice() -> None:
    model = numbered()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[first_and_recent, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        for question in ["q1", "q2", "q3", "q4"]:
            result = await ask(agent, "lc-rm2", question)
        state = [m.text for m in result["messages"]]
        assert said(model.requests[-1]) == state[:-1]  # what the state held at the call
        stored = [m.text for m in await memory.list_messages("lc-rm2")]
        assert stored == state
        assert len(stored) == len(set(stored))


async def test_a_message_removed_between_runs_is_not_sent_again() -> None:
    model = numbered()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        result = await ask(agent, "lc-rm3", "My card number is 4111 1111 1111 1111, pay the bill.")
        await ask(agent, "lc-rm3", "Thanks.")
        secret = result["messages"][0]
        await agent.aupdate_state(config("lc-rm3"), {"messages": [RemoveMessage(id=secret.id)]})
        await ask(agent, "lc-rm3", "What did I ask first?")
        assert said(model.requests[-1]) == [
            "answer to My card number is 4111 1111 1111 1111, pay the bill.", "Thanks.", "answer to Thanks.",
            "What did I ask first?",
        ]
        assert secret.text not in [m.text for m in await memory.list_messages("lc-rm3")]


async def test_removing_a_tool_call_takes_its_result_with_it() -> None:
    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: snow"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "weather" in last.text:
            return AIMessage("", tool_calls=[{"id": f"call-{len(messages)}", "name": "weather", "args": {"city": "Oslo"}}])
        return AIMessage(f"answer to {last.text}")

    @after_model
    def drop_tool_calls(state: Any, runtime: Any) -> dict[str, Any] | None:
        """Removes the model's tool-calling messages once answered (their results stay: an
        orphan in the state)."""
        messages = state["messages"]
        if isinstance(messages[-1], AIMessage) and not messages[-1].tool_calls:
            calls = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
            return {"messages": [RemoveMessage(id=m.id) for m in calls]} if calls else None
        return None

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[weather],
                             middleware=[drop_tool_calls, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        await ask(agent, "lc-rm4", "What's the weather in Oslo?")
        await ask(agent, "lc-rm4", "And tomorrow?")
        last = model.requests[-1]
        assert not any(isinstance(m, ToolMessage) for m in last)  # no result without its call
        assert said(last) == ["What's the weather in Oslo?", "answer to Oslo: snow", "And tomorrow?"]
        stored = await memory.list_messages("lc-rm4")
        assert not any(m.tool_calls or m.tool_results for m in stored)


async def test_without_a_checkpointer_earlier_runs_are_kept() -> None:
    model = numbered()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        for question in ["q1", "q2", "q3"]:
            await ask(agent, "lc-rm5", question)
        assert said(model.requests[-1]) == ["q1", "answer to q1", "q2", "answer to q2", "q3"]
        assert len(await memory.list_messages("lc-rm5")) == 6


async def test_a_removal_between_two_model_calls_of_one_run_is_not_sent() -> None:
    """The app trims before every model call; within one run's tool loop (obsmem's turn open),
    what it removed before the second call is not in that call."""

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return f"{word}: a small dog"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "look up" in last.text:
            return AIMessage("", tool_calls=[{"id": f"call-{len(model.requests)}", "name": "lookup", "args": {"word": "pug"}}])
        return AIMessage(f"answer to {last.text}")

    @before_model
    def only_this_run(state: Any, runtime: Any) -> dict[str, Any] | None:
        """Keeps the state to the newest question and what follows it."""
        messages = state["messages"]
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:start]]} if start else None

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[lookup],
                             middleware=[only_this_run, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        await ask(agent, "lc-rm6", "Hello.")
        await ask(agent, "lc-rm6", "Please look up pug.")
        assert said(model.requests[-2]) == ["Please look up pug."]
        assert said(model.requests[-1]) == ["Please look up pug.", "", "pug: a small dog"]
        assert [(m.role, m.text) for m in await memory.list_messages("lc-rm6")] == [
            ("user", "Please look up pug."), ("assistant", ""), ("tool", ""), ("assistant", "answer to pug: a small dog"),
        ]


async def test_replacing_the_state_with_new_copies_keeps_one_of_each() -> None:
    """``REMOVE_ALL_MESSAGES`` and the kept messages again as new objects without ids (as a
    summarizing middleware writes them): the old ones go, the copies are the conversation."""

    @before_model
    def rewrite(state: Any, runtime: Any) -> dict[str, Any] | None:
        messages = state["messages"]
        if len(messages) < 5:
            return None
        copies = [type(m)(content=m.content) for m in messages[-3:]]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Summary: we talked."), *copies]}

    model = numbered()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[rewrite, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        for question in ["q1", "q2", "q3", "q4"]:
            result = await ask(agent, "lc-rm7", question)
        state = [m.text for m in result["messages"]]
        assert said(model.requests[-1]) == state[:-1]
        assert [m.text for m in await memory.list_messages("lc-rm7")] == state


async def test_removing_messages_already_observed_leaves_the_thread_working() -> None:
    """Messages observed already (their observations stay) and then removed by the app: the run
    goes on, nothing raw of them is sent, and later turns are observed as before."""
    from obsmem import MemoryConfig, ObservationConfig

    model = numbered()
    small = MemoryConfig(observation=ObservationConfig(message_tokens=60, buffer_tokens=False))
    async with Memory("memory://", config=small) as memory:
        agent = create_agent(model, middleware=[keep_last_two, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        for n in range(8):
            await ask(agent, "lc-rm8", f"Fact {n}: my dog Rex likes walking in the park number {n}.")
        last = said(model.requests[-1])
        assert last[-1] == "Fact 7: my dog Rex likes walking in the park number 7."
        assert not any(text.startswith(("Fact 0", "Fact 1", "Fact 2", "Fact 3", "Fact 4", "Fact 5")) for text in last)
        assert await memory.get_record("lc-rm8") is not None  # observed along the way
        assert [m.text for m in await memory.list_messages("lc-rm8")] == [
            "Fact 7: my dog Rex likes walking in the park number 7.",
            "answer to Fact 7: my dog Rex likes walking in the park number 7.",
        ]


async def test_one_obsmem_thread_over_several_checkpointed_conversations_loses_nothing() -> None:
    """The obsmem thread is the user's (``thread_id=`` fixed), each chat a LangGraph thread of its
    own: a new chat's state does not hold the earlier chat's messages, and that is no removal."""
    model = numbered()
    async with Memory("memory://") as memory:
        middleware = ObservationalMemoryMiddleware(memory, thread_id="user-42", resource_id="u")
        agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
        await ask(agent, "chat-1", "My dog is Rex.")
        await ask(agent, "chat-2", "What is my dog called?")
        assert said(model.requests[-1]) == ["My dog is Rex.", "answer to My dog is Rex.", "What is my dog called?"]
        await ask(agent, "chat-1", "Thanks.")
        assert [m.text for m in await memory.list_messages("user-42")] == [
            "My dog is Rex.", "answer to My dog is Rex.", "What is my dog called?",
            "answer to What is my dog called?", "Thanks.", "answer to Thanks.",
        ]


def assert_both_saved_once(stored: list[str], *, before: list[str]) -> None:
    """Both runs' questions and answers stored once each after ``before``: the first question
    (its model call came first) before the second, each answer after its question. Whether the
    second question (saved at its model call) or the first answer (saved at the first run's end)
    comes first is the event loop's to decide: both orders are right."""
    assert stored[: len(before)] == before
    rest = stored[len(before):]
    assert sorted(rest) == sorted(["pug", "corgi", "answer to pug", "answer to corgi"]), stored
    assert rest.index("pug") < rest.index("corgi") < rest.index("answer to corgi"), stored
    assert rest.index("pug") < rest.index("answer to pug"), stored


async def test_two_runs_of_one_thread_at_once_delete_nothing() -> None:
    """A double-submitted request: two runs of one thread at once, no checkpointer. Each run's
    state holds only its own messages; neither is a removal of the other's. (The runs are made
    to meet in one order: both begin, then the first one's model call, then the second one's.)"""
    import asyncio

    from langchain.agents.middleware import before_agent

    began, first_called = asyncio.Event(), asyncio.Event()

    @before_agent
    async def note_second(state: Any, runtime: Any) -> None:
        if state["messages"][-1].text == "corgi":
            began.set()

    @before_model
    async def in_order(state: Any, runtime: Any) -> None:
        await (began if state["messages"][-1].text == "pug" else first_called).wait()

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].text == "pug":
            first_called.set()
        return AIMessage(f"answer to {messages[-1].text}")

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[note_second, in_order, ObservationalMemoryMiddleware(memory, resource_id="u")])
        await asyncio.gather(ask(agent, "lc-rm9", "pug"), ask(agent, "lc-rm9", "corgi"))
        # as saved: each question at its model call, each answer at its run's end; none deleted and
        # saved again (the second run's state lacks the first's question: no removal)
        assert_both_saved_once([m.text for m in await memory.list_messages("lc-rm9")], before=[])


async def test_two_runs_of_one_checkpointed_thread_at_once_delete_nothing() -> None:
    """The same with a checkpointer: both runs begin from the same checkpoint, each adds its own
    question; the second run's state lacking the first one's question is no removal."""
    import asyncio

    from langchain.agents.middleware import before_agent

    began, first_called = asyncio.Event(), asyncio.Event()

    @before_agent
    async def note_second(state: Any, runtime: Any) -> None:
        if state["messages"][-1].text == "corgi":
            began.set()

    @before_model
    async def in_order(state: Any, runtime: Any) -> None:
        if state["messages"][-1].text in ("pug", "corgi"):
            await (began if state["messages"][-1].text == "pug" else first_called).wait()

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].text == "pug":
            first_called.set()
        return AIMessage(f"answer to {messages[-1].text}")

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[note_second, in_order, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        await ask(agent, "lc-rm10", "hello")
        await asyncio.gather(ask(agent, "lc-rm10", "pug"), ask(agent, "lc-rm10", "corgi"))
        assert_both_saved_once(
            [m.text for m in await memory.list_messages("lc-rm10")], before=["hello", "answer to hello"]
        )


async def test_removing_one_result_of_parallel_calls_takes_the_whole_step() -> None:
    """Two parallel calls; the app removes one result only (its call stays in the state, without
    it). The model never gets a call without its result: the step (the calls' message and both
    results) leaves obsmem, the rest of the conversation stays."""

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: snow"

    def answer(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and "weather" in last.text:
            return AIMessage("Looking.", tool_calls=[
                {"id": "call-oslo", "name": "weather", "args": {"city": "Oslo"}},
                {"id": "call-rome", "name": "weather", "args": {"city": "Rome"}},
            ])
        return AIMessage(f"answer to {last.text}")

    @after_model
    def drop_rome(state: Any, runtime: Any) -> dict[str, Any] | None:
        rome = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "call-rome"]
        return {"messages": [RemoveMessage(id=m.id) for m in rome]} if rome else None

    model = Recording(answer=answer, requests=[])
    async with Memory("memory://") as memory:
        agent = create_agent(model, tools=[weather],
                             middleware=[drop_rome, ObservationalMemoryMiddleware(memory, resource_id="u")],
                             checkpointer=InMemorySaver())  # fmt: skip
        await ask(agent, "lc-rm11", "What's the weather in Oslo and Rome?")
        await ask(agent, "lc-rm11", "Thanks.")
        last = model.requests[-1]
        calls = {c["id"] for m in last if isinstance(m, AIMessage) for c in m.tool_calls}
        results = {m.tool_call_id for m in last if isinstance(m, ToolMessage)}
        assert calls == results == set()
        assert said(last)[0] == "What's the weather in Oslo and Rome?" and said(last)[-1] == "Thanks."
        assert not any(m.tool_calls or m.tool_results for m in await memory.list_messages("lc-rm11"))

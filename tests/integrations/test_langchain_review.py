"""LangChain v1: what a user of ``create_agent`` with ObservationalMemoryMiddleware sees, for the
cases a hostile review found: content blocks obsmem has no part for, provider message ids that
repeat, a ``@dynamic_prompt`` middleware beside obsmem, and several system messages in the state.

The agent is LangChain's own (``create_agent``); the model is a fake chat model that records the
messages it gets and answers by a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, after_model, dynamic_prompt
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.integrations.langchain import ObservationalMemoryMiddleware, from_langchain, to_langchain
from obsmem.types import DataPart, FilePart, TextPart

pytestmark = pytest.mark.anyio


class RecordingModel(BaseChatModel):
    """A chat model that keeps every list of messages it gets and answers ``answer(messages)``."""

    answer: Callable[[list[BaseMessage]], AIMessage]
    requests: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "recording"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.requests.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=self.answer(messages))])


def recording(answer: Callable[[list[BaseMessage]], AIMessage] | None = None) -> RecordingModel:
    return RecordingModel(answer=answer or (lambda messages: AIMessage("ok")), requests=[])


def small_memory_config(message_tokens: int) -> MemoryConfig:
    """Observation after a few short turns (obsmem's offline observer), at each turn's boundary."""
    return MemoryConfig(observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False))


def config(thread: str, **extra: str) -> Any:
    return {"configurable": {"thread_id": thread, **extra}}


def system_text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(str(m.text) for m in messages if isinstance(m, SystemMessage))


# -- 1. a message of content blocks obsmem has no part for ------------------------------------------

UNKNOWN_BLOCKS: dict[str, list[str | dict[str, Any]]] = {
    "openai input_audio": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}],
    "anthropic document": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    ],
    "text-plain": [{"type": "text-plain", "text": "contract clause 7: the tenant pays", "mime_type": "text/plain"}],
    "non_standard": [{"type": "non_standard", "value": {"type": "custom", "text": "hello"}}],
    "document and text": [
        {"type": "text", "text": "summarise this"},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/lease.pdf"}, "title": "lease"},
    ],
}


@pytest.mark.parametrize("kind", list(UNKNOWN_BLOCKS))
async def test_an_input_of_blocks_obsmem_has_no_part_for_reaches_the_model_as_sent(kind: str) -> None:
    content = UNKNOWN_BLOCKS[kind]
    baseline = recording()  # what the model gets without obsmem (LangChain normalises some blocks)
    await create_agent(baseline).ainvoke({"messages": [HumanMessage(content=content, id="in")]})
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [HumanMessage(content=content, id="in")]}, config("c"))
        stored = await memory.list_messages("c")
    [request] = model.requests
    humans = [m for m in request if isinstance(m, HumanMessage)]
    assert [m.id for m in humans] == ["in"]  # the input, as the user sent it
    assert [without_ids(m.content) for m in humans] == [without_ids(baseline.requests[0][-1].content)]
    assert [m.role for m in stored] == ["user", "assistant"]  # stored once, in order


def without_ids(content: Any) -> Any:
    """``content`` without the random ids LangChain gives the blocks it normalises (``lc_…``)."""
    if isinstance(content, list):
        return [
            {k: v for k, v in b.items() if not (k == "id" and str(v).startswith("lc_"))} if isinstance(b, dict) else b
            for b in content
        ]
    return content


async def test_an_input_of_unknown_blocks_after_history_is_the_newest_message_the_model_gets() -> None:
    document = UNKNOWN_BLOCKS["anthropic document"]
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke(
            {"messages": [HumanMessage("hi"), AIMessage("hello"), HumanMessage(content=document, id="doc")]},
            config("c"),
        )
        stored = await memory.list_messages("c")
    [request] = model.requests
    assert [type(m).__name__ for m in request] == ["HumanMessage", "AIMessage", "HumanMessage"]
    assert request[-1].content == document
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]


async def test_a_document_sent_earlier_stays_in_the_history_obsmem_sends() -> None:
    """Without a checkpointer the history comes from obsmem: the document of turn 1 is in turn 2's request."""
    document = UNKNOWN_BLOCKS["document and text"]
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        await agent.ainvoke({"messages": [HumanMessage(content=document)]}, config("c"))
        await agent.ainvoke({"messages": [HumanMessage("and the rent?")]}, config("c"))
        stored = await memory.list_messages("c")
    second = model.requests[-1]
    assert [m.content for m in second if isinstance(m, HumanMessage)] == [document, "and the rent?"]
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]


def test_a_part_stands_for_each_unknown_block_of_a_users_message_and_the_block_comes_back() -> None:
    sent = [HumanMessage(content=content, id=kind) for kind, content in UNKNOWN_BLOCKS.items()]
    converted = from_langchain(sent)
    shown = {m.id: [p for p in m.parts if not isinstance(p, DataPart)] for m in converted}
    assert shown["openai input_audio"] == [FilePart(media_type="audio/wav", data="UklGRg==")]
    assert shown["anthropic document"] == [FilePart(media_type="application/pdf", data="JVBERi0=")]
    assert shown["text-plain"] == [TextPart(text="contract clause 7: the tenant pays")]
    assert shown["non_standard"] == [TextPart(text="hello")]
    assert shown["document and text"][1] == FilePart(
        media_type="application/pdf", url="https://example.com/lease.pdf", filename="lease"
    )
    assert [m.content for m in to_langchain(converted)] == [m.content for m in sent]
    # in an assistant's message such a block stays data (never shown): it is not an attachment
    [answer] = from_langchain([AIMessage(content=[{"type": "server_tool_call", "id": "s1", "name": "web"}])])
    assert all(isinstance(p, DataPart) for p in answer.parts)


# -- 2. provider message ids ------------------------------------------------------------------------


def numbered_answers() -> Callable[[list[BaseMessage]], AIMessage]:
    count = [0]

    def answer(messages: list[BaseMessage]) -> AIMessage:
        count[0] += 1
        return AIMessage(f"answer number {count[0]}", id="chatcmpl-1")  # a server that repeats its id

    return answer


async def _three_questions(model: Any, checkpointed: bool) -> list[Message]:
    """Three runs of an agent with obsmem's middleware on thread ``c``; what obsmem stored."""
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
            checkpointer=InMemorySaver() if checkpointed else None,
        )
        for question in ["first question", "second question", "third question"]:
            await agent.ainvoke({"messages": [HumanMessage(question)]}, config("c"))
        return await memory.list_messages("c")


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_a_provider_that_repeats_its_message_id_loses_no_answer(checkpointed: bool) -> None:
    """(With a checkpointer LangGraph's state itself replaces the earlier answer of the same id;
    obsmem keeps the conversation as it happened and sends it to the model.)"""
    model = recording(numbered_answers())
    stored = await _three_questions(model, checkpointed)
    assert [m.text for m in stored] == [
        "first question", "answer number 1", "second question", "answer number 2", "third question", "answer number 3",
    ]
    last = model.requests[-1]
    assert [m.text for m in last if isinstance(m, AIMessage)] == ["answer number 1", "answer number 2"]
    assert not any(m.id == "chatcmpl-1" for m in stored)


async def test_the_same_provider_id_in_another_users_thread_does_not_fail_that_run() -> None:
    model = recording(lambda messages: AIMessage("an answer", id="chatcmpl-1"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)])
        for user in ["alice", "bob"]:
            result = await agent.ainvoke(
                {"messages": [HumanMessage(f"{user} here")]}, config(f"lc-{user}", user_id=user)
            )
            assert result["messages"][-1].text == "an answer"
        stored = {user: await memory.list_messages(f"lc-{user}") for user in ["alice", "bob"]}
    for user, messages in stored.items():
        assert [(m.role, m.text) for m in messages] == [("user", f"{user} here"), ("assistant", "an answer")]
        assert all(m.resource_id == user for m in messages)


async def _stateless_handler(model: Any) -> list[Message]:
    """Four requests, each with a new agent and middleware, the client sending the whole history
    back each time (``question 0`` … ``question 3``); what obsmem stored."""
    history: list[BaseMessage] = []
    async with Memory("memory://") as memory:
        for turn in range(4):
            agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
            state: Any = {"messages": [*history, HumanMessage(f"question {turn}")]}
            result = await agent.ainvoke(state, config("c"))
            history = result["messages"]
        return await memory.list_messages("c")


async def test_history_sent_again_with_repeated_ids_is_stored_once() -> None:
    """A stateless handler: a new agent and middleware per request, the client sends the whole
    history back each time; the provider repeats its message id."""
    stored = await _stateless_handler(recording(numbered_answers()))
    expected = [text for turn in range(4) for text in (f"question {turn}", f"answer number {turn + 1}")]
    assert [m.text for m in stored] == expected
    assert len({m.id for m in stored}) == len(stored)


def the_conversation(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.text)) for m in messages if not isinstance(m, SystemMessage)]


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_a_provider_that_repeats_its_message_id_and_its_answer_loses_no_answer(checkpointed: bool) -> None:
    """The server repeats ``chatcmpl-1`` and the answer is the same text each time: each answer is
    a message of its own, and the model never gets two user messages in a row."""
    model = recording(lambda messages: AIMessage("ok", id="chatcmpl-1"))
    stored = await _three_questions(model, checkpointed)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "first question"), ("assistant", "ok"), ("user", "second question"), ("assistant", "ok"),
        ("user", "third question"), ("assistant", "ok"),
    ]
    assert the_conversation(model.requests[-1]) == [
        ("human", "first question"), ("ai", "ok"), ("human", "second question"), ("ai", "ok"),
        ("human", "third question"),
    ]


async def test_history_sent_again_with_repeated_ids_and_answers_is_stored_once() -> None:
    """A stateless handler (a new agent and middleware per request, the client sends the whole
    history back): the server repeats its id and its answer; each answer is stored, once."""
    model = recording(lambda messages: AIMessage("ok", id="chatcmpl-1"))
    stored = await _stateless_handler(model)
    assert [m.text for m in stored] == [text for turn in range(4) for text in (f"question {turn}", "ok")]
    assert the_conversation(model.requests[-1]) == [
        pair for turn in range(4) for pair in (("human", f"question {turn}"), ("ai", "ok"))
    ][:-1]


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_an_edited_message_replaces_its_earlier_version(checkpointed: bool) -> None:
    """The user corrects an earlier message (same LangChain id, new text; LangGraph's state
    replaces it by id): the model gets the corrected message only, where the original was, and
    obsmem stores it in place."""
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
            checkpointer=InMemorySaver() if checkpointed else None,
        )
        first = await agent.ainvoke({"messages": [HumanMessage("I live in Paris", id="h1")]}, config("c"))
        edited: list[BaseMessage] = [
            HumanMessage("I live in Rome", id="h1"), HumanMessage("where do I live?", id="h2"),
        ]
        if not checkpointed:  # the app sends its history back, corrected
            edited.insert(1, first["messages"][-1])
        state: Any = {"messages": edited}
        await agent.ainvoke(state, config("c"))
        stored = await memory.list_messages("c")
    assert the_conversation(model.requests[-1]) == [
        ("human", "I live in Rome"), ("ai", "ok"), ("human", "where do I live?"),
    ]
    assert [m.text for m in stored] == ["I live in Rome", "ok", "where do I live?", "ok"]


@pytest.mark.parametrize("checkpointed", [False, True])
async def test_answers_a_middleware_rewrites_under_a_repeated_id_are_not_edits(checkpointed: bool) -> None:
    """A middleware after the model rewrites each answer under its id (as a redacting one does)
    and the server repeats its id: each answer is a new message, none takes an earlier's place."""
    count = [0]

    def answer(messages: list[BaseMessage]) -> AIMessage:
        count[0] += 1
        return AIMessage(f"call 555-000{count[0]}", id="chatcmpl-1")

    @after_model
    def redact(state: Any, runtime: Any) -> dict[str, Any]:
        last = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))  # the model's answer
        return {"messages": [AIMessage(str(last.text).replace("555-", "[phone] "), id=last.id)]}

    model = recording(answer)
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u"), redact],
            checkpointer=InMemorySaver() if checkpointed else None,
        )
        for question in ["q1", "q2", "q3"]:
            await agent.ainvoke({"messages": [HumanMessage(question)]}, config("c"))
        stored = await memory.list_messages("c")
    assert [m.text for m in stored if m.role == "user"] == ["q1", "q2", "q3"]
    assert [m.text for m in stored if m.role == "assistant"][-1] == "call [phone] 0003"
    assert len([m for m in stored if m.role == "assistant"]) == 3


async def test_an_edit_undone_is_stored_undone() -> None:
    """Paris, corrected to Rome, corrected back to Paris (same id each time): obsmem keeps what
    the state says, in the message's place."""
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")], checkpointer=InMemorySaver(),
        )
        for text, question in [("I live in Paris", "hi"), ("I live in Rome", "really?"), ("I live in Paris", "sure?")]:
            state: Any = {"messages": [HumanMessage(text, id="h1"), HumanMessage(question)]}
            await agent.ainvoke(state, config("c"))
        stored = await memory.list_messages("c")
    assert [m.text for m in stored] == ["I live in Paris", "hi", "ok", "really?", "ok", "sure?", "ok"]
    assert the_conversation(model.requests[-1])[0] == ("human", "I live in Paris")


async def test_an_edit_of_a_message_observed_already_reaches_the_model() -> None:
    """The earlier version is in the observations, no longer raw: the correction is not saved
    in its place (where the model would never see it) but as a new message."""
    model = recording(lambda messages: AIMessage("noted, " + "fine " * 30))
    async with Memory("memory://", config=small_memory_config(message_tokens=200)) as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")], checkpointer=InMemorySaver(),
        )
        await agent.ainvoke({"messages": [HumanMessage("I live in Paris", id="h1")]}, config("c"))
        for turn in range(8):
            await agent.ainvoke({"messages": [HumanMessage(f"turn {turn}: " + "y " * 30)]}, config("c"))
        record = await memory.get_record("c")
        assert record is not None and record.cursor("c") > 1  # "I live in Paris" is observed
        state: Any = {"messages": [HumanMessage("I live in Rome", id="h1"), HumanMessage("where do I live?")]}
        await agent.ainvoke(state, config("c"))
    sent = the_conversation(model.requests[-1])
    assert sent[-2:] == [("human", "I live in Rome"), ("human", "where do I live?")]


# -- 3. a @dynamic_prompt middleware beside obsmem ---------------------------------------------------

PERSONA = "You are a helpful travel agent."


@dynamic_prompt
def persona(request: ModelRequest) -> str:
    return PERSONA


@pytest.mark.parametrize("order", ["obsmem first", "obsmem last"])
async def test_observations_survive_a_dynamic_prompt_in_either_order(order: str) -> None:
    model = recording(lambda messages: AIMessage("noted, " + "fine " * 30))
    async with Memory("memory://", config=small_memory_config(message_tokens=200)) as memory:
        obsmem = ObservationalMemoryMiddleware(memory, resource_id="u")
        agent = create_agent(model, middleware=[obsmem, persona] if order == "obsmem first" else [persona, obsmem])
        for turn in range(10):
            await agent.ainvoke({"messages": [HumanMessage(f"turn {turn}: my cat is called Mittens{turn} " + "x " * 20)]},
                                config("c"))
        record = await memory.get_record("c")
    assert record is not None and record.active_observations.strip()
    last = model.requests[-1]
    seen = system_text(last)
    assert PERSONA in seen  # the app's prompt, as its middleware set it
    assert "<observations>" in seen  # and obsmem's observations
    assert "Mittens9" in str(last[-1].content)
    # what the model no longer gets raw (the observed turns), it gets as observations
    observed = [line.strip() for line in record.active_observations.splitlines() if "Mittens" in line]
    assert observed and all(line in seen for line in observed)
    assert not any("turn 0:" in str(m.content) for m in last if isinstance(m, HumanMessage))


# -- 4. several system messages in the agent's state -------------------------------------------------


async def test_every_system_message_of_the_state_reaches_the_model() -> None:
    model = recording()
    async with Memory("memory://") as memory:
        agent = create_agent(
            model, system_prompt="APP PROMPT", middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")],
            checkpointer=InMemorySaver(),
        )
        await agent.ainvoke(
            {"messages": [SystemMessage("POLICY: never give refunds over $50."), HumanMessage("hi")]}, config("c")
        )
        await agent.ainvoke(
            {"messages": [SystemMessage("Note: the user is on the Pro plan."), HumanMessage("I want a $500 refund")]},
            config("c"),
        )
        stored = await memory.list_messages("c")
    seen = system_text(model.requests[-1])
    assert "APP PROMPT" in seen and "POLICY" in seen and "Pro plan" in seen
    assert seen.index("APP PROMPT") < seen.index("POLICY") < seen.index("Pro plan")
    assert [m.text for m in stored if m.role == "system"] == [
        "POLICY: never give refunds over $50.", "Note: the user is on the Pro plan.",
    ]


async def test_state_system_messages_and_observations_are_both_sent_and_only_the_apps_are_stored() -> None:
    model = recording(lambda messages: AIMessage("noted, " + "fine " * 30))
    async with Memory("memory://", config=small_memory_config(message_tokens=200)) as memory:
        agent = create_agent(
            model, middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")], checkpointer=InMemorySaver(),
        )
        await agent.ainvoke({"messages": [SystemMessage("POLICY A"), HumanMessage("hello")]}, config("c"))
        for turn in range(8):
            messages: list[Any] = [HumanMessage(f"turn {turn}: my dog is Rex{turn} " + "y " * 20)]
            if turn == 3:
                messages.insert(0, SystemMessage("POLICY B"))
            await agent.ainvoke({"messages": messages}, config("c"))
        stored = await memory.list_messages("c")
        record = await memory.get_record("c")
    assert record is not None and record.active_observations.strip()
    seen = system_text(model.requests[-1])
    assert "POLICY A" in seen and "POLICY B" in seen and "<observations>" in seen
    assert [m.text for m in stored if m.role == "system"] == ["POLICY A", "POLICY B"]
    # the model's request: the system messages first, then the conversation
    last = model.requests[-1]
    kinds = [isinstance(m, SystemMessage) for m in last]
    assert kinds == sorted(kinds, reverse=True)

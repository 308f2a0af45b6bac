"""pydantic-ai's Agent with obsmem's capability, from the user's side (review findings).

Each test drives a real :class:`pydantic_ai.Agent` through pydantic-ai's ``FunctionModel`` and
asserts on what the model received and what obsmem stored:

- the app's ``system_prompt`` leads every request as a system prompt (never moved into the
  conversation as ``<system>`` user text) and is stored once while it stays the same;
- a ``message_history`` from another conversation reaches the model and is stored in the run's
  thread, once, in order, leaving the conversation it came from as it was;
- user content obsmem's converter had no part for (``TextContent``, ``StructuredContent``,
  ``UploadedFile``, ``CachePoint``) reaches the model in later turns as it was, and the text of
  it is observed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.integrations.pydantic_ai import ObservationalMemory, from_pydantic_ai, to_pydantic_ai
from obsmem.om.context import model_visible
from obsmem.types import FilePart, Message, TextPart

pytestmark = pytest.mark.anyio

SYSTEM = "STATIC-SYS: never reveal secrets."


def small_memory_config(*, message_tokens: int = 400) -> MemoryConfig:
    """Thresholds small enough that a few short turns are observed by the offline observer, at
    turn boundaries (no buffering)."""
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=4000),
    )


class Recorder:
    """A FunctionModel function: records every request; asks for the weather tool when the newest
    user prompt mentions the weather (once), else answers with a numbered text."""

    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        last = messages[-1]
        wants_tool = any(
            isinstance(p, pai.UserPromptPart) and isinstance(p.content, str) and "weather" in p.content
            for p in last.parts
        )
        if wants_tool and info.function_tools:
            return pai.ModelResponse(parts=[pai.ToolCallPart("get_weather", {"city": "Lyon"})])
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(self.calls)}")])


def _parts(call: list[pai.ModelMessage]) -> list[Any]:
    return [part for message in call for part in message.parts]


def _item_prompts(call: list[pai.ModelMessage]) -> list[pai.UserPromptPart]:
    """The user prompts made of items (not one string)."""
    return [p for p in _parts(call) if isinstance(p, pai.UserPromptPart) and not isinstance(p.content, str)]


def _texts(call: list[pai.ModelMessage]) -> list[str]:
    """The text of every user prompt and text response part the model got, in order."""
    out: list[str] = []
    for part in _parts(call):
        if isinstance(part, pai.UserPromptPart):
            out.append(part.content if isinstance(part.content, str) else repr(part.content))
        elif isinstance(part, pai.TextPart):
            out.append(part.content)
    return out


def _assert_leads(call: list[pai.ModelMessage], system: str) -> None:
    """The request starts with the system prompt ``system``, and holds no other system prompt
    and no user text carrying it."""
    first = call[0]
    assert isinstance(first, pai.ModelRequest)
    assert isinstance(first.parts[0], pai.SystemPromptPart) and first.parts[0].content == system
    systems = [p for p in _parts(call) if isinstance(p, pai.SystemPromptPart)]
    assert len(systems) == 1, systems
    user_texts = [str(p.content) for p in _parts(call) if isinstance(p, pai.UserPromptPart)]
    assert not [text for text in user_texts if "STATIC-SYS" in text]


def _agent(memory: Memory, model: Recorder, **options: Any) -> Agent[None, str]:
    return Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")], **options)


def _prompt(turn: int) -> str:
    if turn == 3:
        return "What is the weather in Lyon today?"
    return f"Turn {turn}: I like hiking number {turn} with my dog Rex near the lake of Annecy in summer."


async def test_the_system_prompt_leads_every_request_and_is_stored_once() -> None:
    memory = Memory("memory://", config=small_memory_config(message_tokens=200))
    model = Recorder()
    agent = _agent(memory, model, system_prompt=SYSTEM)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"{city}: sunny"

    for turn in range(10):
        await agent.run(_prompt(turn), conversation_id="c1")
    assert len(model.calls) == 11  # one run called the tool: two requests
    for call in model.calls:
        _assert_leads(call, SYSTEM)
    # earlier turns were observed and left the request: the system prompt did not
    assert await memory.get_record("c1") is not None
    assert _prompt(0) not in _texts(model.calls[-1])

    stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "system"] == [SYSTEM]
    assert [m.text for m in stored if m.role == "user"] == [_prompt(t) for t in range(10)]
    context = await memory.get_context("c1")
    assert [m.text for m in context.instructions] == [SYSTEM]
    await memory.aclose()


async def test_a_changed_system_prompt_leads_and_becomes_the_instructions() -> None:
    memory = Memory("memory://", config=small_memory_config())
    model = Recorder()
    current = ["STATIC-SYS: version A."]
    agent = _agent(memory, model)

    @agent.system_prompt
    def system() -> str:
        return current[0]

    versions = ["STATIC-SYS: version A.", "STATIC-SYS: version B.", "STATIC-SYS: version A."]
    for turn, version in enumerate(versions):
        current[0] = version
        await agent.run(f"question {turn}", conversation_id="c1")
        _assert_leads(model.calls[-1], version)
        context = await memory.get_context("c1")
        assert [m.text for m in context.instructions] == [version]
    stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "system"] == versions  # each change stored once
    await memory.aclose()


async def test_a_system_prompt_passed_back_in_the_history_is_stored_once_and_leads() -> None:
    memory = Memory("memory://", config=small_memory_config(message_tokens=200))
    model = Recorder()
    agent = _agent(memory, model, system_prompt=SYSTEM)
    history: list[pai.ModelMessage] = []
    for turn in range(6):
        prompt = _prompt(turn if turn != 3 else 30)
        result = await agent.run(prompt, conversation_id="c1", message_history=history)
        history = result.all_messages()
    for call in model.calls:
        _assert_leads(call, SYSTEM)
    stored = await memory.list_messages("c1")
    assert [m.text for m in stored if m.role == "system"] == [SYSTEM]
    await memory.aclose()


async def test_a_history_from_another_conversation_reaches_the_model_and_is_stored_once() -> None:
    memory = Memory("memory://", config=small_memory_config())
    model = Recorder()
    agent = _agent(memory, model, system_prompt=SYSTEM)
    first = await agent.run("My name is Dana and my flight is LH123.", conversation_id="a")
    in_a = await memory.list_messages("a")

    question = "What is my flight number?"
    forked = await agent.run(question, conversation_id="b", message_history=first.all_messages())
    # the model got the whole history, as pydantic-ai without obsmem sends it
    _assert_leads(model.calls[-1], SYSTEM)
    assert _texts(model.calls[-1]) == ["My name is Dana and my flight is LH123.", "answer 1", question]
    stored_b = await memory.list_messages("b")
    assert [(m.role, m.text) for m in stored_b] == [
        ("system", SYSTEM), ("user", "My name is Dana and my flight is LH123."), ("assistant", "answer 1"),
        ("user", "What is my flight number?"), ("assistant", "answer 2"),
    ]
    assert not {m.id for m in stored_b} & {m.id for m in in_a}
    assert [m.model_dump() for m in await memory.list_messages("a")] == [m.model_dump() for m in in_a]

    # passing b's history back to b stores nothing twice; a's own history goes on in a as before
    await agent.run("And my name?", conversation_id="b", message_history=forked.all_messages())
    assert _texts(model.calls[-1])[-2:] == ["answer 2", "And my name?"]
    assert [m.text for m in await memory.list_messages("b")][len(stored_b):] == ["And my name?", "answer 3"]
    await agent.run("Thanks!", conversation_id="a", message_history=first.all_messages())
    assert _texts(model.calls[-1]) == ["My name is Dana and my flight is LH123.", "answer 1", "Thanks!"]
    texts_a = [m.text for m in await memory.list_messages("a")]
    assert texts_a == [*(m.text for m in in_a), "Thanks!", "answer 4"]

    # the same foreign history passed to b again is the same messages: stored once
    before = len(await memory.list_messages("b"))
    await agent.run("Once more?", conversation_id="b", message_history=first.all_messages())
    assert [m.text for m in await memory.list_messages("b")][before:] == ["Once more?", "answer 5"]
    await memory.aclose()


async def test_a_history_converted_from_obsmem_messages_never_stored_reaches_the_model() -> None:
    memory = Memory("memory://", config=small_memory_config())
    model = Recorder()
    agent = _agent(memory, model)
    said = [Message.user("My flight is LH123."), Message.assistant("Noted.")]
    history = to_pydantic_ai(said)  # tagged with the ids of messages no thread holds
    await agent.run("Which flight?", conversation_id="c", message_history=history)
    assert _texts(model.calls[-1]) == ["My flight is LH123.", "Noted.", "Which flight?"]
    stored = await memory.list_messages("c")
    assert [(m.id, m.text) for m in stored[:2]] == [(m.id, m.text) for m in said]  # under their own ids
    assert [m.text for m in stored[2:]] == ["Which flight?", "answer 1"]
    await agent.run("And again?", conversation_id="c", message_history=history)
    assert _texts(model.calls[-1])[:2] == ["My flight is LH123.", "Noted."]
    assert [m.text for m in await memory.list_messages("c")][4:] == ["And again?", "answer 2"]  # nothing twice
    await memory.aclose()


PASSPORT = "My passport number is X1234567."
CONTENT: dict[str, list[Any]] = {
    "text-content": [pai.TextContent(PASSPORT, metadata={"source": "form", "field": 7})],
    "structured-content": [pai.StructuredContent({"passport": "X1234567", "cart": ["shoes"]})],
    "uploaded-file": [
        "summarize this",
        pai.UploadedFile(file_id="file-X1234567", provider_name="openai", media_type="application/pdf"),
    ],
    "with-cache-point": ["look:", pai.TextContent(PASSPORT, metadata={"k": 1}), pai.CachePoint()],
}


def _dumped(content: list[Any]) -> Any:
    request = pai.ModelRequest(parts=[pai.UserPromptPart(content)])
    return pai.ModelMessagesTypeAdapter.dump_python([request], mode="json")[0]["parts"][0]["content"]


@pytest.mark.parametrize("name", list(CONTENT))
async def test_content_obsmem_has_no_part_for_reaches_later_turns_and_is_observed(name: str) -> None:
    content = CONTENT[name]
    memory = Memory("memory://", config=small_memory_config())
    model = Recorder()
    agent = _agent(memory, model)
    await agent.run(content, conversation_id="c1")
    await agent.run("What did I just give you?", conversation_id="c1")
    await agent.run("Anything else?", conversation_id="c1")
    for call in model.calls:
        assert [_dumped(list(p.content)) for p in _item_prompts(call)] == [_dumped(content)]  # as given

    stored = await memory.list_messages("c1")
    first = stored[0]
    if name == "uploaded-file":
        files = [p for p in first.parts if isinstance(p, FilePart)]
        assert len(files) == 1 and files[0].media_type == "application/pdf"
    else:
        assert "X1234567" in first.text
    await memory.observe("c1")
    record = await memory.get_record("c1")
    assert record is not None and "X1234567" in record.active_observations
    # once observed, the content left the request; the model has it from the observations
    await agent.run("Remind me?", conversation_id="c1")
    last = model.calls[-1]
    assert _item_prompts(last) == []
    await memory.aclose()


def test_user_content_maps_to_visible_parts_and_comes_back_from_a_context() -> None:
    """What a context holds of a message (its parts without data parts) converts back to the
    message as it was: text items with their metadata and values, uploaded files, cache points;
    a response keeps its known parts' details beside a native tool part obsmem has no type for."""
    when = datetime(2026, 3, 1, 12, tzinfo=UTC)
    request = pai.ModelRequest([pai.UserPromptPart([
        "look:", pai.TextContent(PASSPORT, metadata={"k": 1}), pai.StructuredContent({"cart": ["shoes"]}),
        pai.UploadedFile(file_id="file-X1234567", provider_name="openai", media_type="application/pdf"),
        pai.CachePoint(),
    ], timestamp=when)])
    response = pai.ModelResponse([
        pai.NativeToolCallPart("web_search", {"query": "Lyon"}, tool_call_id="ws_1", provider_name="openai"),
        pai.TextPart("Found it.", id="msg_1"),
    ], timestamp=when, model_name="gpt-test", provider_response_id="r1")
    converted = from_pydantic_ai([request, response])
    user, assistant = converted
    assert [type(p) for p in user.parts] == [TextPart, TextPart, TextPart, FilePart]
    assert user.parts[1] == TextPart(text=PASSPORT) and '"cart"' in user.text
    assert user.parts[3] == FilePart(media_type="application/pdf", filename="file-X1234567")
    shown = [m for m in (model_visible(m) for m in converted) if m is not None]
    dump = pai.ModelMessagesTypeAdapter.dump_python
    back = dump(to_pydantic_ai(shown), mode="json")
    for message in back:
        message["metadata"] = None  # (the obsmem ids)
    expected = dump([request, pai.ModelResponse(
        [pai.TextPart("Found it.", id="msg_1")], timestamp=when, model_name="gpt-test", provider_response_id="r1"
    )], mode="json")
    assert back == expected

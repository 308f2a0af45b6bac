"""ScriptedModel and FunctionModel: the public test doubles behave like a provider, predictably."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from obsmem.errors import ModelOutputError, ModelUnavailableError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, Usage
from obsmem.models.testing import FunctionModel, ScriptedModel
from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart

HELLO = [Message.user("hello world")]  # 11 characters → 3 estimated input tokens


@pytest.mark.parametrize("cls", [ScriptedModel, FunctionModel])
def test_doubles_are_chat_models_and_not_collected(cls: type[ScriptedModel | FunctionModel]) -> None:
    assert cls.__test__ is False
    model = ScriptedModel([]) if cls is ScriptedModel else FunctionModel(lambda m, s: "")
    assert isinstance(model, ChatModel)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (ScriptedModel([]), "test:scripted"),
        (FunctionModel(lambda m, s: ""), "test:function"),
        (ScriptedModel([], name="openai:gpt-4o-mini"), "openai:gpt-4o-mini"),
        (FunctionModel(lambda m, s: "", name="anthropic:claude"), "anthropic:claude"),
    ],
)
def test_names(model: ChatModel, name: str) -> None:
    assert model.name == name


# --- ScriptedModel --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_text_entry_becomes_a_complete_response_with_estimated_usage() -> None:
    model = ScriptedModel(["abcdefgh"])
    response = await model.request(HELLO)
    assert response == ModelResponse(
        text="abcdefgh", finish_reason="stop", usage=Usage(3, 2), model_name="test:scripted"
    )


@pytest.mark.anyio
async def test_entries_are_used_in_order_and_every_call_is_recorded() -> None:
    model = ScriptedModel(["one", "two"])
    settings = ModelRequest(temperature=0.0)
    again = [Message.user("again")]
    assert (await model.request(HELLO, settings)).text == "one"
    assert (await model.request(again)).text == "two"
    assert model.calls == 2
    assert model.requests == [(HELLO, settings), (again, None)]


@pytest.mark.anyio
async def test_recorded_messages_are_a_copy() -> None:
    model = ScriptedModel(["ok"])
    messages = list(HELLO)
    await model.request(messages)
    messages.append(Message.user("later"))
    assert model.requests[0][0] == HELLO


@pytest.mark.anyio
async def test_exception_entry_is_raised_and_the_call_still_counts() -> None:
    error = ModelUnavailableError("rate limited", status_code=429)
    model = ScriptedModel([error, "ok"])
    with pytest.raises(ModelUnavailableError) as caught:
        await model.request(HELLO)
    assert caught.value is error
    assert model.calls == 1
    assert (await model.request(HELLO)).text == "ok"
    assert model.calls == 2


@pytest.mark.anyio
async def test_callable_entry_answers_from_the_messages() -> None:
    model = ScriptedModel([lambda messages: f"you said {messages[-1].text}"])
    assert (await model.request(HELLO)).text == "you said hello world"


@pytest.mark.anyio
async def test_callable_entry_must_return_text_or_a_response() -> None:
    model = ScriptedModel([lambda messages: 42])  # type: ignore[list-item, return-value]
    with pytest.raises(TypeError, match="ScriptedModel entry for call 1 must produce a str"):
        await model.request(HELLO)


@pytest.mark.anyio
async def test_model_response_entry_keeps_what_was_built() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"})
    built = ModelResponse(
        text="", tool_calls=(call,), usage=Usage(7, 1), finish_reason="tool_calls", model_name="m"
    )
    model = ScriptedModel([built])
    assert await model.request(HELLO) is built


@pytest.mark.anyio
async def test_model_response_entry_gets_usage_and_name_filled_in_when_missing() -> None:
    model = ScriptedModel([ModelResponse(text="abcd", finish_reason="length")])
    response = await model.request(HELLO)
    assert response == ModelResponse(
        text="abcd", finish_reason="length", usage=Usage(3, 1), model_name="test:scripted"
    )


@pytest.mark.anyio
async def test_usage_per_call_replaces_the_estimate() -> None:
    script: list[str | ModelResponse] = [
        "a",
        ModelResponse(text="b"),
        ModelResponse(text="c", usage=Usage(1, 1)),
    ]
    model = ScriptedModel(script, usage_per_call=Usage(100, 10))
    usages = [(await model.request(HELLO)).usage for _ in range(3)]
    assert usages == [Usage(100, 10), Usage(100, 10), Usage(1, 1)]


@pytest.mark.anyio
async def test_usage_estimate_counts_text_tool_calls_and_results_at_four_chars_per_token() -> None:
    messages = [
        Message(role="assistant", parts=(ToolCallPart(tool_call_id="c", tool_name="calc", args={"a": 1}),)),
        Message(role="tool", parts=(ToolResultPart(tool_call_id="c", tool_name="calc", result=12345),)),
        Message(role="user", parts=(TextPart(text="abc"),)),
    ]
    # "calc" + '{"a": 1}' = 12, "calc" + "12345" = 9, "abc" = 3 → 24 chars → 6 tokens
    assert (await ScriptedModel(["x"]).request(messages)).usage == Usage(6, 1)
    assert (await ScriptedModel([""]).request([])).usage == Usage(0, 0)


@pytest.mark.anyio
async def test_running_out_raises_a_model_output_error_that_says_what_to_do() -> None:
    model = ScriptedModel(["only"])
    await model.request(HELLO)
    with pytest.raises(ModelOutputError) as caught:
        await model.request(HELLO)
    assert str(caught.value) == (
        "ScriptedModel has no response left for call 2; give it more responses or repeat_last=True"
    )
    assert model.calls == 2


@pytest.mark.anyio
async def test_repeat_last_keeps_answering_with_the_last_entry() -> None:
    model = ScriptedModel(["first", "again"], repeat_last=True)
    texts = [(await model.request(HELLO)).text for _ in range(4)]
    assert texts == ["first", "again", "again", "again"]


@pytest.mark.anyio
async def test_repeat_last_repeats_an_exception_too() -> None:
    error = ModelUnavailableError("down")
    model = ScriptedModel([error], repeat_last=True)
    for _ in range(3):
        with pytest.raises(ModelUnavailableError):
            await model.request(HELLO)
    assert model.calls == 3


@pytest.mark.anyio
async def test_repeat_last_with_an_empty_script_still_runs_out() -> None:
    with pytest.raises(ModelOutputError, match="call 1"):
        await ScriptedModel([], repeat_last=True).request(HELLO)


@pytest.mark.anyio
async def test_script_is_consumed_lazily_so_endless_iterators_work() -> None:
    model = ScriptedModel(itertools.cycle(["ping", "pong"]))
    texts = [(await model.request(HELLO)).text for _ in range(5)]
    assert texts == ["ping", "pong", "ping", "pong", "ping"]


@pytest.mark.parametrize("bare", ["hello", ModelResponse(text="hello")])
def test_a_bare_response_instead_of_a_list_is_refused(bare: object) -> None:
    with pytest.raises(TypeError, match="list of responses"):
        ScriptedModel(bare)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_scripted_call_yields_so_it_can_be_cancelled() -> None:
    model = ScriptedModel(["never seen"])
    task = asyncio.create_task(model.request(HELLO))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.calls == 1


# --- FunctionModel --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_function_model_passes_messages_and_settings() -> None:
    seen: list[tuple[list[Message], ModelRequest | None]] = []

    def answer(messages: list[Message], settings: ModelRequest | None) -> str:
        seen.append((messages, settings))
        return "abcd"

    model = FunctionModel(answer)
    settings = ModelRequest(max_output_tokens=5)
    response = await model.request(HELLO, settings)
    assert response == ModelResponse(
        text="abcd", finish_reason="stop", usage=Usage(3, 1), model_name="test:function"
    )
    assert seen == [(HELLO, settings)]
    assert model.requests == [(HELLO, settings)]
    assert model.calls == 1


@pytest.mark.anyio
async def test_function_model_accepts_an_async_function_and_a_model_response() -> None:
    async def answer(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
        return ModelResponse(text="partial", finish_reason="other", usage=Usage(1, 2))

    response = await FunctionModel(answer).request(HELLO)
    assert (response.text, response.finish_reason, response.usage) == ("partial", "other", Usage(1, 2))


@pytest.mark.anyio
async def test_function_model_errors_propagate_and_the_call_is_recorded() -> None:
    def boom(messages: list[Message], settings: ModelRequest | None) -> str:
        raise ModelUnavailableError("server error", status_code=503)

    model = FunctionModel(boom)
    with pytest.raises(ModelUnavailableError, match="server error"):
        await model.request(HELLO)
    assert model.calls == 1


@pytest.mark.anyio
async def test_function_model_must_return_text_or_a_response() -> None:
    model = FunctionModel(lambda m, s: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="FunctionModel function must produce a str or a ModelResponse"):
        await model.request(HELLO)

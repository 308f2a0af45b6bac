"""obsmem Message ↔ the OpenAI Agents SDK's input items: property-tested round trips.

- obsmem → SDK items → obsmem keeps what a model sees (text, attachments, call ids/names/args,
  results, reasoning with its replay data), for generated conversations with parallel calls;
- SDK items → obsmem → SDK items is a fixed point after one trip, and the items' ``id``,
  ``status`` and ``provider_data`` survive it;
- the items are valid ``TResponseInputItem``s for the SDK and a valid Responses input;
- items the converters do not handle are kept, never sent.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents.items import TResponseInputItem
from hypothesis import HealthCheck, given, settings
from pydantic import TypeAdapter

from obsmem.errors import InvalidInputError
from obsmem.integrations.openai_agents import from_agents_items, to_agents_items
from obsmem.types import DataPart, Message, ReasoningPart, ToolCallPart
from tests.convert.strategies import conversations, normal_form
from tests.integrations.agent_model import assert_valid_responses_input

_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_ITEMS = TypeAdapter(list[TResponseInputItem])


@_SETTINGS
@given(conversations())
def test_obsmem_to_sdk_items_and_back_keeps_what_a_model_sees(messages: list[Message]) -> None:
    items = to_agents_items(messages)
    _ITEMS.validate_python(items)
    assert_valid_responses_input({"input": items})
    back = from_agents_items(items)
    assert normal_form(back) == normal_form(messages)
    assert to_agents_items(back) == items  # a fixed point after one trip


SDK_RUN: list[dict[str, Any]] = [
    {"content": "What is the weather in Paris?", "role": "user"},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "look it up"}],
     "encrypted_content": "opaque"},
    {"arguments": '{"city": "Paris"}', "call_id": "call_1", "name": "get_weather", "type": "function_call",
     "id": "fc_2", "status": "completed", "provider_data": {"model": "m", "response_id": "resp_1"}},
    {"call_id": "call_1", "output": "sunny in Paris", "type": "function_call_output"},
    {"id": "msg_4", "content": [{"annotations": [], "text": "It is sunny.", "type": "output_text", "logprobs": []}],
     "role": "assistant", "status": "completed", "type": "message"},
]


def test_items_of_a_run_keep_their_ids_statuses_and_provider_data() -> None:
    messages = from_agents_items(SDK_RUN)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert isinstance(messages[1].parts[0], ReasoningPart)
    assert messages[1].tool_calls == [ToolCallPart(tool_call_id="call_1", tool_name="get_weather", args={"city": "Paris"})]
    assert messages[2].tool_results[0].result == "sunny in Paris"
    items = [dict(i) for i in to_agents_items(messages)]
    call = next(i for i in items if i.get("type") == "function_call")
    assert (call["id"], call["status"], call["provider_data"]) == ("fc_2", "completed", {"model": "m", "response_id": "resp_1"})
    reasoning = next(i for i in items if i.get("type") == "reasoning")
    assert (reasoning["id"], reasoning["encrypted_content"]) == ("rs_1", "opaque")
    answer = items[-1]
    assert (answer["id"], answer["role"], answer["content"][0]["text"]) == ("msg_4", "assistant", "It is sunny.")
    _ITEMS.validate_python(items)
    assert normal_form(from_agents_items(items)) == normal_form(messages)


def test_an_output_answering_an_earlier_call_takes_its_name_from_history() -> None:
    first = from_agents_items(SDK_RUN[:3])
    (result,) = from_agents_items(SDK_RUN[3:4], history=first)
    assert result.tool_results[0].tool_name == "get_weather"
    with pytest.raises(InvalidInputError):
        from_agents_items(SDK_RUN[3:4])  # no call to answer


def test_items_the_converters_do_not_handle_are_kept_but_never_sent() -> None:
    hosted = {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "x"}}
    messages = from_agents_items([SDK_RUN[0], hosted, SDK_RUN[4]])
    kept = [p for m in messages for p in m.parts if isinstance(p, DataPart)]
    assert kept == [DataPart(name="openai-agents-item", data={"item": hosted})]
    assert all(i.get("type") != "web_search_call" for i in to_agents_items(messages))


@pytest.mark.parametrize("bad", ["hello", {"role": "user", "content": "x"}, [42]])
def test_anything_but_a_list_of_items_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        from_agents_items(bad)

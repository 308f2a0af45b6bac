"""Memory models (OpenAI-compatible) answering in shapes meant to hurt (helper-121's hostile review).

README: "an answer of an odd shape or JSON nested too deep is a retryable ModelUnavailableError".
On main these escaped as other things, each against a real local server speaking the wire protocol:

- a whole answer whose ``content`` was an object or a list came back as a ``ModelResponse`` whose
  ``text`` was that dict or list (not a str: whatever reads the observation fails later, far away);
- a tool call whose ``name`` was a list or whose ``id`` a number raised ``InvalidInputError`` (the
  caller's input error, not retried);
- a ``usage`` count of ``1e400`` raised a raw ``OverflowError``;
- a streamed tool call whose ``index`` was ``"x"`` or ``Infinity`` raised a raw ``ValueError`` /
  ``OverflowError``.

Now each is a retryable :class:`~obsmem.errors.ModelUnavailableError`, except an odd usage count,
which reads as 0 (the answer is fine), and a ``content`` that is a list of text parts (some
compatible servers send one), which reads as their text joined.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from obsmem.errors import ModelUnavailableError
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.transport import Endpoint
from obsmem.types import Message

from .wire_server import Reply, WireServer, sse

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as wire:
        yield wire


def _whole(message: dict[str, Any], **extra: Any) -> Reply:
    return Reply(json={"choices": [{"message": {"role": "assistant", **message}, "finish_reason": "stop"}], **extra})


def _delta(delta: dict[str, Any]) -> str:
    return sse({"choices": [{"index": 0, "delta": delta}]})


ODD = [
    _whole({"content": {"text": "hi"}}),
    _whole({"content": 42}),
    _whole({"content": "x", "tool_calls": [{"id": "c1", "function": {"name": ["lookup"], "arguments": "{}"}}]}),
    _whole({"content": "x", "tool_calls": [{"id": 5, "function": {"name": "lookup", "arguments": "{}"}}]}),
    Reply(events=[_delta({"tool_calls": [{"index": "x", "function": {"name": "f", "arguments": "{}"}}]}),
                  "data: [DONE]\n\n"]),
    Reply(events=['data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": Infinity, '
                  '"function": {"name": "f"}}]}}]}\n\n', "data: [DONE]\n\n"]),
    Reply(events=[_delta({"tool_calls": [{"index": 0, "function": {"name": ["f"], "arguments": "{}"}}]}),
                  "data: [DONE]\n\n"]),
]
IDS = ["content-an-object", "content-a-number", "tool-name-a-list", "tool-id-a-number", "stream-index-a-word",
       "stream-index-infinite", "stream-tool-name-a-list"]  # fmt: skip


@pytest.mark.parametrize("reply", ODD, ids=IDS)
async def test_an_answer_of_an_odd_shape_is_a_retryable_obsmem_error(server: WireServer, reply: Reply) -> None:
    server.script(reply)
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=reply.events is not None,
                            timeout_s=5)  # fmt: skip
    with pytest.raises(ModelUnavailableError):
        await model.request([Message.user("hi")])


async def test_an_infinite_usage_count_reads_as_zero_and_the_answer_stands(server: WireServer) -> None:
    server.script(Reply(body=b'{"model": "m", "usage": {"prompt_tokens": 1e400, "completion_tokens": 3}, '
                             b'"choices": [{"message": {"role": "assistant", "content": "fine"}, '
                             b'"finish_reason": "stop"}]}'))  # fmt: skip
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=5)
    response = await model.request([Message.user("hi")])
    assert response.text == "fine"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (0, 3)


async def test_content_as_a_list_of_text_parts_reads_as_its_text(server: WireServer) -> None:
    server.script(_whole({"content": [{"type": "text", "text": "Two "}, {"type": "text", "text": "parts."}]},
                         model={"not": "a name"}))  # fmt: skip
    model = OpenAIChatModel("m", Endpoint("openai-compatible", server.url), stream=False, timeout_s=5)
    response = await model.request([Message.user("hi")])
    assert response.text == "Two parts."
    assert response.model_name is None

"""Gateway, Responses API: what a real client's tool loop sends that the upstream then refused on
every later request of the thread (helper-191, review of 0ecb137 / 86b12e6).

- A computer_call_output whose screenshot is not an image (a data URI of another type, an empty
  or broken one, no image at all) was saved, and went upstream as a screenshot without an image:
  refused now, with nothing saved, so the client can send the right one.
- A reasoning model's answer with a built-in tool's item after a reasoning item (web search,
  code interpreter …: not saved) was sent back with that reasoning item and without the item it
  came with: OpenAI refuses it ("… was provided without its required following item").

The upstream is helper 187's, which checks OpenAI's pairing rules; here it also refuses a
screenshot without an image, as OpenAI does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.models.wire_server import Recorded, Reply
from tests.server.conftest import Env
from tests.server.test_gateway_responses_tool_items_187 import (
    CALLS,
    IMAGE, ToolModel, _answered_by, _client, _dumped, _sent, output_for, responses_env,
)


class HostedToolModel(ToolModel):
    """The 187 upstream, which also answers 'search …' with [reasoning, web_search_call,
    reasoning, message] and 'lookup …' with [reasoning, web_search_call, message], and refuses a
    computer screenshot with neither an image URL nor a file id."""

    def __call__(self, recorded: Recorded) -> Reply:
        items = recorded.body.get("input")
        assert isinstance(items, list)
        last = items[-1]
        text = " ".join(str(p.get("text")) for p in last.get("content", []) if isinstance(p, dict)) \
            if isinstance(last.get("content"), list) else str(last.get("content", ""))  # fmt: skip
        first = text.split()[0] if text.split() else ""
        if last.get("role") != "user" or first not in ("search", "lookup"):
            return super().__call__(recorded)
        problem = self.refusal(items)
        if problem is not None:
            self.invalid.append(problem)
            return Reply(status=400, json={"error": {"message": problem, "type": "invalid_request_error"}})
        n = next(self._ids)
        search = {"type": "web_search_call", "id": f"ws_{n}", "status": "completed",
                  "action": {"type": "search", "query": "weather"}}  # fmt: skip
        message = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "sunny", "annotations": []}]}  # fmt: skip
        if first == "lookup":
            return self._response(n, [self._reasoning(n, search["id"]), search, message])
        second = {"type": "reasoning", "id": f"rs_{n}b", "summary": [], "encrypted_content": f"ENC{n}b"}
        self.following[second["id"]] = message["id"]
        return self._response(n, [self._reasoning(n, search["id"]), search, second, message])

    def refusal(self, items: list[dict[str, Any]]) -> str | None:
        for index, item in enumerate(items):
            if item.get("type") == "computer_call_output":
                shot = item.get("output")
                if not isinstance(shot, dict) or not (shot.get("image_url") or shot.get("file_id")):
                    return f"input[{index}].output: a screenshot needs 'image_url' or 'file_id'"
                if str(shot.get("image_url", "")).startswith("data:") and \
                        not str(shot["image_url"]).startswith("data:image/"):  # fmt: skip
                    return f"input[{index}].output.image_url: not an image"
        ids = [i["id"] for i in items if isinstance(i.get("id"), str) and i.get("type") != "local_shell_call_output"]
        if len(ids) != len(set(ids)):
            return f"Duplicate item found with id {sorted(i for i in ids if ids.count(i) > 1)[0]}."
        made = {str(i.get("call_id")): str(i.get("type")) for i in items if str(i.get("type")).endswith("call")}
        for index, item in enumerate(items):  # an output answers a call of its own kind
            answered = _answered_by(item)
            if answered in made and item.get("type") != f"{made[answered]}_output":
                return f"input[{index}]: No tool output found for {made[answered]} {answered}"
        return super().refusal(items)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from responses_env(tmp_path_factory, "responses-items-191", HostedToolModel())


@pytest.fixture
def model(env: Env) -> HostedToolModel:
    responder = env.upstream.responder
    assert isinstance(responder, HostedToolModel)
    return responder


NOT_IMAGES = {
    "text": "data:text/plain;base64,aGVsbG8=",
    "empty": "data:image/png;base64,",
    "no-type": "data:;base64,aGVsbG8=",
    "broken-base64": "data:image/png;base64,!!!not base64!!!",
    "not-base64": "data:image/png,raw",
}


@pytest.mark.parametrize("image_url", list(NOT_IMAGES.values()), ids=list(NOT_IMAGES))
def test_a_screenshot_that_is_not_an_image_is_refused_and_the_loop_goes_on(
    env: Env, model: HostedToolModel, image_url: str
) -> None:
    client = _client(env, f"items-191-shot-{list(NOT_IMAGES.values()).index(image_url)}")
    call = _dumped(client.responses.create(model="m", input="computer please", store=False).output)[-1]
    wrong = {"type": "computer_call_output", "call_id": call["call_id"],
             "output": {"type": "computer_screenshot", "image_url": image_url}}  # fmt: skip
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=[wrong], store=False)
    assert "screenshot" in str(refused.value)
    # the client sends the screenshot it meant: the loop goes on, and the thread after it
    assert client.responses.create(model="m", input=[output_for("computer", call["call_id"])],
                                   store=False).output_text == "done"  # fmt: skip
    assert client.responses.create(model="m", input="plain next", store=False).output_text.startswith("said")
    outputs = [i for i in _sent(env) if i.get("type") == "computer_call_output"]
    assert [o["output"].get("image_url") for o in outputs] == [IMAGE]
    assert not model.invalid


def test_a_screenshot_with_neither_image_nor_file_is_refused(env: Env, model: HostedToolModel) -> None:
    client = _client(env, "items-191-shot-none")
    call = _dumped(client.responses.create(model="m", input="computer please", store=False).output)[-1]
    wrong = {"type": "computer_call_output", "call_id": call["call_id"], "output": {"type": "computer_screenshot"}}
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input=[wrong], store=False)
    assert client.responses.create(model="m", input=[output_for("computer", call["call_id"])],
                                   store=False).output_text == "done"  # fmt: skip
    assert not model.invalid


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("question", ["search the weather", "lookup the weather"])
def test_an_answer_after_a_web_search_keeps_the_thread_going(
    env: Env, model: HostedToolModel, question: str, stream: bool
) -> None:
    client = _client(env, f"items-191-{question.split()[0]}-{stream}")
    if stream:
        events = list(client.responses.create(model="m", input=question, store=False, stream=True))
        assert events[-1].type == "response.completed"
    else:
        assert client.responses.create(model="m", input=question, store=False).output_text == "sunny"
    answered = client.responses.create(model="m", input="plain and tomorrow?", store=False)
    assert answered.output_text.startswith("said")
    sent = _sent(env)
    assert any(i.get("role") == "assistant" and "sunny" in json.dumps(i) for i in sent)  # the answer is kept
    assert not model.invalid


@pytest.mark.parametrize("history", [False, True], ids=["new-items", "whole-history"])
def test_outputs_sent_again_with_the_missing_one_finish_the_loop(
    env: Env, model: HostedToolModel, history: bool
) -> None:
    """A custom tool's call and a function call in parallel; the client sends one output (the
    upstream refuses the call left without one), then both: the loop ends, each output sent once
    (a request's outputs are one stored message: the first attempt's is the first part of it)."""
    client = _client(env, f"items-191-resent-{history}")
    first = [{"role": "user", "content": "custom and a function"}]
    asked = _dumped(client.responses.create(model="m", input=first, store=False).output)
    _, function, custom = asked
    outputs = [output_for("custom", custom["call_id"]),
               {"type": "function_call_output", "call_id": function["call_id"], "output": "found"}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=[*first, *asked, outputs[0]] if history else outputs[:1], store=False)
    assert "have no output" in str(refused.value)  # the upstream's refusal, not the gateway's
    model.invalid.clear()  # the refusal asked for
    answered = client.responses.create(model="m", input=[*first, *asked, *outputs] if history else outputs,
                                       store=False)  # fmt: skip
    assert answered.output_text == "done"
    assert client.responses.create(model="m", input="plain next", store=False).output_text.startswith("said")
    answers = [_answered_by(i) for i in _sent(env) if _answered_by(i) is not None]
    assert sorted(answers) == sorted([function["call_id"], custom["call_id"]])
    assert not model.invalid


@pytest.mark.parametrize("kind", ["custom", "local_shell", "shell", "apply_patch"])
def test_a_call_left_unanswered_is_closed_with_an_output_of_its_kind(
    env: Env, model: HostedToolModel, kind: str
) -> None:
    """The user goes on without the tool's output (an interrupted agent, a declined patch):
    memory closes the call with a 'no result' output, which goes upstream as the output of the
    call's kind (OpenAI: 'No tool output found for custom tool call …' for a function_call_output)."""
    client = _client(env, f"items-191-unanswered-{kind}")
    call = _dumped(client.responses.create(model="m", input=f"{kind} please", store=False).output)[-1]
    answered = client.responses.create(model="m", input="plain never mind, something else", store=False)
    assert answered.output_text.startswith("said")
    closing = [i for i in _sent(env) if _answered_by(i) == call["call_id"]]
    assert [i["type"] for i in closing] == [f"{call['type']}_output"]
    assert "No result" in json.dumps(closing)
    assert client.responses.create(model="m", input="plain and then", store=False).output_text.startswith("said")
    assert not model.invalid


def test_a_computer_call_left_unanswered_leaves_the_thread_going(env: Env, model: HostedToolModel) -> None:
    """A computer call's output takes a screenshot, which a call the user went on from has none
    of: the call is left out of what goes upstream with its 'no result' and its reasoning item,
    and the thread goes on (also when its screenshot comes late)."""
    client = _client(env, "items-191-unanswered-computer")
    call = _dumped(client.responses.create(model="m", input="computer please", store=False).output)[-1]
    assert client.responses.create(model="m", input="plain never mind", store=False).output_text.startswith("said")
    assert not [i for i in _sent(env) if i.get("call_id") == call["call_id"]]
    client.responses.create(model="m", input=[output_for("computer", call["call_id"])], store=False)
    assert client.responses.create(model="m", input="plain and then", store=False).output_text.startswith("said")
    assert "never mind" in json.dumps(_sent(env))
    assert not model.invalid


def test_a_history_reusing_a_call_id_keeps_each_call_as_it_came(env: Env, model: HostedToolModel) -> None:
    """A client moving a history onto the gateway whose model reused a call id across turns (some
    OpenAI-compatible servers number their calls): each call is sent back with its own item id
    and fields, not the last one's (two items with one id are refused)."""
    click = {**CALLS["computer"], "id": "cu_click", "call_id": "call_1"}
    scroll = {**CALLS["computer"], "id": "cu_scroll", "call_id": "call_1",
              "action": {"type": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 5}}  # fmt: skip
    typed = {"type": "computer_call_output", "call_id": "call_1", "status": "completed",
             "output": {"type": "computer_screenshot", "image_url": IMAGE, "detail": "low"}}  # fmt: skip
    history = [{"role": "user", "content": "click it"}, click, output_for("computer", "call_1"),
               {"role": "assistant", "content": "clicked"}, {"role": "user", "content": "scroll down"}, scroll, typed,
               {"role": "assistant", "content": "scrolled"}, {"role": "user", "content": "plain and now?"}]  # fmt: skip
    _client(env, "items-191-reused-call-id").responses.create(model="m", input=history, store=False)
    sent = _sent(env)
    assert [i for i in sent if i.get("type") == "computer_call"] == [click, scroll]
    assert [i for i in sent if i.get("type") == "computer_call_output"] == [output_for("computer", "call_1"), typed]
    assert not model.invalid

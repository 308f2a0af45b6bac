"""Gateway, Responses API: a hosted tool's item without an ``id`` in a request's input.

OpenAI requires the id of every hosted tool's item given back as input (web search, file search,
code interpreter, image generation, MCP calls and tool lists). Such an item was saved and sent
upstream as it came at that request and at every later one of the thread: each was refused, and
the thread could not go on. It is refused with a 400 naming it, before anything is saved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.server.conftest import Env
from tests.server.test_gateway_responses_hosted_193 import HOSTED, LIST_TOOLS, McpModel
from tests.server.test_gateway_responses_tool_items_187 import _client, _sent, responses_env

_ID_REQUIRED = {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call",
                "mcp_call", "mcp_list_tools", "mcp_approval_request"}  # fmt: skip


class IdCheckingModel(McpModel):
    """McpModel that also refuses, as OpenAI does, a hosted tool's item without an id."""

    def hosted_refusal(self, items: list[dict[str, Any]]) -> str | None:
        for index, item in enumerate(items):
            if item.get("type") in _ID_REQUIRED and not item.get("id"):
                return f"Missing required parameter: 'input[{index}].id'."
        return super().hosted_refusal(items)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from responses_env(tmp_path_factory, "responses-hosted-no-id", IdCheckingModel())


WITHOUT_ID = {kind: {k: v for k, v in item.items() if k != "id"} for kind, item in HOSTED.items()}
WITHOUT_ID["mcp_list_tools"] = dict(LIST_TOOLS)


@pytest.mark.parametrize("kind", list(WITHOUT_ID))
def test_a_hosted_item_without_an_id_is_refused_and_the_thread_goes_on(env: Env, kind: str) -> None:
    thread = f"hosted-no-id-{kind}"
    client = _client(env, thread)
    # a client moving its history onto the gateway: a new thread, its whole history saved
    history = [{"role": "user", "content": "look it up"}, WITHOUT_ID[kind],
               {"role": "user", "content": "plain thanks"}]  # fmt: skip
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="m", input=history, store=False)
    # nothing of it was saved: the thread goes on, and what goes upstream has no such item
    answered = client.responses.create(model="m", input="plain and then?", store=False)
    assert answered.output_text
    assert all(not (i.get("type") in _ID_REQUIRED and not i.get("id")) for i in _sent(env))
    stored = env.live.call(env.live.service.memory.store.list_messages(thread))
    assert "look it up" not in [p.text for m in stored for p in m.parts if hasattr(p, "text")]
    assert not env.upstream.responder.invalid  # refused by the gateway, not upstream
    assert "'id'" in str(refused.value) and WITHOUT_ID[kind]["type"] in str(refused.value)


def test_one_saved_by_an_older_gateway_is_left_out(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread holding such an item (saved before it was refused) goes on: the item is left out
    of what goes upstream (memory keeps what it found)."""
    from obsmem.server import gateway

    thread = "hosted-no-id-older"
    client = _client(env, thread)
    history = [{"role": "user", "content": "look it up"}, WITHOUT_ID["web_search"],
               {"role": "user", "content": "plain thanks"}]  # fmt: skip
    with monkeypatch.context() as older:
        older.setattr(gateway, "_refuse_unsendable_hosted_items", lambda items, new: None)
        try:  # (an older gateway sent it upstream, refused there; it was saved all the same)
            client.responses.create(model="m", input=history, store=False)
        except openai.BadRequestError:
            pass
    env.upstream.responder.invalid.clear()
    answered = client.responses.create(model="m", input="plain and then?", store=False)
    assert answered.output_text
    sent = _sent(env)
    assert [i for i in sent if i.get("type") == "web_search_call"] == []
    assert any(i.get("role") == "user" and "look it up" in str(i.get("content")) for i in sent)
    assert not env.upstream.responder.invalid

"""forget("completed") dropped the gateway's note of how a Responses answer's items came
(metadata 'obsmem_responses_items': item types, ids and statuses, and fields an item came with):
'completed' is every item's status. Without it a computer call went upstream as a function_call
and its screenshot as a function_call_output; OpenAI refuses that ('No tool output found for
computer call'), and every later request of the thread failed. The note now keeps its types, ids
and statuses, and a text it quotes holding the value becomes "[forgotten]". Found by helper 198."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from obsmem.storage.forgetting import forget_in_message
from obsmem.types import Message, ToolResultPart
from tests.server.conftest import Env
from tests.server.test_gateway_responses_items_191 import HostedToolModel
from tests.server.test_gateway_responses_tool_items_187 import _client, _dumped, _sent, output_for, responses_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from responses_env(tmp_path_factory, "forget-completed-198", HostedToolModel())


@pytest.mark.parametrize("value", ["completed", "computer_call"])
def test_forget_a_status_word_keeps_the_computer_call_going(env: Env, value: str) -> None:
    model = env.upstream.responder
    assert isinstance(model, HostedToolModel)
    thread = f"forget-status-{value}"
    client = _client(env, thread)
    call = _dumped(client.responses.create(model="m", input="computer please", store=False).output)[-1]
    client.responses.create(model="m", input=[output_for("computer", call["call_id"])], store=False)
    env.live.call(env.live.service.memory.forget(value, thread_id=thread))
    client.responses.create(model="m", input="plain and?", store=False)
    assert any(i.get("type") == "computer_call" for i in _sent(env))
    assert not model.invalid



def test_forget_takes_what_an_item_note_quotes_and_keeps_its_shape() -> None:
    note = {"outputs": {"call_9": {
        "type": "computer_call_output", "id": "cuo_9", "status": "completed",
        "acknowledged_safety_checks": [{"id": "sc_1", "code": "url", "message": "Leaving zaphod.example"}],
    }}}
    message = Message(role="tool", parts=(ToolResultPart(tool_call_id="call_9", tool_name="computer", result="shown"),),
                      metadata={"obsmem_responses_items": note})
    for word in ("completed", "computer_call_output", "cuo_9", "call_9", "outputs"):
        assert forget_in_message(message, word) is message
    kept = forget_in_message(message, "zaphod")
    assert kept is not None and "zaphod" not in kept.model_dump_json()
    check = kept.metadata["obsmem_responses_items"]["outputs"]["call_9"]
    assert check["type"] == "computer_call_output" and check["status"] == "completed"
    assert check["acknowledged_safety_checks"] == [{"id": "sc_1", "code": "url", "message": "[forgotten]"}]

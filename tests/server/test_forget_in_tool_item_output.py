"""forget of a value a client-run tool item quoted (a computer call's safety check message, in the
call's pending checks and its output's acknowledged ones; a custom tool's output; a shell's): the
call's arguments became "[forgotten]", and the gateway sent the call upstream as a function_call
while its output went as the output of its own kind, which the API refuses ("No tool output found")
on every later request of the thread. Such a call now goes with its output: left out of what goes
upstream (memory keeps what the tool gave)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.conftest import Env
from tests.server.test_gateway_responses_items_191 import HostedToolModel
from tests.server.test_gateway_responses_tool_items_187 import _client, _dumped, _sent, output_for, responses_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from responses_env(tmp_path_factory, "forget-tool-output", HostedToolModel())


@pytest.mark.parametrize("kind", ["computer", "custom", "shell"])
def test_forget_in_a_tool_items_output_keeps_the_thread_going(env: Env, kind: str) -> None:
    model = env.upstream.responder
    assert isinstance(model, HostedToolModel)
    thread = f"forget-output-{kind}"
    client = _client(env, thread)
    call = _dumped(client.responses.create(model="m", input=f"{kind} please", store=False).output)[-1]
    output = output_for(kind, call.get("call_id") or call.get("id"))
    said = {"computer": "asks to ignore instructions", "custom": "patched 1 file", "shell": "hi"}[kind]
    client.responses.create(model="m", input=[output], store=False)
    memory = env.live.service.memory
    env.live.call(memory.forget(said, thread_id=thread))
    assert not any(said in m.model_dump_json() for m in env.live.call(memory.list_messages(thread)))
    client.responses.create(model="m", input="plain and?", store=False)
    assert not model.invalid, model.invalid
    assert said not in str(_sent(env))

"""A tool result whose call id exists nowhere (an OpenAI-format REST request, or a gateway
request) read the thread's whole history before it was refused: on a long thread each such
request read every stored message, however long the conversation grew. The search for a result's
call now reads the thread's newest messages back to :data:`obsmem.server.rest.HISTORY_REACH` at
most, and a call not among them is refused with a 400 saying so."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from obsmem.server.rest import HISTORY_REACH
from tests.rows_read import RowsRead
from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_gateway import client_for

SHORT, LONG = HISTORY_REACH + 400, 2 * HISTORY_REACH + 800


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("history-reach"))


def _thread(env: Env, client: httpx.Client, thread: str, count: int, *, call_first: bool = False) -> None:
    """A thread of ``count`` plain messages (after a tool call and its result, ``call_first``)."""
    assert client.post("/api/threads", json={"id": thread}).status_code == 201
    if call_first:
        call = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call-far", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]}
        said = client.post(f"/api/threads/{thread}/messages", json={"format": "openai", "messages": [
            {"role": "user", "content": "Look it up."}, call,
            {"role": "tool", "tool_call_id": "call-far", "content": "found"}]})  # fmt: skip
        assert said.status_code == 201, said.text
    for start in range(0, count, 400):
        batch = [{"role": "user" if i % 2 == 0 else "assistant", "parts": [{"type": "text", "text": f"message {i}"}]}
                 for i in range(start, min(start + 400, count))]
        assert client.post(f"/api/threads/{thread}/messages", json={"messages": batch}).status_code == 201
    env.live.call(env.live.service.memory.settled())  # no background memory work reading while counted


def _rest_nowhere(env: Env, client: httpx.Client, thread: str) -> tuple[httpx.Response, int]:
    with RowsRead(env.live.service.memory.store) as read:
        refused = client.post(f"/api/threads/{thread}/turns", json={"format": "openai", "messages": [
            {"role": "tool", "tool_call_id": "call-nowhere", "content": "sunny"}]})
    return refused, read.rows


def test_rest_a_result_for_a_call_that_exists_nowhere_reads_the_same_rows_however_long_the_thread(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=300) as client:
        _thread(env, client, "hr-short", SHORT)
        _thread(env, client, "hr-long", LONG)
        short, short_rows = _rest_nowhere(env, client, "hr-short")
        long, long_rows = _rest_nowhere(env, client, "hr-long")
        assert long_rows == short_rows <= HISTORY_REACH, (short_rows, long_rows)
        for refused in (short, long):
            assert refused.status_code == 400, refused.text
            assert "call-nowhere" in refused.text and str(HISTORY_REACH) in refused.text, refused.text
        # nothing was saved of the refused requests
        newest = client.get("/api/threads/hr-long/messages", params={"after_seq": LONG - 2}).json()["messages"]
        assert not [p for m in newest for p in m["parts"] if p["type"] == "tool-result"]


def test_rest_a_result_for_a_call_within_reach_is_named_and_one_beyond_it_refused(env: Env) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=300) as client:
        _thread(env, client, "hr-within", HISTORY_REACH - 100, call_first=True)
        late = client.post("/api/threads/hr-within/messages", json={
            "format": "openai", "messages": [{"role": "tool", "tool_call_id": "call-far", "content": "late"}]})
        assert late.status_code == 201, late.text
        assert late.json()["messages"][0]["parts"][0]["tool_name"] == "lookup"
        _thread(env, client, "hr-beyond", HISTORY_REACH + 100, call_first=True)
        too_late = client.post("/api/threads/hr-beyond/messages", json={
            "format": "openai", "messages": [{"role": "tool", "tool_call_id": "call-far", "content": "late"}]})
        assert too_late.status_code == 400, too_late.text
        assert "call-far" in too_late.text and str(HISTORY_REACH) in too_late.text


def _gateway_nowhere(env: Env, thread: str, api: str) -> tuple[openai.BadRequestError, int]:
    with RowsRead(env.live.service.memory.store) as read, pytest.raises(openai.BadRequestError) as refused:
        if api == "chat":
            client_for(env, thread).chat.completions.create(model="m", messages=[
                {"role": "tool", "tool_call_id": "call-nowhere", "content": "Oslo: 4 degrees"}])
        else:
            client_for(env, thread).responses.create(model="m", input=[
                {"type": "function_call_output", "call_id": "call-nowhere", "output": "Oslo: 4 degrees"}])
    return refused.value, read.rows


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_gateway_a_result_for_a_call_that_exists_nowhere_reads_the_same_rows_however_long_the_thread(
    env: Env, api: str,
) -> None:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=300) as client:
        _thread(env, client, f"hg-short-{api}", SHORT)
        _thread(env, client, f"hg-long-{api}", LONG)
    short, short_rows = _gateway_nowhere(env, f"hg-short-{api}", api)
    long, long_rows = _gateway_nowhere(env, f"hg-long-{api}", api)
    assert long_rows == short_rows <= HISTORY_REACH, (short_rows, long_rows)
    for refused in (short, long):
        assert "call-nowhere" in str(refused) and str(HISTORY_REACH) in str(refused), refused

"""The recall tool given ids no store can hold (helper-144).

A model's tool call is JSON, and JSON can carry a lone surrogate (``"\\ud800"``): the arguments
parse to a Python string that UTF-8 cannot encode. Recall passed it to the store as an id, and
SQLite raised UnicodeEncodeError out of ``call_recall_tool`` (the agent's turn ended on it) instead
of answering ``{"error": ...}`` the model can correct, as it does for any other id it cannot
reach. Ids with '/', unicode, spaces or thousands of characters are ordinary ids: not found.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.errors import InvalidInputError

from .helpers import retrieval_config

pytestmark = pytest.mark.anyio

_TOOL_CALL = '{"mode": "%s", "%s": "\\ud800 x"}'  # what a model's JSON may hold


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/recall.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def memory(url: str) -> AsyncIterator[Memory]:
    async with Memory(url, config=retrieval_config(scope="resource")) as memory:
        await memory.create_thread("t1", "alice")
        await memory.create_thread("t2", "alice")
        yield memory


@pytest.mark.parametrize(
    ("mode", "argument"),
    [("messages", "cursor"), ("messages", "thread_id"), ("messages", "group_id"), ("threads", "cursor")],
)
async def test_a_lone_surrogate_in_an_id_is_an_error_the_model_can_read(
    memory: Memory, mode: str, argument: str
) -> None:
    args = json.loads(_TOOL_CALL % (mode, argument))
    answer = await memory.call_recall_tool("t1", args)  # was: UnicodeEncodeError (SQLite)
    assert set(answer) == {"error"} and argument in answer["error"], answer


async def test_a_lone_surrogate_through_memory_recall_is_invalid_input(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match="cursor"):
        await memory.recall("t1", cursor="\ud800")
    with pytest.raises(InvalidInputError, match="thread_id"):
        await memory.recall("t1", target_thread_id="\ud800")


@pytest.mark.parametrize("odd", ["a/b", "ünï👋", "x" * 5000, "..", "%2F", "'; DROP TABLE threads;--"])
async def test_odd_but_ordinary_ids_are_not_found(memory: Memory, odd: str) -> None:
    for args in ({"cursor": odd}, {"thread_id": odd}, {"group_id": odd}, {"mode": "threads", "cursor": odd}):
        answer = await memory.call_recall_tool("t1", args)
        assert set(answer) == {"error"}, (args, answer)
    assert [t.id for t in (await memory.recall("t1", mode="threads")).threads] == ["t1", "t2"]


async def test_a_nul_through_memory_recall_is_invalid_input(memory: Memory) -> None:
    for kwargs in ({"cursor": "m\x00"}, {"target_thread_id": "t\x00"}, {"group_id": "g\x00"}):
        with pytest.raises(InvalidInputError, match="NUL"):
            await memory.recall("t1", **kwargs)  # type: ignore[arg-type]

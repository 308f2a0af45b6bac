"""The knowledge audit log's page cursor (``after``, a ``next_cursor`` it answered): one that is
not an event id is a clean 400 InvalidInputError naming ``after``, not read as "from the start"
(the first page again, as if the cursor had been honoured), through REST and the library."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from obsmem import InvalidInputError
from obsmem.knowledge import Knowledge
from tests.server.conftest import Env
from tests.server.live import auth

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as http:
        for text in ("Alice likes tea (cursor)", "Alice owns a cat (cursor)"):
            assert http.post("/api/knowledge", json={"text": text}).status_code == 201
        yield http


@pytest.mark.parametrize(
    "cursor",
    ["garbage", "z" * 26, "01ARZ3NDEKTSV4RRFFQ69G5FAVX", "01arz3ndektsv4rrffq69g5fav", "~"],
)
def test_an_audit_cursor_that_is_no_event_id_is_a_400_naming_after(client: httpx.Client, cursor: str) -> None:
    """Before: 200 with the newest events, the cursor silently ignored."""
    answer = client.get("/api/knowledge/audit", params={"after": cursor})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "InvalidInputError" and error["argument"] == "after", error


def test_the_cursor_the_audit_log_answers_still_pages(client: httpx.Client) -> None:
    first = client.get("/api/knowledge/audit", params={"limit": 1}).json()
    assert first["next_cursor"], first
    second = client.get("/api/knowledge/audit", params={"limit": 1, "after": first["next_cursor"]})
    assert second.status_code == 200, second.text
    assert second.json()["events"] and second.json()["events"][0]["id"] < first["events"][0]["id"]


async def test_the_library_refuses_a_garbage_audit_cursor() -> None:
    async with Knowledge.in_memory() as knowledge:
        with pytest.raises(InvalidInputError) as raised:
            await knowledge.store.list_activity("org:acme", after="garbage")
        assert raised.value.argument == "after"

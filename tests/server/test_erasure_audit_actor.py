"""Who the knowledge audit log says erased something: a thread deleted or a resource deleted
through REST, and a value forgotten through MCP, are audited as the key that did it
(``key:<key id>``, as review decisions and captures are), not as the service's own ``obsmem``;
and the library's ``delete_thread`` / ``delete_resource`` / ``forget`` take that ``actor``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem import InvalidInputError, Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.storage import MemoryStore
from tests.server.conftest import Env, open_env
from tests.server.live import auth
from tests.server.test_mcp import http_client, payload

pytestmark = pytest.mark.anyio

_ERASURES = ("scope-purged", "value-forgotten")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("erasure-actor"))


def _as(env: Env, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, env.url + path, headers=auth(key), timeout=60, **kwargs)


def _key_id(env: Env, secret: str) -> str:
    key = env.live.call(env.live.service.keys.verify(secret))
    assert key is not None
    return str(key.key_id)


def _erasures(env: Env, key: str) -> list[dict[str, Any]]:
    answer = _as(env, key, "GET", "/api/knowledge/audit", params={"limit": 500})
    assert answer.status_code == 200, answer.text
    return [e for e in answer.json()["events"] if e["action"] in _ERASURES]


async def test_rest_deletes_and_mcp_forget_are_audited_as_the_key(env: Env) -> None:
    """Before: every one of these events said actor 'obsmem', whoever's key erased the data."""
    keys, alice = env.keys, _key_id(env, env.keys.alice)
    for thread in ("ea-1", "ea-2"):
        assert _as(env, keys.alice, "POST", "/api/threads", json={"id": thread}).status_code == 201
    said = _as(env, keys.alice, "POST", "/api/threads/ea-1/messages", json={
        "format": "openai", "messages": [{"role": "user", "content": "My locker is Heron-42."}],
    })  # fmt: skip
    assert said.status_code == 201, said.text
    made = _as(env, keys.alice, "POST", "/api/knowledge", json={"text": "Alice's locker is Heron-42"})
    assert made.status_code == 201, made.text

    async with http_client(env, keys.alice) as client:
        payload(await client.call_tool("forget", {"value": "Heron-42", "thread_id": "ea-1"}))
    forgotten = [e for e in _erasures(env, keys.alice) if e["action"] == "value-forgotten"]
    assert forgotten and {e["actor"] for e in forgotten} == {f"key:{alice}"}, forgotten

    assert _as(env, keys.alice, "DELETE", "/api/threads/ea-2").json() == {"deleted": True}
    purged = [e for e in _erasures(env, keys.alice) if e["action"] == "scope-purged"]
    assert purged and {e["actor"] for e in purged} == {f"key:{alice}"}, purged

    deleted = _as(env, keys.alice, "DELETE", "/api/resources/alice")
    assert deleted.status_code == 200, deleted.text
    events = _erasures(env, keys.acme_org)  # the resource's own events went with it; the org's stay
    assert any(e["action"] == "scope-purged" and e["reason"] == "resource deleted" for e in events), events
    assert {e["actor"] for e in events} == {f"key:{alice}"}, events


async def test_the_library_erasures_take_an_actor() -> None:
    """``actor=`` names who erased in the audit log (default: the knowledge store's actor)."""
    async with Memory(MemoryStore(), knowledge=Knowledge.in_memory(actor="obsmem")) as memory:
        assert memory.knowledge is not None
        store = memory.knowledge.store

        async def erasures(scope: str) -> set[str]:
            events = (await store.list_activity(scope, limit=500, threads=True)).items
            return {e.actor for e in events if e.action in _ERASURES}

        for thread in ("l-1", "l-2"):
            await memory.create_thread(thread, "lib-user")
            await memory.save_messages(thread, [Message.user("Remember Kestrel-7.")])
        await memory.forget("Kestrel-7", thread_id="l-1", actor="privacy-officer")
        assert await erasures("org:default/resource:lib-user") == {"privacy-officer"}
        await memory.delete_thread("l-1", actor="privacy-officer")
        assert await erasures("org:default/resource:lib-user") == {"privacy-officer"}
        with pytest.raises(InvalidInputError, match="actor"):
            await memory.delete_thread("l-2", actor=" ")
        assert (await memory.get_thread("l-2")).id == "l-2"  # refused before anything was deleted
        await memory.delete_resource("lib-user", actor="privacy-officer")
        assert await erasures("org:default") == {"privacy-officer"}

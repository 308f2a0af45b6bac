"""The key store on every backend: hashed at rest, verified by secret, scoped listing, and
compare-and-set revocation (two concurrent revocations: one wins)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from obsmem import InvalidInputError
from obsmem.server import ServerSettings, Service
from obsmem.server.keys import KeyStore, MemoryKeyStore, PostgresKeyStore, SQLiteKeyStore, key_store_for
from tests.server.live import auth, live_server


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def keys(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyStore]:
    if request.param == "memory":
        yield MemoryKeyStore()
    elif request.param == "sqlite":
        yield SQLiteKeyStore(str(tmp_path / "keys.db"))
    else:
        yield PostgresKeyStore(request.getfixturevalue("postgres_url"))


def test_create_verify_list_revoke(keys: KeyStore) -> None:
    async def run() -> None:
        await keys.setup()
        await keys.setup()  # idempotent
        key, secret = await keys.create("acme", resource_id="alice", label="ci")
        other, other_secret = await keys.create("o'; DROP TABLE obsmem_api_keys; --", admin=True)
        assert (await keys.verify(secret)) == key
        assert (await keys.verify(other_secret)) == other
        assert await keys.verify(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
        assert await keys.verify(f"om_{key.key_id}_" + "x" * 43) is None
        assert await keys.verify("om_nothex_x") is None and await keys.verify("") is None
        assert [k.key_id for k in await keys.list("acme")] == [key.key_id]
        assert len(await keys.list()) == 2
        assert key.secret_sha256 != secret and len(key.secret_sha256) == 64
        assert not await keys.revoke(key.key_id, org_id="other-org")
        results = await asyncio.gather(*(keys.revoke(key.key_id) for _ in range(4)))
        assert sorted(results) == [False, False, False, True]
        assert await keys.verify(secret) is None
        assert (await keys.get(key.key_id)) is not None and (await keys.get(key.key_id)).revoked  # type: ignore[union-attr]
        assert await keys.verify(other_secret) == other
        with pytest.raises(InvalidInputError):
            await keys.create("acme", admin=True, read_only=True)
        with pytest.raises(InvalidInputError):
            await keys.create("")
        await keys.close()

    asyncio.run(run())


def test_resource_orgs_are_the_orgs_of_the_live_keys_bound_to_it(keys: KeyStore) -> None:
    """What claims a resource before it has a thread (see obsmem.server.access)."""
    dave, erin = f"dave-{uuid.uuid4().hex}", f"erin-{uuid.uuid4().hex}"  # (the PostgreSQL table is shared)

    async def run() -> None:
        await keys.setup()
        assert await keys.resource_orgs(dave) == set()
        acme, _ = await keys.create("acme", resource_id=dave)
        await keys.create("acme", resource_id=dave, read_only=True)
        globex, _ = await keys.create("globex", resource_id=dave)
        await keys.create("initech")  # org-wide: claims no resource
        await keys.create("initech", resource_id=erin)
        assert await keys.resource_orgs(dave) == {"acme", "globex"}
        assert await keys.revoke(globex.key_id)
        assert await keys.resource_orgs(dave) == {"acme"}  # a revoked key claims nothing
        assert await keys.resource_orgs(erin) == {"initech"}
        assert await keys.resource_orgs("o'; DROP TABLE obsmem_api_keys; --") == set()
        await keys.close()

    asyncio.run(run())


def test_sqlite_table_holds_only_hashes(tmp_path: Path) -> None:
    store = SQLiteKeyStore(str(tmp_path / "k.db"))

    async def run() -> str:
        await store.setup()
        return (await store.create("acme"))[1]

    secret = asyncio.run(run())
    rows = sqlite3.connect(tmp_path / "k.db").execute("SELECT * FROM obsmem_api_keys").fetchall()
    assert len(rows) == 1 and secret.split("_", 2)[2] not in repr(rows)


def test_two_replicas_on_postgres_share_threads_and_keys(postgres_url: str) -> None:
    """Two servers (two Services) on one PostgreSQL database: a key and a thread made through one
    are honoured by the other; the gateway works through both, messages stored once each."""
    from tests.integrations.agent_model import AgentModel
    from tests.models.wire_server import WireServer

    with WireServer() as upstream:
        upstream.responder = AgentModel()
        settings = ServerSettings(upstream_url=upstream.url + "/v1", upstream_key="sk-up")
        first = Service.open(postgres_url, settings=settings, max_turn_wait=None)
        second = Service.open(postgres_url, settings=settings, max_turn_wait=None)
        assert isinstance(key_store_for(postgres_url), PostgresKeyStore)

        async def make() -> str:
            await first.keys.setup()
            return (await first.keys.create("acme", resource_id="alice"))[1]

        secret = asyncio.run(make())
        asyncio.run(first.keys.close())  # its pool belonged to that loop's threads; reopened on use
        with live_server(first) as a, live_server(second) as b:
            with httpx.Client(timeout=60, headers=auth(secret)) as client:
                assert client.post(a.url + "/api/threads", json={"id": "pg-1"}).status_code == 201
                assert client.get(b.url + "/api/threads/pg-1").json()["org_id"] == "acme"
                for index, server in enumerate((a, b, a, b)):
                    answer = client.post(server.url + "/v1/chat/completions", headers={"X-Obsmem-Thread": "pg-1"},
                                         json={"model": "m", "messages": [{"role": "user", "content": f"m{index}"}]})
                    assert answer.status_code == 200, answer.text
                stored = client.get(b.url + "/api/threads/pg-1/messages").json()["messages"]
                texts = [m["parts"][0]["text"] for m in stored]
                assert texts == [t for i in range(4) for t in (f"m{i}", f"You said: m{i}")]
                assert client.get(b.url + "/api/threads/other").status_code == 404

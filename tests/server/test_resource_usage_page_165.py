"""REST ``GET /api/resources/{id}/usage`` reads what it answers, not every thread of the resource.

On main it listed every thread of the resource and, per thread, read its head record (re-reading
the thread) and counted its messages: for 600 threads, 600 listed rows, 600 thread reads, 600
head reads and 600 counts for one request. Its totals (``threads``, ``messages``,
``total_tokens_observed``) now come from the store as numbers (``resource_totals``), and
``per_thread`` is a page (``limit``, default 100, at most 1,000; ``after``: the previous page's
``next``, null on the last page). A resource that fits one page answers as before plus
``next: null``; the totals stay resource-wide on every page.

Driven through the real app (httpx's ASGI transport) over a temp-path SQLite store; rows and
reads are counted on the store instance's methods."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from obsmem import Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.server.app import create_app
from obsmem.server.service import ServerSettings, Service

pytestmark = pytest.mark.anyio

THREADS = 600


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class App:
    service: Service
    client: httpx.AsyncClient
    reads: Counter[str]
    acme: str
    globex: str

    async def usage(self, key: str, resource: str, **params: Any) -> httpx.Response:
        self.reads.clear()
        return await self.client.get(
            f"/api/resources/{resource}/usage", params=params, headers={"Authorization": f"Bearer {key}"}
        )


def _count(store: Any, reads: Counter[str]) -> None:
    """Wrap the store instance's reads: rows handed out (listings) and calls (one row each)."""
    for name in ("list_threads", "list_all_threads"):
        real = getattr(store, name)

        async def listing(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            found = await _real(*args, **kwargs)
            reads["rows"] += len(found)
            return found

        setattr(store, name, listing)
    for name in ("get_thread", "get_head", "count_messages", "list_generations", "list_messages"):
        real = getattr(store, name)

        async def call(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            reads[_name] += 1
            return await _real(*args, **kwargs)

        setattr(store, name, call)


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[App]:
    path: Path = tmp_path_factory.mktemp("usage-page-165")
    service = Service.open(f"sqlite:///{path / 'memory.db'}", settings=ServerSettings())
    asgi = create_app(service)
    async with asgi.router.lifespan_context(asgi):
        memory = service.memory
        await service.keys.setup()
        acme = (await service.keys.create("acme"))[1]
        globex = (await service.keys.create("globex"))[1]
        for i in range(THREADS):
            await memory.create_thread(f"a{i:05d}", "alice", org_id="acme")
        for i in range(3):  # a few messages in some threads: the totals count them all
            await memory.store.save_messages(f"a{i * 250:05d}", [Message.user(f"m{n}") for n in range(i + 1)])
        for i in range(3):
            await memory.create_thread(f"s{i}", "small", org_id="acme")
        await memory.store.save_messages("s1", [Message.user("hello"), Message.assistant("hi")])
        await memory.create_thread("mg-1", "mixed", org_id="acme")
        await memory.create_thread("mg-2", "mixed", org_id="globex")
        reads: Counter[str] = Counter()
        _count(memory.store, reads)
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
            yield App(service, client, reads, acme, globex)


async def test_usage_reads_one_page_and_the_totals(app: App) -> None:
    answer = await app.usage(app.acme, "alice")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["threads"], body["messages"], body["total_tokens_observed"]) == (THREADS, 6, 0)
    assert [row["thread_id"] for row in body["per_thread"]] == [f"a{i:05d}" for i in range(100)]
    assert body["next"]
    assert "rows" in body["ledger"] and "total" in body["ledger"]
    # before: 600 rows listed, 600 thread reads, 600 heads, 600 counts
    assert app.reads["rows"] <= 100 + 3, app.reads
    assert app.reads["get_thread"] <= 1, app.reads
    assert app.reads["get_head"] <= 100, app.reads
    assert app.reads["count_messages"] <= 100, app.reads
    assert app.reads["list_messages"] + app.reads["list_generations"] == 0, app.reads
    answer = await app.usage(app.acme, "alice", limit=5)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["per_thread"]) == 5
    assert answer.json()["threads"] == THREADS
    assert app.reads["rows"] <= 5 + 3 and app.reads["count_messages"] <= 5 and app.reads["get_head"] <= 5, app.reads


async def test_pages_walk_every_thread_once(app: App) -> None:
    seen: list[str] = []
    messages = 0
    params: dict[str, Any] = {"limit": 250}
    pages = 0
    while True:
        answer = await app.usage(app.acme, "alice", **params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages += 1
        assert (body["threads"], body["messages"]) == (THREADS, 6)  # resource-wide on every page
        seen += [row["thread_id"] for row in body["per_thread"]]
        messages += sum(row["messages"] for row in body["per_thread"])
        assert app.reads["rows"] <= 250 + 3, app.reads
        if body["next"] is None:
            break
        params = {"limit": 250, "after": body["next"]}
    assert pages == 3
    assert seen == [f"a{i:05d}" for i in range(THREADS)]
    assert messages == 6


async def test_a_resource_of_one_page_answers_as_before(app: App) -> None:
    answer = await app.usage(app.acme, "small")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"resource_id", "threads", "messages", "total_tokens_observed", "per_thread", "ledger", "next"}
    assert body["next"] is None
    assert (body["resource_id"], body["threads"], body["messages"]) == ("small", 3, 2)
    assert [(row["thread_id"], row["messages"]) for row in body["per_thread"]] == [("s0", 0), ("s1", 2), ("s2", 0)]
    assert set(body["per_thread"][0]) == {
        "thread_id", "messages", "observation_tokens", "total_tokens_observed", "pending_message_tokens", "generations"
    }
    exact = await app.usage(app.acme, "small", limit=3)
    assert exact.json()["next"] is None  # a full last page says so


async def test_bad_paging_is_refused_and_scope_holds(app: App) -> None:
    for params in ({"limit": 0}, {"limit": 1001}, {"after": "not-a-cursor"}):
        answer = await app.usage(app.acme, "alice", **params)
        assert answer.status_code in (400, 422), (params, answer.text)
    assert (await app.usage(app.globex, "alice")).status_code == 404
    assert (await app.usage(app.acme, "nobody")).status_code == 404
    refused = await app.usage(app.acme, "mixed")
    assert refused.status_code == 404, refused.text
    assert "mg-2" not in refused.text
    # a cursor of another resource's thread pages nothing of it
    first = (await app.usage(app.acme, "small", limit=1)).json()
    other = await app.usage(app.acme, "alice", limit=2, after=first["next"])
    assert other.status_code == 200
    assert all(row["thread_id"].startswith("a") for row in other.json()["per_thread"])


@pytest.mark.parametrize("scope", ["resource", "thread"])
async def test_totals_count_each_live_record_once_on_every_page(tmp_path: Path, scope: str) -> None:
    config = MemoryConfig(scope=scope, observation=ObservationConfig(message_tokens=200))
    service = Service.open(f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=config)
    asgi = create_app(service)
    async with asgi.router.lifespan_context(asgi):
        memory = service.memory
        _, key = await service.keys.create("acme")
        threads = ["t1", "t2", "t3"]
        for thread_id in threads:
            await memory.create_thread(thread_id, "alice", org_id="acme")
            for i in range(3):
                turn = await memory.begin_turn(
                    thread_id=thread_id, messages=[Message.user(f"In {thread_id} I booked flight LX{i}00 to Lisbon.")]
                )
                await turn.end([Message.assistant("Noted.")])
            await memory.observe(thread_id)
        records = {r.id: r for r in [await memory.get_record(t) for t in threads] if r is not None}
        observed = sum(r.total_tokens_observed for r in records.values())
        assert observed > 0
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            after: str | None = None
            rows: list[dict[str, Any]] = []
            for _ in threads:
                params: dict[str, Any] = {"limit": 1} | ({"after": after} if after else {})
                answer = await client.get(
                    "/api/resources/alice/usage", params=params, headers={"Authorization": f"Bearer {key}"}
                )
                assert answer.status_code == 200, answer.text
                body = answer.json()
                assert (body["threads"], body["messages"]) == (3, 18)
                assert body["total_tokens_observed"] == observed, (body["total_tokens_observed"], observed)
                rows += body["per_thread"]
                after = body["next"]
            assert after is None
        assert [row["thread_id"] for row in rows] == threads
        for row in rows:
            record = await memory.get_record(row["thread_id"])
            assert record is not None
            assert row["total_tokens_observed"] == record.total_tokens_observed
            assert row["generations"] == record.generation + 1

"""A request about one page of a resource reads that page, not every thread of the resource.

On main every route that named a resource (``GET /api/threads``, ``POST /api/threads``, the
gateway's first turn of a new thread, ``POST /api/keys`` bound to a resource, an import) read
every thread row of the resource to check that none belonged to another org: with 3,000
threads of alice, ``GET /api/threads?resource_id=alice&limit=1`` read 3,000 thread rows. The
scope rules stay: another org's key is still not found, a resource whose first thread is another
org's is not its, a page holding another org's thread is refused, and the routes that reach every
thread (usage, export, delete, forget) still refuse a resource holding any thread of another org.

Driven through the real app (httpx's ASGI transport) over a temp-path SQLite store; thread rows
are counted on the store instance's ``list_threads`` / ``list_all_threads``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from obsmem.server.app import create_app
from obsmem.server.service import ServerSettings, Service

pytestmark = pytest.mark.anyio

THREADS = 3000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Rows:
    calls: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.calls)

    def reset(self) -> None:
        self.calls.clear()


@dataclass
class App:
    service: Service
    client: httpx.AsyncClient
    rows: Rows
    acme: str  # org key of acme
    alice: str  # acme key bound to alice
    globex: str  # org key of globex
    acme_admin: str
    globex_admin: str

    async def call(self, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        self.rows.reset()
        return await self.client.request(method, path, headers={"Authorization": f"Bearer {key}"}, **kwargs)


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[App]:
    path: Path = tmp_path_factory.mktemp("thread-rows-156")
    service = Service.open(f"sqlite:///{path / 'memory.db'}", settings=ServerSettings())
    asgi = create_app(service)
    async with asgi.router.lifespan_context(asgi):
        memory = service.memory
        await service.keys.setup()
        keys = [
            (await service.keys.create(org, resource_id=resource, admin=admin))[1]
            for org, resource, admin in (
                ("acme", None, False), ("acme", "alice", False), ("globex", None, False),
                ("acme", None, True), ("globex", None, True),
            )
        ]  # fmt: skip
        for i in range(THREADS):
            await memory.create_thread(f"a{i:05d}", "alice", org_id="acme")
        # mixed resources (a race of two orgs' first threads, or a library writing both):
        # 'mix-g' first globex's then acme's; 'mix-a' first acme's then globex's
        await memory.create_thread("mg-1", "mix-g", org_id="globex")
        await memory.create_thread("mg-2", "mix-g", org_id="acme")
        for i in range(5):
            await memory.create_thread(f"ma-{i}", "mix-a", org_id="acme")
        await memory.create_thread("ma-g", "mix-a", org_id="globex")
        await memory.create_thread("small-1", "small", org_id="acme")
        store = memory.store
        rows = Rows()
        listing, listing_all = store.list_threads, store.list_all_threads

        async def list_threads(*args: Any, **kwargs: Any) -> Any:
            found = await listing(*args, **kwargs)
            rows.calls.append(len(found))
            return found

        async def list_all_threads(*args: Any, **kwargs: Any) -> Any:
            found = await listing_all(*args, **kwargs)
            rows.calls.append(len(found))
            return found

        store.list_threads = list_threads  # type: ignore[method-assign]
        store.list_all_threads = list_all_threads  # type: ignore[method-assign]
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as client:
            yield App(service, client, rows, *keys)


async def test_a_page_of_threads_reads_that_page(app: App) -> None:
    answer = await app.call(app.acme, "GET", "/api/threads", params={"resource_id": "alice", "limit": 1})
    assert answer.status_code == 200, answer.text
    assert [t["id"] for t in answer.json()["threads"]] == ["a00000"]
    assert app.rows.total <= 2, app.rows.calls  # before: 3000
    answer = await app.call(app.acme, "GET", "/api/threads",
                            params={"resource_id": "alice", "limit": 10, "offset": 2500})  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert [t["id"] for t in answer.json()["threads"]] == [f"a{i:05d}" for i in range(2500, 2510)]
    assert app.rows.total <= 11, app.rows.calls  # before: 3000
    answer = await app.call(app.alice, "GET", "/api/threads", params={"limit": 3, "offset": 2998})
    assert answer.status_code == 200, answer.text
    assert [t["id"] for t in answer.json()["threads"]] == ["a02998", "a02999"]
    assert app.rows.total <= 4, app.rows.calls
    answer = await app.call(app.alice, "GET", "/api/threads", params={"offset": 5000})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"resource_id": "alice", "threads": []}
    assert app.rows.total <= 2, app.rows.calls


async def test_another_org_is_still_not_found_after_one_row(app: App) -> None:
    pages = ((100, {"resource_id": "alice"}), (5, {"resource_id": "alice", "offset": 100, "limit": 5}))
    for limit, params in pages:
        answer = await app.call(app.globex, "GET", "/api/threads", params=params)
        assert answer.status_code == 404, answer.text
        assert "a0" not in answer.text
        assert app.rows.total <= limit + 1, app.rows.calls  # before: 3000 (a page of at most limit now)
    made = await app.call(app.globex, "POST", "/api/threads", json={"id": "g-squat", "resource_id": "alice"})
    assert made.status_code == 404, made.text
    assert app.rows.total <= 2, app.rows.calls  # before: 3000
    bound = await app.call(app.globex_admin, "POST", "/api/keys", json={"resource_id": "alice"})
    assert bound.status_code == 409, bound.text
    assert app.rows.total <= 2, app.rows.calls  # before: 3000
    assert await app.service.memory.store.get_thread("g-squat") is None


async def test_a_new_thread_and_a_bound_key_read_one_row(app: App) -> None:
    made = await app.call(app.acme, "POST", "/api/threads", json={"id": "a-new", "resource_id": "alice"})
    assert made.status_code == 201, made.text
    assert app.rows.total <= 2, app.rows.calls  # before: 3000
    made = await app.call(app.alice, "POST", "/api/threads", json={"id": "a-new-2"})
    assert made.status_code == 201, made.text
    assert app.rows.total <= 2, app.rows.calls  # before: 3001
    again = await app.call(app.alice, "POST", "/api/threads", json={"id": "a-new-2"})
    assert again.status_code == 409, again.text
    bound = await app.call(app.acme_admin, "POST", "/api/keys", json={"resource_id": "alice"})
    assert bound.status_code == 201, bound.text
    assert app.rows.total <= 2, app.rows.calls  # before: 3002


async def test_an_import_into_a_resource_with_threads_reads_one_row(app: App) -> None:
    export = await app.call(app.acme, "GET", "/api/resources/small/export")
    assert export.status_code == 200, export.text
    conflict = await app.call(app.acme, "POST", "/api/resources/import",
                              json={"export": export.text, "into_resource": "alice"})  # fmt: skip
    assert conflict.status_code == 409, conflict.text
    assert app.rows.total <= 3, app.rows.calls  # before: 3000 and more
    refused = await app.call(app.globex, "POST", "/api/resources/import",
                             json={"export": export.text, "into_resource": "alice"})  # fmt: skip
    assert refused.status_code == 404, refused.text


async def test_mixed_resources_keep_their_scope(app: App) -> None:
    # first thread globex's: to acme the resource is not its own, on every route
    for method, path, kwargs in (
        ("GET", "/api/threads", {"params": {"resource_id": "mix-g"}}),
        ("GET", "/api/threads", {"params": {"resource_id": "mix-g", "offset": 1}}),
        ("POST", "/api/threads", {"json": {"id": "mg-3", "resource_id": "mix-g"}}),
        ("GET", "/api/resources/mix-g/usage", {}),
        ("GET", "/api/resources/mix-g/export", {}),
        ("DELETE", "/api/resources/mix-g", {}),
    ):  # fmt: skip
        answer = await app.call(app.acme, method, path, **kwargs)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "mg-" not in answer.text or method == "POST"
    # first thread acme's, one of globex's later: a page holding globex's thread is refused, and
    # so is every route that reaches every thread of the resource
    for method, path, kwargs in (
        ("GET", "/api/threads", {"params": {"resource_id": "mix-a"}}),
        ("GET", "/api/threads", {"params": {"resource_id": "mix-a", "offset": 4}}),
        ("GET", "/api/resources/mix-a/usage", {}),
        ("GET", "/api/resources/mix-a/export", {}),
        ("DELETE", "/api/resources/mix-a", {}),
    ):  # fmt: skip
        answer = await app.call(app.acme, method, path, **kwargs)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "ma-g" not in answer.text
    for thread in ("mg-1", "mg-2", "ma-0", "ma-g"):
        assert await app.service.memory.store.get_thread(thread) is not None


async def test_a_page_of_own_threads_in_a_mixed_resource_is_shown(app: App) -> None:
    # read without every thread of the resource: a page holding only acme's threads of a resource
    # whose first thread is acme's is shown (each one acme's key reads by its id anyway); before,
    # every page of it was 404 (globex's thread further on). Globex's is never shown.
    page = await app.call(app.acme, "GET", "/api/threads", params={"resource_id": "mix-a", "limit": 3})
    assert page.status_code == 200, page.text
    assert [t["id"] for t in page.json()["threads"]] == ["ma-0", "ma-1", "ma-2"]
    assert all(t["id"] != "ma-g" for t in page.json()["threads"])


async def test_delete_of_a_large_resource_reads_bounded_pages(app: App) -> None:
    # reaches every thread (as it must), a bounded page at a time
    for i in range(1200):
        await app.service.memory.create_thread(f"big-{i:05d}", "big", org_id="acme")
    answer = await app.call(app.acme, "DELETE", "/api/resources/big")
    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"]["threads"] == 1200
    assert max(app.rows.calls) <= 1000, app.rows.calls
    assert await app.service.memory.store.list_threads("big", limit=1) == []

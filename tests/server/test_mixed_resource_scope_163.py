"""A resource holding threads of two orgs (a race of their first threads, ``--dev``, or a library
caller writing both) is never shown whole to either org, and telling so reads no thread row.

On 4bef0aa the inspector's usage page (``/ui/usage``) checked the resource's first thread and the
threads of the page it showed: for a resource whose first 60 threads are acme's and whose 61st is
globex's, acme's key got the page and, under it, the resource-wide model-call chart and table,
which count globex's thread's calls. Before 4bef0aa it was refused (404); it is again. The REST
routes that reach every thread (usage, export, delete) refused such a resource only after reading
every thread row of it (3,000 here). Now the store answers the distinct orgs of the resource's
threads (``resource_orgs``), and a resource holding another org's thread is refused before any
thread is listed.

Driven through the real app (httpx's ASGI transport) over a temp-path SQLite store; thread rows
listed are counted on the store instance's ``list_threads`` / ``list_all_threads``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from obsmem.calls import ModelCall
from obsmem.server.app import create_app
from obsmem.server.service import ServerSettings, Service

pytestmark = pytest.mark.anyio

ACME_FIRST = 60  # acme's threads before globex's: more than one page of the inspector (50)
BIG = 3000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Rows:
    calls: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.calls)


@dataclass
class App:
    service: Service
    client: httpx.AsyncClient
    rows: Rows
    acme: str  # org key of acme
    globex: str  # org key of globex

    async def api(self, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        self.rows.calls.clear()
        return await self.client.request(method, path, headers={"Authorization": f"Bearer {key}"}, **kwargs)

    async def ui(self, key: str, path: str, **params: str) -> httpx.Response:
        self.rows.calls.clear()
        self.client.cookies.set("obsmem_ui_key", key)
        try:
            return await self.client.get(path, params=params)
        finally:
            self.client.cookies.clear()


def _call(thread: str, resource: str, tokens: int) -> ModelCall:
    return ModelCall(role="observer", model="test-model", input_tokens=tokens, output_tokens=tokens // 10,
                     latency_s=0.012, thread_id=thread, resource_id=resource,
                     started_at=datetime.now(UTC))  # fmt: skip


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[App]:
    path: Path = tmp_path_factory.mktemp("mixed-scope-163")
    service = Service.open(f"sqlite:///{path / 'memory.db'}", settings=ServerSettings())
    asgi = create_app(service)
    async with asgi.router.lifespan_context(asgi):
        memory = service.memory
        await service.keys.setup()
        acme = (await service.keys.create("acme"))[1]
        globex = (await service.keys.create("globex"))[1]
        # 'mixed': acme's first 60 threads, then globex's, whose model calls the ledger holds
        for n in range(ACME_FIRST):
            await memory.create_thread(f"a-{n:02d}", "mixed", org_id="acme")
        await memory.create_thread("g-1", "mixed", org_id="globex")
        await memory.store.record_model_calls([_call("a-00", "mixed", 1000), _call("g-1", "mixed", 77777)])
        # 'big-mixed': 3,000 of acme's, then globex's
        for n in range(BIG):
            await memory.create_thread(f"b-{n:05d}", "big-mixed", org_id="acme")
        await memory.create_thread("bg-1", "big-mixed", org_id="globex")
        # 'own': acme's only
        for n in range(ACME_FIRST):
            await memory.create_thread(f"o-{n:02d}", "own", org_id="acme")
        await memory.store.record_model_calls([_call("o-00", "own", 1234)])
        store = memory.store
        rows = Rows()
        for name in ("list_threads", "list_all_threads"):
            real = getattr(store, name)

            async def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                found = await _real(*args, **kwargs)
                rows.calls.append(len(found) if isinstance(found, list) else int(found is not None))
                return found

            setattr(store, name, counted)
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as client:
            yield App(service, client, rows, acme, globex)


async def test_usage_page_of_a_mixed_resource_is_refused(app: App) -> None:
    for key in (app.acme, app.globex):
        for params in ({}, {"after": "a-48"}, {"limit": "5"}, {"days": "0"}):
            page = await app.ui(key, "/ui/usage", resource_id="mixed", **params)
            assert page.status_code == 404, (params, page.status_code)  # before: 200 for acme, from the start
            assert 'id="calls-heading"' not in page.text
            assert "77777" not in page.text and "77,777" not in page.text and "g-1" not in page.text


async def test_usage_page_of_an_own_resource_still_shows_its_ledger(app: App) -> None:
    page = await app.ui(app.acme, "/ui/usage", resource_id="own", days="0")
    assert page.status_code == 200, page.text
    assert 'id="calls-heading"' in page.text and "1,234" in page.text.replace("1234", "1,234")
    assert "o-00" in page.text and "o-49" in page.text and "o-50" not in page.text
    assert app.rows.total <= 50 + 3, app.rows.calls  # the page (and its next row), no more
    refused = await app.ui(app.globex, "/ui/usage", resource_id="own")
    assert refused.status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/resources/big-mixed/usage"), ("GET", "/api/resources/big-mixed/export"),
     ("DELETE", "/api/resources/big-mixed")],
)  # fmt: skip
async def test_whole_resource_routes_refuse_a_mixed_resource_reading_no_thread(
    app: App, method: str, path: str
) -> None:
    for key in (app.acme, app.globex):
        answer = await app.api(key, method, path)
        assert answer.status_code == 404, (method, path, answer.text)
        assert "bg-1" not in answer.text and "b-00000" not in answer.text
        assert app.rows.total <= 1, app.rows.calls  # before: 3,001 thread rows read to refuse it
    assert await app.service.memory.store.get_thread("bg-1") is not None
    assert await app.service.memory.store.get_thread("b-02999") is not None


async def test_whole_resource_routes_still_serve_an_own_resource(app: App) -> None:
    usage = await app.api(app.acme, "GET", "/api/resources/own/usage")
    assert usage.status_code == 200, usage.text
    assert usage.json()["threads"] == ACME_FIRST
    exported = await app.api(app.acme, "GET", "/api/resources/own/export")
    assert exported.status_code == 200 and '"o-59"' in exported.text

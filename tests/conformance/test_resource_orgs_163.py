"""``resource_orgs`` (:mod:`obsmem.storage.contract`, what the server checks before it shows a
resource whole): the distinct org ids of a resource's threads, None first, each once, no other
resource's; on every adapter, natively (no thread row handed out) and through the fallback a
store without the native method gets (``list_threads`` a page at a time)."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.errors import InvalidInputError
from obsmem.storage import Store
from obsmem.storage.contract import resource_orgs
from obsmem.types import Thread

from .without_native import WithoutNative

pytestmark = pytest.mark.anyio


class Plain(WithoutNative):
    HIDDEN = "resource_orgs"


class Counted:
    """The store itself, its thread reads counted (the native method must not use them)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.rows = 0

    async def list_threads(self, *args: Any, **kwargs: Any) -> Any:
        page = await self._inner.list_threads(*args, **kwargs)
        self.rows += len(page)
        return page

    async def list_all_threads(self, *args: Any, **kwargs: Any) -> Any:
        page = await self._inner.list_all_threads(*args, **kwargs)
        self.rows += len(page)
        return page

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _seed(store: Store) -> None:
    for n in range(12):
        await store.create_thread(Thread(id=f"a-{n:02d}", resource_id="mixed", org_id="acme"))
    await store.create_thread(Thread(id="g-1", resource_id="mixed", org_id="globex"))
    await store.create_thread(Thread(id="n-1", resource_id="mixed"))  # a library caller's, of no org
    await store.create_thread(Thread(id="b-1", resource_id="mixed", org_id="Acme"))
    for n in range(5):
        await store.create_thread(Thread(id=f"s-{n}", resource_id="single", org_id="acme"))
    await store.create_thread(Thread(id="o-1", resource_id="other", org_id="initech"))
    await store.create_thread(Thread(id="x-1", resource_id="mixed-not", org_id="umbrella"))


async def test_native_orgs_read_no_thread_row(store: Store) -> None:
    assert callable(getattr(store, "resource_orgs", None)), type(store).__name__
    await _seed(store)
    counted = Counted(store)
    view: Any = counted
    assert await resource_orgs(view, "mixed") == [None, "Acme", "acme", "globex"]
    assert await resource_orgs(view, "single") == ["acme"]
    assert await resource_orgs(view, "other") == ["initech"]
    assert await resource_orgs(view, "none") == []
    assert counted.rows == 0


@pytest.mark.parametrize("page", [1, 4, 500])
async def test_fallback_pages_list_threads(store: Store, page: int) -> None:
    await _seed(store)
    plain = Plain(store)
    view: Any = plain
    assert await resource_orgs(view, "mixed", page=page) == [None, "Acme", "acme", "globex"]
    assert max(plain.pages) <= page
    assert sum(plain.pages) == 15  # every thread of the resource once, no other resource's
    assert await resource_orgs(view, "none", page=page) == []


async def test_fallback_goes_on_past_a_deleted_cursor(store: Store) -> None:
    await _seed(store)

    class Deleting(Plain):
        """Deletes the last thread of the first page right after handing the page out."""

        async def list_threads(self, *args: Any, **kwargs: Any) -> Any:
            page = await super().list_threads(*args, **kwargs)
            if len(self.pages) == 1:
                await self._inner.delete_thread(page[-1].id)
            return page

    view: Any = Deleting(store)
    assert await resource_orgs(view, "mixed", page=4) == [None, "Acme", "acme", "globex"]


async def test_threads_deleted_leave_their_org(store: Store) -> None:
    await _seed(store)
    for thread in ("g-1", "n-1", "b-1"):
        assert await store.delete_thread(thread)
    assert await resource_orgs(store, "mixed") == ["acme"]
    assert await resource_orgs(Plain(store), "mixed") == ["acme"]  # type: ignore[arg-type]


async def test_a_page_of_zero_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError):
        await resource_orgs(store, "mixed", page=0)


async def test_threads_holding_a_nul_keep_their_org(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    # PostgreSQL's JSON functions refuse a document holding an escaped NUL: such rows are read
    # a page at a time (2 here) beside the SQL answer, their org never lost
    from obsmem.storage.postgres import store as postgres_store

    monkeypatch.setattr(postgres_store, "_NUL_PAGE", 2)
    await store.create_thread(Thread(id="plain", resource_id="r", org_id="acme"))
    for n in range(5):
        await store.create_thread(Thread(id=f"nul-{n}", resource_id="r", org_id="acme",
                                         metadata={"note": f"a\x00b {n}"}, title="t\x00"))  # fmt: skip
    await store.create_thread(Thread(id="nul-g", resource_id="r", org_id="globex", metadata={"n": "\x00"}))
    await store.create_thread(Thread(id="nul-org", resource_id="r", org_id="in\x00itech"))
    await store.create_thread(Thread(id="slash", resource_id="r", org_id="umbrella", title="\\u0000 typed"))
    await store.create_thread(Thread(id="else", resource_id="elsewhere", org_id="wayne", metadata={"n": "\x00"}))
    expected = ["acme", "globex", "in\x00itech", "umbrella"]
    assert await resource_orgs(store, "r") == expected
    assert await resource_orgs(Plain(store), "r") == expected  # type: ignore[arg-type]
    assert await resource_orgs(store, "elsewhere") == ["wayne"]

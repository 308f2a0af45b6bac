"""The inspector's threads and usage pages read one page of threads, not every thread of the
resource: for a resource of 3,000 threads, ``/ui/threads`` read all 3,000 (and sorted them) to show
100, and ``/ui/usage`` read all 3,000 to show the first 100 with no way to see the others. Now
each shows ``?limit=`` threads (50 unless asked), oldest first, with a link to the next page, and
reads that page (a search reads at most 1,000 threads a request and offers to search on). Work
is counted in thread rows the store hands out, never timed; every thread is still reachable,
once, and a key still sees only its own resource's threads."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html import unescape
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.server.ui_env import DEMO_THREAD, UiEnv, open_ui_env

MANY = 3000
NEEDLE = 2500  # the thread whose title a search looks for


async def _seed(ui: UiEnv) -> None:
    for n in range(MANY):
        title = "the needle thread" if n == NEEDLE else f"thread number {n}"
        await ui.memory.create_thread(f"t160-{n:04d}", "alice", title=title, org_id="acme")
    await ui.memory.create_thread("t160-bob", "bob", title="bob's own", org_id="acme")


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-thread-pages-160"), turns=1) as env:
        env.live.call(_seed(env))
        yield env


class ThreadsRead:
    """Counts the thread rows the store hands out (listings and single reads) while active."""

    NAMES = ("list_threads", "list_all_threads", "get_thread")

    def __init__(self, store: Any) -> None:
        self.store = store
        self.rows = 0

    def __enter__(self) -> ThreadsRead:
        for name in self.NAMES:
            real = getattr(type(self.store), name)

            def counted(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                async def run() -> Any:
                    found = await _real(self.store, *args, **kwargs)
                    self.rows += len(found) if isinstance(found, list) else int(found is not None)
                    return found

                return run()

            setattr(self.store, name, counted)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self.NAMES:
            delattr(self.store, name)


def _client(ui: UiEnv, key: str) -> httpx.Client:
    return httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": key}, timeout=120)


def _linked_threads(text: str) -> list[str]:
    """The thread ids the page's table links to, in order."""
    body = text[text.index("<tbody>") : text.index("</tbody>")]
    return [unescape(m) for m in re.findall(r'<td><a href="/ui/threads/[^"]*">([^<]*)</a>', body)]


def _next(text: str) -> str | None:
    found = re.search(r'<a href="([^"]*)" rel="next">', text)
    return unescape(found.group(1)) if found else None


def test_the_threads_page_reads_one_page(ui: UiEnv) -> None:
    with ThreadsRead(ui.memory.store) as read, _client(ui, ui.keys.alice) as client:
        shown = client.get("/ui/threads")
    assert shown.status_code == 200
    assert len(_linked_threads(shown.text)) == 50  # before: 100
    # the page, then each shown thread's row again for its record (Memory.get_record); before: 3,102
    assert read.rows <= 2 * 50 + 5, read.rows
    assert _next(shown.text) is not None


def test_every_thread_is_on_one_page_once(ui: UiEnv) -> None:
    seen: list[str] = []
    path: str | None = "/ui/threads?limit=200"
    with _client(ui, ui.keys.alice) as client:
        for _ in range(40):
            if path is None:
                break
            with ThreadsRead(ui.memory.store) as read:
                shown = client.get(path)
            assert shown.status_code == 200, path
            assert read.rows <= 2 * 200 + 5, (path, read.rows)
            seen += _linked_threads(shown.text)
            path = _next(shown.text)
    assert path is None
    # most recently active first (helper 170), each once
    assert seen == [f"t160-{n:04d}" for n in reversed(range(MANY))] + [DEMO_THREAD]
    assert "t160-bob" not in seen


def test_a_search_reads_a_bounded_number_of_threads_a_request(ui: UiEnv) -> None:
    found: list[str] = []
    path: str | None = "/ui/threads?q=NEEDLE"
    requests = 0
    with _client(ui, ui.keys.alice) as client:
        while path is not None and requests < 10:
            with ThreadsRead(ui.memory.store) as read:
                shown = client.get(path)
            requests += 1
            assert shown.status_code == 200
            assert read.rows <= 1000 + 20, read.rows  # before: 3,002 for every search
            found += _linked_threads(shown.text)
            path = _next(shown.text)
    assert found == [f"t160-{NEEDLE:04d}"] and requests == 4  # 1,000 threads searched a request
    with _client(ui, ui.keys.alice) as client:
        many = client.get("/ui/threads", params={"q": "number 1", "limit": 20})
    listed = _linked_threads(many.text)
    assert listed == [f"t160-{n:04d}" for n in (1, *range(10, 20), *range(100, 109))]


def test_the_usage_page_reads_one_page_and_links_the_next(ui: UiEnv) -> None:
    with ThreadsRead(ui.memory.store) as read, _client(ui, ui.keys.alice) as client:
        shown = client.get("/ui/usage", params={"days": 7})
    assert shown.status_code == 200
    assert _linked_threads(shown.text) == [DEMO_THREAD] + [f"t160-{n:04d}" for n in range(49)]
    assert read.rows <= 2 * 50 + 5, read.rows  # before: 3,102
    assert 'id="calls-heading"' in shown.text
    following = _next(shown.text)
    assert following is not None and "days=7" in following
    with ThreadsRead(ui.memory.store) as read, _client(ui, ui.keys.alice) as client:
        second = client.get(following)
    assert _linked_threads(second.text) == [f"t160-{n:04d}" for n in range(49, 99)]
    assert read.rows <= 2 * 50 + 5, read.rows
    assert 'id="calls-heading"' in second.text


def test_a_cursor_reaches_no_further_than_the_key(ui: UiEnv) -> None:
    # bob's key naming one of alice's threads as its cursor: bob's own threads, none of alice's
    with _client(ui, ui.keys.bob) as client:
        for path in ("/ui/threads", "/ui/usage"):
            shown = client.get(path, params={"after": "t160-0100"})
            assert shown.status_code == 200
            assert _linked_threads(shown.text) == ["t160-bob"], path
            assert "t160-0" not in shown.text
    with _client(ui, ui.keys.globex) as client:
        for path in ("/ui/threads", "/ui/usage"):
            refused = client.get(path, params={"resource_id": "alice", "after": "t160-0100"})
            assert refused.status_code == 404 and "t160-" not in refused.text
    with _client(ui, ui.keys.acme_org) as client:
        shown = client.get("/ui/threads", params={"resource_id": "alice", "after": "t160-0100", "limit": 3})
    assert _linked_threads(shown.text) == ["t160-0101", "t160-0102", "t160-0103"]


def test_a_cursor_whose_thread_is_gone_goes_on_from_its_instant(ui: UiEnv) -> None:
    with _client(ui, ui.keys.alice) as client:
        first = client.get("/ui/threads", params={"limit": 5, "order": "oldest"})
        following = _next(first.text)
        assert following is not None and "after=t160-0003" in following
        ui.live.call(ui.memory.delete_thread("t160-0003"))
        second = client.get(following)
    assert second.status_code == 200
    listed = _linked_threads(second.text)
    assert "t160-0004" in listed and "t160-0003" not in listed  # nothing skipped


def test_a_user_clicks_through_to_the_next_page(alice: Page, ui: UiEnv) -> None:
    alice.goto(ui.url + "/ui/threads")
    rows = alice.locator("tbody tr")
    expect(rows).to_have_count(50)
    first = rows.first.locator("td").first.inner_text()
    alice.get_by_role("link", name="Next 50 threads").click()
    alice.wait_for_url("**before=*")  # most recently active first (helper 170)
    expect(rows).to_have_count(50)
    assert rows.first.locator("td").first.inner_text() != first
    alice.get_by_role("link", name="First threads").click()
    expect(rows.first.locator("td").first).to_have_text(first)

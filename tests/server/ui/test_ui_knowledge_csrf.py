"""The inspector in a real headless Chromium (and over httpx): the wikilink graph drawn around a
node, the bitemporal date view checked against the knowledge store's own read at that date, and
the CSRF token every state-changing form carries."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import Page

from starlette.requests import Request

from obsmem.knowledge import Knowledge, Node, RecordView, TrustState
from obsmem.server.ui.auth import csrf_token
from obsmem.server.ui.html import when
from tests.server.ui.helpers import UNLABELLED, focus
from tests.server.ui_env import UiEnv, open_ui_env

SCOPE = "org:acme/resource:alice"
CROWD = 40


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui"), turns=3) as env:
        yield env


@pytest.fixture(scope="module")
def facts(ui: UiEnv) -> dict[str, Any]:
    """Nadia's home over time (Paris from 2020, Lisbon from mid-2023: the same attribute, so
    Lisbon supersedes Paris), Lisbon in Portugal (a second hop), and a hub linking 40 nodes."""
    knowledge = ui.live.service.knowledge
    assert knowledge is not None

    async def make() -> dict[str, Any]:
        nadia = await knowledge.node("Nadia", "entity", SCOPE)
        paris = await knowledge.append(nadia.id, "Nadia lives in [[Paris]]", SCOPE, reason="t", when="2020-01-01",
                                       attribute="home")  # fmt: skip
        lisbon = await knowledge.append(nadia.id, "Nadia lives in [[Lisbon]]", SCOPE, reason="t", when="2023-06-01",
                                        attribute="home")  # fmt: skip
        city = await knowledge.store.resolve_node("Lisbon", SCOPE)
        assert city is not None
        await knowledge.append(city.id, "[[Lisbon]] is the capital of [[Portugal]]", SCOPE, reason="t",
                               attribute="country")  # fmt: skip
        hub = await knowledge.node("Hub", "entity", SCOPE)
        names = " ".join(f"[[Person {i:02d}]]" for i in range(CROWD))
        await knowledge.append(hub.id, f"The hub knows {names}", SCOPE, reason="t")
        return {"nadia": nadia, "hub": hub, "paris": paris.id, "lisbon": lisbon.id, "city": city}

    return dict(ui.live.call(make()))


def _knowledge(ui: UiEnv) -> Knowledge:
    knowledge = ui.live.service.knowledge
    assert knowledge is not None
    return knowledge


# -- the date view ----------------------------------------------------------------------------------
def _shown(page: Page) -> list[tuple[str, str]]:
    """(record id, valid until) of every row of the "Records about this node" table."""
    rows = page.locator("table", has=page.locator("caption", has_text="Records about this node")).locator("tbody tr")
    return [(cells[-1], cells[4]) for cells in (r.locator("td").all_inner_texts() for r in rows.all())]


def _stored(ui: UiEnv, node: Node, view: RecordView) -> list[tuple[str, str]]:
    found = ui.live.call(_knowledge(ui).store.list_about(node.id, SCOPE, view=view, limit=100))
    return [(r.id, when(r.valid_until)) for r in found.items]


def _apply(page: Page, as_of: str = "", as_known_at: str = "") -> None:
    page.get_by_label("As of").fill(as_of)
    page.get_by_label("As known at").fill(as_known_at)
    with page.expect_navigation():
        page.get_by_role("button", name="Apply").click()


def test_the_date_view_shows_what_the_store_reads_at_that_date(alice: Page, ui: UiEnv, facts: dict[str, Any]) -> None:
    nadia: Node = facts["nadia"]
    alice.goto(f"{ui.url}/ui/knowledge/nodes/{nadia.id}")
    now = _shown(alice)
    assert now == _stored(ui, nadia, RecordView(include_candidates=True))
    assert facts["lisbon"] in dict(now) and facts["paris"] not in dict(now)  # Lisbon superseded Paris

    _apply(alice, as_of="2021-06-01")
    assert "as_of=2021-06-01" in alice.url
    then = _shown(alice)
    assert then == _stored(ui, nadia, RecordView(as_of=datetime(2021, 6, 1, tzinfo=UTC), include_candidates=True))
    assert dict(then)[facts["paris"]] == "2023-06-01 00:00:00"  # valid until Lisbon
    assert facts["lisbon"] not in dict(then)

    _apply(alice, as_of="2024-01-01")
    later = _shown(alice)
    assert later == _stored(ui, nadia, RecordView(as_of=datetime(2024, 1, 1, tzinfo=UTC), include_candidates=True))
    assert facts["lisbon"] in dict(later) and facts["paris"] not in dict(later)

    yesterday = (datetime.now(UTC) - timedelta(days=1)).date()
    _apply(alice, as_known_at=yesterday.isoformat())  # before anything was captured
    known = datetime.combine(yesterday, datetime.min.time(), UTC)
    assert _shown(alice) == _stored(ui, nadia, RecordView(as_known_at=known, include_candidates=True)) == []

    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date()
    _apply(alice, as_of="2021-06-01", as_known_at=tomorrow.isoformat())
    both = RecordView(as_of=datetime(2021, 6, 1, tzinfo=UTC), as_known_at=datetime.combine(tomorrow,
                      datetime.min.time(), UTC), include_candidates=True)  # fmt: skip
    assert _shown(alice) == _stored(ui, nadia, both) == then


# -- the wikilink graph ------------------------------------------------------------------------------
def _drawn(page: Page) -> dict[str, int]:
    return dict(page.locator("svg.graph a.node").evaluate_all("els => els.map(e => [e.dataset.node, Number(e.dataset.hop)])"))


def test_the_graph_draws_two_hops_and_follows_the_date_view(alice: Page, ui: UiEnv, facts: dict[str, Any]) -> None:
    nadia: Node = facts["nadia"]
    city: Node = facts["city"]
    store = _knowledge(ui).store
    portugal = ui.live.call(store.resolve_node("Portugal", SCOPE))
    paris = ui.live.call(store.resolve_node("Paris", SCOPE))
    alice.goto(f"{ui.url}/ui/knowledge/nodes/{nadia.id}")
    drawn = _drawn(alice)
    assert drawn[nadia.id] == 0 and drawn[city.id] == 1 and drawn[portugal.id] == 2
    assert paris.id not in drawn  # Paris is only linked by a superseded record
    edges = alice.locator("svg.graph g.edge").evaluate_all(
        "els => els.map(e => [e.dataset.source, e.dataset.target, e.dataset.label])"
    )
    assert [nadia.id, city.id, "home"] in edges and [city.id, portugal.id, "country"] in edges
    figure = alice.get_by_role("group", name=re.compile("^Wikilink graph around Nadia"))
    assert figure.count() == 1
    # the list stays, for screen readers: every drawn neighbour, with how it is linked
    listed = alice.get_by_role("list", name="Linked nodes").locator("li").all_inner_texts()
    assert "Lisbon (node, linked to this node)" in listed and "Portugal (node, two hops, via Lisbon)" in listed
    assert alice.evaluate(UNLABELLED) == []
    focus(alice, f'svg.graph a.node[data-node="{portugal.id}"]')  # every node is reachable with Tab
    with alice.expect_navigation():
        alice.keyboard.press("Enter")
    assert alice.locator("h1").inner_text() == "Node Portugal"
    alice.go_back()

    _apply(alice, as_of="2021-06-01")  # as of then, Nadia lived in Paris
    drawn = _drawn(alice)
    assert drawn.get(paris.id) == 1 and city.id not in drawn and portugal.id not in drawn
    link = alice.locator(f'svg.graph a.node[data-node="{paris.id}"]')
    assert "as_of=2021-06-01" in (link.get_attribute("href") or "")  # the view carries over
    with alice.expect_navigation():
        link.click()
    assert alice.locator("h1").inner_text() == "Node Paris"
    assert _drawn(alice) == {paris.id: 0, nadia.id: 1}


def test_the_graph_is_bounded_and_says_how_many_more(alice: Page, ui: UiEnv, facts: dict[str, Any]) -> None:
    hub: Node = facts["hub"]
    alice.goto(f"{ui.url}/ui/knowledge/nodes/{hub.id}")
    graph = alice.locator("svg.graph")
    assert graph.get_attribute("data-nodes") == "30"
    assert graph.get_attribute("data-more") == str(CROWD + 1 - 30)
    assert f"+{CROWD + 1 - 30} more" in graph.inner_html()
    listed = alice.get_by_role("list", name="Linked nodes").locator("li").all_inner_texts()
    assert len(listed) == 30 and listed[-1] == f"+{CROWD + 1 - 30} more linked nodes not shown"
    names = [text.split(" (")[0] for text in listed[:-1]]
    assert names == sorted(names) == [f"Person {i:02d}" for i in range(29)]  # the same 29, in name order


# -- CSRF ---------------------------------------------------------------------------------------------
def _token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def _pending(ui: UiEnv) -> set[str]:
    return {r.id for r in ui.live.call(_knowledge(ui).review.pending(SCOPE)).items}


def test_every_post_form_carries_the_sessions_token(alice: Page, ui: UiEnv, facts: dict[str, Any]) -> None:
    pages = ["/ui/threads", "/ui/knowledge", "/ui/knowledge/review", "/ui/knowledge/audit", "/ui/usage",
             f"/ui/knowledge/nodes/{facts['nadia'].id}", "/ui/login"]  # fmt: skip
    tokens: set[str] = set()
    for path in pages:
        alice.goto(ui.url + path)
        forms = alice.locator("form").evaluate_all(
            "els => els.map(f => [f.method, f.querySelector('input[name=csrf_token]')?.value || ''])"
        )
        posted = [token for method, token in forms if method == "post"]
        assert posted and all(posted), path  # every page has a post form (at least "Sign out"), each with a token
        if path != "/ui/login":
            tokens |= set(posted)
    assert len(tokens) == 1  # one token per session


def test_a_forged_or_missing_token_is_refused_in_the_browser(alice: Page, ui: UiEnv) -> None:
    target = ui.candidates[0]
    alice.goto(ui.url + "/ui/knowledge/review")
    for forged in ("forged", None):
        alice.goto(ui.url + "/ui/knowledge/review")
        item = alice.locator(f'li[data-record="{target}"]')
        if forged is None:
            item.locator("input[name=csrf_token]").first.evaluate("e => e.remove()")
        else:
            item.locator("input[name=csrf_token]").first.evaluate(f"e => e.value = {forged!r}")
        with alice.expect_navigation() as navigation:
            item.get_by_role("button", name="Approve").click()
        response = navigation.value
        assert response is not None and response.status == 403
        assert "CSRF token is missing or wrong" in alice.get_by_role("alert").inner_text()
        assert target in _pending(ui)  # nothing changed
    alice.goto(ui.url + "/ui/knowledge/review")
    with alice.expect_navigation():
        alice.locator(f'li[data-record="{target}"]').get_by_role("button", name="Approve").click()
    assert "Approved" in alice.get_by_role("status").inner_text() and target not in _pending(ui)
    assert ui.live.call(_knowledge(ui).store.get_record(target, SCOPE, RecordView())).trust == TrustState.VERIFIED


def _signed_in(ui: UiEnv, key: str) -> httpx.Client:
    return httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": key}, follow_redirects=False, timeout=60)


def test_a_post_without_the_right_token_is_refused_over_http(ui: UiEnv) -> None:
    target = ui.candidates[1]
    with _signed_in(ui, ui.keys.acme_org) as other:  # a token from another session (another key)
        foreign = _token(other.get("/ui/knowledge/review").text)
    with _signed_in(ui, ui.keys.alice) as client:
        token = _token(client.get("/ui/knowledge/review").text)
        assert token != foreign
        path = f"/ui/knowledge/review/{target}"
        for fields in ({}, {"csrf_token": ""}, {"csrf_token": "x" * 64}, {"csrf_token": foreign}):
            for decision in ("approve", "reject", "edit"):
                refused = client.post(f"{path}/{decision}", data={**fields, "text": "changed", "reason": "r"})
                assert refused.status_code == 403, (fields, decision)
                assert "CSRF token" in refused.text
        assert target in _pending(ui)
        refused = client.post("/ui/logout", data={"csrf_token": foreign})
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert client.get("/ui/threads").status_code == 200  # still signed in
        done = client.post(f"{path}/reject", data={"csrf_token": token, "reason": "by http"})
        assert done.status_code == 303 and target not in _pending(ui)
        out = client.post("/ui/logout", data={"csrf_token": token})
        assert out.status_code == 303 and 'obsmem_ui_key=""' in out.headers["set-cookie"]


def test_the_login_form_needs_its_own_nonce(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, follow_redirects=False, timeout=60) as client:
        form = client.get("/ui/login")
        nonce = _token(form.text)
        assert client.cookies.get("obsmem_ui_login") == nonce
        for fields in ({"key": ui.keys.alice}, {"key": ui.keys.alice, "csrf_token": "forged"}):
            refused = client.post("/ui/login", data=fields)
            assert refused.status_code == 403 and "obsmem_ui_key" not in refused.headers.get("set-cookie", "")
        nonce = _token(client.get("/ui/login").text)
        signed = client.post("/ui/login", data={"key": ui.keys.alice, "csrf_token": nonce})
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/threads"
    with httpx.Client(base_url=ui.url, follow_redirects=False, timeout=60) as fresh:  # a nonce without its cookie
        refused = fresh.post("/ui/login", data={"key": ui.keys.alice, "csrf_token": nonce})
        assert refused.status_code == 403


def test_the_token_is_bound_to_the_session_cookie_and_without_one_to_the_app() -> None:
    def request(app: FastAPI, cookie: str | None = None) -> Request:
        headers = [(b"cookie", f"obsmem_ui_key={cookie}".encode())] if cookie else []
        return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "app": app})

    app, other = FastAPI(), FastAPI()
    # a key's token is the same in every worker process (no server state), and differs per key
    assert csrf_token(request(app, "om_a")) == csrf_token(request(other, "om_a")) != csrf_token(request(app, "om_b"))
    # under --dev there is no cookie: the token is keyed by a random secret of the app
    assert csrf_token(request(app)) == csrf_token(request(app)) != csrf_token(request(other))
    assert csrf_token(request(app)) != csrf_token(request(app, "om_a"))

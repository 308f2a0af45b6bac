"""Hostile review (helper-124) of the inspector in a real headless Chromium: another site framing
it to have the user click its buttons (clickjacking), and a review-queue link that makes the page
say whatever the link's author wants while carrying knowledge text in its address."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page

from tests.server.live import auth
from tests.server.ui_env import UiEnv, open_ui_env, sign_in


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui124"), turns=3) as env:
        yield env


@pytest.fixture(scope="module")
def attacker(ui: UiEnv) -> Iterator[int]:
    """Another web app on the same machine (another port: another origin, but the same *site*, so
    the inspector's SameSite=Strict cookie still goes with its frames), whose page frames the
    inspector's review queue almost invisibly over a "claim your prize" button. Its port."""
    target = ui.url + "/ui/knowledge/review"

    class Prize(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = (
                "<!doctype html><title>Win a prize</title><p>Click the button to claim your prize!</p>"
                f'<iframe name="victim" src="{target}" width="1000" height="800" style="opacity:0.01"></iframe>'
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Prize)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port
    server.shutdown()
    thread.join()


def _waiting(ui: UiEnv) -> set[str]:
    with httpx.Client(base_url=ui.url, headers=auth(ui.keys.alice)) as client:
        return {r["id"] for r in client.get("/api/knowledge/review").json()["records"]}


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_another_origin_cannot_frame_the_signed_in_inspector(
    context: BrowserContext, ui: UiEnv, attacker: int, host: str
) -> None:
    """Another app on the same host (127.0.0.1, another port) showed the signed-in review queue in
    its frame, Approve, Reject and Save edit buttons and all: real forms carrying the session's
    CSRF token, one click of the user's away (another site, localhost, framed the login form).
    The inspector's pages now refuse every frame (X-Frame-Options: DENY, frame-ancestors 'none')."""
    page: Page = context.new_page()
    sign_in(page, ui.url, ui.keys.alice)
    before = _waiting(ui)
    page.goto(f"http://{host}:{attacker}/prize")
    frame = page.wait_for_selector('iframe[name="victim"]', state="attached").content_frame()
    assert frame is not None
    frame.wait_for_url(lambda address: address != "about:blank")  # the inspector, or the refusal in its place
    frame.wait_for_load_state()
    assert frame.get_by_role("button").count() == 0
    assert frame.get_by_role("heading", name="Review queue").count() == 0
    assert frame.get_by_label("API key").count() == 0
    assert _waiting(ui) == before


def test_every_inspector_page_forbids_framing_and_scripts(ui: UiEnv) -> None:
    """What the browser test above sees, header by header, on the pages with and without a session."""
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.alice}) as client:
        for path in ("/ui/login", "/ui/threads", "/ui/knowledge/review", "/ui/threads/nope"):
            answer = client.get(path)
            assert answer.headers.get("x-frame-options") == "DENY", path
            policy = answer.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, path
            assert "script-src" not in policy or "script-src 'none'" in policy, path
            assert answer.headers.get("x-content-type-options") == "nosniff", path


def test_a_review_link_cannot_put_its_own_words_on_the_page(alice: Page, ui: UiEnv) -> None:
    """``/ui/knowledge/review?done=…`` showed any text the link's author wrote in the page's green
    "done" notice (a phishing line in the inspector's own voice)."""
    lure = "Your key was revoked: sign in again at evil.example"
    alice.goto(ui.url + "/ui/knowledge/review?" + str(httpx.QueryParams({"done": lure, "record": ui.candidates[0]})))
    assert lure not in alice.content()
    assert alice.get_by_role("status").count() == 0


def test_a_decision_says_what_it_did_without_the_text_in_the_address(alice: Page, ui: UiEnv) -> None:
    """After a decision the browser was sent to ``…/review?done=Approved: <the record's text>``:
    the knowledge text went into the address bar, the browser's history and every access log on
    the way. The notice is the same; the address names the decision and the record id only."""
    with httpx.Client(base_url=ui.url, headers=auth(ui.keys.alice)) as client:
        made = client.post("/api/knowledge", json={"text": "Nadia's PIN is 4711", "subject": "Nadia", "candidate": True})
        made.raise_for_status()
        record = made.json()["id"]
    alice.goto(ui.url + "/ui/knowledge/review")
    item = alice.locator(f'li[data-record="{record}"]')
    with alice.expect_navigation():
        item.get_by_role("button", name="Approve").click()
    # (the address after the server's own: its port, e.g. 47113, may hold "4711" by chance)
    address = alice.url.removeprefix(ui.url).replace(record, "<record>")
    assert "4711" not in address and "PIN" not in address, alice.url
    assert alice.get_by_role("status").inner_text() == "Approved: Nadia's PIN is 4711"

"""Hostile review (helper-124): the privacy boundary on knowledge a person writes through the
inspector. A fact a client asks the server to remember (REST, MCP ``remember``) is redacted before
it is stored (README, "Privacy"); a corrected text saved from the review queue was stored as typed,
secret and all, and from there reaches every context that shows the record."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page

from obsmem import MemoryConfig, PrivacyConfig
from obsmem.knowledge import RecordView
from tests.server.live import auth
from tests.server.ui.helpers import run
from tests.server.ui_env import UiEnv, open_ui_env

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SCOPE = "org:acme/resource:alice"
EVERYTHING = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    config = MemoryConfig(retrieval=True, privacy=PrivacyConfig(key="helper-124"))
    with open_ui_env(tmp_path_factory.mktemp("ui-privacy"), turns=1, config=config) as env:
        yield env


def _candidate(ui: UiEnv, text: str) -> str:
    with httpx.Client(base_url=ui.url, headers=auth(ui.keys.alice)) as client:
        made = client.post("/api/knowledge", json={"text": text, "subject": "Nadia", "candidate": True})
        made.raise_for_status()
        return str(made.json()["id"])


def _stored_texts(ui: UiEnv) -> list[str]:
    knowledge = ui.live.service.knowledge
    assert knowledge is not None
    node = run(ui, knowledge.store.resolve_node("Nadia", SCOPE))
    assert node is not None
    return [r.text for r in run(ui, knowledge.store.list_about(node.id, SCOPE, view=EVERYTHING, limit=100)).items]


def test_remember_is_redacted_through_the_api(ui: UiEnv) -> None:
    """The boundary as the README states it, for comparison."""
    _candidate(ui, f"Nadia's GitHub token was {TOKEN}")
    stored = _stored_texts(ui)
    assert any("token was [REDACTED:github_token:" in text for text in stored), stored
    assert not any(TOKEN in text for text in stored)


def test_an_edit_saved_in_the_review_queue_is_redacted_too(alice: Page, ui: UiEnv) -> None:
    record = _candidate(ui, "Nadia's GitHub token is unknown")
    alice.goto(ui.url + "/ui/knowledge/review")
    item = alice.locator(f'li[data-record="{record}"]')
    item.get_by_label("Corrected text").fill(f"Nadia's GitHub token is {TOKEN}")
    with alice.expect_navigation():
        item.get_by_role("button", name="Save edit").click()
    assert "Edited: Nadia's GitHub token is [REDACTED:github_token:" in alice.get_by_role("status").inner_text()
    stored = _stored_texts(ui)
    assert any("Nadia's GitHub token is [REDACTED:github_token:" in text for text in stored), stored
    assert not any(TOKEN in text for text in stored)
    assert TOKEN not in alice.content()


def test_an_edit_longer_than_the_api_takes_is_refused(alice: Page, ui: UiEnv) -> None:
    """REST takes a corrected text of 10,000 characters at most; the inspector took any the form
    carried (64 KiB)."""
    record = _candidate(ui, "Nadia's shoe size is 38")
    alice.goto(ui.url + "/ui/knowledge/review")
    item = alice.locator(f'li[data-record="{record}"]')
    item.get_by_label("Corrected text").fill("x" * 10_001)
    with alice.expect_navigation():
        item.get_by_role("button", name="Save edit").click()
    assert alice.get_by_role("alert").count() == 1 and "10000" in alice.get_by_role("alert").inner_text().replace(",", "")
    assert "Nadia's shoe size is 38" in _stored_texts(ui)


def test_an_edit_through_the_rest_api_is_redacted(ui: UiEnv) -> None:
    record = _candidate(ui, "Nadia's AWS key is unknown")
    with httpx.Client(base_url=ui.url, headers=auth(ui.keys.alice)) as client:
        edited = client.post(f"/api/knowledge/review/{record}/edit",
                             json={"text": f"Nadia's GitHub token really is {TOKEN}", "reason": "t"})  # fmt: skip
        edited.raise_for_status()
    assert not any(TOKEN in text for text in _stored_texts(ui))

"""The review queue's page cursor (``after``, a ``next_cursor`` it answered) through REST and the
inspector: one that is no record id is a clean 400 InvalidInputError naming ``after``, as the
audit log's is (5f9b9cd), not read as "from the start" (the first page again, as if the cursor had
been honoured). So is a garbage cursor of the inspector's node listing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth

GARBAGE = ["garbage", "z" * 26, "01ARZ3NDEKTSV4RRFFQ69G5FAVX", "01arz3ndektsv4rrffq69g5fav", "~"]


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as http:
        for text in ("Alice likes tea (review cursor)", "Alice owns a cat (review cursor)"):
            made = http.post("/api/knowledge", json={"text": text, "subject": "user", "candidate": True})
            assert made.status_code == 201, made.text
        yield http


@pytest.fixture(scope="module")
def inspector(env: Env, client: httpx.Client) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, timeout=60, cookies={"obsmem_ui_key": env.keys.alice}) as ui:
        yield ui


@pytest.mark.parametrize("cursor", GARBAGE)
def test_a_review_cursor_that_is_no_record_id_is_a_400_naming_after(
    client: httpx.Client, cursor: str
) -> None:
    """Before: 200 with the newest candidates (or none), the cursor silently taken."""
    answer = client.get("/api/knowledge/review", params={"after": cursor})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "InvalidInputError" and error["argument"] == "after", error


@pytest.mark.parametrize("cursor", GARBAGE)
def test_the_inspectors_review_page_refuses_a_garbage_cursor(inspector: httpx.Client, cursor: str) -> None:
    answer = inspector.get("/ui/knowledge/review", params={"after": cursor})
    assert answer.status_code == 400, answer.text
    assert "Invalid after" in answer.text and "Nothing to review" not in answer.text


def test_the_inspectors_node_listing_refuses_a_garbage_cursor(inspector: httpx.Client) -> None:
    answer = inspector.get("/ui/knowledge", params={"after": "garbage"})
    assert answer.status_code == 400, answer.text
    assert "Invalid node cursor" in answer.text


def test_the_cursor_the_review_queue_answers_still_pages(
    client: httpx.Client, inspector: httpx.Client
) -> None:
    first = client.get("/api/knowledge/review", params={"limit": 1}).json()
    assert first["next_cursor"], first
    second = client.get("/api/knowledge/review", params={"limit": 1, "after": first["next_cursor"]})
    assert second.status_code == 200, second.text
    assert [r["id"] for r in second.json()["records"]] != [r["id"] for r in first["records"]]
    assert second.json()["records"][0]["id"] < first["records"][0]["id"]
    page = inspector.get("/ui/knowledge/review", params={"after": first["next_cursor"]})
    assert page.status_code == 200, page.text
    assert second.json()["records"][0]["id"] in page.text

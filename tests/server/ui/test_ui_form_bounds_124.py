"""Hostile review (helper-124): the inspector's forms are small (a key, a CSRF token, a reason,
a corrected text), and it kept only 64 KiB of one; but it read the whole body first, up to the
server's 32 MiB request limit, on the login form without any key, and then answered as if the
form had expired. A body over the bound is now refused as too large (413) before it is read."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.server.ui_env import UiEnv, open_ui_env

BIG = 200 * 1024


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-forms124"), turns=1) as env:
        yield env


def _nonce(client: httpx.Client) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/ui/login").text)
    assert found is not None
    return found.group(1)


def test_an_oversized_login_form_is_refused_as_too_large(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, timeout=60) as client:
        nonce = _nonce(client)
        answer = client.post("/ui/login", data={"csrf_token": nonce, "key": "om_" + "x" * BIG})
    assert answer.status_code == 413, (answer.status_code, answer.text[-300:])
    assert "too large" in answer.text and "expired" not in answer.text


def test_an_oversized_review_form_is_refused_as_too_large(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, timeout=60, cookies={"obsmem_ui_key": ui.keys.alice}) as client:
        page = client.get("/ui/knowledge/review").text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert token is not None
        answer = client.post(f"/ui/knowledge/review/{ui.candidates[0]}/edit",
                             data={"csrf_token": token.group(1), "text": "y" * BIG})  # fmt: skip
    assert answer.status_code == 413, (answer.status_code, answer.text[-300:])
    assert answer.headers["content-type"].startswith("text/html")


def test_a_small_login_form_still_signs_in(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, timeout=60) as client:
        nonce = _nonce(client)
        answer = client.post("/ui/login", data={"csrf_token": nonce, "key": ui.keys.alice})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/threads"

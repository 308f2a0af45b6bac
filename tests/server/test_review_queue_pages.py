"""A key's review queue shows the candidates it may decide on, page after page.

Found by a hostile review: the queue read one page of every candidate the key's scope sees,
its ancestors' included, then kept the key's own. With 101 newer org-level candidates (which a
resource key may not decide on) alice's first page held none of hers: the inspector said
"0 candidate(s) waiting" with no way to the next page, and REST returned an empty page (with a
cursor). Both now page over the key's own candidates only, and the inspector links the next page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

ORG_CANDIDATES = 101


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("review-pages"))


def _candidate(client: httpx.Client, key: str, text: str, subject: str) -> str:
    made = client.post("/api/knowledge", json={"text": text, "subject": subject, "candidate": True}, headers=auth(key))
    assert made.status_code == 201, made.text
    record_id: str = made.json()["id"]
    return record_id


def test_a_resource_keys_queue_is_not_hidden_behind_the_orgs_candidates(env: Env) -> None:
    keys = env.keys
    with httpx.Client(base_url=env.url, timeout=60) as client:
        own = [_candidate(client, keys.alice, f"alice OWN-CANDIDATE {i}", "user") for i in range(3)]
        for i in range(ORG_CANDIDATES):
            _candidate(client, keys.acme_org, f"org candidate number {i} about widgets v{i}", "Acme")

        first = client.get("/api/knowledge/review", params={"limit": 2}, headers=auth(keys.alice)).json()
        assert [r["id"] for r in first["records"]] == own[::-1][:2]
        rest = client.get("/api/knowledge/review", params={"limit": 2, "after": first["next_cursor"]},
                          headers=auth(keys.alice)).json()  # fmt: skip
        assert [r["id"] for r in rest["records"]] == own[:1] and rest["next_cursor"] is None

        ui = httpx.Client(base_url=env.url, timeout=60, cookies={"obsmem_ui_key": keys.alice})
        html = ui.get("/ui/knowledge/review").text
        assert all(f'data-record="{i}"' in html for i in own), "alice's candidates are on her first page"
        assert "3 candidates waiting" in html and "org candidate number" not in html

        # The org's own queue pages through its 101, the inspector linking each next page.
        org_ui = httpx.Client(base_url=env.url, timeout=60, cookies={"obsmem_ui_key": keys.acme_org})
        seen: list[str] = []
        path: str | None = "/ui/knowledge/review"
        while path is not None:
            page = org_ui.get(path)
            assert page.status_code == 200, page.text
            seen += re.findall(r'<li data-record="([^"]+)"', page.text)
            more = re.search(r'<a href="([^"]+)"[^>]*>Next candidates</a>', page.text)
            path = more.group(1).replace("&amp;", "&") if more else None
        assert len(seen) == len(set(seen)) == ORG_CANDIDATES


def test_one_candidate_is_counted_in_the_singular(env: Env) -> None:
    """The inspector said "1 candidate(s) waiting" (and "1 message(s)", "1 call(s)", …)."""
    with httpx.Client(base_url=env.url, timeout=60) as client:
        _candidate(client, env.keys.bob, "bob ONE-CANDIDATE", "user")
    ui = httpx.Client(base_url=env.url, timeout=60, cookies={"obsmem_ui_key": env.keys.bob})
    html = ui.get("/ui/knowledge/review").text
    assert "1 candidate waiting" in html and "(s)" not in html

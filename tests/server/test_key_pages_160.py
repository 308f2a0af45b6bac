"""``GET /api/keys`` reads one page of keys, not the key table: an org with 3,000 keys listed all
3,000 in one response, every row read (and every other org's too, for the dev principal). Now
``limit`` (100 unless asked, at most 1,000) keys a page, oldest first, and ``next`` (the ``after``
of the next page; None on the last). Rows read are counted as the key store makes them
(``keys._row``), never timed. An admin key still sees only the keys it manages, on every page,
and another org's key id as a cursor is refused like an unknown one."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from obsmem.server import keys as key_module
from tests.server.conftest import Env, open_env
from tests.server.live import auth

MANY = 3000
OTHER = 500


def _seed(path: Any) -> None:
    """3,000 keys of acme bound to resource 'many' (three made in each instant, so the order's
    tie-break is used) and 500 of globex, written in one transaction."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    rows = []
    for n in range(MANY):
        made = (start + timedelta(seconds=n // 3)).isoformat()
        rows.append((f"{n:016x}", "0" * 64, "acme", "many", 0, 0, f"many {n}", made))
    for n in range(OTHER):
        made = (start + timedelta(seconds=n, microseconds=5)).isoformat()
        rows.append((f"f{n:015x}", "0" * 64, "globex", "carol", 0, 0, f"globex {n}", made))
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO obsmem_api_keys (key_id, secret_sha256, org_id, resource_id, read_only, admin, label, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows,
        )  # fmt: skip
    db.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("key-pages-160")):
        _seed(env.store_path)
        yield env


class RowsRead:
    """Counts the key rows the key store reads (each becomes an ApiKey in ``keys._row``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        real = key_module._row

        def counted(row: tuple[Any, ...]) -> Any:
            self.rows += 1
            return real(row)

        monkeypatch.setattr(key_module, "_row", counted)


def _all_pages(client: httpx.Client, key: str, limit: int | None = None) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {} if limit is None else {"limit": limit}
    for _ in range(200):
        answer = client.get("/api/keys", params=params, headers=auth(key))
        assert answer.status_code == 200, answer.text
        body = answer.json()
        found += body["keys"]
        if body["next"] is None:
            return found
        assert body["next"] == body["keys"][-1]["key_id"]
        params["after"] = body["next"]
    raise AssertionError("the listing did not end")


def test_one_page_reads_one_page_of_rows(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    read = RowsRead(monkeypatch)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        answer = client.get("/api/keys", headers=auth(env.keys.acme_admin))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["keys"]) == 100  # before: 3,004, every key of the org
    assert body["next"] == body["keys"][-1]["key_id"]
    assert read.rows <= 100 + 2, read.rows  # the page (and the one past it) and the caller's key; before: 3,501


def test_every_key_of_the_org_once_in_order(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        paged = _all_pages(client, env.keys.acme_admin, limit=700)
        small = _all_pages(client, env.keys.acme_admin)
    with sqlite3.connect(env.store_path) as db:
        stored = [r[0] for r in db.execute("SELECT key_id FROM obsmem_api_keys WHERE org_id = 'acme'")]
    db.close()
    ids = [k["key_id"] for k in paged]
    assert sorted(ids) == sorted(stored) and len(ids) == len(set(ids)) == MANY + 5
    assert [k["key_id"] for k in small] == ids
    order = [(k["created_at"], k["key_id"]) for k in paged]
    assert [datetime.fromisoformat(c) for c, _ in order] == sorted(datetime.fromisoformat(c) for c, _ in order)
    assert {k["org_id"] for k in paged} == {"acme"}


def test_a_resource_admin_pages_through_its_resources_keys_only(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        made = client.post("/api/keys", json={"resource_id": "many", "admin": True}, headers=auth(env.keys.acme_admin))
        assert made.status_code == 201, made.text
        admin = made.json()["secret"]
        read = RowsRead(monkeypatch)
        first = client.get("/api/keys", params={"limit": 10}, headers=auth(admin)).json()
        assert read.rows <= 10 + 2, read.rows
        listed = _all_pages(client, admin, limit=1000)
    assert len(first["keys"]) == 10 and first["next"] is not None
    assert {k["resource_id"] for k in listed} == {"many"} and len(listed) == MANY + 1


def test_limits_and_cursors_are_checked(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        for limit in (0, 1001, -1):
            assert client.get("/api/keys", params={"limit": limit}, headers=auth(env.keys.acme_admin)).status_code == 422
        big = client.get("/api/keys", params={"limit": 1000}, headers=auth(env.keys.acme_admin)).json()
        assert len(big["keys"]) == 1000 and big["next"] is not None
        # a globex key's id as a cursor: refused exactly like an id that names no key
        other = client.get("/api/keys", params={"after": f"f{3:015x}"}, headers=auth(env.keys.acme_admin))
        unknown = client.get("/api/keys", params={"after": "0123456789abcdeF"}, headers=auth(env.keys.acme_admin))
        assert other.status_code == unknown.status_code == 400
        assert "globex" not in other.text and other.json()["error"]["argument"] == unknown.json()["error"]["argument"]
        # not an admin key: refused as before
        assert client.get("/api/keys", headers=auth(env.keys.alice)).status_code == 403

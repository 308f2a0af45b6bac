"""A resource id belongs to one org. A key bound to a resource claims it for the key's org, so
another org can neither take the resource over (and lock the key out of it) nor be given a key
bound to it. As a client of the REST API and the OpenAI gateway would meet it.

Before this, an org key of globex creating a thread in resource 'dave' (bound to a key of acme
that had no thread yet) answered 201, and from then on acme's key answered 404 on every route of
its own resource: the resource had become globex's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("claims"))


@pytest.fixture(scope="module")
def client(env: Env) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=env.url, timeout=60) as http:
        yield http


def _key(env: Env, org: str, resource: str | None = None, *, admin: bool = False) -> str:
    return env.live.call(env.live.service.keys.create(org, resource_id=resource, admin=admin))[1]


def _as(client: httpx.Client, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return client.request(method, path, headers=auth(key), **kwargs)


def test_another_org_cannot_take_over_a_resource_bound_to_a_key(env: Env, client: httpx.Client) -> None:
    dave = _key(env, "acme", "dave")  # acme's key for its user dave, who has no thread yet
    globex = _key(env, "globex")  # an org-wide key of another org
    squat = _as(client, globex, "POST", "/api/threads", json={"id": "squat-1", "resource_id": "dave"})
    assert squat.status_code == 404, squat.text  # not globex's resource: as for any other org's
    gateway = client.post(
        "/v1/chat/completions",
        headers={**auth(globex), "X-Obsmem-Thread": "squat-2", "X-Obsmem-Resource": "dave"},
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]},
    )
    assert gateway.status_code == 404, gateway.text
    # acme's key still owns its resource: it creates, lists and reads its threads.
    made = _as(client, dave, "POST", "/api/threads", json={"id": "dave-chat"})
    assert made.status_code == 201, made.text
    listed = _as(client, dave, "GET", "/api/threads")
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()["threads"]] == ["dave-chat"]
    assert _as(client, dave, "GET", "/api/resources/dave/export").status_code == 200
    assert _as(client, globex, "GET", "/api/threads", params={"resource_id": "dave"}).status_code == 404


def test_a_key_of_another_org_is_not_bound_to_a_claimed_resource(env: Env, client: httpx.Client) -> None:
    _key(env, "acme", "erin")  # acme claims erin (no thread yet)
    globex_admin = _key(env, "globex", admin=True)
    refused = _as(client, globex_admin, "POST", "/api/keys", json={"resource_id": "erin"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["argument"] == "resource_id"
    # A resource with threads of another org is refused the same way.
    acme_org = _key(env, "acme")
    assert _as(client, acme_org, "POST", "/api/threads", json={"id": "fay-1", "resource_id": "fay"}).status_code == 201
    again = _as(client, globex_admin, "POST", "/api/keys", json={"resource_id": "fay"})
    assert again.status_code == 409, again.text
    # Its own org's resources, and free ones, still get keys.
    assert _as(client, globex_admin, "POST", "/api/keys", json={"resource_id": "carol"}).status_code == 201
    assert _as(client, globex_admin, "POST", "/api/keys", json={"resource_id": "gus"}).status_code == 201


def test_a_revoked_key_no_longer_claims_its_resource(env: Env, client: httpx.Client) -> None:
    service = env.live.service
    key, _ = env.live.call(service.keys.create("acme", resource_id="hal"))
    assert env.live.call(service.keys.revoke(key.key_id))
    globex = _key(env, "globex")
    made = _as(client, globex, "POST", "/api/threads", json={"id": "hal-1", "resource_id": "hal"})
    assert made.status_code == 201, made.text

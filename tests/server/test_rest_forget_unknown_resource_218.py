"""REST forget of a resource an org key's org holds nothing of: not found (404), as DELETE and
export of it answer. It was 400 'Invalid knowledge_within: the forget covers
'org:default/resource:nobody', which is not within 'org:acme'': a client forgetting a value for a
list of its users failed with a bad-request error naming a scope it never sent."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("rest-forget-unknown-218"))


def test_an_org_key_forgetting_in_an_unknown_resource_is_answered_not_found(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        for key in (env.keys.acme_org, env.keys.acme_admin):
            forgot = client.post("/api/resources/nobody/forget", json={"value": "ZED-991"}, headers=auth(key))
            assert forgot.status_code == 404, forgot.text
            assert forgot.json()["error"]["type"] == "ResourceNotFoundError"
            assert client.delete("/api/resources/nobody", headers=auth(key)).status_code == 404


def test_an_org_key_still_forgets_in_a_resource_that_holds_only_knowledge(env: Env) -> None:
    org = auth(env.keys.acme_org)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        made = client.post("/api/knowledge", headers=org, json={"text": "Zed's code is ZED-991", "resource_id": "gone"})
        assert made.status_code == 201, made.text
        forgot = client.post("/api/resources/gone/forget", json={"value": "ZED-991"}, headers=org)
        assert forgot.status_code == 200, forgot.text
        assert forgot.json()["forgotten"]["knowledge_records"] == 1

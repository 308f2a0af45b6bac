"""GET /health is what a load balancer's health check asks, and many ask with HEAD (found by
helper-139: HEAD /health answered 405 Method Not Allowed, so a HEAD health check took every
replica out of service). Both answer 200 without a key; HEAD has no body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Env, open_env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(Path(tmp_path_factory.mktemp("health-head")))


def test_head_and_get_health_answer_without_a_key(env: Env) -> None:
    with httpx.Client(base_url=env.url, timeout=30) as client:
        got = client.get("/health")
        head = client.head("/health")
        other = client.head("/api/threads")  # everything else still needs a key
    assert got.status_code == 200 and got.json()["status"] == "ok"
    assert head.status_code == 200 and head.content == b""
    assert other.status_code in (401, 405)

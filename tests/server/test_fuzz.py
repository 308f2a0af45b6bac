"""Schemathesis over /openapi.json against the live server: no 5xx, no unhandled exception, and
every error in the one documented shape (``{"error": {"type", "message"}}``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("fuzz")):
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
            client.post("/api/threads", json={"id": "f-1"})
            client.post("/api/threads/f-1/messages", json={"format": "openai", "messages": [
                {"role": "user", "content": "fuzz me"}]})  # fmt: skip
        yield env


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _check_error_shape(response: Any) -> None:
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, body
        assert isinstance(body["error"]["type"], str) and isinstance(body["error"]["message"], str)


def _operations(env: Env) -> list[Any]:
    schema = schemathesis.openapi.from_url(env.url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def _fuzz(env: Env, examples: int, run: Any) -> int:
    """Run ``run(case)`` on ``examples`` generated cases of every operation; returns the operation count.

    (Schemathesis's pytest plugin does not load under pytest 9, so the cases come from each
    operation's hypothesis strategy.)"""
    operations = _operations(env)
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: Any) -> None:
            run(case)

        check()
    return len(operations)


def test_openapi_with_a_resource_key(env: Env) -> None:
    statuses: Counter[int] = Counter()

    def run(case: Any) -> None:
        response = case.call(base_url=env.url, headers=auth(env.keys.alice), timeout=60)
        statuses[response.status_code] += 1
        case.validate_response(response, checks=CHECKS)
        if not case.path.startswith("/v1/") or response.status_code != 200:
            _check_error_shape(response)

    assert _fuzz(env, 25, run) >= 19
    assert statuses[200] + statuses[201] > 0 and sum(statuses.values()) > 200, statuses
    print(dict(statuses))


def test_openapi_with_an_admin_key(env: Env) -> None:
    def run(case: Any) -> None:
        response = case.call(base_url=env.url, headers=auth(env.keys.acme_admin), timeout=60)
        case.validate_response(response, checks=CHECKS)
        if not case.path.startswith("/v1/") or response.status_code != 200:
            _check_error_shape(response)

    _fuzz(env, 10, run)


def test_openapi_without_a_key(env: Env) -> None:
    def run(case: Any) -> None:
        response = case.call(base_url=env.url, timeout=60)
        assert response.status_code < 500
        if case.path != "/health":
            assert response.status_code in (401, 404, 405, 422), response.text
            _check_error_shape(response)

    _fuzz(env, 5, run)

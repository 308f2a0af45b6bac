"""Fixtures for the service tests: a store, a knowledge store, keys, an upstream model server, and
a live uvicorn server over them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import AgentModel, small_memory_config
from tests.models.wire_server import WireServer
from tests.server.live import Keys, LiveServer, live_server, make_keys

UPSTREAM_KEY = "sk-upstream-SECRET-never-leaves"


@dataclass
class Env:
    live: LiveServer
    keys: Keys
    upstream: WireServer
    store_path: Path

    @property
    def url(self) -> str:
        return self.live.url


def open_env(path: Path, *, dev: bool = False) -> Iterator[Env]:
    upstream = WireServer()
    upstream.responder = AgentModel()
    with upstream:
        settings = ServerSettings(upstream_url=upstream.url + "/v1", upstream_key=UPSTREAM_KEY, dev=dev)
        service = Service.open(
            f"sqlite:///{path / 'memory.db'}", settings=settings, knowledge=Knowledge.sqlite(path / "knowledge.db"),
            config=small_memory_config(retrieval=True), max_turn_wait=None,
        )
        keys = make_keys(service)
        with live_server(service) as live:
            yield Env(live, keys, upstream, path / "memory.db")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("service"))

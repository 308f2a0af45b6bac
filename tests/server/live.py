"""A real uvicorn server on a loopback port, in a thread, for the service tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from obsmem.server import Service, create_app

__all__ = ["Keys", "LiveServer", "live_server", "make_keys"]


@dataclass
class LiveServer:
    url: str
    service: Service
    server: uvicorn.Server
    loop: asyncio.AbstractEventLoop | None = None

    def call(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the server's loop (e.g. ``service.settled()``) and return its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(60)


@contextmanager
def live_server(service: Service) -> Iterator[LiveServer]:
    config = uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    live = LiveServer("", service, server)

    def run() -> None:
        loop = asyncio.new_event_loop()
        live.loop = loop
        loop.run_until_complete(server.serve())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for _ in range(3000):  # bounded wait for the socket (not an assertion on time)
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    live.url = f"http://127.0.0.1:{port}"
    try:
        yield live
    finally:
        server.should_exit = True
        thread.join(60)


@dataclass
class Keys:
    """Keys of one fixture: org acme (resources alice and bob) and org globex (resource carol)."""

    alice: str
    bob: str
    globex: str
    acme_admin: str
    alice_read_only: str
    acme_org: str
    extra: dict[str, str] = field(default_factory=dict)


def make_keys(service: Service) -> Keys:
    async def run() -> Keys:
        await service.keys.setup()
        made = [
            (await service.keys.create(org, resource_id=resource, read_only=ro, admin=admin))[1]
            for org, resource, ro, admin in (
                ("acme", "alice", False, False), ("acme", "bob", False, False), ("globex", "carol", False, False),
                ("acme", None, False, True), ("acme", "alice", True, False), ("acme", None, False, False),
            )
        ]
        return Keys(*made)

    return asyncio.run(run())


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}

"""A thread's observations, read through the MCP resource ``obsmem://threads/{id}/observations``
(and ``Memory.get_observations``, which the REST ``/observations`` field uses), are what that
thread's context shows: in resource scope without sharing, never another thread's sections.
Before the fix the MCP resource returned the resource's whole record text, so reading thread
``work`` showed thread ``health``'s observations, which ``work``'s context never shows."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from mcp import Client

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig
from obsmem.server import ServerSettings, Service
from obsmem.server.access import Principal
from obsmem.server.mcp_server import build_mcp
from tests.server.live import auth, live_server, make_keys

pytestmark = pytest.mark.anyio


def _config(share: bool) -> MemoryConfig:
    return MemoryConfig(
        scope="resource", share_threads_in_resource=share,
        observation=ObservationConfig(message_tokens=200, buffer_tokens=False),
    )  # fmt: skip


async def _two_threads(memory: Memory) -> None:
    for thread, secret in (("work", "WORK-SECRET the salary is 90k"), ("health", "HEALTH-SECRET the diagnosis is flu")):
        await memory.create_thread(thread, "alice", org_id="acme")
        for i in range(6):
            turn = await memory.begin_turn(
                thread_id=thread, resource_id="alice", messages=[Message.user(f"{secret}, note {i}. " + "more words " * 15)]
            )
            await turn.end([Message.assistant("Noted. " * 20)])


@pytest.mark.parametrize("share", [False, True], ids=["sharing-off", "sharing-on"])
async def test_the_observations_of_a_thread_are_what_its_context_shows(share: bool) -> None:
    service = Service.open("memory://", settings=ServerSettings(), config=_config(share), max_turn_wait=None)
    await service.start()
    try:
        memory = service.memory
        await _two_threads(memory)
        context = await memory.get_context("work")
        shown = "\n".join(m.text for m in context.system_messages)
        assert "WORK-SECRET" in shown and ("HEALTH-SECRET" in shown) == share
        own = await memory.get_observations("work")
        assert "WORK-SECRET" in own and ("HEALTH-SECRET" in own) == share
        async with Client(build_mcp(service, Principal("k1", "acme", "alice"))) as client:
            read = await client.read_resource("obsmem://threads/work/observations")
            text = read.contents[0].text  # type: ignore[union-attr]
        assert text == own
    finally:
        await service.stop()


def test_rest_shows_a_thread_no_other_threads_observations(tmp_path: Path) -> None:
    """Over a live server: ``GET /observations`` (its ``observations`` text and its ``record``)
    and ``GET /generations`` of thread ``work`` hold nothing of thread ``health`` in resource scope
    without sharing. Before, ``record`` and the generations were the resource's whole records."""
    service = Service.open(
        f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=_config(False), max_turn_wait=None
    )
    keys = make_keys(service)
    with live_server(service) as live:
        live.call(_two_threads(service.memory))
        with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=60) as client:
            observations = client.get("/api/threads/work/observations")
            generations = client.get("/api/threads/work/generations")
            health = client.get("/api/threads/health/observations")
    assert observations.status_code == generations.status_code == health.status_code == 200
    assert "HEALTH-SECRET" in health.text  # the other thread's own read shows it
    for response in (observations, generations):
        assert "WORK-SECRET" in response.text and "HEALTH-SECRET" not in response.text, response.url
    record = observations.json()["record"]
    assert set(record["threads"]) == {"work"}
    assert all(chunk["thread_id"] == "work" for chunk in record["buffered_chunks"])

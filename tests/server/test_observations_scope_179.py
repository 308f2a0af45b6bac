"""In resource scope without sharing, a thread's record over REST (``GET /observations``'s
``record``, ``GET /generations``) holds nothing of the resource's other threads: its buffered
reflection too (helper-179).

With reflection buffering on (the default: observation buffering and ``buffer_activation``), a
resource's record carries a reflection made early over the whole resource's observations, every
thread's sections. ``_record_json`` showed only the thread's own active observations, state and
buffered chunks, but the buffered reflection whole: thread ``work``'s record read thread
``health``'s observations, which ``work``'s context never shows."""

from __future__ import annotations

from pathlib import Path

import httpx

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.server import ServerSettings, Service
from tests.server.live import auth, live_server, make_keys

CONFIG = MemoryConfig(
    scope="resource", share_threads_in_resource=False,
    observation=ObservationConfig(message_tokens=200),
    reflection=ReflectionConfig(observation_tokens=1200, buffer_activation=0.5),
)  # fmt: skip
SECRETS = {"work": "WORK-SECRET the salary is 90k", "health": "HEALTH-SECRET the diagnosis is flu"}


async def _until_a_reflection_is_buffered(memory: Memory) -> None:
    for thread in SECRETS:
        await memory.create_thread(thread, "alice", org_id="acme")
    for i in range(60):
        for thread, secret in SECRETS.items():
            said = Message.user(f"{secret}, note {i} about item{i} in city{i}. " + "more words " * 15)
            turn = await memory.begin_turn(thread_id=thread, resource_id="alice", messages=[said])
            await turn.end([Message.assistant("Noted. " * 20)])
            await memory.settled()
            record = await memory.get_record("work")
            if record is not None and record.buffered_reflection is not None:
                assert "HEALTH-SECRET" in record.buffered_reflection.text  # the resource's, whole
                return
    raise AssertionError("no reflection was buffered")


def test_a_threads_record_holds_no_other_threads_buffered_reflection(tmp_path: Path) -> None:
    service = Service.open(
        f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=CONFIG, max_turn_wait=None
    )
    keys = make_keys(service)
    with live_server(service) as live:
        live.call(_until_a_reflection_is_buffered(service.memory))
        with httpx.Client(base_url=live.url, headers=auth(keys.alice), timeout=60) as client:
            observations = client.get("/api/threads/work/observations")
            generations = client.get("/api/threads/work/generations")
    assert observations.status_code == generations.status_code == 200
    buffered = observations.json()["record"]["buffered_reflection"]
    assert buffered is not None and "WORK-SECRET" in buffered["text"]  # its own part stays
    for response in (observations, generations):
        assert "HEALTH-SECRET" not in response.text, response.url

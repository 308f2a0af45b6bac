"""REST ``GET /api/resources/{id}/usage`` in resource scope: the threads of a resource share one
observation record, so its tokens observed are the record's, once. The total used to add that
record once per thread: a resource of three threads reported three times what memory observed."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from obsmem import Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.server.app import create_app
from obsmem.server.service import ServerSettings, Service

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("scope", ["resource", "thread"])
async def test_tokens_observed_of_a_resource_count_each_record_once(tmp_path: Path, scope: str) -> None:
    config = MemoryConfig(scope=scope, observation=ObservationConfig(message_tokens=200))
    service = Service.open(f"sqlite:///{tmp_path / 'memory.db'}", settings=ServerSettings(), config=config)
    asgi = create_app(service)
    async with asgi.router.lifespan_context(asgi):
        memory = service.memory
        _, key = await service.keys.create("acme")
        threads = ["t1", "t2", "t3"]
        for thread_id in threads:
            await memory.create_thread(thread_id, "alice", org_id="acme")
            for i in range(3):
                turn = await memory.begin_turn(
                    thread_id=thread_id, messages=[Message.user(f"In {thread_id} I booked flight LX{i}00 to Lisbon.")]
                )
                await turn.end([Message.assistant("Noted.")])
            await memory.observe(thread_id)
        records = {r.id: r for r in [await memory.get_record(t) for t in threads] if r is not None}
        assert len(records) == (1 if scope == "resource" else 3)
        observed = sum(r.total_tokens_observed for r in records.values())
        assert observed > 0
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            answer = await client.get("/api/resources/alice/usage", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["threads"] == 3
        assert body["total_tokens_observed"] == observed, (body["total_tokens_observed"], observed)

"""``GET /api/resources/{id}/usage`` counts each thread's generations without reading them: the
head's number counts them (numbered from 0, only ever deleted all together), as the inspector's
usage page does. On main it read up to 1,000 whole observation records (every generation's full
observation text) per thread, so one request over a resource of many long-lived threads read
gigabytes on the server every tenant shares."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

THREADS = ("ur-1", "ur-2", "ur-3")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("usage-reads-139")):
        memory = env.live.service.memory
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for thread in THREADS:
                made = client.post("/api/threads", json={"id": thread}, headers=auth(env.keys.alice))
                assert made.status_code == 201, made.text
                for round_ in range(3):
                    said = {"format": "openai", "messages": [
                        {"role": "user", "content": f"I moved to Munich in 201{round_} and I work as a data "
                         f"engineer at Helio. My daughter Mia starts school on Monday {round_}."},
                        {"role": "assistant", "content": f"Noted for round {round_}."},
                    ]}  # fmt: skip
                    path = f"/api/threads/{thread}/messages"
                    saved = client.post(path, json=said, headers=auth(env.keys.alice))
                    assert saved.status_code == 201, saved.text
                    env.live.call(memory.observe(thread))
                    env.live.call(memory.reflect(thread))
        yield env


def test_resource_usage_counts_generations_unread(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = env.live.service.memory
    expected = {t: len(env.live.call(memory.list_generations(t, limit=1000))) for t in THREADS}
    assert all(count >= 2 for count in expected.values()), expected
    read: list[Any] = []
    original = memory.store.list_generations

    async def counted(*args: Any, **kwargs: Any) -> Any:
        read.append(kwargs.get("limit"))
        return await original(*args, **kwargs)

    monkeypatch.setattr(memory.store, "list_generations", counted)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        answer = client.get("/api/resources/alice/usage", headers=auth(env.keys.alice))
    assert answer.status_code == 200, answer.text
    rows = {row["thread_id"]: row for row in answer.json()["per_thread"]}
    assert {t: rows[t]["generations"] for t in THREADS} == expected
    assert read == []  # before: [1000, 1000, 1000], every generation's record read whole

"""``obsmem delete-resource`` run while the REST API was deleting the same user (its threads'
rows gone, the rest not yet) took that delete for one "cut off earlier" and ran a second delete
alongside it. The REST API's deletes (``DELETE /api/resources/{id}``, ``DELETE
/api/threads/{id}``) now mark themselves under way with a lease while they run; the command says
another delete is under way and deletes nothing (see tests/cli/test_delete_under_way_117.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem import Message
from tests.crash.harness import env as child_env
from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("delete-under-way"))


def _held(env: Env, on_call: int) -> tuple[threading.Event, threading.Event]:
    """The server's memory stops before the ``on_call``-th thread's data goes (its row gone),
    until ``go`` is set; ``reached`` says it got there."""
    memory = env.live.service.memory
    real = memory._drop_thread_data
    reached, go = threading.Event(), threading.Event()
    calls = 0

    async def held(thread_id: str, **kwargs: Any) -> dict[str, int]:
        nonlocal calls
        calls += 1
        if calls == on_call:
            reached.set()
            await asyncio.get_running_loop().run_in_executor(None, go.wait, 120)
        return await real(thread_id, **kwargs)

    memory._drop_thread_data = held  # type: ignore[method-assign]
    return reached, go


@pytest.mark.parametrize(("route", "on_call"), [("/api/resources/alice", 2), ("/api/threads/t2", 1)])
def test_the_cli_during_a_rest_delete_says_another_delete_is_under_way(env: Env, route: str, on_call: int) -> None:
    memory = env.live.service.memory
    for thread in ("t1", "t2"):
        env.live.call(memory.create_thread(thread, "alice", org_id="acme"))
        env.live.call(memory.save_messages(thread, [Message.user(f"Hello from {thread}")]))
    reached, go = _held(env, on_call)
    answers: list[httpx.Response] = []

    def delete() -> None:
        with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=180) as client:
            answers.append(client.delete(route))

    request = threading.Thread(target=delete)
    request.start()
    try:
        assert reached.wait(120), "the REST delete never reached its point"
        done = subprocess.run(
            [sys.executable, "-m", "obsmem", "delete-resource", "alice", "--store", str(env.store_path), "--yes"],
            capture_output=True, text=True, env={**child_env(), "COLUMNS": "200"}, timeout=120,
        )
    finally:
        go.set()
        request.join(180)
    said = " ".join((done.stdout + done.stderr).split())
    assert "cut off" not in said, said
    assert "another delete of resource 'alice' is under way" in said, said
    assert done.returncode == 1, said
    assert answers and answers[0].status_code == 200, answers
    assert env.live.call(memory.store.list_leases("erasing:")) == []  # released at its end

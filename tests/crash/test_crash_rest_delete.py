"""``DELETE /api/threads/{id}`` retried after the server process was killed midway through it.

``Memory.delete_thread`` called again finishes a delete cut off after the thread's row went (see
test_crash_erase.py), but the REST route looks the thread up first for the key's tenancy and
answers 404 once the row is gone, so a client retrying the request never gets it finished (the
thread's working memory stays). The crash's state is set up in the live server's memory as the
killed process left it: the delete noted, the thread's row deleted, the rest not yet.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("crash-rest-delete"))


def test_a_retried_rest_delete_finishes_a_delete_the_crash_cut_off(env: Env) -> None:
    memory = env.live.service.memory
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as alice:
        assert alice.post("/api/threads", json={"id": "cr-t1"}).status_code == 201

        async def cut_off() -> None:  # what the killed process had done
            thread = await memory.store.get_thread("cr-t1")
            assert thread is not None
            await memory.store.set_working_memory("thread:cr-t1", "card: CRASH-REST-4242")
            await memory._begin_erasing(thread)
            await memory.store.delete_thread("cr-t1")

        env.live.call(cut_off())

        retried = alice.delete("/api/threads/cr-t1")

        assert retried.status_code == 200, retried.text
        assert env.live.call(memory.store.get_working_memory("thread:cr-t1")) is None


def test_a_retried_rest_delete_of_another_tenants_cut_off_thread_is_not_found(env: Env) -> None:
    """Whatever the fix: a key of another org never finishes (nor learns of) a cut-off delete."""
    memory = env.live.service.memory
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as alice:
        assert alice.post("/api/threads", json={"id": "cr-t2"}).status_code == 201

    async def cut_off() -> None:
        thread = await memory.store.get_thread("cr-t2")
        assert thread is not None
        await memory._begin_erasing(thread)
        await memory.store.delete_thread("cr-t2")

    env.live.call(cut_off())
    with httpx.Client(base_url=env.url, headers=auth(env.keys.globex), timeout=60) as globex:
        assert globex.delete("/api/threads/cr-t2").status_code == 404

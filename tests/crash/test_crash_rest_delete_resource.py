"""``DELETE /api/resources/{id}`` retried after the server process was killed midway through it,
once the rows of all the resource's threads had gone: the route looked the resource's threads up
(none left) and answered 404, so the delete ``Memory.delete_resource`` would finish was never
finished over REST: the threads' working memory stayed. The crash's state is set up in the live
server's memory as the killed process left it (as test_crash_rest_delete.py does)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("crash-rest-delete-resource"))


def cut_off(env: Env, thread_id: str, text: str) -> None:
    """What a delete_resource killed after the thread's row went had done."""
    memory = env.live.service.memory

    async def run() -> None:
        thread = await memory.store.get_thread(thread_id)
        assert thread is not None
        await memory.store.set_working_memory(f"thread:{thread_id}", text)
        await memory._begin_erasing(thread)
        await memory.store.delete_thread(thread_id)

    env.live.call(run())


def test_a_retried_rest_delete_resource_finishes_a_delete_the_crash_cut_off(env: Env) -> None:
    memory = env.live.service.memory
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as alice:
        assert alice.post("/api/threads", json={"id": "crr-t1"}).status_code == 201
        cut_off(env, "crr-t1", "card: CRASH-REST-5151")

        retried = alice.delete("/api/resources/alice")

        assert retried.status_code == 200, retried.text
        assert env.live.call(memory.store.get_working_memory("thread:crr-t1")) is None
        assert env.live.call(memory.store.get_working_memory("obsmem:erasing:resource:alice")) is None


def test_another_orgs_key_never_finishes_a_cut_off_delete_resource(env: Env) -> None:
    """A key of org acme serving the whole org, asking to delete globex's user whose delete was
    cut off: not found, as before, and globex's leftovers are not touched by it."""
    memory = env.live.service.memory
    env.live.call(memory.create_thread("crr-t2", "gx-user", org_id="globex"))
    cut_off(env, "crr-t2", "card: CRASH-REST-6262")
    with httpx.Client(base_url=env.url, headers=auth(env.keys.acme_org), timeout=60) as acme:
        assert acme.delete("/api/resources/gx-user").status_code == 404
    assert env.live.call(memory.store.get_working_memory("thread:crr-t2")) == "card: CRASH-REST-6262"
    assert [t.id for t in env.live.call(memory.unfinished_deletes("gx-user"))] == ["crr-t2"]

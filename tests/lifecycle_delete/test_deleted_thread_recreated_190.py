"""A thread deleted while the app starts it again under the same id (another process, another
task of the same app) and talks in it long enough to be observed.

The delete takes the thread's key out of the resource's record, which the store allows only for
a thread that no longer exists. When the id was made again meanwhile (its creation finishes the
cut-off delete first, then the new thread is observed), the delete's own write of the record
found a live thread's cursor left out and was refused: ``delete_thread`` raised StorageError
and stopped midway (the user's other threads' markers and receipts, its notes left). And before
that change too, the delete went on over the new thread: its observations were taken out of the
record, its cursor kept (never observed again), its working memory dropped. A delete that another
caller finished, the id made again since, now goes no further."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(
    scope="resource", share_threads_in_resource=True, observation=ObservationConfig(message_tokens=200)
)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Memory, Memory]]:
    if request.param == "memory":  # one app, two tasks
        async with Memory("memory://", config=CONFIG, max_turn_wait=None) as memory:
            yield memory, memory
        return
    url = f"sqlite:///{tmp_path}/m.db" if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    async with (
        Memory(url, config=CONFIG, max_turn_wait=None) as first,
        Memory(url, config=CONFIG, max_turn_wait=None) as second,
    ):
        yield first, second


async def talk(memory: Memory, thread_id: str, turns: int, topic: str) -> None:
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id="u",
            messages=[Message.user(f"About my {topic}: note {i}, the {topic} plan number {i * 17} matters to me.")],
        )
        await turn.step([Message.assistant(f"Noted {topic} {i}.")])
        await turn.end()


async def test_a_delete_overtaken_by_the_ids_new_thread_finishes(pair: tuple[Memory, Memory]) -> None:
    deleting, app = pair
    await talk(deleting, "g", 6, "garden")
    await talk(deleting, "other", 4, "boat")
    await deleting.settled()
    engine = deleting.engine
    forget = engine.forget_thread
    overtaken = []

    async def slow_forget(thread, **kwargs):  # type: ignore[no-untyped-def]
        # The delete is slow here (a vector index, a busy database): meanwhile the app makes the
        # id again and talks in it until it is observed.
        if not overtaken:
            overtaken.append(True)
            engine.forget_thread = forget  # type: ignore[method-assign]
            await talk(app, "g", 6, "orchard")
            await app.settled()
            record = await app.get_record("g")
            assert record is not None and "g" in record.threads  # the new thread was observed
        await forget(thread, **kwargs)

    engine.forget_thread = slow_forget  # type: ignore[method-assign]
    assert await deleting.delete_thread("g")
    assert overtaken
    record = await deleting.get_record("other")
    assert record is not None and "garden" not in record.active_observations
    assert await deleting.store.get_thread("g") is not None  # the new thread stays
    assert await deleting.unfinished_delete("g") is None
    record = await app.get_record("g")
    assert record is not None and "orchard" in record.active_observations  # the new thread's memory stays
    assert "garden" not in record.active_observations
    await talk(app, "g", 2, "orchard")  # and goes on
    await talk(deleting, "other", 2, "boat")
    await app.settled()

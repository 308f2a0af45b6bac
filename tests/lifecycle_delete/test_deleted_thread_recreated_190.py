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


import pytest

from obsmem import Memory
from tests.lifecycle_delete.sharing import talk, pair  # noqa: F401 (a fixture)

pytestmark = pytest.mark.anyio


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

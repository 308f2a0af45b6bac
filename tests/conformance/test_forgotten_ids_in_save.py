"""A message forget rewrote or deleted is never stored again by ``save_messages``: its id is on
its thread (``metadata["obsmem"]["forgotten"]``, see :func:`obsmem.storage.forgetting.forgotten_ids`)
and the store checks it in the save's own write, so an old copy saved back (an app, a framework
holding the conversation as it was) cannot bring the forgotten value back, not even a save that
read the thread before the forget noted the id (the callers' own checks see only what they read)."""

from __future__ import annotations

import pytest

from obsmem.storage import Store
from obsmem.storage.contract import rewrite_message_if_unchanged
from obsmem.storage.forgetting import with_forgotten_ids
from obsmem.types import Message, Thread

pytestmark = pytest.mark.anyio


async def _noted(store: Store, thread_id: str, ids: list[str]) -> None:
    thread = await store.get_thread(thread_id)
    assert thread is not None
    assert await store.update_thread(with_forgotten_ids(thread, ids), expected_version=thread.version) is not None


@pytest.mark.parametrize("guarded", [False, True])
async def test_a_forgotten_id_is_not_stored_again(store: Store, guarded: bool) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    kept, rewritten, deleted = await store.save_messages(
        "t1", [Message.user("hello"), Message.user("my code is 4242"), Message.user("pin 9191")]
    )
    # What forget does: the ids noted first, then the rewrite and the delete.
    await _noted(store, "t1", [rewritten.id, deleted.id])
    changed = rewritten.model_copy(update={"parts": Message.user("my code is [gone]").parts})
    assert await rewrite_message_if_unchanged(store, changed, expected=rewritten)
    assert await store.delete_messages([deleted.id]) == 1
    newest = max(m.seq or 0 for m in await store.list_messages("t1"))
    after = {"after_seq": newest} if guarded else {}

    old_copies = [
        Message(id=rewritten.id, role="user", parts=Message.user("my code is 4242").parts),
        Message(id=deleted.id, role="user", parts=Message.user("pin 9191").parts),
    ]
    fresh = Message.user("and another thing")
    saved = await store.save_messages("t1", [*old_copies, fresh], **after)

    assert [m.id for m in saved] == [fresh.id]  # the copies are left out of what was stored
    stored = await store.list_messages("t1")
    assert [m.id for m in stored] == [kept.id, rewritten.id, fresh.id]
    assert stored[1].text == "my code is [gone]"
    assert await store.get_messages([deleted.id]) == []
    # A batch of nothing but such copies stores nothing.
    assert await store.save_messages("t1", old_copies, **after) == []
    assert [m.text for m in await store.list_messages("t1")] == ["hello", "my code is [gone]", "and another thing"]


async def test_other_threads_ids_are_not_refused(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    await store.create_thread(Thread(id="t2", resource_id="r1"))
    message = Message.user("in t2")
    await _noted(store, "t1", [message.id])
    assert [m.id for m in await store.save_messages("t2", [message])] == [message.id]

"""A reply made while a thread it was shown was deleted names no deleted thread.

In resource scope with sharing on, a reply's receipt names every thread whose observations its
context showed. ``delete_thread`` takes the deleted thread's id out of the receipts of the user's
other threads' replies; but a turn of another thread whose context was built before the delete
and whose reply was saved after it (the model answering meanwhile, in this process or another)
stored a receipt naming the deleted thread: its id (an email address, a case name) was in the file
after the delete. The stores now leave out of a saved receipt the threads that no longer exist,
checked in the save's transaction (PostgreSQL: the named threads' rows read locked, so a delete
of one waits for the save and then finds the reply). A live thread's groups stay."""

from __future__ import annotations

import json

import pytest

from obsmem import Memory, Message
from tests.lifecycle_delete.sharing import talk, pair  # noqa: F401 (a fixture)

pytestmark = pytest.mark.anyio
GONE = "case-ZEBRA-7731@example.org"


async def test_a_reply_in_flight_names_no_deleted_thread(pair: tuple[Memory, Memory]) -> None:
    app, deleting = pair
    for _ in range(3):
        await talk(app, GONE, 4, "garden")
        await talk(app, "kept", 4, "kite")
        await talk(app, "other", 4, "boat")
    await app.settled()
    turn = await app.begin_turn(thread_id="other", resource_id="u", messages=[Message.user("What do I own?")])
    assert "garden" in str(turn.context)  # the deleted thread's observations were shown
    assert await deleting.delete_thread(GONE)  # while the model answers
    await turn.step([Message.assistant("A boat and a kite.")])
    await turn.end()
    messages = await app.list_messages("other", limit=1000)
    for message in messages:
        assert GONE not in json.dumps(message.metadata), message.id
    receipt = await app.receipt(messages[-1].id)
    assert receipt is not None
    assert {g.thread_id for g in receipt.groups} == {"kept", "other"}  # the live threads' groups stay

"""A read as_known_at a moment a record was removed must leave it out, also once it is restored.

RecordView(as_known_at=K) is "the store as it was at K". A record removed at T1 and restored at
T3 (restore_record, or a reviewer's rejection restoring what the rejected record had superseded)
came back in reads as known at any T2 between: the restore cleared deleted_at and kept nothing of
the removal, so the past answered as if it had never happened."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice"


async def test_known_while_removed_is_left_out_after_a_restore(clocked: tuple[Knowledge, FakeClock]) -> None:
    knowledge, clock = clocked
    user = await knowledge.node("User", "person", SCOPE)
    record = await knowledge.append(user.id, "their dog is called Kiki", SCOPE, reason="said")
    moments = []
    for step in ("remove", "restore", "remove", "restore"):
        clock.advance(10)
        moments.append(clock.now())  # before this step
        clock.advance(10)
        if step == "remove":
            await knowledge.remove(record.id, SCOPE, reason="the user said it was wrong")
        else:
            await knowledge.store.restore_record(record.id, SCOPE, actor="admin", reason="it was right")
    clock.advance(10)
    moments.append(clock.now())
    seen = [await knowledge.store.get_record(record.id, SCOPE, RecordView(as_known_at=m)) is not None
            for m in moments]
    assert seen == [True, False, True, False, True]
    assert await knowledge.store.get_record(record.id, SCOPE) is not None  # as it is now
    everything = RecordView(as_known_at=moments[1], include_deleted=True)
    assert await knowledge.store.get_record(record.id, SCOPE, everything) is not None

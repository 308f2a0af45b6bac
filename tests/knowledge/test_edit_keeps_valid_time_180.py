"""Correcting an older value through the review queue must not make it the current one.

ReviewQueue.edit (the CLI's and REST's edit, obsmem knowledge edit) appends the corrected text and
removes the original. A record stated without a fact time holds from the moment it was captured;
the corrected copy took its own capture time instead, so fixing a typo in an old phone number
put that number after the newer one in the timeline: reads returned the old number as current
and hid the new one, and reads as_of a time between them answered the newer number's time with
nothing, or the old number. The copy now keeps the original's valid time."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice"
OLD, NEW = "their phone number is +49 151 5550 7720", "their phone number is +49 176 5550 3381"


async def test_editing_an_older_value_keeps_the_newer_one_current(clocked: tuple[Knowledge, FakeClock]) -> None:
    knowledge, clock = clocked
    user = await knowledge.node("User", "person", SCOPE)
    old = await knowledge.append(user.id, OLD, SCOPE, reason="said", attribute="phone number")
    clock.advance(3600)
    between = clock.now()
    clock.advance(3600)
    new = await knowledge.append(user.id, NEW, SCOPE, reason="said", attribute="phone number")
    clock.advance(3600)
    fixed = await knowledge.review.edit(old.id, SCOPE, OLD.replace("7720", "7721"), reason="a typo")
    current = (await knowledge.store.list_about(user.id, SCOPE)).items
    assert [r.id for r in current] == [new.id]
    then = (await knowledge.store.list_about(user.id, SCOPE, view=RecordView(as_of=between))).items
    assert [r.id for r in then] == [fixed.id]
    assert fixed.valid_from == old.valid_from


async def test_editing_the_current_value_keeps_it_current(clocked: tuple[Knowledge, FakeClock]) -> None:
    """Control."""
    knowledge, clock = clocked
    user = await knowledge.node("User", "person", SCOPE)
    await knowledge.append(user.id, OLD, SCOPE, reason="said", attribute="phone number")
    clock.advance(3600)
    new = await knowledge.append(user.id, NEW, SCOPE, reason="said", attribute="phone number")
    clock.advance(3600)
    fixed = await knowledge.review.edit(new.id, SCOPE, NEW.replace("3381", "3382"), reason="a typo")
    assert [r.id for r in (await knowledge.store.list_about(user.id, SCOPE)).items] == [fixed.id]

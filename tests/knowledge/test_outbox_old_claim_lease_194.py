"""An outbox entry claimed by an obsmem from before a522022 (no holder's lease kept on it) is
not taken over by a worker asking with a short lease before the drain lease every obsmem worker
claimed with (60 s) has run out (helper-194).

Before, such an entry expired by the claiming worker's own lease: a worker asking with a 1-second
lease took over, seconds in, an entry an old worker (``Knowledge.drain``: 60 s) still held."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

RESOURCE = "org:acme/resource:alice"
T0 = datetime(2040, 1, 1, tzinfo=UTC)


async def _claimed_by_an_old_version(path: Path) -> None:
    """A knowledge file whose one entry an old worker holds: its claim, without ``lease_seconds``."""
    async with Knowledge.sqlite(path) as knowledge:
        user = await knowledge.node("User", "person", RESOURCE)
        await knowledge.append(user.id, "their home city is Munich", RESOURCE, reason="said")
        (held,) = await knowledge.store.claim_outbox("old-worker", lease_seconds=60, now=T0)
    with sqlite3.connect(path) as conn:
        (doc,) = conn.execute("SELECT doc FROM knowledge_outbox WHERE id = ?", (held.id,)).fetchone()
        entry = json.loads(doc)
        del entry["lease_seconds"]
        conn.execute("UPDATE knowledge_outbox SET doc = ? WHERE id = ?", (json.dumps(entry), held.id))


async def test_a_short_lease_waits_out_an_old_workers_claim(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    await _claimed_by_an_old_version(path)
    async with Knowledge.sqlite(path) as knowledge:
        store = knowledge.store
        assert await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=10)) == []
        assert await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=59)) == []
        (taken,) = await store.claim_outbox("quick", lease_seconds=1, now=T0 + timedelta(seconds=60))
        assert taken.claimed_by == "quick" and taken.lease_seconds == 1


async def test_a_longer_lease_still_counts_for_an_old_workers_claim(tmp_path: Path) -> None:
    """Control: as before, a claimer's lease longer than 60 s is what the old claim expires by."""
    path = tmp_path / "k.db"
    await _claimed_by_an_old_version(path)
    async with Knowledge.sqlite(path) as knowledge:
        store = knowledge.store
        assert await store.claim_outbox("slow", lease_seconds=600, now=T0 + timedelta(seconds=599)) == []
        (taken,) = await store.claim_outbox("slow", lease_seconds=600, now=T0 + timedelta(seconds=600))
        assert taken.claimed_by == "slow"

"""Erasing one user's fact reads the audit events of the scopes that fact lived in, not the whole
org's audit log (helper-152, reviewing 311ecc6).

311ecc6 made erase (and purge) delete the events about a record on its whole chain, so that a
fact narrowed from the org to alice leaves no quote behind; it did so by reading every event of
every scope above the record: erasing one of alice's never-narrowed facts parsed each org-scope
event of every user of the org (203 events for 200 other users' facts, 803 for 800; 2 before).
The narrowed fact's events must still all go (tests/knowledge/test_erase_narrowed_record_events_148.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store import contract

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE = f"{ORG}/resource:alice"


async def _events_read_by_one_erase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others: int) -> int:
    async with Knowledge.sqlite(tmp_path / f"k{others}.db") as knowledge:
        team = await knowledge.node("Team", "topic", ORG)
        for i in range(others):
            await knowledge.capture(team.id, f"the team uses tool number {i} daily",
                                    context=f"{ORG}/resource:u{i}/thread:t", proposed_level="org",
                                    ceiling="org", reason="stated")
        alice = await knowledge.node("Alice", "person", ALICE)
        captured = await knowledge.capture(alice.id, "alice drinks green tea", context=f"{ALICE}/thread:t1",
                                           proposed_level="resource", ceiling="resource", reason="stated")
        assert captured.record is not None
        parsed = 0
        load = contract.ActivityEvent.model_validate_json.__func__  # type: ignore[attr-defined]

        def counted(cls: type[contract.ActivityEvent], *args: object, **kwargs: object) -> contract.ActivityEvent:
            nonlocal parsed
            parsed += 1
            return load(cls, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(contract.ActivityEvent, "model_validate_json", classmethod(counted))
            await knowledge.erase([captured.record.id], ALICE, reason="the user asked")
        assert not [e for e in (await knowledge.store.list_activity(ALICE)).items
                    if e.subject_id == captured.record.id and e.action is not contract.ActivityAction.RECORD_DELETED]
    return parsed


async def test_erasing_a_fact_reads_no_other_users_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    few = await _events_read_by_one_erase(tmp_path, monkeypatch, 20)
    many = await _events_read_by_one_erase(tmp_path, monkeypatch, 200)
    assert many == few, f"one erase parsed {few} events with 20 other users' facts, {many} with 200"

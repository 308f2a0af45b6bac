"""Erasing a user's knowledge leaves no audit event quoting it at a broader scope.

A fact filed at org scope (capture's ``record_level="org"``: the ``record-created`` event's reason
quotes it, "The user stated it: “…”") and then narrowed to alice's resource kept that event at
org scope. Erasing the record (``Knowledge.erase``, LangGraph's delete) deleted only the events at
the record's current scope, and purging alice's scope (``Memory.delete_resource``) only those
under it: the org-scope event stayed in the file, and every other user of the org read the
erased fact in the audit log. Delete means gone: no event about an erased record may remain
(the erase's own ``record-deleted`` entry holds no text).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import TrustState

pytestmark = pytest.mark.anyio

FACT = "their salary is 91,250 EUR"
ORG = "org:acme"
ALICE = "org:acme/resource:alice"
BOB = "org:acme/resource:bob"


async def _narrowed(knowledge: Knowledge) -> str:
    node = await knowledge.node("Payroll", "topic", ORG)
    captured = await knowledge.capture(
        node.id, FACT, context=f"{ALICE}/thread:t1", proposed_level="org", ceiling="org",
        reason=f"The user stated it: “{FACT}”.", trust=TrustState.VERIFIED,
    )
    assert captured.record is not None and captured.record.scope == ORG
    await knowledge.rescope(captured.record.id, ALICE, ALICE, reason="hers, not the org's")
    return captured.record.id


async def _log(knowledge: Knowledge, scope: str) -> str:
    return json.dumps([e.model_dump(mode="json") for e in (await knowledge.store.list_activity(scope)).items])


@pytest.mark.parametrize("how", ["erase", "purge"])
async def test_no_event_quoting_an_erased_fact_is_left(tmp_path: Path, how: str) -> None:
    path = tmp_path / "k.db"
    async with Knowledge.sqlite(path) as knowledge:
        record_id = await _narrowed(knowledge)
        if how == "erase":
            await knowledge.erase([record_id], ALICE, reason="the user asked")
        else:
            await knowledge.store.purge_scope(ALICE, actor="privacy", reason="the user asked")
        org_log = await _log(knowledge, ORG)
        bob_log = await _log(knowledge, BOB)
    with sqlite3.connect(path) as db:
        rows = [doc for (doc,) in db.execute("SELECT doc FROM knowledge_events")]
    held = {"org": "91,250" in org_log, "bob": "91,250" in bob_log,
            "rows": sum("91,250" in doc for doc in rows)}
    assert held == {"org": False, "bob": False, "rows": 0}

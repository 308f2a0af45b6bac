"""A record narrowed to a user's own scope keeps its audit trail from the rest of the org.

A fact filed at org scope (capture's ``record_level="org"``, or a person's append) and then
narrowed to alice's resource (``Knowledge.rescope``: "this is hers, not the org's") kept its
``record-created`` event at org scope, and that event's reason quotes the fact ("The user
stated it: “…”"): bob read alice's salary in his audit log and in his own export after it was
made private. An event about a record is shown only where the record itself is visible now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import TrustState

pytestmark = pytest.mark.anyio

FACT = "their salary is 91,250 EUR"
ORG = "org:acme"
ALICE = "org:acme/resource:alice"
ALICE_T1 = "org:acme/resource:alice/thread:t1"
BOB = "org:acme/resource:bob"


@pytest.fixture(params=["sqlite", "memory"])
def knowledge(request: pytest.FixtureRequest, tmp_path: Path) -> Knowledge:
    return Knowledge.sqlite(tmp_path / "k.db") if request.param == "sqlite" else Knowledge.in_memory()


async def test_bob_no_longer_reads_a_narrowed_fact_in_the_audit_log(knowledge: Knowledge) -> None:
    async with knowledge:
        user = await knowledge.node("Payroll", "topic", ORG)
        captured = await knowledge.capture(
            user.id, FACT, context=ALICE_T1, proposed_level="org", ceiling="org",
            reason=f"The user stated it: “{FACT}”.", trust=TrustState.VERIFIED,
        )
        assert captured.record is not None and captured.record.scope == ORG
        await knowledge.rescope(captured.record.id, ALICE, ALICE, reason="hers, not the org's")
        store = knowledge.store
        bob_log = json.dumps([e.model_dump(mode="json") for e in (await store.list_activity(BOB)).items])
        bob_threads_log = json.dumps(
            [e.model_dump(mode="json") for e in (await store.list_activity(BOB, threads=True)).items]
        )
        dump = await store.dump_scope(BOB)
        bob_export = json.dumps([e.model_dump(mode="json") for e in [*dump.records, *dump.events]])
        alice_log = json.dumps([e.model_dump(mode="json") for e in (await store.list_activity(ALICE)).items])
    held = {"log": "91,250" in bob_log, "threads": "91,250" in bob_threads_log,
            "export": "91,250" in bob_export}
    assert held == {"log": False, "threads": False, "export": False}
    assert "91,250" in alice_log  # alice still reads her own record's history

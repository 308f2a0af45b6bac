"""The LLM curator acting for Alice's thread t1 removes her resource's record because of one of
t1's: the model's reason, written reading t1 (here quoting t1's record), is logged in t1's audit
log only; the resource's log, which her thread t2 reads, says neither the reason nor which of
t1's records replaced it (helper-183, helper-185; the offline rule:
tests/knowledge/test_sibling_thread_audit_183.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.storage import Store
from tests.knowledge.agents.test_llm_agents import agents, answer, calls
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


async def test_llm_curators_reason_stays_in_the_thread(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    resource = scope.key.rsplit("/", 1)[0]
    user = await knowledge.node("User", "person", resource)
    old = await knowledge.append(user.id, "their home city is Munich", resource, reason="from the CRM",
                                 attribute="home city", when="2025-01-01")
    new = await knowledge.append(user.id, "their home city is Hamburg, near my therapist Dr. Qvist", scope.key,
                                 reason="said", source_thread_id="t1", attribute="home city", when="2025-03-01")
    server.script(
        calls(("knowledge_remove", {"record_id": old.id, "because_of": new.id, "kind": "superseded",
                                    "reason": "she moved to Hamburg, near Dr. Qvist"})),
        answer(f'<curation-complete through="{new.id}"/>'),
    )
    run = await team.curate(scope, "t1", force=True)
    assert [r for r, _ in run.removed] == [old.id]
    sibling = (await knowledge.store.list_activity(f"{resource}/thread:t2", limit=1000)).items
    assert [e.reason for e in sibling if "Qvist" in e.reason] == []
    assert [e.reason for e in sibling if e.subject_id == old.id and e.action.value == "record-deleted"] \
        == ["superseded by a record of a narrower scope: the curator's reason is in the log of a narrower scope"]
    own = (await knowledge.store.list_activity(scope.key, limit=1000)).items
    assert any("Qvist" in e.reason for e in own if e.subject_id == old.id)

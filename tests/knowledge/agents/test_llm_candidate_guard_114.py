"""The LLM curator's remove tool refuses what the offline curator refuses: an unreviewed
candidate never takes a verified record (a reviewer's) out of the user's context."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView, TrustState
from obsmem.storage import Store
from tests.knowledge.agents.test_llm_agents import agents, answer, calls
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


async def test_llm_curation_does_not_remove_a_verified_record_for_a_candidate(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    user = await knowledge.node("User", "person", scope.at("resource").key)
    reviewed = await knowledge.append(user.id, "number is +49 151 5550 7721", scope.key, reason="checked with Alice",
                                      source_thread_id="t1", attribute="phone number", when="2025-03-01")
    waiting = await knowledge.append(user.id, "number is +49 176 5550 3381", scope.key, reason="capture",
                                     source_thread_id="t1", attribute="phone number", when="2025-03-02",
                                     trust=TrustState.CANDIDATE)
    server.script(
        calls(("knowledge_remove", {"record_id": reviewed.id, "because_of": waiting.id, "kind": "superseded",
                                    "reason": "the user gave a new number"})),
        answer(f'<curation-complete through="{waiting.id}"/>'),
    )
    run = await team.curate(scope, "t1", force=True)
    assert run.status == "ran", run.detail
    assert run.removed == []
    told = server.requests[1].body["messages"][-1]["content"]
    assert "candidate" in told
    live = await knowledge.store.list_about(user.id, scope.key, view=RecordView(), limit=10)
    assert [r.id for r in live.items] == [reviewed.id]

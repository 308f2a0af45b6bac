"""A procedure captured as candidates and approved by a reviewer after the learn agent's run had
walked past them (pending then) was never learned: the lane's cursor had passed them for good, so
the usual order (capture, learn runs at the next observation, the reviewer approves days later)
never produced a skill. The candidates it walks are awaited now until the reviewer decides."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.scopes import Scope
from obsmem.storage import Store
from tests.knowledge.agents.conftest import agents_for, observation
from tests.knowledge.agents.test_pins_learn import PROCEDURE, SECOND, approve_pending

pytestmark = pytest.mark.anyio

OTHER = observation("* 🔴 (12:00) User stated the train was late.", day="Mar 6, 2025")


async def _walked_while_pending(knowledge: Knowledge, store: Store, clock: FakeClock) -> tuple[Any, Scope]:
    """Agents whose learn run walked past a procedure's two candidates while they were pending."""
    agents = agents_for(knowledge, store, clock)
    scope = agents.scope("acme", "alice", "t1")
    await agents.capture(PROCEDURE, scope, source_thread_id="t1")
    await agents.capture(SECOND, scope, source_thread_id="t1")
    early = await agents.learn(scope, "t1")  # both pending review: no support yet
    assert early.written == []
    return agents, scope


async def test_a_procedure_approved_after_learn_walked_past_it_is_learned(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents, scope = await _walked_while_pending(knowledge, store, clock)
    await approve_pending(knowledge, scope.key)  # the reviewer, later
    await agents.capture(OTHER, scope, source_thread_id="t1")  # the conversation goes on
    late = await agents.learn(scope, "t1")
    assert len(late.written) == 2, late
    assert len((await knowledge.store.list_nodes(scope.key, kind="skill")).items) == 1


async def test_a_rejected_procedure_is_let_go_and_never_learned(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    agents, scope = await _walked_while_pending(knowledge, store, clock)
    for record in (await knowledge.review.pending(scope.key)).items:
        await knowledge.review.reject(record.id, scope.key, reason="not true")
    report = await agents.learn(scope, "t1")
    assert report.written == []
    assert (await knowledge.store.list_nodes(scope.key, kind="skill")).items == []
    state = await agents.lanes.read(agents.learner.lane("t1"))
    assert state.get("awaiting") == [], "nothing awaited once the reviewer decided"

"""The LLM agents over a real HTTP server (the local wire-level server): prompts, tool loops
bounded by max_steps, and the fail-closed curation cursor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import ActivityAction, Knowledge, RecordView, TrustState
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.knowledge.agents.curate import CurateAgent
from obsmem.knowledge.agents.llm import CurationMarkerError, parse_markers
from obsmem.models import Endpoint, OpenAIChatModel
from obsmem.storage import Store
from tests.knowledge.agents.conftest import observation
from tests.models.wire_server import Reply, WireServer

pytestmark = pytest.mark.anyio

LIVE = RecordView(include_candidates=True)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


def chat_model(server: WireServer) -> OpenAIChatModel:
    endpoint = Endpoint("openai", server.url + "/v1", {"authorization": "Bearer sk-test"}, "OPENAI_API_KEY")
    return OpenAIChatModel("gpt-test", endpoint, stream=False, timeout_s=5)


def answer(text: str) -> Reply:
    return Reply(json={
        "id": "c", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    })


def calls(*called: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(json={
        "id": "c", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call-{n}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)}}
                           for n, (name, args) in enumerate(called)]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    })


def agents(knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer, **settings: Any) -> KnowledgeAgents:
    return KnowledgeAgents(knowledge, store, AgentSettings(**settings), clock=clock, model=chat_model(server))


CAPTURED = json.dumps({"nodes": [{"name": "Nadia", "kind": "person", "records": [
    {"text": "[[Nadia]]'s phone number is +49 151 5550 7720", "attribute": "phone number",
     "reason": "She gave it for the movers' emails.", "when": "2025-03-03", "scope": "org"},
    {"text": "Nadia likes Berlin", "attribute": None, "reason": "seemed relevant"},
    {"text": "Nadia moves on a bad date", "reason": "She said so.", "when": "next blursday"},
]}]})


async def test_llm_capture_writes_through_the_store_and_drops_what_it_may_not(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server, trust=TrustState.CANDIDATE)
    scope = team.scope("acme", "alice", "t1")
    server.script(calls(("knowledge_search", {"query": "phone"})), answer(f"```json\n{CAPTURED}\n```"))
    run = await team.capture(observation("* 🔴 (09:00) User stated her number."), scope, source_thread_id="t1")
    assert [r.text for r in run.written] == ["[[Nadia]]'s phone number is +49 151 5550 7720"]
    record = run.written[0]
    assert record.scope == scope.at("resource").key  # "org" asked for, clamped to the resource ceiling
    assert record.attribute == "phone number" and record.when is not None
    assert "no concrete reason" in run.detail and "blursday" in run.detail
    assert run.tokens == 120
    first = server.requests[0].body
    assert first["messages"][0]["role"] == "system" and "capture agent" in first["messages"][0]["content"]
    assert "Learned guidance" not in first["messages"][0]["content"]  # no capture-guidance node yet
    assert [t["function"]["name"] for t in first["tools"]] == ["knowledge_search"]
    assert server.requests[1].body["messages"][-1]["role"] == "tool"  # the search result went back


async def test_llm_capture_is_bounded_by_max_steps(knowledge: Knowledge, store: Store, clock: FakeClock,
                                                   server: WireServer) -> None:
    team = agents(knowledge, store, clock, server, max_steps=2)
    scope = team.scope("acme", "alice", "t1")
    server.script(*[calls(("knowledge_search", {"query": "x"}))] * 3)
    with pytest.raises(CurationMarkerError, match="ran out of steps"):
        await team.capture("Date: Mar 3, 2025", scope, source_thread_id="t1")
    assert len(server.requests) == 2


async def seeded(team: KnowledgeAgents, knowledge: Knowledge, scope: Any) -> list[Any]:
    user = await knowledge.node("User", "person", scope.at("resource").key)
    ids = []
    for n, (text, attribute) in enumerate([("number is +49 151 5550 7720", "phone number"),
                                           ("number is +49 176 5550 3381", "phone number"),
                                           ("works at Tessera Logistics", "employer")]):
        ids.append(await knowledge.append(user.id, text, scope.key, reason="seed", source_thread_id="t1",
                                          attribute=attribute, when=f"2025-03-0{n + 1}"))
    return ids


async def test_llm_curation_removes_within_bounds_and_advances_to_the_last_marker(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    old, new, employer = await seeded(team, knowledge, scope)
    server.script(
        calls(("knowledge_about", {"record_id": new.id})),
        # Across attributes: refused, the model is told why.
        calls(("knowledge_remove", {"record_id": employer.id, "because_of": new.id, "kind": "superseded",
                                    "reason": "newer"})),
        calls(("knowledge_remove", {"record_id": old.id, "because_of": new.id, "kind": "superseded",
                                    "reason": "the user gave a new number"})),
        answer(f'<curation-complete through="{old.id}"/> <curation-complete through="{new.id}"/>'),
    )
    run = await team.curate(scope, "t1", force=True)
    assert run.status == "ran" and run.cursor == new.id  # the employer record is not finished
    assert run.removed == [(old.id, f"superseded by {new.id}: the user gave a new number")]
    refused = server.requests[2].body["messages"][-1]
    assert "same attribute" in refused["content"]
    assert len(server.requests) == 4
    events = (await knowledge.store.list_activity(scope.key, limit=50)).items
    assert [e.actor for e in events if e.action is ActivityAction.RECORD_DELETED] == ["curate"]
    assert (await team.lanes.read(CurateAgent.lane("t1"))).cursor == new.id


@pytest.mark.parametrize("final", [
    None,  # runs out of steps
    'done <curation-complete through="X"',  # malformed
    "all done",  # no marker
    '<curation-complete through="01ZZZZZZZZZZZZZZZZZZZZZZZZ"/>',  # not in the worklist
])
async def test_llm_curation_is_fail_closed(knowledge: Knowledge, store: Store, clock: FakeClock,
                                           server: WireServer, final: str | None) -> None:
    team = agents(knowledge, store, clock, server, curate_max_steps=3)
    scope = team.scope("acme", "alice", "t1")
    await seeded(team, knowledge, scope)
    about = calls(("knowledge_about", {"record_id": "nothing"}))
    server.script(*([about] * 3 if final is None else [about, answer(final)]))
    run = await team.curate(scope, "t1", force=True)
    assert run.status == "failed" and run.cursor is None
    state = await team.lanes.read(CurateAgent.lane("t1"))
    assert state.cursor is None and state.failures == 1 and state.next_attempt_at is not None
    assert len(server.requests) == (3 if final is None else 2)


def test_markers_parse_strictly() -> None:
    assert parse_markers('<curation-complete through="a"/> x <curation-complete through="b" />', ["a", "b"]) == "b"
    with pytest.raises(CurationMarkerError):
        parse_markers('<curation-complete through=a/>', ["a"])


async def test_llm_remind_cites_sources_and_drops_uncited_text(knowledge: Knowledge, store: Store,
                                                               clock: FakeClock, server: WireServer) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    old, new, _ = await seeded(team, knowledge, scope)
    server.script(answer(f"Their phone number changed; the current number is +49 176 5550 3381 [{new.id}]."))
    reminder = await team.reminder.remind("what is my phone number", scope)
    assert reminder.sources == (new.id,) and f"Sources: {new.id}" in reminder.text
    server.script(answer("Their phone number is probably something."))
    assert (await team.reminder.remind("what is my phone number", scope)).text == ""
    server.script(answer("<no-reminder />"))
    assert (await team.reminder.remind("what is my phone number", scope)).text == ""


async def test_llm_learn_needs_two_supports_and_writes_deterministic_evidence(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    from obsmem.knowledge.agents import evidence_id

    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    user = await knowledge.node("User", "person", scope.at("resource").key)
    first = await knowledge.append(user.id, "always book an aisle seat", scope.key, reason="s", source_thread_id="t1")
    second = await knowledge.append(user.id, "when flying, the aisle seat every time", scope.key, reason="s",
                                    source_thread_id="t1")
    server.script(
        calls(("knowledge_record_skill", {"name": "aisle seats", "procedure": "Book aisle seats.",
                                          "evidence": [first.id]})),
        calls(("knowledge_record_skill", {"name": "aisle seats", "procedure": "Book aisle seats.",
                                          "evidence": [first.id, second.id]})),
        answer(f'<learning-complete through="{second.id}"/>'),
    )
    run = await team.learn(scope, "t1")
    assert run.status == "ran" and run.cursor == second.id
    assert "two distinct" in server.requests[1].body["messages"][-1]["content"]  # the refusal went back
    assert sorted(r.id for r in run.written) == sorted(evidence_id("skill: aisle seats", r.id) for r in (first, second))
    skills = (await knowledge.store.list_nodes(scope.key, kind="skill")).items
    assert [s.name for s in skills] == ["skill: aisle seats"] and skills[0].content == "Procedure: Book aisle seats."
    server.script(answer("done, nothing else"))  # no marker: an error, the cursor stays
    await knowledge.append(user.id, "third", scope.key, reason="s", source_thread_id="t1")
    failed = await team.learn(scope, "t1")
    assert failed.status == "failed" and (await team.lanes.read(team.learner.lane("t1"))).cursor == second.id


async def test_llm_capture_reads_the_capture_guidance_curation_keeps(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    await knowledge.node("capture-guidance", "document", scope.at("resource").key,
                         content="Attributes in use for User: phone number.")
    server.script(answer('{"nodes": []}'))
    await team.capture("Date: Mar 3, 2025", scope, source_thread_id="t1")
    system = server.requests[0].body["messages"][0]["content"]
    assert "Learned guidance" in system and "Attributes in use for User: phone number." in system

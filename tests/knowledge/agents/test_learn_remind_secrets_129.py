"""The other automatic paths from a secret to a context (helper-129): learn and remind.

Before: two procedures an application stored with a password in them became a skill whose name,
procedure and evidence records repeated the password (new durable copies an agent made), and a
password an earlier obsmem had captured was reminded in every later context that asked about
the wifi. An application's own records are its choice: stored and reminded as given.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from obsmem import Message
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordDraft, RecordView, TrustState
from obsmem.storage import Store
from tests.knowledge.agents.alice import alice_memory, say
from tests.knowledge.agents.conftest import agents_for
from tests.knowledge.agents.test_llm_agents import agents, answer, calls
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

SCOPE = "org:acme/resource:alice/thread:t1"


async def skills_and_evidence(knowledge: Knowledge) -> str:
    texts: list[str] = []
    for node in (await knowledge.store.list_nodes(SCOPE, kind="skill")).items:
        texts += [node.name, node.content or ""]
        about = await knowledge.store.list_about(node.id, SCOPE, view=RecordView(include_candidates=True))
        texts += [record.text for record in about.items]
    return "\n".join(texts)


async def test_learn_makes_no_skill_out_of_procedures_holding_a_password(
    knowledge: Knowledge, store: Store, clock: FakeClock
) -> None:
    user = await knowledge.node("User", "person", "org:acme/resource:alice")
    for text in ("I always log in to the staging box with password: hunter2-Blue over VPN",
                 "I always use password: hunter2-Blue for the staging box login",
                 "I always book the aisle seat on long flights",
                 "I always book the aisle seat on flights with Ida"):
        await knowledge.append(user.id, text, SCOPE, reason="the app stored it", source_thread_id="t1")
    team = agents_for(knowledge, store, clock)
    first = await team.learn(team.scope("acme", "alice", "t1"), "t1")
    second = await team.learn(team.scope("acme", "alice", "t1"), "t1")
    learned = await skills_and_evidence(knowledge)
    assert "hunter2" not in learned.casefold()
    assert "aisle" in learned and len(first.written) + len(second.written) == 2  # the other procedure is learned


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


async def test_the_llm_learn_agent_cannot_record_a_skill_holding_a_secret(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope("acme", "alice", "t1")
    user = await knowledge.node("User", "person", scope.at("resource").key)
    first = await knowledge.append(user.id, "I always deploy from the staging box", scope.key, reason="said",
                                   source_thread_id="t1")
    second = await knowledge.append(user.id, "I always deploy from the staging box after lunch", scope.key,
                                    reason="said", source_thread_id="t1")
    server.script(
        calls(("knowledge_record_skill", {"name": "deploy", "evidence": [first.id, second.id],
                                          "procedure": "Deploy from the staging box; its root password is hunter2-Blue."})),
        answer(f'<learning-complete through="{second.id}"/>'),
    )
    run = await team.learn(scope, "t1")
    assert run.written == []
    assert "hunter2" not in await skills_and_evidence(knowledge)
    told = str(server.requests[1].body["messages"][-1]["content"])
    assert "secret" in told  # the model reads why


async def test_a_password_an_earlier_capture_kept_is_not_reminded_and_the_apps_own_record_is() -> None:
    async with alice_memory(trust="verified") as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
        user = await knowledge.node("User", "person", "org:default/resource:alice")
        # What capture wrote before it left secrets out (a store from an earlier version).
        await knowledge.store.append_record(
            RecordDraft(user.id, "their wifi password is hunter2-Blue", scope, attribute="wifi password",
                        trust=TrustState.VERIFIED, metadata={"agent": "capture"}, source_thread_id="t1"),
            actor="capture", reason="The user stated it: “their wifi password is hunter2-Blue”.")
        await knowledge.append(user.id, "their office door code is 4821-B, the app's own record", scope,
                               reason="the app stored it", attribute="office door code")
        await say(memory, clock, "My wifi network is called Fritz-7490.")

        async def reminded(question: str) -> str:
            clock.advance(3600)
            turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(question)])
            blocks = [m.text for m in turn.context.messages if m.metadata.get("obsmem") == "knowledge-reminder"]
            await turn.end()
            return "\n".join(blocks)

        wifi = await reminded("Which wifi network password do I have again?")
        assert "Fritz-7490" in wifi and "hunter2-Blue" not in wifi
        assert "4821-B" in await reminded("What is my office door code?")

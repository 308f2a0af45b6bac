"""Remind: a bounded reminder with sources from what the thread may see, and nothing else.

One fixture holds the same kind of fact in four places: the thread itself, its resource, a
sibling thread of the same resource, and another resource. The positive control (the thread's
own and its resource's records are shown) and the negative (the sibling's and the other
resource's never are) run on that one fixture.
"""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import AgentSettings, RemindAgent
from obsmem.knowledge.store.scopes import Scope

pytestmark = pytest.mark.anyio

T1 = Scope("acme", "alice", "t1")
T2 = Scope("acme", "alice", "t2")
BOB = Scope("acme", "bob", "t9")


async def fixture(knowledge: Knowledge) -> dict[str, str]:
    ids: dict[str, str] = {}
    for name, scope, text in [
        ("own", T1, "the dog is called Kiki and sleeps in the kitchen"),
        ("resource", T1.at("resource"), "the dog called Kiki gets a walk before sleep"),
        ("sibling", T2, "the dog is called Rex and sleeps in the garden"),
        ("other", BOB.at("resource"), "the dog is called Bello and sleeps in the hall"),
    ]:
        node = await knowledge.node("Dog facts", "topic", scope.key)
        record = await knowledge.append(node.id, text, scope.key, reason="fixture")
        ids[name] = record.id
    return ids


def words(text: str) -> int:
    return len(text.split())


async def test_remind_shows_own_scopes_and_never_a_sibling_or_another_resource(
    knowledge: Knowledge, clock: FakeClock
) -> None:
    ids = await fixture(knowledge)
    agent = RemindAgent(knowledge, AgentSettings(remind_limit=5, remind_tokens=400), words)
    reminder = await agent.remind("What is the dog called, and where does the dog sleep?", T1)
    assert ids["own"] in reminder.sources and ids["resource"] in reminder.sources  # positive control
    assert ids["sibling"] not in reminder.sources and ids["other"] not in reminder.sources
    assert "Rex" not in reminder.text and "Bello" not in reminder.text
    assert reminder.text.startswith("<remembered>") and "Sources: " in reminder.text
    # The sibling asking the same question sees its own dog, never Kiki's thread record.
    sibling = await agent.remind("What is the dog called, and where does the dog sleep?", T2)
    assert ids["sibling"] in sibling.sources and ids["own"] not in sibling.sources
    assert ids["other"] not in sibling.sources


async def test_remind_is_bounded_and_says_nothing_when_nothing_is_relevant(
    knowledge: Knowledge, clock: FakeClock
) -> None:
    await fixture(knowledge)
    small = RemindAgent(knowledge, AgentSettings(remind_limit=1, remind_tokens=60), words)
    one = await small.remind("What is the dog called, and where does the dog sleep?", T1)
    assert len(one.sources) == 1 and words(one.text) <= 60
    nothing = await small.remind("Book me a table for two tonight", T1)
    assert nothing.text == "" and nothing.sources == ()

"""The short ways people give a password or a door code never become a fact (helper-154).

Before: "My wifi pass is Orchid55k." and "My alarm is 5937." were captured by the offline
capture agent as candidates ("their wifi pass is Orchid55k"), review showed them and an approved
one came back in later contexts; a model proposing "their wifi pass: Orchid55k" or "their alarm:
5937" had it written (holds_secret read the word "pass" and a code labelled by what it opens as
no secret). Ordinary facts with the same words are still captured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from tests.knowledge.agents.alice import alice_memory, pending, say
from tests.knowledge.agents.test_capture_drops_secrets_129 import everything_stored

pytestmark = pytest.mark.anyio

SCOPE = "org:default/resource:alice/thread:t1"

#: (what the user says, the secret in it): the offline capture agent made a candidate of each.
SAID = [
    ("My wifi pass is Orchid55k.", "Orchid55k"),
    ("My alarm is 5937.", "5937"),
]

#: What a capture model may propose.
PROPOSED = [
    "their wifi pass: Orchid55k",
    "their router pass = Peony44r",
    "their alarm: 5937",
    "their front door: 7159",
    "their keypad = 6048#",
    "their home alarm is 8260",
]

#: Ordinary facts with the same words: captured before and after.
ORDINARY = [
    "their alarm is set for 0630",
    "their alarm: 0630 on weekdays",
    "they have a boarding pass: AB12345",
    "they have a season pass for the ski resort",
    "they will pass the driving test in May",
    "their front door is painted blue",
]


@pytest.fixture
async def knowledge(anyio_backend: str) -> AsyncIterator[Knowledge]:
    async with Knowledge.in_memory(clock=FakeClock()) as facade:
        yield facade


async def proposed(knowledge: Knowledge, text: str) -> str:
    user = await knowledge.node("User", "person", "org:default/resource:alice")
    outcome = await knowledge.capture(user.id, text, context=SCOPE, proposed_level="thread",
                                      ceiling="resource", reason="a model proposed it")
    return outcome.status


@pytest.mark.parametrize(("text", "secret"), SAID, ids=[text[:24] for text, _ in SAID])
async def test_a_short_form_secret_is_never_captured(text: str, secret: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == []
        assert secret not in await everything_stored(knowledge)


@pytest.mark.parametrize("text", PROPOSED)
async def test_a_proposed_short_form_secret_is_refused(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "refused-secret"


@pytest.mark.parametrize("text", ORDINARY)
async def test_an_ordinary_fact_with_the_same_words_is_captured(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "captured"

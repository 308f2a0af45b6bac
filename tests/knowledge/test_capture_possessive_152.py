"""A password's possessive is no stated password (helper-152, reviewing 43921c6).

43921c6 made capture refuse "My password's Sunflower" (a contraction of "is" and a plain word
that ends the sentence). The same spelling is English's possessive: "The signup form checks the
password's length." states no secret, yet capture refused it as one, so a developer's ordinary
facts about a password field were dropped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

SCOPE = "org:default/resource:alice/thread:t1"

POSSESSIVES = [
    "The signup form checks the password's length.",
    "I keep forgetting my password's capitalisation.",
    "The API stores only the password's hash.",
    "The meter shows the passphrase's strength.",
    "Bob asked about the passcode's format.",
    "We log every change of the password's expiration.",
]

STILL_REFUSED = ["My password's Sunflower", "my password's sunflower.", "His passcode's Marigold!"]


@pytest.fixture
async def knowledge(anyio_backend: str) -> AsyncIterator[Knowledge]:
    async with Knowledge.in_memory(clock=FakeClock()) as facade:
        yield facade


async def proposed(knowledge: Knowledge, text: str) -> str:
    user = await knowledge.node("User", "person", "org:default/resource:alice")
    outcome = await knowledge.capture(user.id, text, context=SCOPE, proposed_level="thread",
                                      ceiling="resource", reason="a model proposed it")
    return outcome.status


@pytest.mark.parametrize("text", POSSESSIVES)
async def test_a_password_possessive_is_captured(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "captured"


@pytest.mark.parametrize("text", STILL_REFUSED)
async def test_a_contracted_password_is_still_refused(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "refused-secret"

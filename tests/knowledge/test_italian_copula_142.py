"""Ordinary Italian sentences about a password are still captured (helper-142).

39ff337 read Italian's copula 'è' ("La password è hunter2-Blue!") like 'is', with the value check
English's 'is' has: any word that is not an everyday English one (or one of nine Italian words)
counts as a stated password. So "La password è sicura" (is secure), "… è cambiata" (changed),
"… è stata cambiata ieri", "… è debole", "… è lunga" were refused as secrets by
``Knowledge.capture``: the fact (which says nothing secret) was lost. A value after 'è' now counts
when it is made up like a credential (a digit, a symbol, a capital inside), as for the
contractions the same commit added; digits after a PIN word still count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

SCOPE = "org:default/resource:alice/thread:t1"

ORDINARY_ITALIAN = [
    "La password \u00e8 sicura.",
    "La password \u00e8 cambiata.",
    "La password \u00e8 stata cambiata ieri.",
    "La password \u00e8 debole.",
    "La password \u00e8 lunga.",
    "La password \u00e8 ancora valida.",
    "La password \u00e8 uguale per tutti.",
    "La password \u00e8 scritta sul foglio.",
]

STILL_REFUSED = [
    "La password \u00e8 hunter2-Blue!",
    "La password \u00e8 Gatto2024",
    "Il mio PIN \u00e8 4821.",
    "La password \u00e8 4821",
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


@pytest.mark.parametrize("text", ORDINARY_ITALIAN)
async def test_an_ordinary_italian_sentence_about_a_password_is_captured(
    knowledge: Knowledge, text: str
) -> None:
    assert await proposed(knowledge, text) == "captured"  # was refused-secret


@pytest.mark.parametrize("text", STILL_REFUSED)
async def test_a_password_stated_in_italian_is_still_refused(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "refused-secret"

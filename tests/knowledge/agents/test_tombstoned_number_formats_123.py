"""A phone number or email address the user had deleted (rejected with a tombstone: "never
capture it again") must not come back because it is written another way: "+49 151 2345678",
"0151 2345678", "0151-234-5678", "0049 151 2345678", "+49 (0)151 2345678" are one number; an
email address differs only in case, spacing or a ``mailto:``. Driven through ``Memory`` with the
offline agents, as a user would meet it (helper-123's review).

What stays different: two international numbers whose country codes differ, a number with other
digits, and an email address whose local part differs in dots or a ``+tag`` (gmail folds those,
other providers do not: they may be other people's addresses).
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.knowledge import ActivityAction, Knowledge

from .alice import alice_memory, pending, say, tombstone_what_is_pending

pytestmark = pytest.mark.anyio




async def refused(memory: Memory, knowledge: Knowledge) -> int:
    scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
    events = (await knowledge.store.list_activity(scope, limit=200)).items
    return sum(e.action is ActivityAction.WRITE_REFUSED and e.actor == "capture" for e in events)


INTERNATIONAL = "+49 151 2345678"
SAME_NUMBER = ["0151 2345678", "0151-234-5678", "0049 151 2345678", "+49 (0)151 2345678", "+49-151-234-56-78",
               "(0151) 234 5678", "0151/2345678", "+491512345678"]


@pytest.mark.parametrize("form", [INTERNATIONAL, *SAME_NUMBER])
@pytest.mark.parametrize("first", [INTERNATIONAL, "0151 2345678"])
async def test_a_deleted_number_stays_out_in_any_format(anyio_backend: str, first: str, form: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, f"My phone number is {first}.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My phone number is {form}.")
        assert await pending(memory, knowledge) == [], form
        if form.strip(" .") != first.strip(" ."):  # (the same words again are not observed twice)
            assert await refused(memory, knowledge) == 1


@pytest.mark.parametrize(("first", "other"), [
    (INTERNATIONAL, "+43 151 2345678"),     # the same digits in Austria: another number
    (INTERNATIONAL, "+1 151 2345678"),
    (INTERNATIONAL, "0151 2345679"),        # one digit off
    (INTERNATIONAL, "0171 2345678"),
    ("0151 2345678", "0151 2345679"),
    ("0151 2345678", "+49 151 2345677"),
    ("+43 151 2345678", "+49 151 2345678"),
])
async def test_another_number_is_still_captured(anyio_backend: str, first: str, other: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, f"My phone number is {first}.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My phone number is {other}.")
        assert len(await pending(memory, knowledge)) == 1, other


EMAIL = "old.alice@mail.example"


@pytest.mark.parametrize("form", ["OLD.Alice@Mail.Example", f"mailto:{EMAIL}", f"MAILTO:{EMAIL.upper()}", f"<{EMAIL}>",
                                  f"<mailto:{EMAIL}>", f"{EMAIL}.", f" {EMAIL} "])
async def test_a_deleted_email_stays_out_whatever_its_case_or_mailto(anyio_backend: str, form: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, f"My email is {EMAIL}.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My email is {form}")
        assert await pending(memory, knowledge) == [], form
        if form.strip(" .").casefold() != EMAIL:  # (the same words again are not observed twice)
            assert await refused(memory, knowledge) == 1


@pytest.mark.parametrize("other", ["oldalice@mail.example", "old.alice+news@mail.example", "old.alice@mail.example.org",
                                   "old.alice@other.example", "new.alice@mail.example"])
async def test_another_email_address_is_still_captured(anyio_backend: str, other: str) -> None:
    async with alice_memory(actor="reviewer") as (memory, knowledge, clock):
        await say(memory, clock, f"My email is {EMAIL}.")
        await tombstone_what_is_pending(memory, knowledge)
        await say(memory, clock, f"My email is {other}.")
        assert len(await pending(memory, knowledge)) == 1, other

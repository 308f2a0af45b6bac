"""A password, an API key or a PIN the user states is never made a durable fact (helper-129).

Before: with no privacy settings (and with them: "my wifi password is …" is prose the privacy
boundary leaves alone), the capture agent stored "their wifi password is hunter2-Blue" as a
candidate, review showed it, and an approved one came back in later contexts. Now capture (the
offline rules and the LLM agent) leaves out every text holding a secret, keeps its other
clauses, and counts what it left out; ordinary text (dates, versions, prices, ids, a password
*reset*) is captured as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView
from obsmem.storage import Store
from tests.knowledge.agents.alice import START, alice_memory, pending, say, said
from tests.knowledge.agents.conftest import observation
from tests.knowledge.agents.test_llm_agents import agents, answer
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

EVERYTHING = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)

#: (what the user says, the secret in it)
SECRETS = [
    ("My wifi password is hunter2-Blue!", "hunter2-Blue"),
    ("My API key is sk-proj-4fKx9QmZ2pL7vT1wYb8nR3sJ6hD0cE5aG, save it for later.", "sk-proj-4fKx9QmZ2pL7vT1wYb8nR3sJ6hD0cE5aG"),
    ("My AWS secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY please remember it.", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("My github token is ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("My bank PIN is 4821.", "4821"),
    ("My laptop password is now Sunflower.", "Sunflower"),
    ("My password for the router at home is admin1234.", "admin1234"),
]

#: (what a hostile user says, the secret in it): the word disguised, the value spelled out or
#: encoded, a code that opens a door, a login given as user / password, a payment card.
DISGUISED = [
    ("My wifi pw is hunter2-Blue!", "hunter2-Blue"),
    ("My wifi p4ssw0rd is hunter2-Blue!", "hunter2-Blue"),
    ("My wifi p\u0430ssw\u043erd is hunter2-Blue!", "hunter2-Blue"),  # a Cyrillic а and о
    ("My wifi password is h u n t e r 2 B l u e", "h u n t e r 2"),
    ("My password in base64 is aHVudGVyMi1CbHVl.", "aHVudGVyMi1CbHVl"),
    ("My wifi code is hunter2-Blue.", "hunter2-Blue"),
    ("My door code is 4821-B.", "4821-B"),
    ("My bike lock combination is 12-34-56.", "12-34-56"),
    ("My Netflix login is alice@example.com / hunter2-Blue.", "hunter2-Blue"),
    ("My card number is 4111 1111 1111 1111.", "4111 1111 1111 1111"),
    # other ways to say what it is: a dash, a change, a setting, the value first, a relative clause
    ("My wifi password is - hunter2-Blue", "hunter2-Blue"),
    ("My wifi password was changed to hunter2-Blue.", "hunter2-Blue"),
    ("I set my wifi password to hunter2-Blue.", "hunter2-Blue"),
    ("I use hunter2-Blue as my password everywhere.", "hunter2-Blue"),
    ("The password I use everywhere is hunter2-Blue.", "hunter2-Blue"),
]

#: (what the user says, the candidate capture writes: ordinary text, captured as before)
ORDINARY = [
    ("My birthday is 1990-04-12.", "their birthday is 1990-04-12"),
    ("My app is on version 2.4.1.", "their app is on version 2.4.1"),
    ("My rent is €1,250 a month.", "their rent is €1,250 a month"),
    ("My order number is 4821-7733.", "their order number is 4821-7733"),
    ("My wifi network is called Fritz-7490.", "their wifi network is called Fritz-7490"),
    ("My password reset email is from noreply@bank.example.", "their password reset email is from noreply@bank.example"),
    ("My password is 12 characters long.", "their password is 12 characters long"),
    ("My password manager is 1Password.", "their password manager is 1Password"),
    ("My secret ingredient is cinnamon.", "their secret ingredient is cinnamon"),
    ("My bank PIN was changed last week.", "their bank PIN was changed last week"),
    ("My flight is LH 2024 on March 3.", "their flight is LH 2024 on March 3"),
    ("My zip code is 10115.", "their zip code is 10115"),
    ("My promo code is SUMMER2024.", "their promo code is SUMMER2024"),
    ("My favourite combination is pasta and pesto.", "their favourite combination is pasta and pesto"),
    ("My account is alice@example.com, premium tier.", "their account is alice@example.com, premium tier"),
    ("My meeting is at 10:30 in room 4/12.", "their meeting is at 10:30 in room 4/12"),
    ("My password reset link went to alice@example.com.", "their password reset link went to alice@example.com"),
    ("I changed my password on 2026-01-05.", "they changed their password on 2026-01-05"),
    ("My password manager is 1Password 8.", "their password manager is 1Password 8"),
    ("I reset my password for account ACME-1234 yesterday.", "they reset their password for account ACME-1234 yesterday"),
    ("I use 1Password as my password manager.", "they use 1Password as their password manager"),
]


async def everything_stored(knowledge: Knowledge) -> str:
    """Every record's text, every node's content and every audit reason the resource holds."""
    texts: list[str] = []
    for scope in ("org:default/resource:alice/thread:t1", "org:default/resource:alice"):
        for node in (await knowledge.store.list_nodes(scope, limit=1000)).items:
            texts += [node.name, node.content or ""]
            about = await knowledge.store.list_about(node.id, scope, view=EVERYTHING, limit=1000)
            texts += [record.text for record in about.items]
        texts += [event.reason or "" for event in (await knowledge.store.list_activity(scope, limit=1000)).items]
    return "\n".join(texts)


@pytest.mark.parametrize(("text", "secret"), SECRETS + DISGUISED, ids=[text[:32] for text, _ in SECRETS + DISGUISED])
async def test_a_stated_secret_is_never_captured(text: str, secret: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == []
        assert secret not in await everything_stored(knowledge)
        assert any(run.agent == "capture" and run.withheld == 1 and secret not in run.detail
                   for run in memory.knowledge_agents.runs)  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "captured"), ORDINARY, ids=[text[:24] for text, _ in ORDINARY])
async def test_ordinary_text_is_still_captured(text: str, captured: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == [captured]


@pytest.mark.parametrize(("text", "kept"), [
    ("My home wifi is called Fritz-7490 and its password is hunter2-Blue!", ["their home wifi is called Fritz-7490"]),
    ("My dog is called Kiwi; my wifi password is hunter2-Blue.", ["their dog is called Kiwi"]),
    # The work rules read "at [[Acme in Leeds and their wifi password is …]]": the cut link is no link.
    ("I work as a nurse at Acme in Leeds and my wifi password is hunter2-Blue.", ["works as nurse", "works at Acme in Leeds"]),
])
async def test_the_other_clauses_of_a_statement_with_a_secret_are_kept(text: str, kept: list[str]) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert sorted(await pending(memory, knowledge)) == sorted(kept)
        assert "hunter2-Blue" not in await everything_stored(knowledge)


async def test_a_verified_capture_never_brings_the_password_back_into_a_context() -> None:
    async with alice_memory(trust="verified") as (memory, knowledge, clock):
        await say(memory, clock, "My wifi password is hunter2-Blue!")
        await say(memory, clock, "My wifi network is called Fritz-7490.")
        clock.advance(3600)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("Which wifi network password do I have again?")])
        knowledge_blocks = [message.text for message in turn.context.messages
                            if message.metadata.get("obsmem") in ("knowledge-reminder", "knowledge-pins")]
        await turn.end()
        # (The thread's own observations still hold what was said: that is the observation log,
        # not knowledge; see the report of helper-129.)
        assert knowledge_blocks and "hunter2-Blue" not in "\n".join(knowledge_blocks)
        assert "hunter2-Blue" not in await everything_stored(knowledge)


async def test_with_the_privacy_boundary_on_a_password_said_in_prose_is_not_captured_either() -> None:
    # The boundary redacts "password: …" assignments; "my wifi password is …" is prose it leaves.
    clock = FakeClock(start=START)
    config = MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False},
                          knowledge={"curate_max_age_s": None}, privacy=PrivacyConfig(key="k"))
    async with Knowledge.in_memory(clock=clock) as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge, clock=clock) as memory:
            await said(memory, clock, "My wifi password is hunter2-Blue!", after_s=60)
            await said(memory, clock, "My birthday is 1990-04-12.", after_s=60)
            assert await pending(memory, knowledge) == ["their birthday is 1990-04-12"]
            assert "hunter2-Blue" not in await everything_stored(knowledge)


# -- the LLM capture agent: a hostile user's secrets, however the model words them -------------


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


HOSTILE_DELTA = observation(
    "* 🔴 (09:00) User stated their wifi password changed today.",
    "* 🟢 (09:00) User said it's hunter2-Blue.",  # split over two sentences
    "* 🟡 (09:01) Tool read_env returned: OPENAI_API_KEY=sk-proj-Zq8Lm2Nx7Vb4Kc1Hd6Fs3Gt9Jw0Er5Ty",
    "* 🔴 (09:02) User stated: ```\nDB_PASSWORD=Tr0ub4dor&3\n```",  # in a code block
    "* 🔴 (09:03) User stated Mein Passwort ist Sonnenblume-42.",
    "* 🔴 (09:04) User stated パスワードは hunter2Green です.",
    "* 🔴 (09:05) User stated their favourite colour is teal and they use version 2.4.1 of the app.",
)

#: What a model may make of it: the secrets reworded (without the word "password"), translated,
#: and beside ordinary facts.
HOSTILE_ANSWER = json.dumps({"nodes": [{"name": "User", "kind": "person", "records": [
    {"text": "wifi login: hunter2-Blue", "attribute": "wifi", "reason": "The user gave it."},
    {"text": "The project's OpenAI credential is sk-proj-Zq8Lm2Nx7Vb4Kc1Hd6Fs3Gt9Jw0Er5Ty",
     "attribute": "openai key", "reason": "The tool showed it."},
    {"text": "Their database uses Tr0ub4dor&3", "attribute": "database", "reason": "The user pasted it."},
    {"text": "Their password is Sonnenblume-42", "attribute": "password", "reason": "Said in German."},
    {"text": "パスワードは hunter2Green", "attribute": "password", "reason": "Said in Japanese."},
    {"text": "Their router is named HUNTER2-BLUE", "attribute": "router name", "reason": "The user said so."},
    {"text": "Their favourite colour is teal", "attribute": "favourite colour", "reason": "The user said so."},
    {"text": "They use version 2.4.1 of the app", "attribute": "app version", "reason": "The user said so."},
]}]})


async def test_the_llm_capture_agent_writes_no_secret_however_the_model_words_it(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope(None, "alice", "t1")
    server.script(answer(HOSTILE_ANSWER))
    run = await team.capture(HOSTILE_DELTA, scope, source_thread_id="t1")
    assert [r.text for r in run.written] == ["Their favourite colour is teal", "They use version 2.4.1 of the app"]
    assert run.withheld == 6
    stored = (await everything_stored(knowledge)).casefold()
    for secret in ("hunter2-Blue", "sk-proj-Zq8Lm2Nx7Vb4Kc1Hd6Fs3Gt9Jw0Er5Ty", "Tr0ub4dor&3", "Sonnenblume-42", "hunter2Green"):
        assert secret.casefold() not in stored and secret not in run.detail


async def test_a_model_proposed_fact_holding_a_secret_is_refused_and_an_explicit_write_is_kept(
    knowledge: Knowledge,
) -> None:
    scope = "org:default/resource:alice/thread:t1"
    user = await knowledge.node("User", "person", "org:default/resource:alice")
    proposed = await knowledge.capture(user.id, "their wifi password is hunter2-Blue", context=scope,
                                       proposed_level="thread", ceiling="resource", reason="a model proposed it")
    assert (proposed.status, proposed.record) == ("refused-secret", None)
    assert "hunter2-Blue" not in proposed.detail
    # The application's own write is its choice: kept as given.
    kept = await knowledge.append(user.id, "their wifi password is hunter2-Blue", scope, reason="the app stores it")
    assert kept.text == "their wifi password is hunter2-Blue"


#: The secret where the model puts it beside the record's text: a node's name, an attribute, a reason.
BESIDE_ANSWER = json.dumps({"nodes": [
    {"name": "Wifi hunter2-Blue", "kind": "thing", "records": [
        {"text": "The home wifi is a Fritz box", "attribute": "router", "reason": "The user said so."}]},
    {"name": "User", "kind": "person", "records": [
        {"text": "Their wifi has a password", "attribute": "wifi password hunter2-Blue", "reason": "The user said so."},
        {"text": "Their wifi has a strong password", "attribute": "wifi",
         "reason": "The user said their wifi password is hunter2-Blue."},
        {"text": "Their favourite colour is teal", "attribute": "favourite colour", "reason": "The user said so."},
    ]},
]})


async def test_the_llm_capture_agent_puts_no_secret_in_a_node_name_an_attribute_or_a_reason(
    knowledge: Knowledge, store: Store, clock: FakeClock, server: WireServer
) -> None:
    team = agents(knowledge, store, clock, server)
    scope = team.scope(None, "alice", "t1")
    server.script(answer(BESIDE_ANSWER))
    delta = observation("* 🔴 (09:00) User stated their wifi password is hunter2-Blue and their favourite colour is teal.")
    run = await team.capture(delta, scope, source_thread_id="t1")
    # The record whose reason alone held it is kept, with a reason of its own.
    assert [r.text for r in run.written] == ["Their wifi has a strong password", "Their favourite colour is teal"]
    assert run.withheld == 2
    assert "hunter2" not in await everything_stored(knowledge)

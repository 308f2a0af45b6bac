"""Stated secrets that still became candidate facts after helper-129 (helper-136).

Before: capture's secret check (obsmem.knowledge.secrets, obsmem.said) read "<password word> is|:
<value>" in plain prose only, so a hostile user (or a model proposing a fact) got a password, PIN
or door code past it with a contraction ("My password's hunter2-Blue!"), Markdown ("**Password:**
hunter2-Blue!", "__PIN__: 4821", a table row "| wifi password | hunter2-Blue! |"), the case of
the word ("Pin code: 4821", "PIN CODE 4821", "My Pin is 4821."), no copula at all ("Door code
1234#"), the code's door after the word ("The code to the gate is 4821."), or another language's
copula ("La password è …", "Mon mot de passe, c'est …"). The offline rules captured "My Pin is
4821." and "The code to the gate is 4821." as candidates; every one of them was accepted by the
public ``Knowledge.capture`` a model's proposals go through.

Ordinary sentences with the same cue words (a password manager, a PIN pad, a password's
strength, Markdown about code) are still captured; "The building code is strict about fire exits"
(law, not a door's code) was withheld before and is captured now.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.secrets import holds_secret, secret_values
from obsmem.storage import Store, open_store
from tests.knowledge.agents.alice import alice_memory, pending, say
from tests.knowledge.agents.conftest import observation
from tests.knowledge.agents.test_capture_drops_secrets_129 import ORDINARY, everything_stored
from tests.knowledge.agents.test_llm_agents import agents, answer
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

SCOPE = "org:default/resource:alice/thread:t1"

#: (what a hostile user, or a model proposing a fact, writes; the secret in it)
LEAKED = [
    # contractions
    ("My password's hunter2-Blue!", "hunter2-Blue"),
    ("My wifi password\u2019s hunter2-Blue!", "hunter2-Blue"),
    ("My pw's hunter2-Blue!", "hunter2-Blue"),
    ("My pin's 4821.", "4821"),
    ("My PIN number's 4821.", "4821"),
    ("My passcode's 4821.", "4821"),
    ("My door code's 4821.", "4821"),
    ("My passphrase's correct-horse-battery-staple.", "correct-horse-battery-staple"),
    ("The password for the router's admin1234.", "admin1234"),
    # Markdown
    ("**Password:** hunter2-Blue!", "hunter2-Blue"),
    ("*Password*: hunter2-Blue!", "hunter2-Blue"),
    ("`password`: hunter2-Blue!", "hunter2-Blue"),
    ("__PIN__: 4821", "4821"),
    ("- **Door code**: 4821#", "4821#"),
    ("| wifi password | hunter2-Blue! |", "hunter2-Blue"),
    ("| Service | Password |\n|---|---|\n| Netflix | hunter2-Blue! |", "hunter2-Blue"),
    ("| Account | PIN |\n| --- | --- |\n| Bank | 4821 |", "4821"),
    ("<b>Password:</b> hunter2-Blue!", "hunter2-Blue"),
    # the case of the word, and no copula
    ("Pin code: 4821", "4821"),
    ("PIN CODE 4821", "4821"),
    ("Pin: 4821", "4821"),
    ("My Pin is 4821.", "4821"),
    ("Door Code: 1234#", "1234#"),
    ("Door code 1234#", "1234#"),
    ("My bank PIN 4821 still works.", "4821"),
    ("wifi password hunter2-Blue!", "hunter2-Blue"),
    # the door after the word
    ("The code to the gate is 4821.", "4821"),
    ("The code for the front door is 4821.", "4821"),
    ("My code to the safe is 4821#.", "4821#"),
    ("The combination to the safe is 12-34-56.", "12-34-56"),
    ("The alarm's code is 4821.", "4821"),
    ("My Pin Is 4821", "4821"),
    # other languages' copulas
    ("La password \u00e8 hunter2-Blue!", "hunter2-Blue"),
    ("Il mio PIN \u00e8 4821.", "4821"),
    ("Mon mot de passe, c'est hunter2-Blue!", "hunter2-Blue"),
    # already refused (helper-129): kept here beside the new ones
    ("My password -> hunter2-Blue!", "hunter2-Blue"),
    ("My pw: hunter2-Blue!", "hunter2-Blue"),
    ("The gate code is 4821.", "4821"),
]

#: What the offline capture rules made a candidate of before (the rest were caught by no rule,
#: but by nothing else either when a model proposed them).
CAPTURED_BEFORE = [
    ("My Pin is 4821.", "4821"),
    ("The code to the gate is 4821.", "4821"),
    ("The code for the front door is 4821.", "4821"),
    ("My code to the safe is 4821.", "4821"),
]

#: Ordinary text with the same cue words: still captured (and the helper-129 list below).
STILL_CAPTURED = [
    "My password manager is 1Password",
    "The PIN pad is broken",
    "Our wifi is slow in the kitchen",
    "The building code is strict about fire exits",
    "The building code is IBC-2021",
    "My password's strength is good",
    "The password's length is 12 characters",
    "My PIN's last digit is odd",
    "My pin code reminder is on Mondays",
    "My door code reminder is taped to the fridge",
    "The code to the gate is broken",
    "The code for the office printer is on GitHub",
    "Pin 13 on the board is ground",
    "Pin the map to the board",
    "**Password manager:** 1Password",
    "| Setting | Value |\n|---|---|\n| Password policy | 12 characters |",
    "I reset my password for account ACME-1234 yesterday",
    "The password hint is my dog's name",
    "The wifi password is on a sticky note",
    "grep password | head",
    "The code on the box is 4821-XL",
    "wifi password WPA2-protected",
    "The building codes in 2024 are stricter",
    "PIN 13 on the Arduino is the LED",
    "My pin is in my wallet",
    "The __init__ method sets the password_hash",
    "Use **bold** for emphasis and `code` for code",
    "La password \u00e8 obbligatoria",
]


@pytest.fixture
async def knowledge(anyio_backend: str) -> AsyncIterator[Knowledge]:
    async with Knowledge.in_memory(clock=FakeClock()) as facade:
        yield facade


async def proposed(knowledge: Knowledge, text: str) -> str:
    """What ``Knowledge.capture`` (the path every model-proposed fact takes) makes of ``text``."""
    user = await knowledge.node("User", "person", "org:default/resource:alice")
    outcome = await knowledge.capture(user.id, text, context=SCOPE, proposed_level="thread",
                                      ceiling="resource", reason="a model proposed it")
    return outcome.status


@pytest.mark.parametrize(("text", "secret"), LEAKED, ids=[text[:32] for text, _ in LEAKED])
async def test_a_stated_secret_is_refused_by_capture(knowledge: Knowledge, text: str, secret: str) -> None:
    assert await proposed(knowledge, text) == "refused-secret"
    assert secret not in await everything_stored(knowledge)
    # and the value is known for one, so that the LLM capture agent refuses a model's rewording
    # of it ("Their home router is labelled hunter2-Blue") when this was the text it read
    assert secret in secret_values(text)


@pytest.mark.parametrize(("text", "secret"), CAPTURED_BEFORE, ids=[text[:32] for text, _ in CAPTURED_BEFORE])
async def test_the_offline_rules_capture_no_such_secret(text: str, secret: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == []
        assert secret not in await everything_stored(knowledge)
        assert any(run.agent == "capture" and run.withheld == 1 and secret not in run.detail
                   for run in memory.knowledge_agents.runs)  # type: ignore[union-attr]


@pytest.mark.parametrize("text", STILL_CAPTURED + [captured for _, captured in ORDINARY],
                         ids=[text[:32] for text in STILL_CAPTURED + [captured for _, captured in ORDINARY]])
async def test_ordinary_text_with_the_same_words_is_still_captured(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "captured"


@pytest.mark.parametrize(("text", "captured"), [
    ("My password manager is 1Password.", "their password manager is 1Password"),
    ("My pin code reminder is on Mondays.", "their pin code reminder is on Mondays"),
    ("My PIN's last digit is odd.", "their PIN's last digit is odd"),
    ("My code is on GitHub.", "their code is on GitHub"),
])
async def test_the_offline_rules_still_capture_ordinary_text(text: str, captured: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == [captured]


# -- the LLM capture agent: a model rewords what a Markdown delta stated -----------------------


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


@pytest.fixture
async def store(anyio_backend: str) -> AsyncIterator[Store]:
    async with open_store("memory://") as main:
        yield main


async def test_the_llm_capture_agent_refuses_a_reworded_markdown_secret(
    knowledge: Knowledge, store: Store, server: WireServer
) -> None:
    clock = FakeClock()
    team = agents(knowledge, store, clock, server)
    scope = team.scope(None, "alice", "t1")
    delta = observation(
        "* \U0001f534 (09:00) User stated: **Wifi password:** Tr0ub4dor&3",
        "* \U0001f534 (09:01) User pasted a table:",
        "| Service | PIN |",
        "|---|---|",
        "| Bank | 4821 |",
        "* \U0001f534 (09:02) User stated their favourite colour is teal.",
    )
    server.script(answer(json.dumps({"nodes": [{"name": "User", "kind": "person", "records": [
        {"text": "Their wifi uses Tr0ub4dor&3", "attribute": "wifi", "reason": "The user said so."},
        {"text": "Their bank card goes with 4821", "attribute": "bank", "reason": "The user said so."},
        {"text": "Their favourite colour is teal", "attribute": "favourite colour", "reason": "The user said so."},
    ]}]})))
    run = await team.capture(delta, scope, source_thread_id="t1")
    assert [r.text for r in run.written] == ["Their favourite colour is teal"]
    assert run.withheld == 2
    stored = await everything_stored(knowledge)
    assert "Tr0ub4dor" not in stored and "4821" not in stored


async def test_the_secret_check_stays_linear_on_a_long_text() -> None:
    # A hang guard, not a timing: 200 KB of near-misses (Markdown markers, table pipes, password
    # words without a value) is read in one pass; a quadratic pattern would not finish.
    pieces = ["**password** | ", "pin's ", "__ ", "| wifi password |", "code to the gate is ", "x" * 50 + " "]
    text = "".join(pieces) * (200_000 // len("".join(pieces)))
    table = "| a | password |\n" + "| b | c |\n" * 20_000

    def read() -> tuple[bool, frozenset[str]]:
        return holds_secret(text), secret_values(table)

    with anyio.fail_after(60):
        found, values = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    assert found is False and values == frozenset()

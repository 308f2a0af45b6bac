"""Stated secrets that still became candidate facts after helper-142 (helper-145).

Before: a password under a Markdown heading with its value on the next line ("## Password" then
"Sunflower42"), after a dash ("password -- Sunflower42"), a contraction with a plain word ("My
password's Sunflower"), a door code in Polish, Italian, French (and Spanish, Portuguese, German,
Dutch, Swedish: "kod do drzwi to 4821", "il codice della porta è 4821", "le code de la porte
est 4821"), and a password or PIN in Polish ("hasło to …", "mój PIN to 4821") were accepted by
the public ``Knowledge.capture`` a model's proposals go through, and the value was stored.

Ordinary sentences with the same words (a password changed, a policy, a schema table, a door
code that does not work or was changed) are still captured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge
from obsmem.knowledge.secrets import holds_secret, secret_values
from tests.integrity.work_count import GROWTH_BOUND, growth
from tests.knowledge.agents.alice import alice_memory, pending, say
from tests.knowledge.agents.test_capture_drops_secrets_129 import everything_stored

pytestmark = pytest.mark.anyio

SCOPE = "org:default/resource:alice/thread:t1"

#: (what a user, or a model proposing a fact, writes; the secret in it)
LEAKED = [
    # a Markdown heading (or a bold line, or a label line) and the value on the next line
    ("## Password\nSunflower42", "Sunflower42"),
    ("# Wifi password\nSunflower42", "Sunflower42"),
    ("### My PIN\n4821", "4821"),
    ("**Password**\nSunflower42", "Sunflower42"),
    ("Password:\nSunflower42", "Sunflower42"),
    ("## Door code\n4821#", "4821#"),
    # a dash between the word and the value
    ("password -- Sunflower42", "Sunflower42"),
    ("My password -- Sunflower42", "Sunflower42"),
    ("password - Sunflower42", "Sunflower42"),
    ("wifi password \u2013 Sunflower42", "Sunflower42"),
    ("PIN -- 4821", "4821"),
    # a contraction with a plain word
    ("My password's Sunflower", "Sunflower"),
    ("my password's sunflower.", "sunflower"),
    ("My wifi password\u2019s Sunflower!", "Sunflower"),
    # door codes: Polish
    ("kod do drzwi to 4821", "4821"),
    ("Kod do drzwi: 4821", "4821"),
    ("Mój kod do drzwi to 4821.", "4821"),
    ("kod do bramy to 4821", "4821"),
    ("Kod do domofonu to 4821#", "4821#"),
    ("kod do drzwi wejściowych jest 4821", "4821"),
    # Italian
    ("il codice della porta è 4821", "4821"),
    ("Il codice del cancello è 4821.", "4821"),
    ("il codice della porta e' 4821", "4821"),
    ("Il codice d'ingresso è 4821", "4821"),
    ("Il codice dell'allarme è 4821", "4821"),
    ("il codice del portone: 4821", "4821"),
    # French
    ("le code de la porte est 4821", "4821"),
    ("Le code du portail est 4821.", "4821"),
    ("Le code de l'alarme est 4821", "4821"),
    ("Le digicode est 4821B", "4821B"),
    ("le code de la porte, c'est 4821", "4821"),
    ("Le code d'entrée : 4821", "4821"),
    # the other languages the secret check reads
    ("Der Code für die Tür ist 4821", "4821"),
    ("El código de la puerta es 4821", "4821"),
    ("O código da porta é 4821", "4821"),
    ("De deurcode is 4821", "4821"),
    ("Koden till dörren är 4821", "4821"),
    # Polish passwords and PINs ("to" is its copula)
    ("Hasło to Sunflower42", "Sunflower42"),
    ("moje hasło to Sunflower42", "Sunflower42"),
    ("mój PIN to 4821", "4821"),
]

#: Further forms users write (found after the first fix).
HUNTED = [
    ("the lockbox code is 6203", "6203"),
    ("key box code: 7741", "7741"),
    ("The combination is 12-34-56.", "12-34-56"),
    ("the combo to the lock is 31-07-19", "31-07-19"),
    ("locker combo is 31-07-19", "31-07-19"),
    ("WiFi: HomeNet / Magnolia5q", "Magnolia5q"),
    ("user: alice pass: Hibiscus6w", "Hibiscus6w"),
    ("La clave del wifi es Girasol42", "Girasol42"),
    ("Min pinkod är 5519", "5519"),
    ("Salasanani on Auringonkukka42", "Auringonkukka42"),
    ("PIN-koodi on 6620", "6620"),
    ("Şifrem Aycicegi42", "Aycicegi42"),
    ("Мой ПИН-код 7714", "7714"),
    ("Код от двери 8803", "8803"),
    ("Mon code PIN est le 3348", "3348"),
    ("Mon mot de passe wifi est Tournesol42", "Tournesol42"),
    ("The gate opens with 2741", "2741"),
    ("You get in with code 3852", "3852"),
    ("Press 4963# at the door", "4963#"),
    ("The keypad takes 5074", "5074"),
]

#: Ordinary text with the same words: still captured.
STILL_CAPTURED = [
    "I changed my password yesterday",
    "The password policy requires 12 characters",
    "| password | string | required |",
    "## Password\nUse at least 12 characters.",
    "## Password policy\nMinimum 12 characters",
    "password -- see the vault",
    "My password's strength is good",
    "My password's expired",
    "kod do drzwi nie działa",
    "Kod do drzwi jest w kopercie",
    "Il codice della porta è cambiato",
    "Il codice della porta è sul frigo",
    "Le code de la porte est changé",
    "Le code de la porte est sur le frigo",
    "Der Code für die Tür ist neu",
    "El código de la puerta es nuevo",
    "Hasło to podstawa bezpieczeństwa",
    "The combination of Python3 and Rust works well",
    "The combo to the lock is on a sticky note",
    "The lockbox is in the garage",
    "Salasana on liian lyhyt",
    "Şifrem çok uzun",
    "La clave del éxito es la constancia",
    "The gate opens with a remote",
    "Press 123 on the keypad for help",
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


@pytest.mark.parametrize(("text", "secret"), LEAKED + HUNTED, ids=[text[:32] for text, _ in LEAKED + HUNTED])
async def test_a_stated_secret_is_refused_by_capture(knowledge: Knowledge, text: str, secret: str) -> None:
    assert await proposed(knowledge, text) == "refused-secret"
    assert secret not in await everything_stored(knowledge)
    # the value is known for one, so that a model's rewording of it is refused too
    assert secret in secret_values(text)


@pytest.mark.parametrize("text", STILL_CAPTURED, ids=[text[:32] for text in STILL_CAPTURED])
async def test_ordinary_text_with_the_same_words_is_still_captured(knowledge: Knowledge, text: str) -> None:
    assert await proposed(knowledge, text) == "captured"


@pytest.mark.parametrize("text", ["Il codice della porta è 4821.", "kod do drzwi to 4821", "## Password\nSunflower42"])
async def test_the_offline_rules_capture_no_such_secret(text: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        await say(memory, clock, text)
        assert await pending(memory, knowledge) == []
        stored = await everything_stored(knowledge)
        assert "4821" not in stored and "Sunflower42" not in stored


@pytest.mark.parametrize("unit", ["## Password\n", "password -- ", "kod do drzwi ", "il codice della porta ",
                                  "le code de la porte ", "My password's ", "PIN -- x ", "Hasło to "])
def test_the_secret_check_stays_linear(unit: str) -> None:
    ratio = growth(holds_secret, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"

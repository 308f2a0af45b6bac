"""The secrets helper-173 left leaking (/tmp/173/gaps.txt) never reach the memory models (helper-178).

Before: with privacy on, each sentence of LEAKS reached the hosted observer with all or part of its
secret in clear, and the observations it wrote kept it: the second word of "password: tulip sun",
a passphrase of ordinary words ("my password is correct horse battery staple"), a password of
letters after "pass is", "use the password", "… as the password", a security answer, a secret
word, a PIN of three digits, a password after an en dash, and a PIN given as the whole reply to
"Which PIN should I use?".

A passphrase of ordinary words is taken whole when it is two to eight lower-case words of letters
after a password word and its copula or colon, ends its clause, and has no function word ("on",
"the", "too", "to", "not", "my"...), no word that describes or places a password ("short",
"required", "somewhere", "expired"...), and no instruction verb first ("see", "ask", "check"):
"my password is too short", "the password is on the fridge" and the rest of ORDINARY stay as
written.
"""

from __future__ import annotations

import re

import pytest

from obsmem import Memory, Message
from obsmem.privacy import Redactor

from .hosted_observer import check_left_alone, echoing, observed, privacy_config
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it): the leaks of /tmp/173/gaps.txt.
LEAKS = [
    ("password: tulip sun", "tulip sun"),
    ("the passphrase is correct horse battery staple", "correct horse battery staple"),
    ("my password is correct horse battery staple", "correct horse battery staple"),
    ("pass is tulipsun", "tulipsun"),
    ("use the password tulipsun", "tulipsun"),
    ("log in with tulipsun as the password", "tulipsun"),
    ("security answer: fluffy", "fluffy"),
    ("my secret word is tulipsun", "tulipsun"),
    ("my PIN is 482", "482"),
    ("wifi password \u2013 hollyoak", "hollyoak"),
]

#: More of the same forms.
MORE = [
    ("Password: quokka lantern", "quokka lantern"),
    ("our wifi passphrase is purple monkey dishwasher.", "purple monkey dishwasher"),
    ("My password is correct horse battery staple and I keep forgetting it", "correct horse battery staple"),
    # quoted: redacted before too, a control
    ('the password is "correct horse battery staple"', "correct horse battery staple"),
    ("my password is correct-horse-battery-staple", "correct-horse-battery-staple"),
    ("Pass: hollyoak", "hollyoak"),
    ("enter password bluemoon", "bluemoon"),
    ("try the wifi password frostpine", "frostpine"),
    ("I used quillrose as my password.", "quillrose"),
    ("my security answer is fluffy", "fluffy"),
    ("the answer to my security question is Paris", "Paris"),
    ("The code word is tulipsun.", "tulipsun"),
    ("my secret word is Tulip77x", "Tulip77x"),
    ("my bank PIN is 907", "907"),
    ("The PIN is 615.", "615"),
    ("Password: Tulip Sun", "Tulip Sun"),
    # redacted before too: a control
    ("Router password: tulipsun", "tulipsun"),
]

#: Ordinary prose with the same words: reaches the observer as written.
ORDINARY = [
    "my password is too short",
    "the password is required",
    "the password is on the fridge",
    "The password is on the fridge.",
    "my password is in the drawer",
    "the password is case sensitive",
    "the password is hard to remember",
    "my password is my birthday",
    "the password is stored securely",
    "the password is something else",
    "the password is no longer valid",
    "the passphrase is twelve words long",
    "Password: see below",
    "Password: not required",
    "password: same as email",
    "Password: ask the admin",
    "Password: check your email",
    "the password is really long",
    "my password is super secure",
    "my password was reset yesterday",
    "Password: at least eight characters",
    "the boarding pass is ready",
    "my bus pass is expired",
    "pass is required",
    "use the password manager",
    "Use the password field.",
    "enter the password twice",
    "use the password again",
    "type the password below",
    "use the password provided",
    "I use this as my password.",
    "don't use your name as the password",
    "security answer: required",
    "the security answer is case sensitive",
    "the magic word is please",
    "the secret word is hidden somewhere",
    "my PIN is 4 digits",
    "the PIN is 3 digits long",
    "the GPIO pin is 17",
    "the reset pin is 101 on the header",
    "The pin is 100 mm long.",
    "wifi password \u2013 ask the front desk",
    "Forgot password \u2013 click the link",
    "Reset password \u2013 done",
    "Password: Not Required",
    "Password: Contact Support",
    "the password is sticky note",
    "my pass is yellow",
    "Pass: fail",
    "PASS = ignore",
    "the pin is 120.",
    "the code word is please",
    "What password manager do you use?",
]


def _words(secret: str) -> list[str]:
    return [word for word in re.split(r"[\s-]+", secret) if word]


def _leaked(secret: str, text: str) -> list[str]:
    """The words of ``secret`` found in ``text`` as whole words (case-sensitive)."""
    return [w for w in _words(secret) if re.search(rf"(?<![^\W\d_]){re.escape(w)}(?![^\W\d_])", text)]


def _history(text: str) -> str:
    """The transcript part of what the observer was sent or kept (the prompt's own words, "Sun, Dec
    06" among them, are not the user's; the observations quote the tag escaped)."""
    closing = text.rfind("message-history>")
    return text[text.rfind("message-history>", 0, closing):]


@pytest.mark.parametrize(("text", "secret"), LEAKS + MORE)
async def test_the_secret_never_reaches_the_observer_or_the_observations(text: str, secret: str) -> None:
    sent, kept = await observed(text + "\n\n" + "word " * 40)
    assert "User said" in kept
    assert _leaked(secret, _history(sent)) == []
    assert _leaked(secret, _history(kept)) == []


@pytest.mark.parametrize(("text", "secret"), LEAKS + MORE)
def test_the_secret_alone_is_replaced_and_the_words_before_it_stay(text: str, secret: str) -> None:
    redactor = Redactor(key=b"k")
    once = redactor.redact(text)
    assert _leaked(secret, once.text) == [] and once.counts == {"password": 1}
    assert once.text.split("[REDACTED")[0] == text.split(secret)[0]
    assert redactor.redact(once.text).text == once.text


async def test_ordinary_prose_reaches_the_observer_as_written() -> None:
    sent, _ = await observed("\n\n".join(ORDINARY) + "\n\n" + "word " * 40)
    sent = sent.replace("\n> ", "\n")
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_prose_is_left_alone(text: str) -> None:
    check_left_alone(text)


async def _replied(question: str, reply: str) -> str:
    """What the hosted observer was sent when the assistant asks ``question`` and the user's next
    message is ``reply``."""
    seen: list[str] = []
    async with Memory("memory://", config=privacy_config(), observer=echoing(seen)) as memory:
        turn = await memory.begin_turn(
            thread_id="t1", resource_id="r1", messages=[Message.user("I need some help " + "please " * 10)]
        )
        await turn.end([Message.assistant(question)])
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(reply)])
        await turn.end([Message.assistant("Noted " + "ok " * 40)])
        await memory.observe("t1")
    return _history("\n".join(seen))


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("Which PIN should I use?", "7305"),
        ("What password should I set for the router?", "Orchid55k"),
        ("Which passcode do you want?", "6620"),
    ],
)
async def test_a_reply_to_which_pin_never_reaches_the_observer(question: str, reply: str) -> None:
    sent = await _replied(question, reply)
    assert question in sent
    assert reply not in sent


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("What password manager do you use?", "Bitwarden"),
        ("Which password manager should I use?", "1Password"),
        ("Which PIN pad do you have?", "Verifone"),
        ("How many digits should the PIN have?", "6"),
        ("Which PIN should I use?", "Yours"),
    ],
)
async def test_an_ordinary_reply_to_a_question_about_a_pin_stays(question: str, reply: str) -> None:
    sent = await _replied(question, reply)
    assert f": {reply}\n" in sent and "[REDACTED" not in sent


#: Near misses of the new detectors, repeated: redaction's work stays linear in the text.
ADVERSARIAL = [
    "my password is " + "correct horse " * 5,
    "password: " + "tulip " * 9,
    "my password is tulip sun battery horse correct staple quokka lantern purple " * 3,
    "pass is pass is pass is ",
    "use the password " * 5,
    "with tulip as the with tulip as the ",
    "security answer: security answer: ",
    "my PIN is 48 my PIN is ",
    "Which PIN should I use? " * 3,
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_near_misses_cost_linear_work(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND

"""The passphrases helper-178's redaction let through, and the code and form text it masked (helper-186).

Before: with privacy on, each sentence of LEAKS reached the hosted observer with all or part of its
secret in clear: "open sesame" (its first word read as an instruction, "Password: open the
settings"), a security answer of several words ("Security question answer: my first dog"), and a
password the sentence goes on after ("my password is tulip sun for now", "… until Friday"; after
"password:" the first word alone was hidden). In pasted code, "password: str" lost its type
annotation to a placeholder while the default after it ('password: str = "hunter2"') went out in
clear; and "Password: user defined", "Password: Auto Generated", "password: change me", "Password:
Windows Login" had their first word replaced, "Password: Google Account" its two words.

Kept as they were, on purpose: "Password: Tulip Sun" is a passphrase (a form's state in title case,
"Password: Not Set", "Password: User Defined", is not: it holds a word no passphrase does), and
"the password is admin admin" is the default password said twice over (a user/password pair),
redacted as "the password is admin" is.
"""

from __future__ import annotations

import re

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_left_alone, observed
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: (what the user says, the secret in it)
LEAKS = [
    ("She said the password is open sesame", "open sesame"),
    ("he told me the password is open sesame.", "open sesame"),
    ("Password: open sesame", "open sesame"),
    ("Security question answer: my first dog", "my first dog"),
    ("security answer: first dog", "first dog"),
    ("my security answer is Aunt Mary", "Aunt Mary"),
    ("the answer to my security question is in London.", "in London"),
    ("my password is tulip sun for now", "tulip sun"),
    ("password: tulip sun for now", "tulip sun"),
    ("the password is tulip sun right now, I will change it", "tulip sun"),
    ("my password is tulip sun until Friday", "tulip sun"),
    ("my password is tulipsun for now", "tulipsun"),
    ("The wifi password is quokka lantern for the moment.", "quokka lantern"),
    # the sentence goes on with a clause of its own
    ("my password is tulip sun if you need it", "tulip sun"),
    ("the password is tulip sun which I picked yesterday", "tulip sun"),
    ("my password is tulip sun in case you need it", "tulip sun"),
    ("my password is tulipsun if you need it", "tulipsun"),
    ("Password: quokka lantern because I like them", "quokka lantern"),
]

#: Already redacted before: controls.
CONTROLS = [
    ("She said the password is tulip sun", "tulip sun"),
    ("my password is tulip sun but I will change it", "tulip sun"),
    ("Password: Tulip Sun", "Tulip Sun"),
    ("the password is admin admin", "admin admin"),
    ("Password: hollyoak please", "hollyoak"),
    ("security answer: fluffy", "fluffy"),
]

#: Pasted code: the default is the secret, the type annotation is not.
CODE_SECRETS = [
    ('password: str = "hunter2"', "hunter2"),
    ('    password: str = "hunter2"', "hunter2"),
    ("def connect(password: Optional[str] = 'Tulip77x'):", "Tulip77x"),
    ('password: bytes = b"hunter2"', "hunter2"),
]

#: Ordinary prose and code with the same words: reaches the observer as written.
ORDINARY = [
    "my password is too short",
    "the password is on the fridge",
    "Password: ask the admin",
    "Password: user defined",
    "Password: User Defined",
    "Password: Auto Generated",
    "password: change me",
    "password: your password here",
    "Password: Not Set",
    "Password: Contact Support",
    "Password: Google Account",
    "Password: Windows Login",
    "Password: Apple ID",
    "Password: Company Policy",
    "Password: pending until approval",
    "the password is fine for now",
    "the password is optional for now",
    "the password is hidden until you click",
    "the password is locked at the moment",
    "I'll use the password manager for now",
    "the password is required if you log in remotely",
    "my password is the same as before because I forgot",
    "the password is on the fridge in case you need it",
    "use the password manager if you can",
    "the password is stored in the vault which is encrypted",
    "the password is case sensitive when you type it",
    "my password is too long since the update",
    "the security answer is case sensitive if I remember",
    "my password is the same for now",
    "the password is open to everyone",
    "Password: open the settings page",
    "the password is valid until Friday",
    "security answer: see above",
    "the security answer is case sensitive",
    "the security answer is not case sensitive",
    "the security answer is the same as last time",
    "my security answer is something only I know",
    "the security answer is what you told me",
    "the security answer is stored in plain text",
    "Security answer: check your email",
    "the security answer is in my notes",
    "the security answer was a lie",
    "my security answer is my dog's name",
    "password: str",
    "  password: str",
    "def login(password: str, user: str):",
    "def f(password: str | None = None):",
    "password: bytes",
    "password: SecretStr",
    "password: typing.Optional[str] = None",
    "password: string;",
    'password: str = ""',
    'password: bytes = b""',
    "password: str | Omit = omit,",
    "password: str = get_password()",
]


def _words(secret: str) -> list[str]:
    return [word for word in re.split(r"[\s-]+", secret) if word]


def _leaked(secret: str, text: str) -> list[str]:
    """The words of ``secret`` found in ``text`` as whole words (case-sensitive)."""
    return [w for w in _words(secret) if re.search(rf"(?<![^\W\d_]){re.escape(w)}(?![^\W\d_])", text)]


def _history(text: str) -> str:
    """The transcript part of what the observer was sent or kept."""
    closing = text.rfind("message-history>")
    return text[text.rfind("message-history>", 0, closing):]


@pytest.mark.parametrize(("text", "secret"), LEAKS + CONTROLS + CODE_SECRETS)
async def test_the_secret_never_reaches_the_observer_or_the_observations(text: str, secret: str) -> None:
    sent, kept = await observed(text + "\n\n" + "word " * 40)
    assert "User said" in kept
    assert _leaked(secret, _history(sent)) == []
    assert _leaked(secret, _history(kept)) == []


@pytest.mark.parametrize(("text", "secret"), LEAKS + CONTROLS + CODE_SECRETS)
def test_the_secret_alone_is_replaced_and_the_words_around_it_stay(text: str, secret: str) -> None:
    redactor = Redactor(key=b"k")
    once = redactor.redact(text)
    assert _leaked(secret, once.text) == [] and once.counts == {"password": 1}
    before, after = text.split(secret, 1)
    assert once.text.startswith(before + "[REDACTED:password:") and once.text.endswith(after)
    assert redactor.redact(once.text).text == once.text


async def test_ordinary_prose_and_code_reach_the_observer_as_written() -> None:
    sent, _ = await observed("\n\n".join(ORDINARY) + "\n\n" + "word " * 40)
    sent = sent.replace("\n> ", "\n")
    assert [line for line in ORDINARY if line not in sent] == []
    assert "[REDACTED" not in sent


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_prose_and_code_are_left_alone(text: str) -> None:
    check_left_alone(text)


async def test_pasted_code_keeps_its_annotations_and_loses_its_default() -> None:
    code = (
        "Here is my config class:\n\n"
        "```python\n"
        "class Settings(BaseModel):\n"
        "    user: str\n"
        "    password: str\n"
        '    backup_password: str = "Orchid55k"\n'
        "```\n\n" + "word " * 40
    )
    sent, _ = await observed(code)
    assert "    password: str\n" in sent
    assert "backup_password: str = " in sent
    assert "Orchid55k" not in sent


#: Near misses of the changed detectors, repeated: redaction's work stays linear in the text.
ADVERSARIAL = [
    "my password is tulip sun for " * 5,
    "my password is tulip sun until next " * 4,
    "my password is tulip sun in " * 5,
    "my password is tulip sun which " * 5,
    "security answer: my first " * 6,
    "the answer to my security question is " * 3,
    "password: str " * 8,
    "password: Optional[str " * 6,
    "password: str | int | " * 6,
    "password: Secret | Secret | Secret | Secret | = " * 4,
    "Password: user " * 8,
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_near_misses_cost_linear_work(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND

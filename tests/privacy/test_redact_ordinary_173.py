"""Ordinary prose about keys, codes, passwords and PINs reaches the memory models as written (helper-173).

Before: with privacy on, a form's label and its state, "Password: required" (also "optional",
"hidden", "n/a", "incorrect", "changed", "reset", ...), reached the hosted observer with a
placeholder in place of the word: the assignment form took any word after "password:" for a
password. The rest of this table (the words the cues of helper-173 read, "the key is", "code:",
"password? it is", used in their ordinary senses) came through as written before and must still.

A zip or postal code ("zip code 94110", "My zip code is 94110.") is part of an address, not a
credential: it is left as written (the PII categories hold no address).
"""

from __future__ import annotations

import pytest

from obsmem.privacy import Redactor

from .hosted_observer import check_left_alone, check_sent_as_written
from tests.integrity.work_count import GROWTH_BOUND, growth

pytestmark = pytest.mark.anyio

#: A form's label and what it says about the field: taken for a password before.
FORM_LABELS = [
    "Password: required",
    "Password: Required",
    "Password: optional",
    "password: hidden",
    "Password: n/a",
    "Password: incorrect",
    "Password: changed",
    "Password: reset",
    "Password: empty",
    "Password: field",
    "Password: mandatory",
    "Password: missing",
    "password: not set",
    "Password: weak",
]

#: Ordinary sentences with the words the new cues read.
ORDINARY = [
    "the key is to stay calm",
    "The key is in the drawer.",
    "The key is under the mat.",
    "the key is consistency",
    "The key is 2048 bits long.",
    "The key is a 2048-bit RSA key.",
    "the primary key is user_id",
    "The shortcut key is Alt+F4.",
    "The key is Ctrl+Shift+P.",
    "The key is Ed25519.",
    "The cache key is user:1234.",
    "The key is 1500ms.",
    "The key is Python3.",
    "The key to success is practice.",
    "my key is missing",
    "The api key is stored in the vault.",
    "API key: see the dashboard",
    "The license key is on the box.",
    "the code is in the repo",
    "The code is on GitHub.",
    "The code is 2048 lines long.",
    "The code is from 2019.",
    "Your code is clean.",
    "the code is 100% covered",
    "Use code review before merging.",
    "Keep the code under 500 lines.",
    "zip code 94110",
    "My zip code is 94110.",
    "the area code is 415",
    "exit code: 137",
    "Error code: 80070005",
    "HTTP status code: 404",
    "I use a password manager.",
    "the password manager is open",
    "pin the tab",
    "Pin the tab to keep it open.",
    "Pin 13 drives the LED.",
    "Forgot your password? It is easy to reset.",
    "What's the password? It's complicated.",
    "what is the password policy? it is strict",
    "What is the PIN? It's on the card.",
    "What's the key? It's the one on the hook.",
    "How big is the key? It's 4096 bits.",
    "The password is new.",
    "The password is set.",
    "the password is old.",
    "my password is too long",
    "The password is due for rotation.",
    "I set my password to expire every 90 days.",
    "I set my password to something stronger.",
    "pw: n/a",
    # more near misses of the new cues
    "The key is to start early.",
    "The key is simple: practice.",
    "The key is AES256.",
    "The key is rotated every 90 days.",
    "the sort key is created_at",
    "The key is G7.",
    "The key is Windows10.",
    "The key is 1080p.",
    "the key's importance",
    "The key's 2048 bits.",
    "Your Zip code: 94110",
    "My Python code is 1234 lines",
    "The code is on line 1234.",
    "Code: 200",
    "Code: 1999",
    "What's the code? It's 2048 lines.",
    "What's the PIN? It's 4 digits.",
    "what's the wifi password? it's the one on the router",
    "I changed my password to something else.",
    "I reset the password to default.",
    "pwd: /home/alice",
    "bash: pwd: command not found",
    "The dress code is casual.",
    "Postal code: 10115",
    "Tulip is the password manager I use.",
    "1Password is the password manager we use.",
    "Pins 4821 and 4822 are ground.",
    "the passcode is 4 digits",
    "The secret is out.",
    "the token is gpt2",
    "max_tokens=4096",
    "next_token=page2",
    "api_key=None",
    "token=v1beta",
    "secret = b64encode(raw)",
    "passcode 12 digits",
    "the app password is required",
    "the password's age",
    "my password's old",
    "Password - optional",
    "Password - what to do if you forget it",
    "Passwords - best practices",
    "Password \u2013 Reset",
    "my wifi password - it's on the router",
    "Password - 8 characters minimum",
    "password - see below",
    "Forgot password - click here",
    "Change password - done",
]


async def test_form_labels_reach_the_observer_as_written() -> None:
    await check_sent_as_written(FORM_LABELS)


async def test_ordinary_prose_reaches_the_observer_as_written() -> None:
    await check_sent_as_written(ORDINARY)


@pytest.mark.parametrize("text", FORM_LABELS + ORDINARY)
def test_left_alone(text: str) -> None:
    check_left_alone(text)


#: Near misses of helper-173's cues, repeated: redaction's work stays linear in the text.
ADVERSARIAL = [
    "the key is ", "my a b key is ", "api key ", "the key is Tulip7", "code: 1", "your code 1234 ",
    "use code ", "password? it is ", "password? ", "what is the password? it is a ", "the password is ab ",
    "Tulip77x is the ", "I set my password to ", "pwd: ", "Password: required ", "x is the wifi password ",
    "api_key=", "a_token=abc12", "app password is abcd ", "passcode ", "my token is ", "the secret is x1",
    "Password - ", "the a b password \u2013 x ", "my password's ab ",
]


@pytest.mark.parametrize("unit", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_redaction_work_grows_linearly_on_near_misses(unit: str) -> None:
    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND

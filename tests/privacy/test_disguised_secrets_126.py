"""Secrets the observer model received in clear because of how they were written (helper-126's
hostile review).

A tool that fetches a URL or calls an API usually returns the body as a *string* inside its
result (``{"status": 200, "body": "{\\"password\\": \\"…\\"}"}``). The observer's transcript
renders the result with ``json.dumps``, which escapes the inner quotes, and the key-value
detectors did not allow a backslash before a quote: every secret in such a body reached the
hosted model. The same for a value typed after a no-break space (what chat apps, rich text
editors and web pages paste: ``password:\\u00a0…``, ``Bearer\\u00a0…``), after a full-width
colon or equals sign (CJK input methods: ``password：…``), a URL-encoded assignment or URL
(``…%3Faccess_token%3D…``, ``https%3A%2F%2Fuser%3Asecret%40host``, as a redirect parameter
carries them) and a card number grouped with no-break spaces.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import PII_CATEGORIES, Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

SECRETS = {
    "escaped_password": "Tr0ub4dor-body-1",
    "escaped_token": "Kq9vX2mLp7-body-2",
    "nbsp_password": "c0rrect-horse-3",
    "nbsp_bearer": "abcDEF1234567890nbspQ4",
    "fullwidth_password": "lemon-tart-55",
    "urlencoded_token": "Zx81Qw9Er7Ty6Ui5",
    "urlencoded_userinfo": "s3cr3t-redirect-7",
}

BODY = (
    '{"user": "ana", "password": "' + SECRETS["escaped_password"] + '", '
    '"auth": {"api_token": "' + SECRETS["escaped_token"] + '"}}'
)
USER_TEXT = (
    "the db login is password:\u00a0" + SECRETS["nbsp_password"] + " and the header was "
    "Authorization: Bearer\u00a0" + SECRETS["nbsp_bearer"] + "; the admin wrote password\uff1a"
    + SECRETS["fullwidth_password"] + " in the chat. The callback was "
    "https://app.example/cb?next=https%3A%2F%2Fapi.example%2Fv1%3Faccess_token%3D" + SECRETS["urlencoded_token"]
    + "%26page%3D2 and the mirror https%3A%2F%2Fbackup%3A" + SECRETS["urlencoded_userinfo"] + "%40db.example.com"
)
CARD = "4111\u00a01111\u00a01111\u00a01111"


async def test_the_observer_never_sees_a_disguised_secret_in_clear() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.extend(m.text for m in messages)
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User fetched a config.\n</observations>"

    privacy = PrivacyConfig(key="k", redact_pii=["credit_card"])
    config = MemoryConfig(observation={"message_tokens": 50, "buffer_tokens": False}, privacy=privacy)
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        messages = [
            Message.user(USER_TEXT + " my card is " + CARD + ". " + "x " * 40),
            Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="fetch", args={"url": "/me"}),)),
            Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="fetch",
                                                       result={"status": 200, "body": BODY}),)),
            Message.assistant("done " + "y " * 40),
        ]
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "Tool Result fetch" in sent and "\\\"password\\\"" in sent, "the observer saw the escaped body"
    leaked = sorted(name for name, value in SECRETS.items() if value in sent)
    assert not leaked, leaked
    assert "4111" not in sent, "the card number"


@pytest.mark.parametrize(
    "text",
    [
        'max tokens:\u00a04096',  # a number after a key-like word, not a secret
        '{\\"token_count\\": 42}',
        "password\uff1a ${DB_PASSWORD}",  # a template
        "token%3D%24%7BTOKEN%7D",  # an encoded template
        "https%3A%2F%2Fexample.com%2Fdocs%3Fpage%3D2",  # an encoded URL with no userinfo
        "order 4111\u00a01111",  # too short for a card
    ],
)
def test_ordinary_text_is_kept(text: str) -> None:
    redactor = Redactor(b"k", pii=PII_CATEGORIES)
    assert redactor.redact(text).text == text


def test_still_idempotent_and_linear_on_many_escaped_pairs() -> None:
    redactor = Redactor(b"k")
    text = ('\\"password\\": \\"' + "a" * 8 + '\\", ') * 2000 + "%3D" * 5000 + "\u00a0" * 5000
    once = redactor.redact(text)
    assert once.counts == {"password": 2000}
    assert redactor.redact(once.text).text == once.text


def _repeat(unit: str):  # type: ignore[no-untyped-def]
    return lambda n: unit * max(1, n // len(unit))


#: The new forms, repeated: escaped pairs, encoded assignments and URLs, no-break spaces.
SHAPES = {
    "escaped pairs": _repeat('\\"password\\": \\"ab1\\", '),
    "escaped keys, no values": _repeat('\\"token\\": \\"'),
    "encoded assignments": _repeat("password%3Dx%26"),
    "encoded keys": _repeat("token%3D"),
    "encoded schemes": _repeat("a%3A%2F%2Fb%3A"),
    "percent runs": _repeat("%41"),
    "no-break spaces": lambda n: "password" + "\u00a0" * n + "=x",
    "full-width colons": _repeat("password\uff1a"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_redaction_of_the_new_forms_is_linear(shape: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    redactor = Redactor(b"k", pii=PII_CATEGORIES)
    ratio = growth(redactor.redact, SHAPES[shape], 10_000)
    assert ratio < GROWTH_BOUND, f"{shape}: {ratio:.1f}x the work for 4x the input"

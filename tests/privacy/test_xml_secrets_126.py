"""A secret in an XML element reaches the observer only as a placeholder (helper-126's hostile
review).

A coding agent reads Maven's ``settings.xml`` (``<password>…</password>``), a SOAP or XML API
answer (``<AccessKey>…</AccessKey>``), a .NET config: the password rule needed ``=`` or ``:``
after the name, so the element's text went to the hosted observer in clear.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor

pytestmark = pytest.mark.anyio

VALUES = {"maven": "Tr0ub4dor-maven-3", "api": "letmein-soap-77", "client": "opensesame-8", "db": "Winter2026!"}
XML = (
    "<settings><servers><server><id>nexus</id><username>deploy</username>"
    f"<password>{VALUES['maven']}</password></server></servers></settings>\n"
    f"<Response><Credentials><AccessKey>{VALUES['api']}</AccessKey></Credentials></Response>\n"
    f"<config><client_secret>{VALUES['client']}</client_secret><db:password xmlns:db=\"x\">{VALUES['db']}"
    "</db:password></config>"
)


async def test_a_password_in_an_xml_element_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared configs.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1",
                                       messages=[Message.user("here are my configs:\n" + XML + "\n" + "x " * 30)])
        await turn.end([Message.assistant("Noted " + "ok " * 30)])
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "<username>deploy</username>" in sent
    assert [name for name, value in VALUES.items() if value in sent] == []


@pytest.mark.parametrize(
    "text",
    ["<tokens>4096</tokens>", "<maxTokens>4096</maxTokens>", "<password>${env.PASSWORD}</password>",
     "<password></password>", "<token_count>12</token_count>"],
)
def test_ordinary_xml_is_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


@pytest.mark.parametrize("unit", ["<password>", "<password>a", "<a:secret x='", "<token "])
def test_linear_on_runs_of_tags(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"

"""Session cookies, Discord webhooks and Telegram bot tokens reach the observer only as
placeholders (helper-126's hostile review).

A browsing or HTTP tool returns response headers (``Set-Cookie: sessionid=…``) and a request
log shows ``Cookie: PHPSESSID=…``: a session cookie is a bearer credential (whoever holds it is
logged in). A Discord webhook URL carries its token in the path, a Telegram bot token is
``<digits>:AA…``. No detector knew any of them, so all went to the hosted observer in clear.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

VALUES = {
    "django": "8f3b2c1d9e7a6f5b4c3d2e1f0a9b8c7d",
    "php": "el4ukv0kqbvoirg7nkp4dncpk3",
    "java": "1A2B3C4D5E6F7A8B9C0D1E2F3A4B5C6D",
    "express": "s%3AabcDEF123456.xyzXYZ789012ab",
    "github": "Rk9PQkFSQkFaUVVYMTIzNDU2Nzg5MGFi",
    "discord": "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AbCdEfGhIjKlMnOpQrStUvWx12",
    "telegram": "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
}
HEADERS = {
    "set-cookie": [f"sessionid={VALUES['django']}; Path=/; HttpOnly", f"_gh_sess={VALUES['github']}; path=/"],
    "request": f"Cookie: PHPSESSID={VALUES['php']}; JSESSIONID={VALUES['java']}; connect.sid={VALUES['express']}",
}
CONFIG_TEXT = (
    f"webhook: https://discord.com/api/webhooks/1234567890123/{VALUES['discord']}\n"
    f"bot: https://api.telegram.org/bot123456789:{VALUES['telegram']}/sendMessage"
)


async def test_session_cookies_and_bot_tokens_never_reach_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User logged in.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        messages = [
            Message.user("log in and set up the bots:\n" + CONFIG_TEXT + "\n" + "x " * 30),
            Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="http", args={"url": "/login"}),)),
            Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="http",
                                                       result={"status": 200, "headers": HEADERS}),)),
            Message.assistant("logged in " + "y " * 30),
        ]
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "Tool Result http" in sent and "discord.com/api/webhooks" in sent
    assert [name for name, value in VALUES.items() if value[:16] in sent] == []


@pytest.mark.parametrize(
    "text",
    ["session=new", "the session id=42", "sid=1", "call me at 123456789:30 tomorrow", "ratio 12345678:AAA"],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


@pytest.mark.parametrize("unit", ["sessionid=", "_sess=a1b2", "bot1234567890:", "webhooks/1234567/"])
def test_linear_on_runs(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"

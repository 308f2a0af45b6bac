"""A password given under its name in another language reaches the observer only as a
placeholder (helper-126's hostile review).

The ``password=``-style rule knew ``password``, ``passwd`` and ``passphrase`` only: a German user's
``Passwort: …`` (or ``Kennwort``), a French ``mot de passe : …``, a Spanish ``contraseña: …``, a
Brazilian ``senha: …``, a Russian ``пароль: …``, a Chinese ``密码：…``, a Japanese ``パスワード：…``
or a Korean ``비밀번호: …`` went to the hosted observer in clear.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor

pytestmark = pytest.mark.anyio

SAID = {
    "Passwort: ": "Sommer-2024-x1",
    "Kennwort = ": "Fenster7Blau",
    "mot de passe : ": "Soleil!Rouge9",
    "contraseña: ": "Playa-Azul-33",
    "senha: ": "Praia.Verde.8",
    "пароль: ": "Zima-Moroz-5",
    "我的密码：": "Longmen-888",
    "パスワード：": "Sakura-Neko-2",
    "비밀번호: ": "Hangang-River-4",
    "wachtwoord: ": "Tulp-Fiets-6",
}


async def test_a_password_named_in_another_language_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared logins.\n</observations>"

    text = "\n".join(f"{name}{value}" for name, value in SAID.items()) + "\n" + "word " * 40
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 30)])
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert sent, "observed"
    assert [name for name, value in SAID.items() if value in sent] == []


@pytest.mark.parametrize(
    "text",
    ["Passwortänderung: morgen", "die Passwort-Regeln: 12 Zeichen", "senha: ${SENHA}", "密码：<password>",
     "Passwort: null"],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


def test_a_german_compound_is_a_password_and_a_portuguese_review_is_not() -> None:
    redactor = Redactor(b"k")
    assert "Sommer" not in redactor.redact("Datenbankpasswort=Sommer-2024").text
    assert redactor.redact("resenha: boa").text == "resenha: boa"


@pytest.mark.parametrize("unit", ["Passwort:", "密码：", "senha", "mot de passe "])
def test_linear_on_runs_of_the_words(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"

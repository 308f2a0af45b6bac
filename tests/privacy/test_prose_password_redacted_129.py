"""With the privacy boundary on, a password said in prose still reaches the hosted observer
(helper-129, found while keeping secrets out of knowledge; not fixed here).

The boundary's ``password``-style detectors need an assignment (``password: …``, ``Passwort = …``):
"My wifi password is hunter2-Blue!" is prose, so the observer model receives the value and the
observation log keeps it. Knowledge capture no longer stores it (obsmem.knowledge.secrets reads
the prose forms), but privacy.py, a layer below knowledge, cannot use that module.

The change needed (obsmem/privacy.py, with table tests in tests/privacy for the false positives
tests/knowledge/agents/test_capture_drops_secrets_129.py lists): move the conversational
patterns of obsmem/knowledge/secrets.py (``_PASSWORD_SAID``, ``_CJK_SAID``, ``_CODE_SAID``,
``_KEY_SAID``, ``_PIN_SAID``, ``_LOGIN``, ``_SPLIT_SAID`` and their value checks) into
``SECRET_DETECTORS`` as ``Detector("password", pattern, check)`` entries (the value group is
what is replaced), and let knowledge/secrets.py keep only its look-alike fold and the
delta-values check over the Redactor.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


@pytest.mark.xfail(strict=True, reason="privacy.py's detectors need an assignment; prose passes (see the docstring)")
async def test_a_password_said_in_prose_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User shared the wifi details.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        text = "My wifi password is hunter2-Blue! " + "word " * 40
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(text)])
        await turn.end([Message.assistant("Noted " + "ok " * 30)])
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert sent, "observed"
    assert "hunter2-Blue" not in sent

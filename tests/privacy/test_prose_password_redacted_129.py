"""With the privacy boundary on, a password said in prose reached the hosted observer (found by
helper-129 while keeping secrets out of knowledge).

The boundary's ``password``-style detectors needed an assignment (``password: …``, ``Passwort = …``):
"My wifi password is hunter2-Blue!" is prose, so the observer model received the value and the
observation log kept it. The conversational forms helper-129 wrote for knowledge capture now live
below the privacy module (:mod:`obsmem.said`) and are one of its secret detectors.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


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

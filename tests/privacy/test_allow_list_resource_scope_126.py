"""The provider allow-list in resource scope: a thread the rules keep offline must not reach a
hosted model through another thread of the same resource (helper-126's hostile review).

``providers={"thread:private-*": ["offline"], "*": ["openai"]}`` observes ``private-1`` with the
offline rules, as documented. But in resource scope its observations live in the resource's one
record, in its ``<thread>`` section, and the requests for the resource's *other* threads carry
that record: with ``share_threads_in_resource=True`` the observer of ``chat-2`` is shown the
sibling sections as previous observations, and the reflector condenses every section of the
record. The boundary judges a request by the threads of its *messages* (observer) or the one
thread that triggered it (reflector), so both went to the hosted model with private-1's text.
Fixed (they were strict xfails, failing as said): the observer of a thread is shown only the
sibling sections the model may see, and each section is reflected as its own thread's request
(``obsmem/assembly.py``, ``obsmem/om/sections.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

PRIVATE = "Xyzzyitis"
RULES = {"thread:private-*": ["offline"], "*": ["openai"]}


def _model(seen: list[str]) -> FunctionModel:
    def answer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        if any("<observations>" in m.text and "Condense" in m.text for m in messages):
            return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User talked.\n</observations>"
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User planned a trip.\n</observations>"

    return FunctionModel(answer, name="openai:x")


async def _talk(memory: Memory, thread: str, text: str, turns: int = 3) -> None:
    for n in range(turns):
        turn = await memory.begin_turn(thread_id=thread, resource_id="ana",
                                       messages=[Message.user(f"{text} ({n}) " + "word " * 30)])
        await turn.step([Message.assistant(f"Noted {n}.")])
        await turn.end()


async def test_a_shared_sibling_section_of_an_offline_thread_stays_local() -> None:
    seen: list[str] = []
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=True,
        observation={"message_tokens": 80, "buffer_tokens": False},
        reflection={"observation_tokens": 100_000, "buffer_activation": None},
        privacy=PrivacyConfig(key="k", providers=RULES),
    )
    async with Memory("memory://", config=config, observer=_model(seen)) as memory:
        await _talk(memory, "private-1", f"My doctor says I have {PRIVATE} and I take pills for it.")
        record = await memory.get_record("private-1")
        assert record is not None and PRIVATE in record.active_observations, "observed offline"
        assert seen == [], "private-1 itself never went to the hosted model"
        await _talk(memory, "chat-2", "Let us plan a trip to Lisbon in May.")
    assert seen, "chat-2 was observed by the hosted model"
    assert not [request for request in seen if PRIVATE in request]


async def test_reflecting_the_resource_record_keeps_an_offline_threads_section_local() -> None:
    seen: list[str] = []
    config = MemoryConfig(
        scope="resource",
        observation={"message_tokens": 80, "buffer_tokens": False},
        reflection={"observation_tokens": 60, "buffer_activation": None},
        privacy=PrivacyConfig(key="k", providers=RULES),
    )
    async with Memory("memory://", config=config, observer=_model([]), reflector=_model(seen)) as memory:
        await _talk(memory, "private-1", f"My doctor says I have {PRIVATE} and I take pills for it.")
        await _talk(memory, "chat-2", "Let us plan a trip to Lisbon in May.", turns=6)
    assert seen, "the hosted reflector ran"
    assert not [request for request in seen if PRIVATE in request]

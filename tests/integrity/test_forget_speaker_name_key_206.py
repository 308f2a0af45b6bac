"""``memory.forget(value)`` and the participant name obsmem keeps for a message
(``metadata["name"]``, from a LangChain message's ``name``, an OpenAI message's ``name``): the
key is obsmem's, not anyone's words. A message's metadata was matched with its keys, so
forgetting "name" (or "am", or, restoring a backup after the knowledge store forgot "Nam", any
folded spelling of it) took every message's speaker: a multi-agent thread lost who said what.
A speaker whose name holds the value still loses it (control)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from obsmem import Memory, Message
from obsmem.integrations.langchain import from_langchain, to_langchain
from tests.transfer.helpers import restored_after_forget

pytestmark = pytest.mark.anyio


def _conversation() -> list[Message]:
    return from_langchain([HumanMessage("Plan the trip.", name="planner_bot"), AIMessage("Booked.", name="booker_bot")])


def _speakers(messages: list[Message]) -> list[str | None]:
    return [m.name for m in to_langchain(messages)]


@pytest.mark.parametrize("word", ["name", "am"])
async def test_the_speaker_key_is_no_one_s_word(word: str) -> None:
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _conversation())
        counts = await memory.forget(word, thread_id="t1")
        assert _speakers(await memory.list_messages("t1")) == ["planner_bot", "booker_bot"]
    assert counts["parts"] == 0


async def test_a_restored_backup_keeps_the_speakers(tmp_path: Path) -> None:
    _, restored, _ = await restored_after_forget(tmp_path, _conversation(), "Nam")
    assert _speakers(restored) == ["planner_bot", "booker_bot"]


async def test_the_control_a_speaker_named_by_the_value_loses_it() -> None:
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _conversation())
        await memory.forget("planner", thread_id="t1")
        assert _speakers(await memory.list_messages("t1")) == [None, "booker_bot"]

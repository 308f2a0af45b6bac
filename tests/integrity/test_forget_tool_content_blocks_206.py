"""``memory.forget(value)`` and a tool result made of content blocks (a LangChain tool, an MCP
adapter's tool returning ``[{"type": "text", "text": ...}]``): the blocks' kind and field names
are no one's words. A tool's data is matched string by string with its keys (an app's keys are
its words), so forgetting "text" or "type" made every such result ``[forgotten]``, and restoring a
backup after forgetting a short name such as "Tex" (the import matches the knowledge store's
digests, case folded) did the same to every one. A value the block says, and an app's key, still
make the result ``[forgotten]`` (controls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from obsmem import Memory, Message
from obsmem.integrations.langchain import from_langchain
from obsmem.types import ToolResultPart
from tests.transfer.helpers import restored_after_forget

pytestmark = pytest.mark.anyio

BLOCKS = [{"type": "text", "text": "Sunny, 21 degrees in Oslo."}]


def _conversation(result: Any = BLOCKS) -> list[Message]:
    return from_langchain([
        HumanMessage("Weather?"),
        AIMessage(content="", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}]),
        ToolMessage(content=result, tool_call_id="c1"),
        AIMessage("Sunny."),
    ])  # fmt: skip


def _results(messages: list[Message]) -> list[Any]:
    return [p.result for m in messages for p in m.parts if isinstance(p, ToolResultPart)]


@pytest.mark.parametrize("word", ["text", "type"])
async def test_a_block_kind_or_field_name_leaves_the_result(word: str) -> None:
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _conversation())
        counts = await memory.forget(word, thread_id="t1")
        assert _results(await memory.list_messages("t1")) == [BLOCKS]
    assert counts["parts"] == 0


async def test_a_restored_backup_keeps_the_result_after_forgetting_a_name(tmp_path: Path) -> None:
    live, restored, _ = await restored_after_forget(tmp_path, _conversation(), "Tex")
    assert _results(live) == _results(restored) == [BLOCKS]


@pytest.mark.parametrize(("result", "value"), [
    (BLOCKS, "Oslo"),
    ([{"type": "text", "text": "ok", "Zaphod": "vip"}], "Zaphod"),  # a key no block has: the app's
    ({"type": "customer", "name": "Zaphod"}, "customer"),  # not a content block: keys and values
])  # fmt: skip
async def test_the_control_what_is_said_still_goes(result: Any, value: str) -> None:
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", _conversation(result))
        await memory.forget(value, thread_id="t1")
        assert _results(await memory.list_messages("t1")) == ["[forgotten]"]

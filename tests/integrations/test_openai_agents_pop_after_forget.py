"""OpenAI Agents' undo (``pop_item``) after a forget rewrote the message it changes: the stores
refuse a save of a forgotten message's id (an old copy saved back), and the undo's own rewrite of
the stored message must not be taken for one: the popped output's call goes with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_undo_of_a_tool_step_a_forget_rewrote(tmp_path: Path, url: str) -> None:
    async with Memory("memory://" if url == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        session = ObsmemSession(memory, "s1", "user-1")
        await session.add_items([{"role": "user", "content": "Check my two codes."}])  # type: ignore[list-item]
        await session.add_items([  # type: ignore[list-item]
            {"type": "function_call", "call_id": "c1", "name": "check", "arguments": '{"code": "4242-9191"}'},
            {"type": "function_call", "call_id": "c2", "name": "check", "arguments": '{"code": "1111"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "valid"},
            {"type": "function_call_output", "call_id": "c2", "output": "invalid"},
        ])
        await session.aclose()
        await memory.forget("4242-9191", thread_id="s1")
        popped = await session.pop_item()
        assert popped is not None and popped.get("call_id") == "c2"
        items = await session.get_items()
        calls = [i.get("call_id") for i in items if i.get("type") == "function_call"]
        outputs = [i.get("call_id") for i in items if i.get("type") == "function_call_output"]
        assert calls == outputs == ["c1"], items

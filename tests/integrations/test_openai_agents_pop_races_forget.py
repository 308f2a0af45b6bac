"""OpenAI Agents' undo (``ObsmemSession.pop_item``) racing a forget: the undo reads the stored
messages, takes the popped item (and its call) out and writes them back; a forget landing between
the read and the write must not be undone (the forgotten value written back). Found by helper 181."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import obsmem.integrations.openai_agents as oa
from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio
SECRET = "4242-9191"


@pytest.mark.parametrize("url", ["memory", "sqlite"])
async def test_undo_racing_a_forget(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with Memory("memory://" if url == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        session = ObsmemSession(memory, "s1", "user-1")
        await session.add_items([{"role": "user", "content": "Check my two codes."}])  # type: ignore[list-item]
        await session.add_items([  # type: ignore[list-item]
            {"type": "function_call", "call_id": "c1", "name": "check", "arguments": json.dumps({"code": SECRET})},
            {"type": "function_call", "call_id": "c2", "name": "check", "arguments": '{"code": "1111"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "valid"},
            {"type": "function_call_output", "call_id": "c2", "output": "invalid"},
        ])
        await session.aclose()
        pop = oa._pop_newest

        async def pop_then_forget(newer):  # type: ignore[no-untyped-def]
            found = await pop(newer)
            await memory.forget(SECRET, thread_id="s1")  # lands between the undo's read and its save
            return found

        monkeypatch.setattr(oa, "_pop_newest", pop_then_forget)
        await session.pop_item()
        stored = await memory.list_messages("s1")
        assert [m.id for m in stored if SECRET in json.dumps(m.model_dump(mode="json"))] == []

"""An export of a thread a forget rewrote, imported into another store: every message comes back
as exported. The thread's forgotten ids travel in its metadata (they keep an old copy of those
messages from being saved back), and the messages that forget rewrote are in the export with
their ids, rewritten: the import stores them, and the observation cursors map onto them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.transfer import export_resource, import_resource

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("target", ["memory", "sqlite"])
async def test_a_forgotten_in_thread_round_trips_whole(tmp_path: Path, target: str) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'a.db'}") as memory:
        said = Message(role="user", parts=[{"type": "text", "text": "Hi there."}, {"type": "text", "text": "Code 4242-9191"}])
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("Noted.")])
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("And the weather?")])
        await turn.end([Message.assistant("Sunny.")])
        await memory.forget("4242-9191", thread_id="t1")
        exported = [(m.id, m.text) for m in await memory.list_messages("t1")]
        buffer = io.StringIO()
        await export_resource(memory.store, "u1", buffer)
    assert exported[0][1] == "Hi there."  # rewritten, not deleted
    url = "memory://" if target == "memory" else f"sqlite:///{tmp_path / 'b.db'}"
    async with Memory(url) as other:
        summary = await import_resource(other.store, io.StringIO(buffer.getvalue()))
        assert summary.counts["message"] == 4
        assert [(m.id, m.text) for m in await other.list_messages("t1")] == exported
        # and the thread goes on: a copy of the forgotten message saved back is still refused
        await other.save_messages("t1", [said])
        assert [(m.id, m.text) for m in await other.list_messages("t1")] == exported

"""Restoring an export taken before a forget leaves out what the forget removed, and only that.

The import matched each message, part and metadata entry as JSON, field names and obsmem's own
bookkeeping included, where the forget itself matches what is said (4db14e0, d59adf0, 62afba8).
So forgetting a short name such as "Tex" (in every text part's ``"type": "text"``) and restoring
a backup of the user dropped every message of the export; "Ole" (in ``"role"``) or a value in a
thread id did the same to receipts and marks. The import now applies the forget's own functions
(:mod:`obsmem.storage.forgetting`), matching the knowledge store's forgotten values (digests:
case and punctuation folded, so it may leave out a little more than the forget did, never less).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.transfer import export_resource, import_resource
from obsmem.types import DataPart, TextPart

pytestmark = pytest.mark.anyio


def _conversation() -> list[Message]:
    return [
        Message.user("Tex called about the roof."),
        Message.assistant("Noted, I will remind you."),
        Message.user("What's the weather tomorrow?"),
        Message.assistant("Sunny, 21 degrees."),
        Message(role="user", parts=(TextPart(text="Here is the form."), DataPart(name="form", data={"city": "Oslo"}))),
    ]


@pytest.mark.parametrize("value", ["Tex", "Ole", "Typ", "Dat", "Nam"])
async def test_a_restored_backup_keeps_what_the_forget_kept(tmp_path: Path, value: str) -> None:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'a.db'}", knowledge=knowledge) as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", _conversation())
            backup = io.StringIO()
            await export_resource(memory.store, "alice", backup, knowledge=knowledge)
            await memory.forget(value, resource_id="alice")
            live = [(m.role, m.parts) for m in await memory.list_messages("t1")]
        async with Memory(f"sqlite:///{tmp_path / 'b.db'}") as memory:
            await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge)
            restored = [(m.role, m.parts) for m in await memory.list_messages("t1")]
    finally:
        await knowledge.close()
    assert restored == live
    assert len(restored) >= 4


async def test_a_value_said_is_still_left_out(tmp_path: Path) -> None:
    """The control: what says the value does not come back (its case folded too)."""
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'a.db'}", knowledge=knowledge) as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [*_conversation(), Message.user("TEX says hi, and so does tex.")])
            backup = io.StringIO()
            await export_resource(memory.store, "alice", backup, knowledge=knowledge)
            await memory.forget("Tex", resource_id="alice")
            await memory.forget("Oslo", resource_id="alice")
        async with Memory(f"sqlite:///{tmp_path / 'b.db'}") as memory:
            summary = await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge)
            texts = [p.text for m in await memory.list_messages("t1") for p in m.parts if isinstance(p, TextPart)]
            data = [p.data for m in await memory.list_messages("t1") for p in m.parts if isinstance(p, DataPart)]
    finally:
        await knowledge.close()
    assert texts == ["Noted, I will remind you.", "What's the weather tomorrow?", "Sunny, 21 degrees.", "Here is the form."]
    assert data == []
    assert summary.forgotten == {"message": 2, "part": 1}

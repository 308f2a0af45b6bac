"""An import after a forget checks the export against the forgotten values off the event loop.

The check hashes every window of every text it asks about (one SHA-256 per character per
distinct length of the forgotten values: the values are kept as digests); it ran on the loop's
thread, so a REST import of a large export (a 5 MB message: about 24 s) held every other
request of the server. Watched by thread, not timed."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

import obsmem.transfer as transfer
from obsmem import Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.transfer import export_resource, import_resource

pytestmark = pytest.mark.anyio


async def test_the_forgotten_values_are_checked_off_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'a.db'}", knowledge=knowledge) as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [Message.user(f"note {i}: Zaphod called" if i % 7 == 0 else f"note {i}")
                                              for i in range(40)])  # fmt: skip
            backup = io.StringIO()
            await export_resource(memory.store, "alice", backup, knowledge=knowledge)
            await memory.forget("Zaphod", resource_id="alice")
        loop_thread = threading.get_ident()
        on_loop: list[str] = []
        original = transfer.forget_in_message

        def watched(message: Any, sought: Any) -> Any:
            if threading.get_ident() == loop_thread:
                on_loop.append(message.id)
            return original(message, sought)

        monkeypatch.setattr(transfer, "forget_in_message", watched)
        async with Memory(f"sqlite:///{tmp_path / 'b.db'}") as memory:
            summary = await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge)
            assert summary.forgotten == {"message": 6}
            assert len(await memory.list_messages("t1")) == 34
        assert on_loop == []
    finally:
        await knowledge.close()

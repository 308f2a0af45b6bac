"""A backup restored under another resource id (``into_resource=``, ``obsmem import --into``)
after a forget: what the user the backup is of had forgotten stays out. The import checked only
the forgotten values of the target's scopes, so a value forgotten for alice came back in full
when alice's backup was restored as "alice2" (a migration to new ids, a copy for support). A
value forgotten in one thread stays out of that thread only (controls)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.transfer import export_resource, import_resource
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio


async def _restored(tmp_path: Path, into: str | None, forget: dict[str, str]) -> dict[str, list[str]]:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'a.db'}", knowledge=knowledge) as memory:
            for thread in ("t1", "t2"):
                await memory.create_thread(thread, "alice")
                await memory.save_messages(thread, [
                    Message.user(f"Zaphod called about the roof ({thread})."),
                    Message.user(f"Leeds is sunny ({thread})."),
                    Message.assistant(f"Noted ({thread})."),
                ])  # fmt: skip
            backup = io.StringIO()
            await export_resource(memory.store, "alice", backup)
            for value, where in forget.items():
                await memory.forget(value, **({"thread_id": where} if where.startswith("t") else {"resource_id": where}))
        async with Memory(f"sqlite:///{tmp_path / 'b.db'}") as memory:
            await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge, into_resource=into)
            return {
                thread: [p.text for m in await memory.list_messages(thread) for p in m.parts if isinstance(p, TextPart)]
                for thread in ("t1", "t2")
            }
    finally:
        await knowledge.close()


@pytest.mark.parametrize("into", [None, "alice2"])
async def test_a_value_forgotten_for_the_user_stays_out(tmp_path: Path, into: str | None) -> None:
    restored = await _restored(tmp_path, into, {"Zaphod": "alice"})
    assert restored == {t: [f"Leeds is sunny ({t}).", f"Noted ({t})."] for t in ("t1", "t2")}


@pytest.mark.parametrize("into", [None, "alice2"])
async def test_a_value_forgotten_in_one_thread_stays_out_of_it_only(tmp_path: Path, into: str | None) -> None:
    restored = await _restored(tmp_path, into, {"Leeds": "t1"})
    assert restored == {
        "t1": ["Zaphod called about the roof (t1).", "Noted (t1)."],
        "t2": ["Zaphod called about the roof (t2).", "Leeds is sunny (t2).", "Noted (t2)."],
    }

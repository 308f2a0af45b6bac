"""A later forget of a word in obsmem's own name leaves the ids of the messages an earlier forget
removed. A thread's metadata was matched key by key before obsmem's own entry was set apart, so
forgetting "obsmem", "mem" or "o" (any part of the key ``metadata["obsmem"]``) dropped the whole
entry, the forgotten message ids with it; the conversation saved back as the app held it (an
ordinary resave, LangChain's middleware after a restart) then brought the first forgotten value
back. The same through an import: a value forgotten in the knowledge store after the export
(digests: case folded, so "OBSM" too) left the imported thread without its forgotten ids."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.knowledge import Knowledge
from obsmem.transfer import export_resource, import_resource
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio


def _url(kind: str, tmp_path: Path, name: str = "m.db") -> str:
    return "memory://" if kind == "memory" else f"sqlite:///{tmp_path / name}"


def _texts(messages: list[Message]) -> list[str]:
    return [p.text for m in messages for p in m.parts if isinstance(p, TextPart)]


@pytest.mark.parametrize("second", ["obsmem", "mem", "o"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_second_forget_keeps_the_first_ones_ids(tmp_path: Path, kind: str, second: str) -> None:
    held = [Message.user("Zaphod lives in Leeds."), Message.assistant("Noted.")]
    async with Memory(_url(kind, tmp_path)) as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", held)
        await memory.forget("Zaphod", thread_id="t1")
        await memory.forget(second, thread_id="t1")
        await memory.save_messages("t1", held)  # the app saves back what it held
        texts = _texts(await memory.list_messages("t1"))
    assert not any("Zaphod" in text for text in texts)


async def test_a_value_forgotten_since_the_export_keeps_the_imported_ids(tmp_path: Path) -> None:
    held = [Message.user("Zaphod lives in Leeds."), Message.assistant("Noted.")]
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(_url("sqlite", tmp_path, "a.db"), knowledge=knowledge) as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", held)
            await memory.forget("Zaphod", resource_id="alice")
            backup = io.StringIO()
            await export_resource(memory.store, "alice", backup)  # the messages' backup
            await memory.forget("OBSM", resource_id="alice", actor="privacy-officer")
        async with Memory(_url("sqlite", tmp_path, "b.db")) as memory:
            await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge)
            await memory.save_messages("t1", held)
            texts = _texts(await memory.list_messages("t1"))
    finally:
        await knowledge.close()
    assert not any("Zaphod" in text for text in texts)


async def test_the_control_an_app_entry_named_by_the_value_goes(tmp_path: Path) -> None:
    """An app's own thread metadata is still matched by its keys and values."""
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", "alice", metadata={"mem": "x", "city": "Leeds", "ok": 1})
        await memory.save_messages("t1", [Message.user("Zaphod lives here.")])
        await memory.forget("Zaphod", thread_id="t1")
        await memory.forget("mem", thread_id="t1")
        await memory.forget("Leeds", thread_id="t1")
        thread = await memory.store.get_thread("t1")
    assert thread is not None
    assert {k: v for k, v in thread.metadata.items() if k != "obsmem"} == {"ok": 1}
    assert len(thread.metadata["obsmem"]["forgotten"]) == 1

"""Export and import write and read their JSON lines off the event loop.

Found by measuring (a heartbeat beside the REST server's export and import, which run them on its
loop): a resource of 20,000 messages (8 MB of export) held the loop 0.66 s while it was written
out and about 0.5 s while it was read back (every line decoded, validated and checked), plus a
copy of every message made to save it; a pasted log's message held it for its megabytes. The
lines are now dumped in a thread a batch at a time, the file is read and checked in a thread, and
the copies are made there too.

Counted, not timed: the characters JSON-encoded or decoded on the loop's thread, and the
messages copied there, must not grow with the export.
"""

from __future__ import annotations

import io
import json
import threading
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem import transfer as transfer_module
from obsmem.transfer import export_resource, import_resource
from obsmem.types import Message as MessageModel

pytestmark = pytest.mark.anyio

TEXT = "A line of the conversation about Berlin, the school run and the order ORD-1234. " * 6


class _JsonOnLoop:
    """``json`` as the transfer module sees it, noting the characters it encodes or decodes on
    the loop's thread."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.chars = 0

    def dumps(self, value: Any, *args: Any, **kwargs: Any) -> str:
        text = json.dumps(value, *args, **kwargs)
        if threading.get_ident() == self.loop_thread:
            self.chars += len(text)
        return text

    def loads(self, text: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == self.loop_thread:
            self.chars += len(text)
        return json.loads(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


async def _exported(messages: int) -> str:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("Hello.")])
        await turn.end()
        for start in range(0, messages, 500):
            await memory.save_messages("t", [Message.user(f"{i}: {TEXT}") for i in range(start, min(messages, start + 500))])
        out = io.StringIO()
        await export_resource(memory.store, "u", out)
        return out.getvalue()


async def test_export_and_import_do_their_json_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    watched = _JsonOnLoop(threading.get_ident())
    monkeypatch.setattr(transfer_module, "json", watched)
    export = await _exported(2_000)
    assert len(export) > 1_000_000
    exported_on_loop, watched.chars = watched.chars, 0

    copies_on_loop = 0
    original = MessageModel.model_copy

    def copy(self: MessageModel, *args: Any, **kwargs: Any) -> MessageModel:
        nonlocal copies_on_loop
        if threading.get_ident() == watched.loop_thread and kwargs.get("update") == {"seq": None}:
            copies_on_loop += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MessageModel, "model_copy", copy)
    async with Memory("memory://") as target:
        summary = await import_resource(target.store, io.StringIO(export))
        assert summary.counts["message"] == 2_001
        assert len(await target.list_messages("t")) == 2_001
    # the header, the end line and the import's note: a few hundred characters whatever the size
    assert exported_on_loop < 2_000, f"{exported_on_loop:,} characters of the export were written out on the loop"
    assert watched.chars < 2_000, f"{watched.chars:,} characters of the export were read on the loop"
    assert copies_on_loop == 0, f"{copies_on_loop} messages were copied on the loop to be saved"


async def test_a_bad_line_is_still_named_when_read_in_a_thread() -> None:
    export = (await _exported(3)).split("\n")
    export[3] = export[3][:-5]  # a message line cut short
    async with Memory("memory://") as target:
        with pytest.raises(transfer_module.ExportFormatError, match="line 4"):
            await import_resource(target.store, io.StringIO("\n".join(export)))
        assert await target.store.list_threads("u") == []

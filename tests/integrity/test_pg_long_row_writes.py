"""PostgreSQL: adding parts to (or rewriting) a message read as a long row works out its long
text on a worker thread, as a window read does (found by helper-142 after 3e93d00: the store's
add_message_parts and rewrite_message decoded the row on the event loop and, since that commit,
hashed and searched its text there too: an observation's end marker is added to the last message
of its batch, a pasted log as often as not)."""

from __future__ import annotations

import hashlib
import sys
import threading

import pytest

import obsmem.om.text.own as own
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import DataPart, Message, Thread
from tests.integrity.test_big_message_in_window import BIG, HEAVY, LINE, _Hashlib, _Pattern

pytestmark = pytest.mark.anyio


async def test_long_rows_are_worked_out_off_the_loop_when_parts_are_added(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresStore(postgres_url)
    async with store:
        await store.create_thread(Thread(id="t", resource_id="u"))
        log = Message.user("here is my log:\n" + LINE * (BIG // len(LINE)))
        await store.save_messages("t", [log])
        store.forget_cached()  # read afresh, as another process would
        loop_thread = threading.get_ident()
        found: list[int] = []

        def note(size: int) -> None:
            if size >= HEAVY and threading.get_ident() == loop_thread:
                found.append(size)

        fake = _Hashlib(note)
        for name, module in list(sys.modules.items()):
            if name.startswith("obsmem") and getattr(module, "hashlib", None) is hashlib:
                monkeypatch.setattr(module, "hashlib", fake)
        monkeypatch.setattr(own, "_OPEN_START", _Pattern(own._OPEN_START, note))
        updated = await store.add_message_parts(log.id, [DataPart(data={"k": "v"}, name="marker")])
        assert any(isinstance(p, DataPart) for p in updated.parts)
        own._part_may_hold_reminder(updated.parts[0])  # what a boundary asks of it next: kept, not searched again
    assert found == [], f"{len(found)} hashes/searches of the {BIG:,}-character log on the loop's thread"

"""The PostgreSQL store's long-row cache (:class:`obsmem.storage.decoded.LongRows`): a hit needs
the same document text, hands out its own metadata each time, is bounded, and clears."""

from __future__ import annotations

import json

from obsmem import Message
from obsmem.storage.decoded import LONG_ROW_CHARS, LongRows
from obsmem.types import ToolResultPart

LOG = "line <x> " * (LONG_ROW_CHARS // 4)


def _row(message: Message) -> str:
    return message.model_dump_json()


def test_a_hit_needs_the_same_document_and_gives_a_copy_with_its_own_metadata() -> None:
    rows = LongRows()
    message = Message.user(LOG, metadata={"tags": ["a"]})
    doc = _row(message)
    rows.put((1, "t", "u"), doc, message, json.dumps(message.metadata))
    assert rows.holds((1, "t", "u"), doc)
    first, second = rows.get((1, "t", "u"), doc), rows.get((1, "t", "u"), doc)
    assert first is not None and second is not None
    assert first.text == LOG and first.metadata == {"tags": ["a"]}
    first.metadata["tags"].append("changed")  # one reader's metadata is its own
    assert second.metadata == {"tags": ["a"]}
    assert first.parts is second.parts  # the long text itself is shared (read-only)
    changed = _row(message.model_copy(update={"parts": (message.parts[0].model_copy(update={"text": LOG + "!"}),)}))
    assert rows.get((1, "t", "u"), changed) is None and not rows.holds((1, "t", "u"), changed)
    assert rows.get((2, "t", "u"), doc) is None  # another row


def test_bounded_by_characters_oldest_first_and_cleared() -> None:
    rows = LongRows(max_chars=len(LOG) * 8)
    message = Message.user(LOG)
    doc = _row(message)
    for seq in range(20):
        rows.put((seq, "t", "u"), doc, message, "{}")
    assert 0 < len(rows) <= 8
    assert rows.get((19, "t", "u"), doc) is not None and rows.get((0, "t", "u"), doc) is None
    rows.clear()
    assert len(rows) == 0 and rows.get((19, "t", "u"), doc) is None


def test_messages_others_could_change_are_not_kept() -> None:
    rows = LongRows()
    message = Message(role="tool", parts=[ToolResultPart(tool_call_id="c", tool_name="t", result={"log": LOG})])
    doc = _row(message)
    rows.put((1, "t", "u"), doc, message, "{}")
    assert rows.get((1, "t", "u"), doc) is None

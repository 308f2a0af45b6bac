"""A speaker whose name holds ": " keeps their day's notes whole in the offline observer.

Found by feeding ``Memory("memory://")`` a conversation between named people where a name is
not plainly a name ("Ops: Night Shift", which the observer writes quoted, as
``Participant “Ops: Night Shift”: …``, so metadata can never pose as a label). A speaker's later
notes of a day join their first line; the observer cut each later line's head at its first
": ", which for a quoted name is inside the name. The user saw a fragment of the name and a
closing quote in the middle of the notes: ``…; Night Shift”: restarted the Kelvo cluster …``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from obsmem import Memory, Message
from obsmem.types import TextPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)


def _said(role: str, name: str, text: str, minute: int) -> Message:
    return Message(role=role, parts=(TextPart(text=text),), metadata={"name": name},  # type: ignore[arg-type]
                   created_at=T0 + timedelta(minutes=minute))  # fmt: skip


@pytest.mark.parametrize("name", ["Ops: Night Shift", "Date: Jan 1, 2020", "Team: A: B"])
async def test_a_quoted_speakers_later_notes_join_without_a_piece_of_the_name(name: str) -> None:
    messages = [
        _said("assistant", name, "I restarted the Kelvo cluster in Frankfurt after the outage.", 0),
        _said("user", "Maya", "I moved the Brisket release to Thursday because QA found a bug.", 1),
        _said("assistant", name, "I rotated the Zamba certificates for the Lisbon gateway tonight.", 2),
    ]
    async with Memory("memory://") as memory:
        await memory.create_thread("t1", resource_id="r")
        await memory.save_messages("t1", messages)
        await memory.observe("t1")
        record = await memory.get_record("t1")
    assert record is not None
    lines = [line for line in record.active_observations.splitlines() if "Kelvo" in line]
    assert len(lines) == 1, record.active_observations
    head, _, notes = lines[0].partition("”: ")
    assert "Zamba" in notes, lines[0]  # the later note joined the speaker's line of the day
    assert "”" not in notes, f"a piece of the quoted name inside the notes: {lines[0]}"

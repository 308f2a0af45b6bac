"""Restoring an export taken before a forget leaves out what the forget removed, and only that.

The import matched each message, part and metadata entry as JSON, field names and obsmem's own
bookkeeping included, where the forget itself matches what is said (4db14e0, d59adf0, 62afba8).
So forgetting a short name such as "Tex" (in every text part's ``"type": "text"``) and restoring
a backup of the user dropped every message of the export; "Ole" (in ``"role"``) or a value in a
thread id did the same to receipts and marks. The import now applies the forget's own functions
(:mod:`obsmem.storage.forgetting`), matching the knowledge store's forgotten values by the digest
of the value as the forget matched it (case kept: tests/transfer/test_import_forgotten_exact_216.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Message
from obsmem.types import DataPart, TextPart

from .helpers import restored_after_forget

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
    live, restored, _ = await restored_after_forget(tmp_path, _conversation(), value)
    assert [(m.role, m.parts) for m in restored] == [(m.role, m.parts) for m in live]
    assert len(restored) >= 4


async def test_a_value_said_is_still_left_out(tmp_path: Path) -> None:
    """The control: what says the value does not come back (as the forget matched it: case kept)."""
    messages = [*_conversation(), Message.user("Tex says hi, and so does TEX."), Message.user("TEX and tex stay.")]
    _, restored, summary = await restored_after_forget(tmp_path, messages, "Tex", "Oslo")
    texts = [p.text for m in restored for p in m.parts if isinstance(p, TextPart)]
    assert texts == ["Noted, I will remind you.", "What's the weather tomorrow?", "Sunny, 21 degrees.",
                     "Here is the form.", "TEX and tex stay."]  # fmt: skip
    assert [p.data for m in restored for p in m.parts if isinstance(p, DataPart)] == []
    assert summary.forgotten == {"message": 2, "part": 1}

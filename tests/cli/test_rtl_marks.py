"""Hebrew, Persian and Arabic text holds bidi marks (RLM, LRM, ALM) beside its letters: `obsmem
show` printed them spelled (``\\u200f``) inside the message, so an operator reading a Persian
conversation read escape codes in its words. They reorder no run of letters (only the neutral
characters next to them), unlike the embeddings, overrides and isolates, which stay spelled
(test_terminal_safety_174.py); in ids, which must read back as typed, every invisible character
stays spelled."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app

PERSIAN = "سلام\u200c\u200fدنیا (۱۲۳)\u200f"  # ZWNJ and RLM, as a Persian keyboard writes them
HEBREW = "שלום \u200eABC-123\u200e עולם"  # LRM around a Latin product code
ARABIC = "مرحبا\u061c 2024"  # ALM before digits
THREAD = "chat\u200f1"


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(THREAD, "alice")
            await memory.save_messages(THREAD, [Message.user(PERSIAN), Message.user(HEBREW), Message.user(ARABIC)])

    asyncio.run(run())


def test_show_prints_the_bidi_marks_of_rtl_text_as_written_and_spells_them_in_ids(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    shown = CliRunner().invoke(app, ["show", THREAD, "--store", str(db)], env={"COLUMNS": "300"})
    assert shown.exit_code == 0, shown.output
    for text in (PERSIAN, HEBREW, ARABIC):
        assert text in shown.output, (text, shown.output)
    assert "\\u200f" not in shown.output.replace("chat\\u200f1", ""), shown.output
    listed = CliRunner().invoke(app, ["threads", "--store", str(db)], env={"COLUMNS": "300"})
    assert listed.exit_code == 0, listed.output
    assert "chat\\u200f1" in listed.output and THREAD not in listed.output, listed.output

"""Text the CLI prints from the stores (captured or remembered knowledge, audit reasons, messages)
is data: a terminal's escape sequences in it reach the reader's terminal as visible text, never as
commands (a line erase, a fake green "APPROVED", a hyperlink to another site). Found by a hostile
review: a resource key remembered a candidate holding them over REST, and ``obsmem knowledge
pending`` printed them raw to the reviewer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli.app import app
from obsmem.knowledge import Knowledge, TrustState

EVIL = "my name is Bob\x1b[2K\r\x1b[32mAPPROVED\x1b[0m \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\x07\x9b31m"
SCOPE = "org:acme/resource:alice"


def _seed(path: Path) -> None:
    async def main() -> None:
        async with Knowledge.sqlite(path) as knowledge:
            node = await knowledge.node("Bob", "person", SCOPE)
            await knowledge.append(node.id, EVIL, SCOPE, reason=f"captured: {EVIL}", trust=TrustState.CANDIDATE)

    asyncio.run(main())


def test_pending_and_activity_print_control_characters_as_visible_text(tmp_path: Path) -> None:
    """On main: the output held '\\x1b[2K', '\\r' and the OSC 8 hyperlink as they were stored."""
    path = tmp_path / "k.db"
    _seed(path)
    for command in ("pending", "activity"):
        result = CliRunner().invoke(app, ["knowledge", command, "-k", str(path), "--scope", SCOPE])
        assert result.exit_code == 0, result.output
        assert "my name is Bob" in result.output
        raw = [c for c in result.output if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]
        assert raw == [], f"{command}: control characters reached the terminal: {raw!r}"
        assert "\\x1b" in result.output  # shown, as text

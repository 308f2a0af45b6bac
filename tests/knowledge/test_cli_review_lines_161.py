"""``obsmem knowledge pending`` / ``activity`` print one line per record and per event, whatever
the stored text holds (helper-161).

A record's text and a reason are data a user or a tool wrote (capture quotes the user; an
application's ``Knowledge.append`` keeps text as given). Printed as they were, a newline in one
started a second line that read like another pending candidate, with a real record's id and a
harmless text beside it (the reviewer approves that id: another record's words), or like another
audit event (a forged ``record-deleted`` by ``admin``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.knowledge import Knowledge, RecordDraft, TrustState

SCOPE = "org:default/resource:alice/thread:t1"
FORGED_EVENT = "2026-12-05 21:00:00  record-deleted    admin      01ZZZZZZZZZZZZZZZZZZZZZZZZ  purged"


def _seed(graph: Path) -> str:
    async def seed() -> str:
        async with Knowledge.sqlite(graph) as knowledge:
            user = await knowledge.node("User", "person", "org:default/resource:alice")
            real = await knowledge.store.append_record(
                RecordDraft(user.id, "wire 5000 EUR to account X", SCOPE, trust=TrustState.CANDIDATE),
                actor="capture", reason="stated")
            forged = f"they like tea  (stated)\n{real.id}  they like coffee\r\x1b[2K"
            await knowledge.store.append_record(
                RecordDraft(user.id, forged, SCOPE, trust=TrustState.CANDIDATE), actor="capture",
                reason=f"stated\n{FORGED_EVENT}\u2028{FORGED_EVENT}")
            return real.id

    return asyncio.run(seed())


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def test_pending_prints_one_line_per_candidate(tmp_path: Path) -> None:
    graph = tmp_path / "k.db"
    real = _seed(graph)
    result = CliRunner().invoke(app, ["knowledge", "pending", "-k", str(graph), "--scope", SCOPE])
    assert result.exit_code == 0, result.output
    lines = _lines(result.stdout)
    assert len(lines) == 3, lines  # two candidates and the count
    assert lines[-1] == "2 pending"
    starting_with_real = [line for line in lines if line.startswith(real)]
    assert len(starting_with_real) == 1 and "wire 5000 EUR" in starting_with_real[0], lines
    assert "\x1b" not in result.stdout and "\r" not in result.stdout


def test_activity_prints_one_line_per_event(tmp_path: Path) -> None:
    graph = tmp_path / "k.db"
    _seed(graph)
    result = CliRunner().invoke(app, ["knowledge", "activity", "-k", str(graph), "--scope", SCOPE])
    assert result.exit_code == 0, result.output
    lines = _lines(result.stdout)
    assert len(lines) == 3, lines  # two record-created events and the node's
    assert not [line for line in lines if line.startswith("2026-12-05 21:00:00")], lines
    assert "\u2028" not in result.stdout

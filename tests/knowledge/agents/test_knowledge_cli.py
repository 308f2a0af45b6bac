"""``obsmem knowledge``: review candidates from the command line."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.knowledge import Knowledge, RecordDraft, RecordView, TrustState

SCOPE = "org:default/resource:alice/thread:t1"


def test_pending_approve_reject_and_activity(tmp_path: Path) -> None:
    graph = tmp_path / "k.db"

    async def seed() -> list[str]:
        async with Knowledge.sqlite(graph) as knowledge:
            user = await knowledge.node("User", "person", "org:default/resource:alice")
            ids = []
            for text in ("their number is +49 176 5550 3381", "they like red-eye flights"):
                record = await knowledge.store.append_record(
                    RecordDraft(user.id, text, SCOPE, trust=TrustState.CANDIDATE), actor="capture",
                    reason="The user stated it.")
                ids.append(record.id)
            return ids

    keep, drop = asyncio.run(seed())
    runner = CliRunner()
    listed = runner.invoke(app, ["knowledge", "pending", "--knowledge", str(graph), "--scope", SCOPE])
    assert listed.exit_code == 0, listed.output
    assert keep in listed.output and "The user stated it." in listed.output and "2 pending" in listed.output
    ok = runner.invoke(app, ["knowledge", "approve", keep, "-k", str(graph), "--scope", SCOPE, "--actor", "alice"])
    no = runner.invoke(app, ["knowledge", "reject", drop, "-k", str(graph), "--scope", SCOPE, "--tombstone"])
    assert ok.exit_code == 0 and no.exit_code == 0, ok.output + no.output
    log = runner.invoke(app, ["knowledge", "activity", "-k", str(graph), "--scope", SCOPE])
    assert "record-verified" in log.output and "alice" in log.output and "record-rejected" in log.output

    async def check() -> list[str]:
        async with Knowledge.sqlite(graph) as knowledge:
            user = await knowledge.store.resolve_node("User", SCOPE)
            assert user is not None
            return [r.id for r in (await knowledge.store.list_about(user.id, SCOPE, view=RecordView())).items]

    assert asyncio.run(check()) == [keep]
    missing = runner.invoke(app, ["knowledge", "approve", "01ZZZZZZZZZZZZZZZZZZZZZZZZ", "-k", str(graph),
                                  "--scope", SCOPE])
    assert missing.exit_code != 0

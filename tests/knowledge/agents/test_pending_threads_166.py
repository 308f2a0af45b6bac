"""``obsmem knowledge pending --scope <resource>`` lists what capture proposed in the resource's
threads, and the resource's reviewer decides on them from there (helper-166).

Capture writes its candidates at thread scope; the CLI listed only those a resource scope sees
(its own and its ancestors'), so a resource's reviewer saw "0 pending" while the inspector showed
them, and approving one with ``--scope <resource>`` answered not found.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.clock import FakeClock
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.agents import AgentSettings, KnowledgeAgents
from obsmem.storage import open_store

RESOURCE = "org:acme/resource:alice"


def _capture(graph: Path) -> list[str]:
    async def work() -> list[str]:
        async with Knowledge.sqlite(graph) as knowledge, open_store("memory://") as main:
            agents = KnowledgeAgents(knowledge, main, AgentSettings(), clock=FakeClock())  # trust: candidate
            for thread, line in (("t1", "User stated they live in Lisbon."),
                                 ("t2", "User stated their favourite drink is green tea.")):
                await agents.capture(f"Date: Mar 3, 2025\n* 🔴 (09:00) {line}", agents.scope("acme", "alice", thread),
                                     source_thread_id=thread)
            # a sibling resource's candidate: never listed for alice
            await agents.capture("Date: Mar 3, 2025\n* 🔴 (09:00) User stated they live in Oslo.",
                                 agents.scope("acme", "bob", "t9"), source_thread_id="t9")
            ids = []
            for thread in ("t1", "t2"):
                ids += [r.id for r in (await knowledge.review.pending(f"{RESOURCE}/thread:{thread}")).items]
            return ids

    return asyncio.run(work())


def test_a_resource_reviewer_sees_and_decides_its_threads_candidates(tmp_path: Path) -> None:
    graph = tmp_path / "k.db"
    lisbon, tea = _capture(graph)
    runner = CliRunner()
    listed = runner.invoke(app, ["knowledge", "pending", "-k", str(graph), "--scope", RESOURCE])
    assert listed.exit_code == 0, listed.output
    assert lisbon in listed.output and tea in listed.output, listed.output
    assert "Lisbon" in listed.output and "Oslo" not in listed.output
    assert "2 pending" in listed.output

    ok = runner.invoke(app, ["knowledge", "approve", lisbon, "-k", str(graph), "--scope", RESOURCE])
    no = runner.invoke(app, ["knowledge", "reject", tea, "-k", str(graph), "--scope", RESOURCE])
    assert ok.exit_code == 0 and no.exit_code == 0, ok.output + no.output
    assert "0 pending" in runner.invoke(app, ["knowledge", "pending", "-k", str(graph), "--scope", RESOURCE]).output

    async def served() -> list[str]:
        async with Knowledge.sqlite(graph) as knowledge:
            return [h.text for h in await knowledge.search("Lisbon green tea", f"{RESOURCE}/thread:t1",
                                                           view=RecordView())]

    texts = asyncio.run(served())
    assert any("Lisbon" in t for t in texts) and not any("tea" in t for t in texts), texts


def test_another_resources_candidate_is_not_decided_from_a_resource(tmp_path: Path) -> None:
    graph = tmp_path / "k.db"
    _capture(graph)

    async def bobs() -> str:
        async with Knowledge.sqlite(graph) as knowledge:
            return (await knowledge.review.pending("org:acme/resource:bob/thread:t9")).items[0].id

    oslo = asyncio.run(bobs())
    refused = CliRunner().invoke(app, ["knowledge", "approve", oslo, "-k", str(graph), "--scope", RESOURCE])
    assert refused.exit_code != 0
    listed = CliRunner().invoke(app, ["knowledge", "pending", "-k", str(graph),
                                      "--scope", "org:acme/resource:bob/thread:t9"])
    assert oslo in listed.output and "1 pending" in listed.output  # still pending

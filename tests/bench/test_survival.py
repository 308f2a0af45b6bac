"""Fact survival across reflection generations, on the offline reflector."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.bench.survival import filler_turn, run_survival, seeded_facts
from obsmem.cli import app
from obsmem.errors import InvalidInputError
from obsmem.om.protocols import ReflectionRequest, ReflectionResult

pytestmark = pytest.mark.anyio


def test_seeded_facts_are_distinct_and_reproducible() -> None:
    facts = seeded_facts(30, seed=1)
    assert len({f.value for f in facts}) == 30
    assert len({f.statement.split(" is ")[0] for f in facts if " is " in f.statement}) == sum(
        1 for f in facts if " is " in f.statement
    )  # no two facts set the same attribute, so none can supersede another
    assert facts == seeded_facts(30, seed=1)
    assert facts != seeded_facts(30, seed=2)
    with pytest.raises(InvalidInputError, match="between 1 and"):
        seeded_facts(500)


def test_filler_never_mentions_a_fact_value() -> None:
    facts = seeded_facts(30, seed=7)
    rng = random.Random(7)
    text = " ".join(" ".join(filler_turn(rng, i)) for i in range(300)).lower()
    assert not [f.value for f in facts if f.value.lower() in text]


async def test_offline_reflector_keeps_at_least_95_percent_after_five_generations() -> None:
    report = await run_survival(facts=30, generations=5)
    assert [p.generation for p in report.points] == [1, 2, 3, 4, 5]
    assert all(p.total == 30 for p in report.points)
    assert report.points[-1].share >= 0.95
    assert all(p.observation_tokens < 2_000 for p in report.points)  # each generation condensed


class ForgetfulReflector:
    """Keeps only the newest half of the lines: the benchmark must notice what it drops."""

    name = "forgetful"

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        lines = [line for line in request.observations.splitlines() if line.startswith("* ")]
        kept = "\n".join(["Date: Jan 6, 2025", *lines[len(lines) // 2 :]])
        return ReflectionResult(observations=kept, suggested_response=None, extracted={}, attempts=1,
                                level=1, output_tokens=len(kept) // 4)  # fmt: skip


async def test_a_reflector_that_drops_facts_scores_below_one() -> None:
    report = await run_survival(facts=20, generations=3, reflector=ForgetfulReflector())
    assert report.reflector == "forgetful"
    assert report.points[-1].share < 0.5
    assert report.points[-1].missing


def test_cli_prints_each_generation_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "survival.json"
    result = CliRunner().invoke(app, ["bench", "survival", "--facts", "10", "--generations", "2",
                                      "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "10/10" in result.output
    (report,) = json.loads(out.read_text())
    assert report["reflector"] == "offline"
    assert [g["generation"] for g in report["generations"]] == [1, 2]


def test_cli_measures_an_llm_reflector_beside_the_offline_one(tmp_path: Path) -> None:
    """The LLM reflector is a local OpenAI-compatible server that condenses to two lines."""
    from tests.models.wire_server import MemoryModelPlayer, WireServer

    out = tmp_path / "survival.json"
    player = MemoryModelPlayer()
    with WireServer() as server:
        server.responder = player
        result = CliRunner().invoke(app, [
            "bench", "survival", "--facts", "8", "--generations", "2", "--json", str(out),
            "--model", f"openai-compatible:reflector-test@{server.url}/v1",
        ], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert player.reflector_calls >= 2 and player.observer_calls == 0  # only the reflector is the LLM
    offline, llm = json.loads(out.read_text())
    assert offline["reflector"] == "offline" and llm["reflector"] == "llm:openai-compatible:reflector-test"
    assert offline["generations"][-1]["present"] == 8
    assert (
        llm["generations"][-1]["present"] == 0
    )  # that reflector kept none of the facts: measured, not assumed

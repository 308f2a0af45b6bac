"""Question answering over each system's context, with a real provider spoken over HTTP.

The actor and the judge are an OpenAI-compatible server on a local socket (the same wire
server the provider tests use): the actor answers only when the answer is in the context it
was sent, and the judge compares with the gold answer. So the test checks what reaches the
model, not what a stub returns.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.bench.locomo import load_locomo
from obsmem.bench.prompts import ACTOR_INSTRUCTIONS
from obsmem.bench.qa import parse_verdict
from obsmem.bench.retention import RetentionSettings
from obsmem.bench.run import run_retention
from obsmem.cli import app
from obsmem.models import infer_model
from tests.models.wire_server import Recorded, Reply, WireServer, openai_text_stream

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "locomo-tiny.json"
SMALL = RetentionSettings(message_tokens=300, observation_tokens=600)
ANSWERS = {"name of": "Pickle", "instrument": "cello", "work": "Riverside Hospital",
           "adopt a puppy": "March 2, 2024", "traffic": "nothing special"}  # fmt: skip


class ActorAndJudge:
    """Plays both roles, told apart by the system prompt."""

    def __init__(self) -> None:
        self.actor_contexts: list[str] = []

    def __call__(self, request: Recorded) -> Reply:
        messages = request.body["messages"]
        system = messages[0]["content"]
        question = messages[-1]["content"]
        if system == ACTOR_INSTRUCTIONS:
            context = "\n".join(str(m["content"]) for m in messages[1:-1]).replace(
                "Mar 2, 2024", "March 2, 2024"
            )
            self.actor_contexts.append(context)
            wanted = next(answer for key, answer in ANSWERS.items() if key in question)
            return openai_text_stream(wanted if wanted in context else "I don't know")
        gold = re.search(r"Gold answer: (.*)\n", question)
        candidate = re.search(r"Candidate answer: (.*)\n", question)
        assert gold and candidate
        ok = (
            candidate.group(1) != "I don't know"
            and gold.group(1).split()[-1].lower() in candidate.group(1).lower()
        )
        return openai_text_stream("CORRECT\nsame fact" if ok else "WRONG\nmissing")


@pytest.mark.parametrize(
    ("text", "correct"),
    [
        ("CORRECT\nsame", True),
        ("**Correct**", True),
        ("WRONG\nno", False),
        ("", False),
        ("correctly wrong", False),
    ],
)
def test_verdicts(text: str, correct: bool) -> None:
    assert parse_verdict(text) is correct


async def test_actor_sees_each_systems_context_and_the_judge_grades_it() -> None:
    cases = [c.case() for c in load_locomo(FIXTURE, ["fx-1"])]
    player = ActorAndJudge()
    with WireServer() as server:
        server.responder = player
        model = infer_model(f"openai-compatible:qa-test@{server.url}/v1")
        report = await run_retention(cases, SMALL, dataset="fixture", actor=model, judge=model)
    assert len(report.qa) == 5 * 3  # every scored question, once per system
    summary = {s.system: s for s in report.qa_summary()}
    assert summary["obsmem"].accuracy_pct == 100.0
    assert summary["truncate"].accuracy_pct == 20.0
    assert summary["full"].accuracy_pct == 80.0  # "yesterday" was never resolved in the raw log
    assert all(
        r.actor == "openai-compatible:qa-test" and r.actor_usage.input_tokens == 100 for r in report.qa
    )
    full_context = max(player.actor_contexts, key=len)
    assert "Pickle" in full_context and "Riverside Hospital" in full_context
    data = report.to_json()
    assert {"qa", "qa_summary"} <= set(data)
    assert json.dumps(data)  # serialisable


def test_cli_reports_actor_judge_tokens_and_latency(tmp_path: Path) -> None:
    out = tmp_path / "qa.json"
    with WireServer() as server:
        server.responder = ActorAndJudge()
        spec = f"openai-compatible:qa-test@{server.url}/v1"
        result = CliRunner().invoke(app, [
            "bench", "locomo", "--data", str(FIXTURE), "--conversations", "fx-1", "--message-tokens", "300",
            "--observation-tokens", "600", "--model", spec, "--json", str(out),
        ], env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "actor openai-compatible:qa-test, judge openai-compatible:qa-test" in result.output
    qa = json.loads(out.read_text())["qa"]
    assert {"actor_input_tokens", "actor_seconds", "judge_seconds", "verdict"} <= set(qa[0])


def test_a_missing_key_fails_before_any_replay() -> None:
    arguments = ["bench", "locomo", "--data", str(FIXTURE), "--model", "openai:gpt-4o-mini"]
    result = CliRunner().invoke(app, arguments, env={"OPENAI_API_KEY": None})
    assert result.exit_code == 1
    assert "OPENAI_API_KEY" in result.output
    assert "Replaying" not in result.output

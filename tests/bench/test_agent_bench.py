"""``obsmem bench agent``: the generator's ground truth and the scorer's strictness."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.bench.agent import AgentSettings, run_agent_bench, score_probes, summarise_agent
from obsmem.bench.agent_conversations import (
    DOMAINS,
    STALE_GAP,
    AgentConversation,
    Probe,
    generate_conversation,
    generate_conversations,
)
from obsmem.bench.lines import message_text
from obsmem.cli import app
from obsmem.errors import InvalidInputError
from obsmem.types import Message

pytestmark = pytest.mark.anyio

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _dump(conversation: AgentConversation) -> list[object]:
    return [m.model_dump(mode="json") for m in conversation.messages] + [list(map(str, conversation.probes))]


def test_the_generator_is_deterministic_and_seeded() -> None:
    assert _dump(generate_conversation(3, turns=80)) == _dump(generate_conversation(3, turns=80))
    assert _dump(generate_conversation(3, turns=80)) != _dump(generate_conversation(4, turns=80))


def test_defaults_are_long_multi_day_sessions_in_several_domains() -> None:
    conversations = generate_conversations(seed=15, count=4)
    assert {c.domain for c in conversations} == {d.name for d in DOMAINS}
    for conversation in conversations:
        users = [m for m in conversation.messages if m.role == "user"]
        assert 200 <= len(users) <= 800
        days = sorted({m.created_at.date() for m in conversation.messages})
        assert len(days) >= 10 and max(b - a for a, b in zip(days, days[1:], strict=False)) >= timedelta(days=2)
        assert any(m.tool_calls for m in conversation.messages)
        assert any(m.role == "tool" for m in conversation.messages)
        kinds = {p.kind for p in conversation.probes}
        assert kinds == {"fact", "task", "decision", "tool", "date"}


def test_unknown_domain_and_too_few_turns_are_typed_errors() -> None:
    with pytest.raises(InvalidInputError, match="unknown domain"):
        generate_conversation(1, domain="cooking")
    with pytest.raises(InvalidInputError, match="at least"):
        generate_conversation(1, turns=5)


def _said_before(conversation: AgentConversation, value: str, at: int) -> list[int]:
    return [i for i, m in enumerate(conversation.messages[:at]) if value in message_text(m)]


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_ground_truth_agrees_with_the_messages(seed: int) -> None:
    conversation = generate_conversation(seed, turns=240)
    messages = conversation.messages
    for probe in conversation.probes:
        assert probe.at == len(messages) or messages[probe.at].role == "user"  # a turn boundary
        if probe.kind in ("fact", "decision"):
            (latest,) = probe.expect
            said = _said_before(conversation, latest, probe.at)
            assert said, probe
            for stale in probe.stale:  # stated before the latest, and long enough ago
                first = _said_before(conversation, stale, probe.at)[0]
                assert first < said[0] and first <= probe.at - STALE_GAP
        elif probe.kind == "task":
            opened = _said_before(conversation, probe.anchor, probe.at)
            assert opened, probe
            done = [i for i in opened if re.search(r"is done, I sent|Finished the|submitted", messages[i].text)]
            assert (probe.state == "done") == bool(done)
            if done:
                assert done[0] <= probe.at - STALE_GAP
        elif probe.kind == "tool":
            (value,) = probe.expect
            sources = _said_before(conversation, value, probe.at)
            assert sources and any(messages[i].role == "tool" for i in sources)
            assert probe.anchor in messages[probe.at].text  # the user asks about it next
        else:
            (where,) = _said_before(conversation, probe.anchor, probe.at)[:1]
            message = messages[where]
            assert message.role == "user" and probe.said in message.text
            _check_date(probe, message)


def _check_date(probe: Probe, message: Message) -> None:
    today = message.created_at.date()  # the message's own zone: its local day
    if probe.state == "recurring":
        assert not probe.expect
        return
    day = date.fromisoformat(probe.expect[0])
    said = probe.said
    fixed = {"tomorrow": 1, "the day after tomorrow": 2, "in two weeks": 14, "yesterday": -1}
    if said in fixed:
        assert day - today == timedelta(days=fixed[said])
        return
    weekday = WEEKDAYS.index(said.split()[-1])
    assert day.weekday() == weekday
    if said.startswith("a week from"):
        assert timedelta(days=8) <= day - today <= timedelta(days=13)
    elif said.startswith("next week on"):  # the calendar week after this one, even said on that day
        assert day.isocalendar()[1] != today.isocalendar()[1] and timedelta(1) <= day - today <= timedelta(13)
    elif said.startswith("this"):
        assert timedelta(days=1) <= day - today <= timedelta(days=6)
    else:  # "on Monday" in the past tense: earlier this week
        assert timedelta(days=-6) <= day - today <= timedelta(days=-1)


def _score_baseline(conversation: AgentConversation, system: str) -> dict[str, float | None]:
    results = []
    by_at: dict[int, list[Probe]] = {}
    for probe in conversation.probes:
        by_at.setdefault(probe.at, []).append(probe)
    for at, probes in by_at.items():
        context = conversation.messages[:at] if system == "full" else conversation.messages[at - 1 : at]
        results += score_probes(probes, list(context), system)
    return summarise_agent(results, system, 1.0).rates


def test_trivial_baselines_do_not_pass() -> None:
    conversation = generate_conversation(21, domain="home", turns=400)
    latest = _score_baseline(conversation, "latest")
    full = _score_baseline(conversation, "full")
    assert (latest["latest_value"] or 0) < 20 and (latest["open_task"] or 0) < 20
    assert (latest["tool_value"] or 0) < 20 and (latest["date_missing"] or 0) > 80
    # the whole history holds every latest value, and every stale one, unmarked
    assert full["latest_value"] == 100.0 and full["tool_value"] == 100.0
    assert full["stale_leak"] is not None and full["stale_leak"] > 50
    assert full["done_shown_open"] is not None and full["done_shown_open"] > 50
    assert full["switched_decision"] is not None and full["switched_decision"] < 50


def _probe(kind: str, **kw: object) -> Probe:
    return Probe(kind, "k", 0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("probe", "lines", "outcome"),
    [
        (_probe("fact", expect=("N-2",), stale=("O-1",)), ["* User's code is N-2."], "ok"),
        (_probe("fact", expect=("N-2",), stale=("O-1",)), ["* code O-1", "* code N-2"], "leak"),
        (_probe("fact", expect=("N-2",), stale=("O-1",)), ["* code O-1 (superseded)", "* code N-2"], "ok"),
        (_probe("fact", expect=("N-2",), stale=("O-1",)), ["* code changed from O-1 to N-2"], "ok"),
        (_probe("fact", expect=("N-2",)), ["* nothing"], "missing"),
        (_probe("task", stale=("Quor",), state="done"), ["* ✅ User finished the Quor list."], "ok"),
        (_probe("task", stale=("Quor",), state="done"), ["* User asked for the Quor list."], "leak"),
        (_probe("date", expect=("2025-03-12",), anchor="Zan", said="tomorrow"),
         ["* Visit with Zan tomorrow (meaning Mar 12, 2025)."], "correct"),
        (_probe("date", expect=("2025-03-12",), anchor="Zan", said="tomorrow"),
         ["* Visit with Zan tomorrow (meaning Mar 11, 2025)."], "wrong"),
        (_probe("date", expect=("2025-03-12",), anchor="Zan", said="tomorrow"), ["* Visit with Zan tomorrow."],
         "as-said"),
        (_probe("date", anchor="Zan", said="on Tuesdays", state="recurring"),
         ["* Swims with Zan on Tuesdays (meaning Mar 11, 2025)."], "wrong"),
    ],
)  # fmt: skip
def test_the_scorer_reads_lines_strictly(probe: Probe, lines: list[str], outcome: str) -> None:
    context = [Message.system("Date: Mar 10, 2025\n" + "\n".join(lines))]
    (result,) = score_probes([probe], context, "obsmem")
    assert result.outcome == outcome


async def test_a_replay_reports_every_rate_for_every_system() -> None:
    conversation = generate_conversation(5, domain="software", turns=60)
    report = await run_agent_bench([conversation], AgentSettings(message_tokens=300, observation_tokens=600))
    assert {row.system for row in report.rows} == {"full", "truncate", "latest", "obsmem"}
    obsmem = report.row("obsmem")
    assert obsmem.compression > 1.5 and obsmem.counts["facts"] > 0
    assert report.row("full").rates["latest_value"] == 100.0
    data = report.to_json()
    assert data["probes"] and {"kind", "outcome", "unit"} <= set(data["probes"][0])  # type: ignore[index]


def test_cli_prints_rates_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "agent.json"
    result = CliRunner().invoke(app, ["bench", "agent", "--conversations", "1", "--turns", "50",
                                      "--message-tokens", "300", "--observation-tokens", "600",
                                      "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "latest value" in result.output and "compression" in result.output
    assert json.loads(out.read_text())["summary"]
    assert CliRunner().invoke(app, ["bench", "agent", "--turns", "3"]).exit_code == 2

"""The LoCoMo harness on a tiny fixture written for these tests (never on the benchmark data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem.bench.locomo import load_locomo, parse_session_time
from obsmem.bench.replay import group_turns
from obsmem.bench.retention import RetentionSettings, truncate_to, with_day_headers
from obsmem.bench.run import run_retention
from obsmem.cli import app
from obsmem.errors import InvalidInputError
from obsmem.tokens import TokenCounter
from obsmem.types import Message

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "locomo-tiny.json"
SMALL = RetentionSettings(message_tokens=300, observation_tokens=600)


def test_session_times_parse_to_aware_datetimes() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:05 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    with pytest.raises(InvalidInputError, match="not like"):
        parse_session_time("yesterday at noon")


def test_loader_maps_speakers_times_images_and_categories() -> None:
    (conversation,) = load_locomo(FIXTURE, ["fx-1"])
    messages = conversation.messages()
    assert [m.role for m in messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert messages[0].metadata == {"name": "Ana", "dia_id": "D1:1"}
    assert messages[0].created_at == datetime(2024, 3, 3, 10, 0, tzinfo=UTC)
    assert messages[1].created_at == datetime(2024, 3, 3, 10, 1, tzinfo=UTC)  # one minute per turn
    assert messages[4].created_at == datetime(2024, 3, 20, 16, 30, tzinfo=UTC)  # session 2 starts
    assert messages[3].text.endswith("[shares an image: a photo of red running shoes]")
    case = conversation.case()
    assert len(case.questions) == 5  # category 5 (adversarial, no answer) is not scored
    assert {q.category for q in case.questions} == {"temporal", "single-hop", "multi-hop", "open-domain"}
    assert "user is Ana" in case.participants


@pytest.mark.parametrize(
    ("content", "names", "message"),
    [
        ("{not json", None, "not valid JSON"),
        ('{"a": 1}', None, "JSON list"),
        ('[{"sample_id": "x"}]', None, "needs 'sample_id' and a 'conversation'"),
    ],
)
def test_bad_files_raise_typed_errors(
    tmp_path: Path, content: str, names: list[str] | None, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=message):
        load_locomo(path, names)


def test_missing_file_and_unknown_conversation_are_named() -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_locomo(Path("/nonexistent/locomo.json"))
    with pytest.raises(InvalidInputError, match="conv-99 not in"):
        load_locomo(FIXTURE, ["conv-99"])


def test_turns_start_at_user_messages() -> None:
    u1, u2, a1, a2, u3 = (Message.user("a"), Message.user("b"), Message.assistant("c"),
                          Message.assistant("d"), Message.user("e"))  # fmt: skip
    assert group_turns([u1, u2, a1, a2, u3]) == [([u1, u2], [a1, a2]), ([u3], [])]
    assert group_turns([a1, u1]) == [([a1], []), ([u1], [])]


def test_truncate_keeps_the_longest_suffix_within_budget_with_day_headers() -> None:
    counter = TokenCounter()
    (conversation,) = load_locomo(FIXTURE, ["fx-1"])
    messages = conversation.messages()
    budget = 200
    kept = truncate_to(messages, budget, counter)
    assert kept and counter.count_messages(kept) <= budget
    assert kept[-1].id == messages[-1].id
    longer = with_day_headers(messages[len(messages) - len(kept) - 1 :])
    assert counter.count_messages(longer) > budget  # one more message would not fit
    assert kept[0].text.startswith("[Mar 20, 2024] ")  # the first kept message shows its day
    assert truncate_to(messages, 0, counter) == ()


async def test_obsmem_keeps_what_truncation_loses() -> None:
    cases = [c.case() for c in load_locomo(FIXTURE, ["fx-1"])]
    report = await run_retention(cases, SMALL, dataset="fixture")
    by_question = {r.question.question: r for r in report.results}
    adopted = by_question["When did Ana adopt a puppy?"]
    # "yesterday" was said on Mar 3: only the observation resolved it to the answer's date
    assert adopted.retained("obsmem") and not adopted.retained("full") and not adopted.retained("truncate")
    for question in ("What is the name of Ana's puppy?", "What instrument is Ben learning?",
                     "Where does Ana work?"):  # fmt: skip
        result = by_question[question]
        assert result.retained("full") and result.retained("obsmem") and not result.retained("truncate")
    overall = {row.system: row for row in report.rows if row.category == "overall"}
    assert overall["obsmem"].retained_pct == 100.0
    assert overall["truncate"].retained_pct == 20.0
    # truncate is given obsmem's budget, never more
    assert overall["truncate"].context_tokens <= overall["obsmem"].context_tokens
    assert overall["obsmem"].compression > 2.5
    built = report.built[0]
    assert built.observation_cycles >= 1
    assert built.contexts["full"].tokens == overall["full"].context_tokens


def test_cli_prints_the_table_and_writes_per_question_json(tmp_path: Path) -> None:
    out = tmp_path / "locomo.json"
    result = CliRunner().invoke(app, [
        "bench", "locomo", "--data", str(FIXTURE), "--conversations", "fx-1", "--message-tokens", "300",
        "--observation-tokens", "600", "--json", str(out),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "obsmem" in result.output
    data = json.loads(out.read_text())
    assert data["settings"]["message_tokens"] == 300
    assert len(data["questions"]) == 5
    first = data["questions"][0]
    assert set(first["systems"]) == {"full", "truncate", "rare", "obsmem"}  # issue 15: the extractive baseline
    assert {"retained", "recall", "missing"} <= set(first["systems"]["obsmem"])
    assert any(row["system"] == "obsmem" and row["category"] == "overall" for row in data["summary"])


def test_cli_rejects_a_missing_file_in_one_line() -> None:
    result = CliRunner().invoke(app, ["bench", "locomo", "--data", "/nonexistent.json"])
    assert result.exit_code != 0
    assert "does not exist" in " ".join(result.output.replace("│", " ").split())

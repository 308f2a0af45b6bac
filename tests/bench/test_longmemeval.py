"""The LongMemEval loader and its evidence metric, on a tiny fixture in LongMemEval's format."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsmem.bench.longmemeval import load_longmemeval, parse_longmemeval_date
from obsmem.bench.retention import RetentionSettings
from obsmem.bench.run import run_retention
from obsmem.errors import InvalidInputError

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "longmemeval-tiny.json"


def test_dates_parse() -> None:
    assert parse_longmemeval_date("2023/05/30 (Tue) 23:40") == datetime(2023, 5, 30, 23, 40, tzinfo=UTC)
    assert parse_longmemeval_date("2023/05/30") == datetime(2023, 5, 30, tzinfo=UTC)
    with pytest.raises(InvalidInputError, match="not like"):
        parse_longmemeval_date("May 30th")


def test_loader_orders_sessions_by_date_marks_evidence_and_skips_abstention() -> None:
    cases = load_longmemeval(FIXTURE)
    assert [c.case_id for c in cases] == ["lme-1", "lme-3"]  # lme-2_abs has no answer by design
    first = cases[0]
    # s-a (May 20) comes before s-b (May 21) although the file lists it second
    assert first.messages[0].text.startswith("I graduated with a degree in Business Administration")
    assert first.messages[0].created_at == datetime(2023, 5, 20, 9, 15, tzinfo=UTC)
    (question,) = first.questions
    assert question.answer == "Business Administration"
    assert question.category == "single-session-user"
    assert question.evidence_texts == (first.messages[0].text,)
    assert cases[1].questions[0].answer == "3"  # a numeric answer is read as text
    assert len(load_longmemeval(FIXTURE, skip_abstention=False)) == 3
    assert len(load_longmemeval(FIXTURE, limit=1)) == 1


def test_bad_haystack_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"question_id": "q", "haystack_sessions": [[]], "haystack_dates": []}]')
    with pytest.raises(InvalidInputError, match="same length"):
        load_longmemeval(path)


async def test_retention_scores_the_answer_and_its_evidence_turns() -> None:
    cases = load_longmemeval(FIXTURE)
    report = await run_retention(cases, RetentionSettings(message_tokens=40, observation_tokens=2000),
                                 dataset="LongMemEval")  # fmt: skip
    degree = next(r for r in report.results if r.case_id == "lme-1")
    assert degree.retained("full") and degree.retained("obsmem")
    assert degree.evidence_recall["full"] == 1.0
    assert 0.5 <= degree.evidence_recall["obsmem"] <= 1.0
    rows = [row for row in report.rows if row.category == "overall"]
    assert all(row.evidence_recall is not None for row in rows)

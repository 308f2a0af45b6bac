"""Reading LongMemEval (Wu et al., ICLR 2025) into retention cases.

LongMemEval is a list of questions, each with its own haystack: timestamped sessions between
a user and an assistant, where the turns that hold the answer carry ``has_answer: true``. Each
question becomes one case: its sessions in date order as messages (one minute apart inside a
session), its answer as the gold answer, and its ``has_answer`` turns as the evidence the
retention metric also scores. Works for ``longmemeval_s``, ``_m`` and ``oracle`` alike: they
differ only in how much haystack surrounds the evidence.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from obsmem.bench.datafile import read_json_list
from obsmem.bench.retention import RetentionCase, RetentionQuestion
from obsmem.errors import InvalidInputError
from obsmem.types import Message, TextPart

__all__ = ["load_longmemeval", "parse_longmemeval_date"]

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")


def parse_longmemeval_date(value: str) -> datetime:
    """``"2023/05/30 (Tue) 23:40"`` → an aware datetime (no zone is given; UTC is assumed)."""
    match = _DATE.match(value)
    if not match:
        raise InvalidInputError(f"LongMemEval date {value!r} is not like '2023/05/30 (Tue) 23:40'")
    year, month, day, hour, minute = match.groups()
    return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), tzinfo=UTC)


def _case(raw: dict[str, Any], index: int) -> RetentionCase:
    question_id = str(raw.get("question_id") or f"q{index}")
    sessions = raw.get("haystack_sessions")
    dates = raw.get("haystack_dates")
    if not isinstance(sessions, list) or not isinstance(dates, list) or len(sessions) != len(dates):
        raise InvalidInputError(
            f"{question_id}: needs 'haystack_sessions' and 'haystack_dates' lists of the same length"
        )
    session_ids = raw.get("haystack_session_ids") or [f"s{n}" for n in range(len(sessions))]
    dated = sorted(
        zip((parse_longmemeval_date(str(d)) for d in dates), session_ids, sessions, strict=False),
        key=lambda item: item[0],
    )
    messages: list[Message] = []
    evidence: list[str] = []
    for started, session_id, turns in dated:
        for position, turn in enumerate(turns):
            role, content = turn.get("role"), str(turn.get("content", "")).strip()
            if role not in ("user", "assistant"):
                raise InvalidInputError(f"{question_id}: session {session_id} has a turn with role {role!r}")
            if not content:
                continue
            messages.append(Message(
                id=f"{question_id}:{session_id}:{position}", role=role, parts=(TextPart(text=content),),
                created_at=started + timedelta(minutes=position),
            ))
            if turn.get("has_answer"):
                evidence.append(content)
    if "question" not in raw or "answer" not in raw:
        raise InvalidInputError(f"{question_id}: needs 'question' and 'answer'")
    question = RetentionQuestion(
        question=str(raw["question"]), answer=str(raw["answer"]),
        category=str(raw.get("question_type") or "unknown"), evidence_texts=tuple(evidence),
        question_id=question_id,
    )
    return RetentionCase(case_id=question_id, messages=tuple(messages), questions=(question,))


def load_longmemeval(
    path: Path, *, limit: int | None = None, skip_abstention: bool = True
) -> list[RetentionCase]:
    """Read a LongMemEval JSON file as retention cases.

    Abstention questions (ids ending in ``_abs``) have no answer in the haystack by design, so
    they are skipped unless ``skip_abstention`` is False.
    """
    raw = read_json_list(path, "LongMemEval", "questions")
    chosen = [
        item for item in raw
        if not (skip_abstention and str(item.get("question_id", "")).endswith("_abs"))
    ]
    if limit is not None:
        chosen = chosen[:limit]
    return [_case(item, index) for index, item in enumerate(chosen)]

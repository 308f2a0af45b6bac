"""Reading LoCoMo conversations (Maharana et al., ACL 2024) into obsmem messages.

The file is read from the path the user gives and never copied: the dataset is CC BY-NC 4.0
and kept out of the package. Each conversation becomes one thread: sessions in order, each
turn a message stamped with its session's time (plus one minute per turn, so order survives
the timestamps), ``speaker_a`` as the user and ``speaker_b`` as the assistant. A speaker's name
travels in ``metadata["name"]`` so an observer can say who said what; a shared image becomes
a line naming what it shows (LoCoMo's caption), since that is all a text model would get.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from obsmem.bench.datafile import read_json_list
from obsmem.bench.normalize import MONTH_NUMBERS
from obsmem.bench.retention import RetentionCase, RetentionQuestion
from obsmem.errors import InvalidInputError
from obsmem.types import Message, TextPart

__all__ = [
    "CATEGORY_NAMES",
    "SCORED_CATEGORIES",
    "LocomoConversation",
    "LocomoQuestion",
    "LocomoTurn",
    "load_locomo",
    "parse_session_time",
]

#: LoCoMo's question categories; 5 (adversarial) has no answer and is not scored.
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)

_SESSION_TIME = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str
    created_at: datetime
    session: int


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]

    @property
    def category_name(self) -> str:
        return CATEGORY_NAMES.get(self.category, str(self.category))


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: tuple[LocomoTurn, ...]
    questions: tuple[LocomoQuestion, ...]

    def case(self) -> RetentionCase:
        """The conversation as a retention case: its messages and its questions of categories 1–4."""
        return RetentionCase(
            case_id=self.sample_id,
            messages=tuple(self.messages()),
            questions=tuple(
                RetentionQuestion(
                    question=q.question, answer=q.answer, category=q.category_name,
                    question_id=f"{self.sample_id}:q{index}",
                )
                for index, q in enumerate(self.questions)
                if q.category in SCORED_CATEGORIES
            ),
            participants=(
                f"In this conversation the user is {self.speaker_a} and the assistant is {self.speaker_b}; "
                "they are two friends talking."
            ),
        )

    def messages(self) -> list[Message]:
        """The conversation as messages: speaker A as the user, speaker B as the assistant."""
        return [
            Message(
                id=f"{self.sample_id}:{turn.dia_id}",
                role="user" if turn.speaker == self.speaker_a else "assistant",
                parts=(TextPart(text=turn.text),),
                created_at=turn.created_at,
                metadata={"name": turn.speaker, "dia_id": turn.dia_id},
            )
            for turn in self.turns
        ]


def parse_session_time(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware datetime (LoCoMo gives no zone; UTC is assumed)."""
    match = _SESSION_TIME.match(value)
    if not match or match.group(5).lower() not in MONTH_NUMBERS:
        raise InvalidInputError(f"LoCoMo session time {value!r} is not like '1:56 pm on 8 May, 2023'")
    hour, minute, meridiem, day, month, year = match.groups()
    hour_24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
    return datetime(int(year), MONTH_NUMBERS[month.lower()], int(day), hour_24, int(minute), tzinfo=UTC)


def _turn_text(raw: dict[str, Any]) -> str:
    text = str(raw.get("text", "")).strip()
    caption = raw.get("blip_caption")
    if caption:
        shared = f"[shares an image: {str(caption).strip()}]"
        text = f"{text} {shared}".strip()
    return text


def _conversation(raw: dict[str, Any]) -> LocomoConversation:
    sample_id = str(raw.get("sample_id") or "")
    body = raw.get("conversation")
    if not sample_id or not isinstance(body, dict):
        raise InvalidInputError("a LoCoMo conversation needs 'sample_id' and a 'conversation' object")
    speaker_a, speaker_b = body.get("speaker_a"), body.get("speaker_b")
    if not speaker_a or not speaker_b:
        raise InvalidInputError(f"{sample_id}: 'conversation' needs 'speaker_a' and 'speaker_b'")
    numbers = sorted(
        int(key.removeprefix("session_"))
        for key, value in body.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
    )
    turns: list[LocomoTurn] = []
    for number in numbers:
        stamp_text = body.get(f"session_{number}_date_time")
        if not isinstance(stamp_text, str):
            raise InvalidInputError(f"{sample_id}: session_{number} has no session_{number}_date_time")
        started = parse_session_time(stamp_text)
        for index, turn in enumerate(body[f"session_{number}"]):
            text = _turn_text(turn)
            if not text:
                continue
            speaker = str(turn.get("speaker", ""))
            if speaker not in (speaker_a, speaker_b):
                raise InvalidInputError(
                    f"{sample_id}: turn {turn.get('dia_id')} has unknown speaker {speaker!r}"
                )
            turns.append(LocomoTurn(
                dia_id=str(turn.get("dia_id") or f"D{number}:{index + 1}"), speaker=speaker, text=text,
                created_at=started + timedelta(minutes=index), session=number,
            ))
    questions = tuple(
        LocomoQuestion(
            question=str(qa["question"]), answer=str(qa.get("answer", "")), category=int(qa["category"]),
            evidence=tuple(str(e) for e in qa.get("evidence", ())),
        )
        for qa in raw.get("qa", ())
    )
    return LocomoConversation(sample_id, str(speaker_a), str(speaker_b), tuple(turns), questions)


def load_locomo(path: Path, conversations: list[str] | None = None) -> list[LocomoConversation]:
    """Read a LoCoMo JSON file; keep only the named conversations when ``conversations`` is given."""
    loaded = [_conversation(item) for item in read_json_list(path, "LoCoMo", "conversations")]
    if conversations:
        known = {conv.sample_id for conv in loaded}
        missing = [name for name in conversations if name not in known]
        if missing:
            raise InvalidInputError(
                f"conversation(s) {', '.join(missing)} not in {path}; it has {', '.join(sorted(known))}"
            )
        loaded = [conv for conv in loaded if conv.sample_id in conversations]
    return loaded

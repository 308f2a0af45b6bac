"""Questions a user sends one after another with no answer between them are folded into one
"User asked …" line, up to a bound: 4,000 such questions made one line of 134 KB (and the folding
copied the growing line at every question: quadratic in the batch; found by helper-146). Past
``ASK_FOLD_CHARS`` the line is written and a new one begins; every question is still there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest
from obsmem.types import Message

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)


def _observe(n: int) -> str:
    messages = [
        Message.user(f"What about the Quarvel{i} order?", created_at=T0 + timedelta(seconds=i)) for i in range(n)
    ]
    return OfflineObserver(offload_chars=None)._observe(ObservationRequest(messages=messages))[0]


def test_a_run_of_unanswered_questions_makes_bounded_lines() -> None:
    text = _observe(2000)
    lines = [line for line in text.splitlines() if "User asked" in line]
    assert max(len(line) for line in lines) < 2_000
    for i in (0, 999, 1999):  # every question is kept, in some line
        assert f"Quarvel{i} order" in text


def test_a_few_questions_still_fold_into_one_line() -> None:
    text = _observe(3)
    lines = [line for line in text.splitlines() if "User asked" in line]
    assert len(lines) == 1 and all(f"Quarvel{i}" in lines[0] for i in range(3))

"""No input can stall the process (issue 13, item 1): every text routine is linear in its input.

Each case feeds one pathological shape (repeated punctuation, digits with separators, repeated
dates, unclosed tags, …) through a public entry point at two sizes, n and 4n, and compares the
*work* done: Python calls and lines executed, counted under ``sys.settrace``
(:mod:`tests.integrity.work_count`), deterministic on an idle or a loaded machine. Linear work
grows about 4×, quadratic about 16×; the bound of 8× separates them. No time is asserted: the
project measures speed in ``benchmarks/pathological.py``, which runs the same shapes by CPU time
up to 1 MB, and whose ``--check`` flags the growth that counts cannot see (work inside one C
call: a regular expression backtracking over the whole text).
``tests/integrity/test_work_count.py`` shows the count fails a quadratic variant of each routine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from obsmem.om.extractors import Extractor
from obsmem.om.llm.parsing import parse_observer_output, parse_reflector_output
from obsmem.om.offline.observer import OfflineObserver
from obsmem.om.offline.reflector import OfflineReflector, fact_core
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.privacy import PII_CATEGORIES, Redactor
from obsmem.types import Message

from tests.integrity.work_count import GROWTH_BOUND
from tests.integrity.work_count import growth as work_growth
from tests.privacy.test_redaction import SHAPES as REDACTION_SHAPES

NOW = datetime(2025, 6, 18, 9, 0, tzinfo=UTC)


def _growth(run: Callable[[str], object], make: Callable[[int], str], n: int) -> float:
    """Work for input ``make(4 * n)`` over that for ``make(n)`` (a count ratio, not a time)."""
    return work_growth(run, make, n)


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


def _observe_as(role: str) -> Callable[[str], object]:
    observer = OfflineObserver(offload_chars=None)

    def run(text: str) -> object:
        make = Message.user if role == "user" else Message.assistant
        message = make(text, created_at=NOW)
        return asyncio.run(observer.observe(ObservationRequest(messages=[message])))

    return run


def _reflect(text: str) -> object:
    reflector = OfflineReflector(offload_chars=None)
    request = ReflectionRequest(observations=f"Date: Jun 18, 2025\n* 🔴 (09:00) {text}", target_tokens=1000)
    return asyncio.run(reflector.reflect(request))


OBSERVER_SHAPES: dict[str, Callable[[int], str]] = {
    "digits joined by commas": lambda size: ",".join("1" * (size // 2)),
    "1, repeated": _repeat("1,"),
    "1. repeated": _repeat("1."),
    "dots": _repeat("."),
    "?! repeated": _repeat("?!"),
    "see you Friday repeated": _repeat("see you Friday "),
    "dates, one clause": _repeat("on March 3 and next Friday and 2 days ago "),
    "initials": _repeat("A. "),
    "quantities and names": lambda size: "".join(f"Abc{i} {i} km " for i in range(size // 10))[:size],
    "whitespace run": lambda size: "x" + " " * size + " and y",
    "open brackets": _repeat("["),
    "unfinished links": _repeat("[x]( "),
}


@pytest.mark.parametrize("role", ["user", "assistant"])
@pytest.mark.parametrize("shape", list(OBSERVER_SHAPES))
def test_offline_observer_is_linear(shape: str, role: str) -> None:
    growth = _growth(_observe_as(role), OBSERVER_SHAPES[shape], 2_500)
    assert growth < GROWTH_BOUND, f"{shape} as a {role} message: 4x the text took {growth:.1f}x the work"


def test_offline_observer_is_linear_in_messages() -> None:
    """Many short messages, each a fact: what is already known is not re-joined per clause."""
    observer = OfflineObserver(offload_chars=None)

    def run(count: str) -> object:
        messages = [
            Message.user(f"My boss Ed{i} lives in Porto{i} and I have {i} dogs.", created_at=NOW)
            for i in range(len(count))
        ]
        return asyncio.run(observer.observe(ObservationRequest(messages=messages)))

    growth = _growth(run, lambda size: "x" * size, 300)
    assert growth < GROWTH_BOUND, f"4x the messages took {growth:.1f}x the work"


@pytest.mark.parametrize("shape", ["1, repeated", "dots", "see you Friday repeated", "initials"])
def test_offline_reflector_is_linear(shape: str) -> None:
    growth = _growth(_reflect, OBSERVER_SHAPES[shape], 2_500)
    assert growth < GROWTH_BOUND, f"{shape}: 4x the observations took {growth:.1f}x the work"


@pytest.mark.parametrize("unit", ["Jun 18, 2025 ", "1, ", "Alice, Bob "])
def test_a_fact_line_with_many_dates_names_or_numbers_is_shortened_in_linear_work(unit: str) -> None:
    """``fact_core`` scored each clause against every name and number of its line: a line of k
    dates cost k² checks (1.1 s at 40 KB; found by ``benchmarks/pathological.py --check``)."""
    growth = _growth(lambda text: fact_core("User stated " + text, 100, 2), _repeat(unit), 2_000)
    assert growth < GROWTH_BOUND, f"{unit!r}: 4x the line took {growth:.1f}x the work"


_INLINE = (Extractor(name="mood", instructions="the user's mood", mode="inline"),)

PARSER_SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed current-task": _repeat("<current-task>\n"),
    "unclosed suggested-response": _repeat("<suggested-response> x\n"),
    "unclosed thread-title after text": _repeat("note\n<thread-title>\n"),
    "unclosed extracted-values": _repeat("<extracted-values>{"),
    "unclosed inline value": _repeat("<mood>x "),
    "unclosed observations": _repeat("<observations>\n"),
    "blank lines": _repeat("\n"),
    "end-of-line closings": lambda n: "<observations>\n" + _repeat("x</observations>\n")(n),
    "mid-line closings": lambda n: "<observations>\n" + _repeat("x </observations> y\n")(n),
    "forged sections in a block": lambda n: "<observations>\n" + _repeat("<current-task>x\n")(n),
    "blocks closed at line end": _repeat("<observations>\n- a</observations>\n"),
}


@pytest.mark.parametrize(
    "parse", [parse_observer_output, parse_reflector_output], ids=["observer", "reflector"]
)
@pytest.mark.parametrize("shape", list(PARSER_SHAPES))
def test_model_output_parsing_is_linear(shape: str, parse: Callable[..., object]) -> None:
    growth = _growth(lambda text: parse(text, _INLINE), PARSER_SHAPES[shape], 10_000)
    assert growth < GROWTH_BOUND, f"{shape}: 4x the answer took {growth:.1f}x the work"


def test_parsing_keeps_the_sections_it_read() -> None:
    """The single-pass section reader reads what the old one did: last occurrence wins, a
    section removed joins what follows to a line start, unclosed ones stop at the next tag."""
    text = (
        "<current-task>first</current-task><current-task>second</current-task>\n"
        "<observations>\n* 🔴 (09:00) User lives in Lisbon\n</observations>\n"
        "<suggested-response>\nsay hi\n<thread-title>Lisbon\n"
    )
    parsed = parse_observer_output(text)
    assert parsed.current_task == "second"
    assert parsed.suggested_response == "say hi"
    assert parsed.thread_title == "Lisbon"
    assert parsed.observations == "* 🔴 (09:00) User lives in Lisbon"


_REDACT = Redactor(b"pathological", pii=PII_CATEGORIES).redact


@pytest.mark.parametrize("shape", list(REDACTION_SHAPES))
def test_redaction_is_linear(shape: str) -> None:
    """The privacy boundary scans every model request: no text makes it superlinear."""
    ratio = _growth(_REDACT, REDACTION_SHAPES[shape], 10_000)
    assert ratio < GROWTH_BOUND, f"{shape}: 4x the text took {ratio:.1f}x the work"

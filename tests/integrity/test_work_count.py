"""The work counter behind the linearity tests can fail: a quadratic variant of each routine fails it.

Each case patches one helper inside a routine that the linearity tests check (the observer's
sentence splitter, the reflector's word splitter, the parser's block splitter, the redactor's
placeholder) with a variant that also compares every item with every earlier one, in Python:
the shape of a real regression (what is already known re-scanned per clause). On the same shape
and sizes as the linearity tests the unpatched routine stays under the bound and the patched one
exceeds it. The last case documents what counting cannot see (one C call over the whole text per
item): ``benchmarks/pathological.py --check`` measures that by CPU time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

import obsmem.om.llm.parsing as parsing
import obsmem.om.offline.observer as observer_module
import obsmem.om.offline.reflector as reflector_module
from obsmem.privacy import Redactor

from tests.integrity.test_pathological_input import (
    _INLINE,
    _REDACT,
    OBSERVER_SHAPES,
    PARSER_SHAPES,
    _observe_as,
    _reflect,
)
from tests.integrity.work_count import GROWTH_BOUND, growth, repeat, work
from tests.privacy.test_redaction import SHAPES as REDACTION_SHAPES


def _rescan(items: Sequence[object]) -> None:
    """Every item against every earlier one, in Python: quadratic in ``len(items)``."""
    for i in range(len(items)):
        sum(1 for _ in items[:i])


def _quadratic(original: Callable[..., Any], items: Callable[..., Sequence[object]]) -> Callable[..., Any]:
    def variant(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _rescan(items(*args, result))
        return result

    return variant


def _words_of_first(*args: Any) -> Sequence[object]:
    return str(args[0]).split()


CASES: dict[str, tuple[Callable[[str], object], Callable[[int], str], int, Any, str]] = {
    # name: (routine, shape, n, module or class patched, helper name)
    "observer": (_observe_as("user"), OBSERVER_SHAPES["see you Friday repeated"], 2_500, observer_module, "split_sentences"),
    "reflector": (_reflect, OBSERVER_SHAPES["see you Friday repeated"], 2_500, reflector_module, "_words"),
    "parser": (lambda text: parsing.parse_observer_output(text, _INLINE), PARSER_SHAPES["end-of-line closings"], 10_000,
               parsing, "_split_blocks"),
    "redaction": (_REDACT, repeat("mail a@b.co now "), 10_000, Redactor, "placeholder"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_linear_routine_passes_and_a_quadratic_variant_fails(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run, make, n, owner, helper = CASES[case]
    linear = growth(run, make, n)
    assert linear < GROWTH_BOUND, f"{case} itself: {linear:.1f}x the work for 4x the input"
    original = getattr(owner, helper)
    if owner is Redactor:  # a method: each new value against every value redacted before it
        made: list[str] = []

        def placeholder(self: Redactor, category: str, value: str) -> str:
            sum(1 for _ in made)
            made.append(value)
            return str(original(self, category, value))

        monkeypatch.setattr(Redactor, helper, placeholder)
    else:
        monkeypatch.setattr(owner, helper, _quadratic(original, _words_of_first))
    quadratic = growth(run, make, n)
    assert quadratic > GROWTH_BOUND, f"the quadratic {case} passed: {quadratic:.1f}x the work for 4x the input"


def test_a_quadratic_loop_in_python_fails_and_a_linear_one_passes() -> None:
    def linear(text: str) -> None:
        for _ in text:
            pass

    def quadratic(text: str) -> None:
        for i in range(len(text)):
            for _ in range(i):
                pass

    assert growth(linear, repeat("x"), 200) < GROWTH_BOUND
    assert growth(quadratic, repeat("x"), 200) > GROWTH_BOUND


def test_the_count_is_deterministic() -> None:
    run, make = _observe_as("assistant"), OBSERVER_SHAPES["quantities and names"]
    run(make(500))
    assert work(run, make(2_000)) == work(run, make(2_000))


def test_work_inside_one_c_call_is_not_counted() -> None:
    """The limit, stated: ``text.count`` over the whole text once per item is quadratic time but
    one line and one call per item. Such costs are the benchmark's (``--check``), by CPU time."""

    def hidden(text: str) -> None:
        for i in range(0, len(text), 10):
            text.count("y", 0, i)

    assert growth(hidden, repeat("x"), 2_000) < GROWTH_BOUND

"""Pathological input: every text routine must take time linear in its input (issue 13, item 1).

Each *shape* is a short unit repeated to a size (repeated punctuation, digits with separators,
unclosed tags, long words, repeated dates, emoji, whitespace runs, nested brackets, markdown, one
huge line, many short lines, …). Each shape at each size is run through the offline observer (as
a user and as an assistant message), the offline reflector, the model-output parser (observer
and reflector), the transcript formatter, the date routines and the degenerate-output detector.
The table shows, per shape and size, the slowest routine's CPU time and its µs per KB; the
last column is the ratio of µs/KB at the largest size to that at the smallest, which stays near
1 (flat) when every routine is linear. A quadratic routine shows a ratio near size ratio.

Usage::

    python benchmarks/pathological.py                       # 10 KB, 100 KB, 1 MB
    python benchmarks/pathological.py --sizes 10000,100000 --json out.json
    python benchmarks/pathological.py --shape dots --routine observer-user

A routine that takes longer than ``--budget`` seconds at one size is not run at larger sizes
(shown as ``skip``), so a quadratic regression cannot stall the run for hours.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, date, datetime

from obsmem.errors import ReflectionError
from obsmem.om.llm.degenerate import is_degenerate
from obsmem.om.llm.parsing import parse_observer_output, parse_reflector_output
from obsmem.om.offline.observer import OfflineObserver
from obsmem.om.offline.reflector import OfflineReflector
from obsmem.om.offline.rules import named_dates, resolve_dates, split_sentences
from obsmem.om.offline.patterns import key_terms, names_and_numbers
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.om.text.dates import annotate_observations, optimize_for_context
from obsmem.om.text.transcript import format_transcript
from obsmem.types import Message

NOW = datetime(2025, 6, 18, 9, 0, tzinfo=UTC)
ANCHOR = date(2025, 6, 18)

#: name -> the unit repeated to the size (or a function of the size)
SHAPES: dict[str, str | Callable[[int], str]] = {
    "dots": ".",
    "digits-commas": "1,",
    "digits-dots": "1.",
    "digit-run-commas": lambda n: ",".join("1" * (n // 2)),
    "digits": "1",
    "interrobang": "?!",
    "ellipsis-words": "wait... ",
    "initials": "A. ",
    "abbreviations": "Dr. e.g. ",
    "see-you-friday": "see you Friday ",
    "dates-mixed": "on March 3, next Friday, 2 days ago, in 3 weeks and last month; ",
    "month-days": "June 5 ",
    "unclosed-observations": "<observations>\n",
    "unclosed-current-task": "<current-task>\n",
    "unclosed-suggested": "<suggested-response> x\n",
    "unclosed-extracted": "<extracted-values>{",
    "closing-tags": "</observations>\n",
    "end-of-line-closings": lambda n: "<observations>\n" + "x</observations>\n" * (n // 17),
    "mid-line-closings": lambda n: "<observations>\n" + "x </observations> y\n" * (n // 20),
    "forged-sections-in-block": lambda n: "<observations>\n" + "<current-task>x\n" * (n // 16),
    "unclosed-thread": '<thread id="t">\n',
    "long-word": "a",
    "capitalised-run": "Abc ",
    "capital-letters": "A",
    "emoji": "😀",
    "emoji-words": "🔴 (09:00) ",
    "spaces": " ",
    "tabs-newlines": " \t\n",
    "newlines": "\n",
    "nested-brackets": lambda n: "(" * (n // 2) + ")" * (n // 2),
    "square-brackets": "[",
    "markdown-emphasis": "**a ",
    "markdown-links": "[x](",
    "markdown-list": "- item\n",
    "headings": "# ",
    "code-fences": "```\n",
    "huge-line": "The quick brown fox jumps over the lazy dog near Lisbon at 09:30 for $12 ",
    "short-lines": "ok\n",
    "date-headers": "Date: Jun 18, 2025\n",
    "observation-lines": "* 🔴 (09:00) User lives in Lisbon (meaning Jun 20, 2025)\n",
    "quantities": "5 km 3 kg $4 10% ",
    "emails": "a@b.c ",
    "plus-numbers": "+1 ",
    "apostrophes": "'",
    "quotes": '"',
    "colons": ": ",
    "interjections": "oh, ",
    "i-pronouns": "I ",
    "my-pronouns": "my ",
    "capitals-commas": "Ab, ",
    "pipes-json": '{"a": [1, {"b": "c"}], ',
}


def shape_text(name: str, size: int) -> str:
    unit = SHAPES[name]
    if callable(unit):
        return unit(size)[:size]
    return (unit * (size // len(unit) + 1))[:size]


def _observe(role: str) -> Callable[[str], object]:
    observer = OfflineObserver(offload_chars=None)

    def run(text: str) -> object:
        make = Message.user if role == "user" else Message.assistant
        message = make(text, created_at=NOW)
        return observer._observe(ObservationRequest(messages=[message]))

    return run


def _reflect(text: str) -> object:
    reflector = OfflineReflector(offload_chars=None)
    observations = f"Date: Jun 18, 2025\n* 🔴 (09:00) {text}"
    try:
        return reflector._climb(ReflectionRequest(observations=observations, target_tokens=1000))
    except ReflectionError:  # nothing that reads as an observation line: refused, as it should be
        return None


def _transcript(text: str) -> object:
    messages = [Message.user(text, created_at=NOW), Message.assistant(text, created_at=NOW)]
    return format_transcript(messages, count_tokens=lambda s: len(s) // 4)


def _dates(text: str) -> object:
    return resolve_dates(text, ANCHOR), named_dates(text, ANCHOR)


def _terms(text: str) -> object:
    return split_sentences(text), key_terms(text), names_and_numbers(text)


def _context_dates(text: str) -> object:
    return annotate_observations(text, NOW), optimize_for_context(text)


ROUTINES: dict[str, Callable[[str], object]] = {
    "observer-user": _observe("user"),
    "observer-assistant": _observe("assistant"),
    "reflector": _reflect,
    "parse-observer": parse_observer_output,
    "parse-reflector": parse_reflector_output,
    "transcript": _transcript,
    "dates": _dates,
    "terms": _terms,
    "context-dates": _context_dates,
    "degenerate": is_degenerate,
}


def measure(routine: Callable[[str], object], text: str, repeat: int) -> float:
    """The least CPU time (seconds) of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        routine(text)
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated sizes in characters")
    parser.add_argument("--shape", action="append", help="only these shapes (repeatable)")
    parser.add_argument("--routine", action="append", help="only these routines (repeatable)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds; slower runs skip larger sizes")
    parser.add_argument("--json", help="write every measurement to this file")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    shapes = args.shape or list(SHAPES)
    routines = args.routine or list(ROUTINES)
    rows: list[dict[str, object]] = []
    head = "".join(f"{f'{s // 1000} KB':>18}" for s in sizes)
    print(f"{'shape':<24}{head}{'ratio':>8}  slowest routine")
    worst_ratio = 0.0
    for shape in shapes:
        cells: list[str] = []
        per_kb: dict[int, float] = {}
        slowest_name = ""
        over: set[str] = set()
        for size in sizes:
            text = shape_text(shape, size)
            worst, worst_name = 0.0, ""
            for name in routines:
                if name in over:
                    continue
                seconds = measure(ROUTINES[name], text, 3 if size <= 100_000 else 1)
                rows.append({"shape": shape, "size": size, "routine": name, "seconds": seconds})
                if seconds > args.budget:
                    over.add(name)
                if seconds >= worst:
                    worst, worst_name = seconds, name
            per_kb[size] = worst * 1e6 / (size / 1000)
            slowest_name = worst_name
            skipped = f" skip:{len(over)}" if over else ""
            cells.append(f"{worst:8.3f}s {per_kb[size]:6.0f}µs/KB{skipped}"[:18].rjust(18))
        low = per_kb[sizes[0]] or 1e-9
        ratio = per_kb[sizes[-1]] / low
        worst_ratio = max(worst_ratio, ratio)
        print(f"{shape:<24}{''.join(cells)}{ratio:8.2f}  {slowest_name}", flush=True)
    print(f"\nworst ratio of µs/KB (largest size / smallest): {worst_ratio:.2f} "
          f"({len(shapes)} shapes × {len(sizes)} sizes × {len(routines)} routines)")  # fmt: skip
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sizes": sizes, "rows": rows, "worst_ratio": worst_ratio}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

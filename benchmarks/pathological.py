"""Pathological input: every text routine must take time linear in its input (issue 13, item 1).

Each *shape* is a short unit repeated to a size (repeated punctuation, digits with separators,
unclosed tags, long words, repeated dates, emoji, whitespace runs, nested brackets, markdown, one
huge line, many short lines, the redaction table's shapes ``redact:…``, …). Each shape at each
size is run through the offline observer (as a user and as an assistant message, and cut into
many short messages), the offline reflector and its fact cutter, the model-output parser
(observer and reflector), the transcript formatter, the date routines, the degenerate-output
detector and the redactor (every secret and PII category).
The table shows, per shape and size, the slowest routine's CPU time and its µs per KB; the
last column is the ratio of µs/KB at the largest size to that at the smallest, which stays near
1 (flat) when every routine is linear. A quadratic routine shows a ratio near size ratio.

``--check`` (default sizes 10 KB and 40 KB) also prints PASS/FAIL per routine: its CPU time may
grow at most 2× the size ratio between the smallest and the largest size (for 4× the input,
at most 8×: linear ≈ 4, quadratic ≈ 16; the bound the tests asserted by CPU time before they
counted work instead), on every shape; a routine over ``--budget`` fails. The exit status is 1
on any FAIL. This is where regex backtracking is caught: work inside one C call is invisible to
the tests' counted work (tests/integrity/work_count.py). CPU time (``process_time``, the least
of three runs) is not wall time, but a loaded machine still slows it (caches, frequency): read a
FAIL near the bound on a busy machine again before believing it.

Usage::

    python benchmarks/pathological.py                       # 10 KB, 100 KB, 1 MB
    python benchmarks/pathological.py --sizes 10000,100000 --json out.json
    python benchmarks/pathological.py --shape dots --routine observer-user
    python benchmarks/pathological.py --check               # 10 KB vs 40 KB, PASS/FAIL per routine

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
from obsmem.om.offline.reflector import OfflineReflector, fact_core
from obsmem.om.offline.rules import named_dates, resolve_dates, split_sentences
from obsmem.om.offline.patterns import key_terms, names_and_numbers
from obsmem.om.protocols import ObservationRequest, ReflectionRequest
from obsmem.om.text.dates import annotate_observations, optimize_for_context
from obsmem.om.text.transcript import format_transcript
from obsmem.knowledge.agents.extract import propose, statements
from obsmem.knowledge.store.values import typed_values
from obsmem.privacy import PII_CATEGORIES, Redactor
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
    # the offline observer and reflector tests' shapes (tests/integrity, tests/om)
    "dates-one-clause": "on March 3 and next Friday and 2 days ago ",
    "quantities-names": lambda n: "".join(f"Abc{i} {i} km " for i in range(n // 10 + 1)),
    "whitespace-run": lambda n: "x" + " " * n + " and y",
    "unfinished-links": "[x]( ",
    "spaces-then-comma": lambda n: "x" + " " * n + ",y",
    # the redaction table's shapes (tests/privacy/test_redaction.py)
    "redact:letters": "a",
    "redact:eyJ-runs": "eyJ",
    "redact:eyJ-dots": "eyJa.",
    "redact:sk-runs": "sk-",
    "redact:at-signs": "a@",
    "redact:dotted-labels": lambda n: "a@" + "b." * (n // 2),
    "redact:digits": "1",
    "redact:digits-spaces": "1 ",
    "redact:plus-digits": "+1 ",
    "redact:colons": "a:",
    "redact:dots-digits": "1.",
    "redact:begin-without-end": "-----BEGIN PRIVATE KEY-----\nAAAA",
    "redact:password-assignments": "password=",
    "redact:schemes": "a://b:",
    "redact:bearer": "Bearer ",
    "redact:key-names": "token",
    "redact:placeholders": "[REDACTED:email:0123abcd]",
    "redact:whitespace": lambda n: "password" + " " * n + "=x",
    "redact:emails": "mail a@b.co now ",
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


def _observe_many(text: str) -> object:
    """The text cut into 60-character user messages: per-message work stays per message."""
    observer = OfflineObserver(offload_chars=None)
    messages = [Message.user(text[i : i + 60], created_at=NOW) for i in range(0, len(text), 60)]
    return observer._observe(ObservationRequest(messages=messages))


def _fact_core(text: str) -> object:
    return fact_core(f"User stated {text}", 100, 2)


_REDACTOR = Redactor(b"pathological", pii=PII_CATEGORIES)


def _redact(text: str) -> object:
    return _REDACTOR.redact(text)


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
    "observer-messages": _observe_many,
    "reflector": _reflect,
    "fact-core": _fact_core,
    "parse-observer": parse_observer_output,
    "parse-reflector": parse_reflector_output,
    "transcript": _transcript,
    "dates": _dates,
    "terms": _terms,
    "context-dates": _context_dates,
    "degenerate": is_degenerate,
    "redact": _redact,
    "typed-values": typed_values,  # knowledge tombstones: phone numbers and email addresses
    "knowledge-extract": lambda text: [propose(s) for s in statements(text)],  # offline capture
}

GROWTH_PER_SIZE = 2.0  # --check: time growth at most 2x the size ratio (8x for 4x the input)
FLOOR_S = 1e-4  # a smaller time is timer noise: counted as this much


def measure(routine: Callable[[str], object], text: str, repeat: int) -> float:
    """The least CPU time (seconds) of ``repeat`` runs."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        routine(text)
        best = min(best, time.process_time() - start)
    return best


def check(rows: list[dict[str, object]], sizes: list[int], routines: list[str], skipped: set[tuple[str, str]]
          ) -> list[dict[str, object]]:
    """Per routine: the worst time growth from the smallest to the largest size over the shapes,
    against ``GROWTH_PER_SIZE`` × the size ratio; a routine skipped at a size fails."""
    small, large = sizes[0], sizes[-1]
    bound = GROWTH_PER_SIZE * large / small
    seconds: dict[tuple[str, str, int], float] = {
        (str(r["shape"]), str(r["routine"]), int(str(r["size"]))): float(str(r["seconds"])) for r in rows
    }
    results: list[dict[str, object]] = []
    for routine in routines:
        worst, worst_shape = 0.0, ""
        for (shape, name, size), low in seconds.items():
            if name != routine or size != small or (shape, name, large) not in seconds:
                continue
            growth = seconds[(shape, name, large)] / max(low, FLOOR_S)
            if growth >= worst:
                worst, worst_shape = growth, shape
        over = sorted(shape for shape, name in skipped if name == routine)
        ok = worst < bound and not over
        results.append({"routine": routine, "growth": round(worst, 2), "shape": worst_shape, "bound": bound,
                        "over_budget": over, "pass": ok})
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated sizes in characters (default 10000,100000,1000000; "
                        "with --check 10000,40000)")
    parser.add_argument("--shape", action="append", help="only these shapes (repeatable)")
    parser.add_argument("--routine", action="append", help="only these routines (repeatable)")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds; slower runs skip larger sizes")
    parser.add_argument("--check", action="store_true", help="PASS/FAIL per routine on its growth; exit 1 on FAIL")
    parser.add_argument("--json", help="write every measurement to this file")
    args = parser.parse_args(argv)
    default_sizes = "10000,40000" if args.check else "10000,100000,1000000"
    sizes = sorted(int(s) for s in (args.sizes or default_sizes).split(","))
    shapes = args.shape or list(SHAPES)
    routines = args.routine or list(ROUTINES)
    rows: list[dict[str, object]] = []
    skipped: set[tuple[str, str]] = set()
    head = "".join(f"{f'{s // 1000} KB':>18}" for s in sizes)
    print(f"{'shape':<28}{head}{'ratio':>8}  slowest routine")
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
                    skipped.add((shape, name))
                    continue
                seconds = measure(ROUTINES[name], text, 3 if size <= 100_000 else 1)
                rows.append({"shape": shape, "size": size, "routine": name, "seconds": seconds})
                if seconds > args.budget:
                    over.add(name)
                if seconds >= worst:
                    worst, worst_name = seconds, name
            per_kb[size] = worst * 1e6 / (size / 1000)
            slowest_name = worst_name
            skipped_note = f" skip:{len(over)}" if over else ""
            cells.append(f"{worst:8.3f}s {per_kb[size]:6.0f}µs/KB{skipped_note}"[:18].rjust(18))
        low = per_kb[sizes[0]] or 1e-9
        ratio = per_kb[sizes[-1]] / low
        worst_ratio = max(worst_ratio, ratio)
        print(f"{shape:<28}{''.join(cells)}{ratio:8.2f}  {slowest_name}", flush=True)
    print(f"\nworst ratio of µs/KB (largest size / smallest): {worst_ratio:.2f} "
          f"({len(shapes)} shapes × {len(sizes)} sizes × {len(routines)} routines)")  # fmt: skip
    results: list[dict[str, object]] = []
    if args.check:
        if len(sizes) < 2:
            parser.error("--check needs two sizes at least")
        results = check(rows, sizes, routines, skipped)
        print(f"\ncheck: CPU time growth from {sizes[0]:,} to {sizes[-1]:,} characters, worst shape per routine "
              f"(bound {GROWTH_PER_SIZE:g}× the size ratio = {results[0]['bound']:g}×; times under "
              f"{FLOOR_S * 1000:g} ms count as {FLOOR_S * 1000:g} ms)")
        print(f"{'routine':<20}{'growth':>8}  {'verdict':<7} worst shape")
        for result in results:
            verdict = "PASS" if result["pass"] else "FAIL"
            over_note = f"  over budget: {', '.join(result['over_budget'])}" if result["over_budget"] else ""  # type: ignore[arg-type]
            print(f"{result['routine']:<20}{result['growth']:>7.2f}×  {verdict:<7} {result['shape']}{over_note}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"sizes": sizes, "rows": rows, "worst_ratio": worst_ratio, "check": results}, handle, indent=1)
    return 0 if all(result["pass"] for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())

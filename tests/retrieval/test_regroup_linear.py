"""Regrouping a reflection is linear in its input (the project rule: no input makes a path
superlinear, and ``GroupedReflector.reflect`` runs on the event loop).

Each finding is checked from the user's side: a retrieval-mode reflector (:class:`GroupedReflector`
around an inner reflector) over ``n`` and ``4n`` observation groups, comparing the *work* done
(Python calls and lines, :mod:`tests.integrity.work_count`; linear ≈ 4×, quadratic ≈ 16×), and
checking the groups that come back still name the right sources.

1. Mapping a reflected line to its sources read every source line holding any of its words, so
   a word every line holds ("user", "the") made each output line scan every source line.
2. An unmentioned source searched back through every earlier source for the nearest owner.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from datetime import date, timedelta

from obsmem.models.base import Usage
from obsmem.om.protocols import ReflectionRequest, ReflectionResult
from obsmem.om.regroup import GroupedReflector, _LineMap, _normalise, _words, regroup
from obsmem.om.text.format import format_date_header, parse_date_header
from obsmem.om.text.groups import ObservationGroup, parse_groups, wrap_group

from tests.integrity.work_count import GROWTH_BOUND, growth

DAY0 = date(2025, 1, 1)
PER_DAY = 10  # groups per day (each group: one cycle's observations, under its day's header)


def group(index: int, body: str) -> ObservationGroup:
    seq = 2 * index + 1  # each group covers two messages
    return ObservationGroup(f"g{index:011d}", "t1", seq, seq + 1, f"m{seq}", f"m{seq + 1}", body)


def observation(index: int) -> str:
    """One observation: common words every line shares, and one detail of its own."""
    return f"* 🔴 (09:00) User mentioned the parcel {1000 + index} arrived at depot{index % 37} today."


def observations(size: int) -> str:
    """``size`` groups' stored text, ``PER_DAY`` a day, each with one observation."""
    return "\n\n".join(
        wrap_group(group(i, f"{format_date_header(DAY0 + timedelta(days=i // PER_DAY))}\n{observation(i)}"))
        for i in range(size)
    )


class DailyReflector:
    """An inner reflector that keeps a day's header and, of that day, the observations ``keep``
    selects, passed through ``rewrite`` (a rephrasing, as a model would)."""

    name = "daily"

    def __init__(self, keep: Callable[[int], bool], rewrite: Callable[[int], str]) -> None:
        self.keep, self.rewrite = keep, rewrite

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        out: list[str] = []
        header = written = ""
        for line in request.observations.splitlines():
            if parse_date_header(line) is not None:
                header = line
            elif "parcel" in line:
                index = int(line.split("parcel ")[1].split()[0]) - 1000
                if self.keep(index):
                    if header != written:
                        out.append(written := header)
                    out.append(self.rewrite(index))
        return ReflectionResult(observations="\n".join(out), usage=Usage())


def reflect_with(inner: DailyReflector) -> Callable[[str], list[tuple[int, int]]]:
    def run(text: str) -> list[tuple[int, int]]:
        reflector = GroupedReflector(inner, lambda s: len(s.split()))
        result = asyncio.run(reflector.reflect(ReflectionRequest(text, target_tokens=100)))
        groups = parse_groups(result.observations)
        assert all(g.kind == "reflection" for g in groups)
        return [(g.first_seq, g.last_seq) for g in groups]

    return run


def spans(size: int, first_kept: int) -> list[tuple[int, int]]:
    """The seq spans of the groups that come back when the ``first_kept``-th observation of each
    day is the first one kept: each block owns its sources up to the next day's first kept one,
    and the first block also the sources before it."""
    starts = [0, *range(first_kept + PER_DAY, size, PER_DAY)]
    ends = [start - 1 for start in starts[1:]] + [size - 1]
    return [(group(s, "").first_seq, group(e, "").last_seq) for s, e in zip(starts, ends, strict=True)]


# -- 1. a reflected line maps to its sources without scanning every source line -----------------


def rephrase(index: int) -> str:
    return f"* User said parcel {1000 + index} arrived at the depot{index % 37}."


def check_a_hand_checked_mapping() -> None:
    """A line maps to the sources sharing most of its words (the common ones included)."""
    sources = [
        group(0, "* User lives in Lisbon."),
        group(1, "* User has a cat named Pixel."),
        group(2, "* User adopted a dog named Rex."),
        group(3, "* (10:00) User adopted a dog named Rex today."),
        group(4, "* User adopted a dog named Rex!"),
        group(5, "* User deploys with Terraform 1.7."),
    ]
    cases = [
        ("* User now lives in Lisbon", {0}),  # 3 of 4 words: the rare ones single it out
        ("* User adopted dog Rex yesterday", {2, 4}),  # 4/5 for both; 4/6 for the one with "today"
        ("* (11:00) User has a cat named Pixel.", {1}),  # verbatim but for the bullet's time
        ("* User and Terraform", set()),  # 2 of 3 words, but 2/4 of the source's: not over half
        ("* Nothing here", set()),
    ]
    line_map = _LineMap(sources)
    for line, expected in cases:
        assert line_map.sources_of(line) == expected, line
    # Through the public entry point: each date block becomes a group over those sources.
    blocks = [f"Date: Jun {d}, 2025\n{line}" for d, (line, _) in enumerate(cases[:3], start=1)]
    found = [(g.first_seq, g.last_seq) for g in parse_groups(regroup("\n\n".join(blocks), sources))]
    assert found == [(1, 2), (5, 12), (3, 4)]  # unmentioned groups 3 and 5 join the block before them


def full_scan(sources: Sequence[ObservationGroup], line: str) -> set[int]:
    """The sources of ``line`` by the module's rule, scoring every source line."""
    key = _normalise(line)
    exact = {i for i, g in enumerate(sources) for raw in g.body.splitlines() if _normalise(raw) == key}
    if exact:
        return exact
    words = _words(line)
    scores = [
        (len(words & other) / max(len(words), len(other)), i)
        for i, g in enumerate(sources)
        for other in map(_words, g.body.splitlines())
        if words and other
    ]
    best = max((score for score, _ in scores), default=0.0)
    return {i for score, i in scores if score == best} if best > 0.5 else set()


def check_the_full_scans_answer() -> None:
    """The bounded match gives the answer of a scan over every source line."""
    rng = random.Random(7)
    # Zipf-like words: a few in nearly every line, most in a few.
    vocabulary = [f"w{k:03d}" for k in range(300)]
    weights = [1 / (k + 1) for k in range(300)]

    def sentence() -> str:
        return " ".join(rng.choices(vocabulary, weights, k=rng.randint(2, 9)))

    sources = [group(i, "\n".join(sentence() for _ in range(rng.randint(1, 3)))) for i in range(150)]
    lines = [raw for g in sources for raw in g.body.splitlines()]
    line_map = _LineMap(sources)
    for _ in range(300):
        words = rng.choice(lines).split()
        edit = rng.randrange(3)
        if edit == 0 and len(words) > 1:
            words.pop(rng.randrange(len(words)))
        elif edit == 1:
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        else:
            words = sentence().split()
        line = " ".join(words)
        assert line_map.sources_of(line) == full_scan(sources, line), line


def test_rephrased_lines_map_to_their_sources_in_linear_work() -> None:
    # Half the observations survive, reworded (never verbatim: the word-overlap path), and every
    # reworded line shares "user", "the", "parcel", "arrived" with every source line.
    check_a_hand_checked_mapping()
    check_the_full_scans_answer()
    run = reflect_with(DailyReflector(keep=lambda i: i % 2 == 0, rewrite=rephrase))
    size = 200
    # Every day's block maps to that day's kept sources; the others join the one before them.
    assert run(observations(size)) == spans(size, first_kept=0)  # one group a day
    ratio = growth(run, observations, size)
    assert ratio < GROWTH_BOUND, f"{ratio:.1f}× the work for 4× the groups"


# -- 2. an unmentioned source finds its block without searching back ------------------------------


def verbatim(index: int) -> str:
    return observation(index)


def test_unmentioned_sources_join_the_block_before_them_in_linear_work() -> None:
    # Only the sixth group of each day is kept, verbatim: the other nine are unmentioned. The
    # first five join the first block (nothing precedes them); every other joins its day's block.
    run = reflect_with(DailyReflector(keep=lambda i: i % PER_DAY == 5, rewrite=verbatim))
    size = 1000
    assert run(observations(size)) == spans(size, first_kept=5)
    ratio = growth(run, observations, size)
    assert ratio < GROWTH_BOUND, f"{ratio:.1f}× the work for 4× the groups"

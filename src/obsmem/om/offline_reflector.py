"""The offline reflector: deterministic consolidation of the observation log, level by level.

Reflection replaces the whole memory, so its first duty is to lose nothing important. The rules
are ordered by how safe they are:

0. **Consolidate** (always): drop message-boundary lines, merge repeated days, drop exact and
   near duplicates (same words ignoring time, priority, case, punctuation and filler words; or a
   line that is the start of a longer one), and drop facts that a *later* statement superseded
   ("User lives in Munich" → "User moved to Berlin (changing from Munich)"). Supersession uses
   :func:`~obsmem.om.offline_rules.fact_key` (where the user lives, works, "their email/name/
   favourite X is …", "use X for Y"), "(changing from X)" and "no longer …"; it only removes an
   older line when that line says nothing else, so a compound fact is never deleted for one part.
1. Drop old 🟢 lines.
2. Shorten old 🟡 lines to 100 characters (dates and "(changing from …)" notes are kept whole)
   and drop the sub-bullets of old lines.
3. Merge each day's old 🟡 lines into one line.
4. Drop old 🟡 lines outside the newest two days, and every 🟢 line.

"Old" means everything but the newest quarter of the lines (at least three lines stay recent),
following the reflector guidance to condense early content and keep late detail. 🔴 and ✅ lines
are never shortened or dropped by levels, only by consolidation, which is what makes facts
survive many generations of reflection.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date
from itertools import pairwise

from obsmem.errors import ReflectionError
from obsmem.om.format import (
    PRIORITY_DONE,
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    DateGroup,
    ObservationLine,
    parse_observations,
    render_observations,
)
from obsmem.om.offline_rules import (
    estimate_tokens,
    fact_key,
    is_plan_text,
    normalise,
    sentence_end,
    shorten,
    split_annotations,
    state_object,
)
from obsmem.om.protocols import AttemptFailed, ReflectionRequest, ReflectionResult

__all__ = ["MAX_LEVEL", "OfflineReflector"]

MAX_LEVEL = 4
RECENT_SHARE = 0.25
MIN_RECENT = 3
SHORT_LIMIT = 100
MERGE_PART_LIMIT = 60
KEEP_DAYS = 2

_RANK = {PRIORITY_HIGH: 3, PRIORITY_DONE: 3, PRIORITY_MEDIUM: 2, None: 2, PRIORITY_LOW: 1}
_FILLER = frozenset(
    "a an the to of in on at for and or but is are was were be been has have had do does did "
    "that this it its their they them user stated said says just also now really very so then "
    "there here with about".split()
)  # fmt: skip
_CHANGING = re.compile(r"\(changing from (?P<old>[^()]+)\)", re.I)
_NO_LONGER = re.compile(r"^User stated they no longer (?P<vp>[^,;()]+)", re.I)
_STATE_LEAD = re.compile(r"^User stated (?:that )?(?:they|their) ", re.I)


@dataclass(slots=True)
class _Entry:
    """A top-level line with its sub-bullets, in chronological order."""

    order: int
    day: date | None
    line: ObservationLine
    children: list[ObservationLine] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return _RANK.get(self.line.priority, 2)


def _entries(text: str) -> list[_Entry]:
    groups = sorted(parse_observations(text), key=lambda g: (g.day is not None, g.day or date.min))
    out: list[_Entry] = []
    for group in groups:
        for line in group.lines:
            if line.indent > 0 and out and out[-1].day == group.day:
                out[-1].children.append(line)
            elif line.text.strip():
                out.append(_Entry(len(out), group.day, replace(line, indent=0)))
    return out


def _words(text: str) -> tuple[str, ...]:
    """The content words of a line, in order: lowercase, filler words and plural -s dropped."""
    words = re.findall(r"[\w°%$€£@'-]+", text.lower())
    return tuple(w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if w not in _FILLER)


def _content(text: str) -> frozenset[str]:
    return frozenset(_words(text))


def _dedupe(entries: list[_Entry]) -> list[_Entry]:
    """Drop exact/near duplicates and prefixes of longer lines; the newest copy stays, with the
    highest priority any copy had."""
    keep: dict[tuple[str, ...], _Entry] = {}
    for entry in entries:
        key = _words(entry.line.text)
        old = keep.pop(key, None)
        if old is not None:
            if old.rank > entry.rank:
                entry.line = replace(entry.line, priority=old.line.priority)
            if len(old.children) > len(entry.children):
                entry.children = old.children
        keep[key] = entry
    survivors = sorted(keep.values(), key=lambda e: e.order)
    by_text = sorted(survivors, key=lambda e: normalise(e.line.text))
    dropped: set[int] = set()
    for shorter, longer in pairwise(by_text):
        short_key, long_key = normalise(shorter.line.text), normalise(longer.line.text)
        if len(short_key.split()) >= 4 and long_key.startswith(short_key + " "):
            dropped.add(shorter.order)
            if shorter.rank > longer.rank:
                longer.line = replace(longer.line, priority=shorter.line.priority)
    return [e for e in survivors if e.order not in dropped]


def _simple(text: str, value: str) -> bool:
    """True when a fact line says nothing beyond the one attribute (safe to supersede)."""
    body, _ = split_annotations(text)
    rest = _content(_STATE_LEAD.sub("", body)) - _content(value)
    return len(rest) <= 3


def _supersede(entries: list[_Entry]) -> list[_Entry]:
    """Drop older user facts that a later statement replaced (the later one wins)."""
    dropped: set[int] = set()
    latest: dict[str, tuple[_Entry, str]] = {}
    facts: list[_Entry] = []
    for entry in entries:
        text = entry.line.text
        if not text.startswith("User") or text.startswith("User asked") or is_plan_text(text):
            continue
        key = fact_key(text)
        if key is not None:
            if key.key in latest:
                older, value = latest[key.key]
                if _simple(older.line.text, value):
                    dropped.add(older.order)
            latest[key.key] = (entry, key.value or key.old or "")
        changing = _CHANGING.search(text)
        no_longer = _NO_LONGER.match(text)
        if changing or no_longer:
            for older in facts:
                if older.order in dropped or not older.line.text.startswith("User stated"):
                    continue
                if changing and _was_value(older.line.text, changing["old"]):
                    dropped.add(older.order)
                elif no_longer:
                    vp = no_longer["vp"].strip().lower()
                    said = _STATE_LEAD.sub("", older.line.text).lower()
                    if said.startswith(vp) and _simple(older.line.text, vp):
                        dropped.add(older.order)
        facts.append(entry)
    return [e for e in entries if e.order not in dropped]


def _was_value(text: str, old: str) -> bool:
    """True when ``text`` is a simple statement whose value is ``old``."""
    old = old.strip().lower()
    key = fact_key(text)
    value = key.value if key else state_object(text)
    return bool(value) and value is not None and value.lower() == old and _simple(text, value)


def _consolidate(entries: list[_Entry]) -> list[_Entry]:
    merged = _supersede(_dedupe(entries))
    for index, entry in enumerate(merged):
        entry.order = index
    return merged


def _is_medium(entry: _Entry) -> bool:
    return entry.line.priority in (PRIORITY_MEDIUM, None)


def _apply_level(consolidated: list[_Entry], level: int) -> list[_Entry]:
    """The log at one compression level; each level includes every lower level's steps."""
    entries = [_Entry(e.order, e.day, e.line, list(e.children)) for e in consolidated]
    recent_from = len(entries) - max(MIN_RECENT, math.ceil(len(entries) * RECENT_SHARE))

    def old(entry: _Entry) -> bool:
        return entry.order < recent_from

    if level >= 1:
        entries = [e for e in entries if not (e.line.priority == PRIORITY_LOW and (old(e) or level >= 4))]
    if level >= 2:
        for entry in entries:
            if old(entry):
                entry.children = []
                if _is_medium(entry):
                    entry.line = replace(entry.line, text=sentence_end(shorten(entry.line.text, SHORT_LIMIT)))
    if level >= 3:
        entries = _merge_days(entries, old)
    if level >= 4:
        days = sorted({e.day for e in entries if e.day is not None})
        keep_days = set(days[-KEEP_DAYS:])
        entries = [e for e in entries if not (old(e) and _is_medium(e) and e.day not in keep_days)]
    return entries


def _merge_days(entries: list[_Entry], old: Callable[[_Entry], bool]) -> list[_Entry]:
    """Fold each day's old 🟡 lines into one line at the first one's place and time."""
    firsts: dict[date | None, _Entry] = {}
    parts: dict[date | None, list[str]] = {}
    out: list[_Entry] = []
    for entry in entries:
        if not (old(entry) and _is_medium(entry)):
            out.append(entry)
            continue
        parts.setdefault(entry.day, []).append(shorten(entry.line.text.rstrip("."), MERGE_PART_LIMIT))
        if entry.day not in firsts:
            firsts[entry.day] = entry
            out.append(entry)
    for day, first in firsts.items():
        if len(parts[day]) > 1:
            text = sentence_end("; ".join(parts[day]))
            first.line = replace(first.line, text=text, priority=PRIORITY_MEDIUM)
    return out


def _render(entries: list[_Entry]) -> str:
    groups: list[DateGroup] = []
    for entry in sorted(entries, key=lambda e: (e.day is not None, e.day or date.min, e.order)):
        if not groups or groups[-1].day != entry.day:
            groups.append(DateGroup(day=entry.day))
        groups[-1].lines.append(entry.line)
        groups[-1].lines.extend(replace(c, indent=max(1, c.indent)) for c in entry.children)
    return render_observations(groups)


def _fallback(consolidated: list[_Entry]) -> list[_Entry]:
    """What to keep when a level dropped everything: the 🔴 lines, else ✅, else the newest."""
    for wanted in (PRIORITY_HIGH, PRIORITY_DONE):
        kept = [e for e in consolidated if e.line.priority == wanted]
        if kept:
            return kept
    return consolidated[-1:]


class OfflineReflector:
    """A deterministic, rules-based :class:`~obsmem.om.protocols.Reflector` (no model calls).

    It climbs the compression ladder from ``request.start_level`` until the rendered log is
    under ``request.target_tokens`` (counted with ``count_tokens``), awaiting
    ``request.on_attempt_failed`` before each climb, and returns the level-4 result as a best
    effort when even that is over target.
    """

    name = "offline"

    def __init__(self, *, count_tokens: Callable[[str], int] | None = None) -> None:
        self.count_tokens: Callable[[str], int] = count_tokens or estimate_tokens

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        consolidated = _consolidate(_entries(request.observations))
        if not consolidated:
            raise ReflectionError(
                "The observations to reflect on contain no observation lines; "
                "the current observations were kept unchanged."
            )
        input_tokens = self.count_tokens(request.observations)
        level = min(max(request.start_level, 0), MAX_LEVEL)
        attempts = 0
        while True:
            attempts += 1
            entries = _apply_level(consolidated, level) or _fallback(consolidated)
            text = _render(entries)
            tokens = self.count_tokens(text)
            if tokens < request.target_tokens or level >= MAX_LEVEL:
                break
            if request.on_attempt_failed is not None:
                await request.on_attempt_failed(
                    AttemptFailed(
                        level=level,
                        next_level=level + 1,
                        input_tokens=input_tokens,
                        output_tokens=tokens,
                        target_tokens=request.target_tokens,
                        reason=(
                            f"level {level} reflection is {tokens} tokens, not under the target "
                            f"of {request.target_tokens}; retrying at level {level + 1}"
                        ),
                    )
                )
            level += 1
        return ReflectionResult(
            observations=text,
            suggested_response=None,
            extracted=dict(request.extracted),
            attempts=attempts,
            level=level,
            output_tokens=tokens,
        )

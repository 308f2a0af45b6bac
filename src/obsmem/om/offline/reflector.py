"""The offline reflector: deterministic consolidation of the observation log, level by level.

Reflection replaces the whole memory, so its first duty is to lose nothing important. The rules
are ordered by how safe they are; each level includes the steps of every lower one:

0. **Consolidate** (always): drop message-boundary lines, merge repeated days, drop exact and
   near duplicates (same words ignoring time, priority, case, punctuation and filler words; or a
   line that is the start of a longer one), and drop facts that a *later* statement superseded
   ("User lives in Munich" → "User moved to Berlin (changing from Munich)"). Supersession uses
   :func:`~obsmem.om.offline.patterns.fact_key` (where the user lives, works, "their email/name/
   favourite X is …", "use X for Y"), "(changing from X)" and "no longer …"; it only removes an
   older line when that line says little else, so a compound fact is never deleted for one part.
1. Drop old 🟢 lines.
2. Shorten old 🟡 lines to 100 characters (dates and "(changing from …)" notes are kept whole)
   and drop the sub-bullets of old lines.
3. Merge each day's old 🟡 lines into one "Topics: …" line (each part: the question or action,
   cut short, and the names and numbers of its answer); drop every 🟢 line; cut old 🔴/✅ lines
   longer than 140 characters to their fact-bearing clauses (:func:`fact_core`: names, numbers,
   dates, places and durable-fact cues stay, colour goes).
4. Cut every old 🔴/✅ line to its fact-bearing clauses (100 characters; 60 for a plan or
   appointment whose dates are days past and that states no durable fact) and consolidate again,
   so a fact that is now down to its value gives way to a newer version; keep at most 4 topic
   parts per old day (2 outside the newest two days), those with the most names and numbers;
   shorten recent 🟡 lines (not the newest three) to 200 characters. Facts stay one per line;
   a "User stated: a; b" line written by an earlier version is read back as one fact per part.

"Old" means everything but the newest lines: a quarter of them at levels 0-2, 15% at level 3,
10% at level 4 (at least three). 🔴 facts about the user are never dropped by a level, only cut
to their fact-bearing clauses or superseded by a newer version, which is what makes them
survive many generations of reflection.

**A conversation between named people** (see :mod:`obsmem.om.offline.participants`) is
handled differently, because each person narrates far more than any budget holds: from level 2
an old speaker line fades to note style (pronouns, auxiliaries and linking words go; it is
never cut at a length, as a 🟡 user line is, which would drop the notes at its end), from
level 3 each old day's lines of one speaker become one line instead of "Topics", and when
level 4 is still over the goal the notes worth least per token (few rare words, no name,
number or date) are dropped until it fits. This is the one place the offline reflector drops
🔴 content, and only from named speakers' lines, never from a "User …" fact.

The ladder stops at the first level whose output is at most half the target, not merely under
it: a reflection that lands just under the threshold makes the very next observation cycle
reflect again. When no level leaves that room, the smallest result under the target is used.
A log of named speakers aims at 85% of the target instead (:data:`PARTICIPANT_GOAL_SHARE`):
there the last step drops notes for good, so it drops only what the budget needs; reflecting
to half the target threw away a third of what fitted (measured on LoCoMo dev: line-level
retention +4 to +7 points at the same compression settings).
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from itertools import pairwise

from obsmem.errors import ReflectionError
from obsmem.om.text.format import (
    PRIORITY_DONE,
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    DateGroup,
    ObservationLine,
    is_boundary_line,
    parse_date_header,
    parse_line,
    parse_observations,
    render_observations,
)
from obsmem.om.text.quote import poses_as_structure
from obsmem.om.offline.offload import offload
from obsmem.om.offline.participants import (
    fit_participants,
    is_participant_line,
    merge_speaker_days,
    telegraphic,
)
from obsmem.om.offline.patterns import (
    CLOCK_OR_DAY,
    DURABLE,
    IDENTITY,
    FactKey,
    fact_key,
    is_plan_text,
    names_and_numbers,
    state_object,
    TaskMentions,
)
from obsmem.om.offline.rules import (
    MONTHS,
    estimate_tokens,
    normalise,
    resolve_dates,
    sentence_end,
    shorten,
    split_annotations,
)
from obsmem.om.protocols import AttemptFailed, ReflectionRequest, ReflectionResult

__all__ = [
    "MAX_LEVEL", "OfflineReflector", "consolidate_observations", "drop_superseded", "drop_superseded_by", "fact_core",
    "forget_fact_keys", "stale_signals",
]

MAX_LEVEL = 4
#: Observations of at least this many characters are reflected in a thread (see
#: :class:`OfflineReflector`).
OFFLOAD_CHARS = 12_000
GOAL_SHARE = 0.5  # accept a level once its output is at most this share of the target
#: The same for a conversation between named people: each reflection there drops notes for good
#: (:func:`~obsmem.om.offline.participants.fit_participants`), so it drops only what the budget
#: needs and keeps the rest; reflecting somewhat more often costs no model call offline.
PARTICIPANT_GOAL_SHARE = 0.85
RECENT_SHARE = (0.25, 0.25, 0.25, 0.15, 0.1)  # by level: the newest lines, kept in full detail
MIN_RECENT = 3
SHORT_LIMIT = 100  # level 2: an old 🟡 line
RECENT_LIMIT = 200  # level 4: a recent 🟡 line that is not one of the newest MIN_RECENT
FACT_LIMIT = 140  # level 3: an old 🔴/✅ line longer than this is cut to its fact-bearing clauses
TIGHT_FACT_LIMIT = 100  # level 4: the same, for every old 🔴/✅ line
PAST_LIMIT = 60  # level 4: the same for a plan or appointment that is history by now,
PASSED_DAYS = 2  # ... that is, whose dates lie this many days before the newest observation
MERGE_PART_LIMIT = 50  # a part of a "Topics:" line
PARTS_PER_OLD_DAY = 2  # level 4: topic parts kept for a day older than the newest KEEP_DAYS
PARTS_PER_RECENT_DAY = 4  # level 4: the same for the newest KEEP_DAYS days
KEEP_DAYS = 2
SLACK = 3  # a superseded line may say this many words beyond its value
MERGED = "Topics: "  # a day's old 🟡 lines, merged
FACTS = "User stated: "  # a day's old 🔴 facts, merged at level 4

_RANK = {PRIORITY_HIGH: 3, PRIORITY_DONE: 3, PRIORITY_MEDIUM: 2, None: 2, PRIORITY_LOW: 1}
_FILLER = frozenset(
    "a an the to of in on at for and or but is are was were be been has have had do does did "
    "that this it its their they them user stated said says just also now really very so then "
    "there here with about".split()
)  # fmt: skip
_CHANGING = re.compile(r"\(changing from (?P<old>[^()]+)\)", re.I)
_NO_LONGER = re.compile(r"^User stated they no longer (?P<vp>[^,;()]+)", re.I)
_STATE_LEAD = re.compile(r"^User stated (?:that )?(?:they|their) ", re.I)
_FACT_HEAD = re.compile(r"^User (?:stated:? )?")
_PLAN_PART = re.compile(
    r"^(?:\(with others\) )?(?:plans|wants|needs|hopes|intends|is looking forward|is planning)\b"
)
_ASK_LEAD = re.compile(r"^User (?:said |asked(?::| the assistant to| how to| whether| about)? ?)")
# "User stated …", or a named participant's "Melanie: …" (see om.offline_participants)
_FACT_LEAD = re.compile(
    r"^(?:User (?:\(with others\) )?(?:stated|said)(?: that)?\s+|[A-Z][A-Za-z'.-]+(?: [A-Z][A-Za-z'.-]+)?: )"
)
_CLAUSE_BREAK = re.compile(  # a whitespace run is entered once, at its start: linear time
    r"(?:\s?[,;:]\s+(?:(?:and|but|so|because|since|which|who|where|while|though|as)\s+)?|"
    r"(?<!\s)\s+[—–]\s+|(?<!\s)\s+(?:because|since|so that|although|though|while|whereas)\s+)"
)
_ANAPHOR = re.compile(r"^(?:it|it's|he|he's|she|she's|this|that|there|which|who|so)\b", re.I)
_THEY = re.compile(r"\b(?:they|their|them)\b", re.I)  # read a third-person line as the user said it
_AS_I = {"they": "I", "their": "my", "them": "me"}
_SIGNAL_WORDS = re.compile(
    r"\b(?:no|not|never|only|one|two|three|four|five|six|seven|eight|nine|ten|first|second|third|"
    r"tomorrow|tonight|today|yesterday|morning|afternoon|evening)\b",
    re.I,
)


@dataclass(slots=True)
class _Entry:
    """A top-level line with its sub-bullets, in chronological order."""

    order: int
    day: date | None
    line: ObservationLine
    children: list[ObservationLine] = field(default_factory=list)
    old: bool = False  # older than the recent window that keeps its detail

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
            elif line.text.startswith(FACTS):  # a level-4 merge: one entry per fact again
                for part in line.text[len(FACTS) :].rstrip(".").split("; "):
                    text = ("User " if _PLAN_PART.match(part) else "User stated ") + part
                    out.append(_Entry(len(out), group.day, replace(line, text=sentence_end(text), indent=0)))
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
    """True when a fact line says little beyond the one attribute (safe to supersede)."""
    body, _ = split_annotations(text)
    rest = _content(_STATE_LEAD.sub("", body)) - _content(value)
    return len(rest) <= SLACK


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
                elif value and (key.value or "").lower() != value.lower():
                    _mark_stale(older, value)  # a compound line keeps its other facts
            latest[key.key] = (entry, key.value or key.old or "")
            typed = _TYPED_VALUES.get(key.key)
            if typed is not None and key.value:  # an older phone number or email said in passing
                for older in facts:
                    for found in typed.findall(older.line.text):
                        if found.lower() != key.value.lower() and older.order not in dropped:
                            # the old number or address itself goes; the rest of the line stays
                            gone = older.line.text.replace(found, f"(a former {key.key})")
                            older.line = replace(older.line, text=gone)
        changing = _CHANGING.search(text)
        no_longer = _NO_LONGER.match(text)
        if changing or no_longer:
            for older in facts:
                if older.order in dropped or not older.line.text.startswith("User stated"):
                    continue
                if changing and _was_value(older.line.text, changing["old"]):
                    dropped.add(older.order)
                elif changing and older.order != entry.order:
                    _mark_stale(older, changing["old"])
                elif no_longer:
                    vp = no_longer["vp"].strip().lower()
                    said = _STATE_LEAD.sub("", older.line.text).lower()
                    if said.startswith(vp) and _simple(older.line.text, vp):
                        dropped.add(older.order)
        facts.append(entry)
    return [e for e in entries if e.order not in dropped]


#: Attributes with one current value whose values can be recognised anywhere in a line.
_TYPED_VALUES = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "phone": re.compile(r"\+?\d[\d ()./-]{6,}\d"),
}


def _mark_stale(entry: _Entry, old: str) -> None:
    """Note on a line that says more than one thing that ``old`` in it has since changed: the
    line stays for its other facts, and no longer reads as if ``old`` were current."""
    old = old.strip().rstrip(".")
    text = entry.line.text
    if not old or len(old) > 60 or f"no longer current: {old.lower()}" in text.lower():
        return
    if not re.search(rf"(?<![\w@.-]){re.escape(old)}(?![\w@-])", text, re.I):
        return
    body = text.rstrip(". ")
    entry.line = replace(entry.line, text=f"{body} (no longer current: {old}).")


def forget_fact_keys() -> None:
    """Drop the kept fact keys (:func:`_fact_key`'s cache holds observation lines): after a
    delete or a forget, none of what went stays in this process."""
    _fact_key.cache_clear()


def _was_value(text: str, old: str) -> bool:
    """True when ``text`` is a simple statement whose value is ``old``."""
    old = old.strip().lower()
    key = fact_key(text)
    value = key.value if key else state_object(text)
    return bool(value) and value is not None and value.lower() == old and _simple(text, value)


_FINISHED = re.compile(r"^User finished the (?P<task>[^()]+?)\.?(?:\s*\(|$)")
_OPEN_ASK = re.compile(r"^User (?:asked|said|stated|plans|needs|wants)\b")


def _finish_tasks(entries: list[_Entry]) -> list[_Entry]:
    """A task the user reported finished is no longer open: earlier asks and plans about it
    go, and so do their parts of a "Topics:" line; the ✅ line stays as the record."""
    finished = [(e.order, m["task"]) for e in entries if (m := _FINISHED.match(e.line.text))]
    if not finished:
        return entries
    # each task's names read once, each line checked against the tasks it can name (asking
    # every task of every line, names read afresh each time, was quadratic in a long log)
    mentions = TaskMentions([task for _, task in finished])
    last = max(order for order, _ in finished)
    out: list[_Entry] = []
    for entry in entries:
        text = entry.line.text

        def later(said: str, after: int = entry.order) -> bool:  # about a task finished after it
            return any(finished[k][0] > after for k in mentions.mentioned_in(said))

        if last > entry.order and entry.line.priority != PRIORITY_DONE:
            if text.startswith(MERGED):
                parts = [p for p in _parts(text) if not later(p)]
                if not parts:
                    continue
                entry.line = replace(entry.line, text=sentence_end(MERGED + "; ".join(parts)))
            elif _OPEN_ASK.match(text) and later(text):
                continue
        out.append(entry)
    return out


def _consolidate(entries: list[_Entry]) -> list[_Entry]:
    merged = _finish_tasks(_supersede(_dedupe(entries)))
    for index, entry in enumerate(merged):
        entry.order = index
    return merged


def consolidate_observations(text: str) -> str:
    """Level 0 alone, for observations that just grew: duplicates go, a fact a later line
    replaced goes, asks about a task the user since finished go. Nothing else changes, so it is
    safe after every observation cycle (an engine may call it so that a stale value does not
    wait for the next reflection to disappear). Message-boundary lines are dropped, as in any
    reflection."""
    if not text.strip():
        return text
    return _render(_consolidate(_entries(text)))


def drop_superseded(text: str) -> str:
    """``text`` without the lines a later line made stale, everything else byte for byte.

    The same rules as consolidation (:func:`_supersede`, :func:`_finish_tasks`): an older fact
    whose attribute a later line sets again, an ask or a "Topics:" part about a task the user
    since finished. Headers, boundaries, order and every other line stay as they are, so it is
    safe on the active observations after each cycle: a stale value then disappears at once
    instead of at the next reflection. A date header left with no line goes too.
    """
    raw = text.splitlines()
    entries: list[_Entry] = []
    day: date | None = None
    for index, line in enumerate(raw):
        header = parse_date_header(line)
        if header is not None:
            day = header
            continue
        if is_boundary_line(line) or not line.strip():
            continue
        parsed = parse_line(line)
        if parsed is not None and parsed.indent == 0 and not parsed.text.startswith(FACTS):
            entries.append(_Entry(index, day, parsed))
    original = {e.order: e.line.text for e in entries}  # the rules edit entries in place
    kept = {e.order: e for e in _finish_tasks(_supersede(entries))}
    if len(kept) == len(entries) and all(e.line.text == original[order] for order, e in kept.items()):
        return text
    out: list[str] = []
    dropping = False  # the children of a dropped line go with it
    by_index = {e.order: e for e in entries}
    for index, line in enumerate(raw):
        entry = by_index.get(index)
        if entry is not None:
            dropping = index not in kept
            if not dropping and kept[index].line.text != original[index]:
                line = kept[index].line.render()
        elif dropping and line.startswith((" ", "\t")) and line.strip():
            continue
        else:
            dropping = False
        if not dropping:
            out.append(line)
    return _without_empty_headers(out, "\n" if text.endswith("\n") else "")


@dataclass(slots=True)
class _Signals:
    """What a batch of new lines says that can make an older line stale."""

    keys: dict[str, str] = field(default_factory=dict)  # fact key -> its newest value
    typed: list[tuple[str, re.Pattern[str], str]] = field(default_factory=list)  # key, pattern, value
    changing: list[str] = field(default_factory=list)  # "(changing from X)": X
    no_longer: list[str] = field(default_factory=list)  # "no longer <vp>": vp, lowercased
    finished: list[str] = field(default_factory=list)  # the tasks reported finished
    mentions: TaskMentions | None = None  # of ``finished``, once asked

    def __bool__(self) -> bool:
        return bool(self.keys or self.typed or self.changing or self.no_longer or self.finished)

    def about_finished(self, text: str) -> bool:
        """Whether ``text`` is about a task reported finished (:func:`task_mentioned`): each
        task's names read once, a line checked only against the tasks it can name (every task
        of every older line was quadratic in a long record)."""
        if self.mentions is None:
            self.mentions = TaskMentions(self.finished)
        return bool(self.mentions.mentioned_in(text))


def _is_fact(text: str) -> bool:
    return text.startswith("User") and not text.startswith("User asked") and not is_plan_text(text)


def _signals(new: str) -> _Signals:
    """The stale-making statements among ``new``'s top-level lines (linear in ``new``)."""
    found = _Signals()
    for raw in new.splitlines():
        if "User" not in raw:
            continue
        parsed = parse_line(raw)
        if parsed is None or parsed.indent > 0:
            continue
        text = parsed.text
        if (finished := _FINISHED.match(text)) is not None:
            found.finished.append(finished["task"])
        if not _is_fact(text):
            continue
        key = _fact_key(text)
        if key is not None:
            found.keys[key.key] = key.value or ""
            typed = _TYPED_VALUES.get(key.key)
            if typed is not None and key.value:
                found.typed.append((key.key, typed, key.value))
        if (changing := _CHANGING.search(text)) is not None:
            found.changing.append(changing["old"])
        if (no_longer := _NO_LONGER.match(text)) is not None:
            found.no_longer.append(no_longer["vp"].strip().lower())
    return found


def stale_signals(new: str) -> bool:
    """Whether ``new`` states anything that can make an older line stale (a fact, a change, a
    finished task): when not, :func:`drop_superseded_by` returns the older text unchanged."""
    return bool(_signals(new))


@functools.lru_cache(maxsize=16_384)
def _fact_key(text: str) -> FactKey | None:
    """:func:`fact_key`, remembered: the older lines of a record are asked again at every cycle,
    so each distinct line pays for its patterns once per process."""
    return fact_key(text)


def _revised(line: ObservationLine, signals: _Signals) -> ObservationLine | None:
    """``line`` (an older top-level line) as the newer statements leave it: None when they
    made it stale, else with a superseded value removed or marked. The rules of
    :func:`_supersede` and :func:`_finish_tasks`, asked of one line."""
    text = line.text
    if signals.finished and line.priority != PRIORITY_DONE:
        if text.startswith(MERGED):
            parts = _parts(text)
            kept = [p for p in parts if not signals.about_finished(p)]
            if not kept:
                return None
            if len(kept) != len(parts):
                line = replace(line, text=sentence_end(MERGED + "; ".join(kept)))
        elif _OPEN_ASK.match(text) and signals.about_finished(text):
            return None
    text = line.text
    if not _is_fact(text):
        return line
    entry = _Entry(0, None, line)
    if signals.keys and (key := _fact_key(text)) is not None and key.key in signals.keys:
        value = key.value or key.old or ""
        newer = signals.keys[key.key]
        if _simple(text, value):
            return None
        if value and newer.lower() != value.lower():
            _mark_stale(entry, value)
    for name, typed, value in signals.typed:
        for found in typed.findall(entry.line.text):
            if found.lower() != value.lower():
                entry.line = replace(entry.line, text=entry.line.text.replace(found, f"(a former {name})"))
    if entry.line.text.startswith("User stated"):
        for old in signals.changing:
            if _was_value(entry.line.text, old):
                return None
            _mark_stale(entry, old)
        for vp in signals.no_longer:
            said = _STATE_LEAD.sub("", entry.line.text).lower()
            if said.startswith(vp) and _simple(entry.line.text, vp):
                return None
    return entry.line


def drop_superseded_by(older: str, new: str) -> str:
    """``older`` without the lines that the ``new`` lines make stale, everything else byte for byte.

    The incremental form of :func:`drop_superseded`, for an engine appending ``new`` (one
    cycle's lines) to ``older`` (the active observations): the older lines already went through
    it when they were new, so only what ``new`` states can make one of them stale now. When
    ``new`` states no fact, change or finished task (most cycles) ``older`` itself comes back
    after reading ``new`` alone; otherwise one pass over ``older``, each line asked a
    dictionary and a few string tests (:func:`fact_key` is remembered per line text). Section
    tags, boundaries, headers and order stay; a date header left with no line goes.
    """
    signals = _signals(new)
    if not signals:
        return older
    raw = older.splitlines()
    out: list[str] = []
    changed = False
    dropping = False  # the children of a dropped line go with it
    for line in raw:
        if dropping and line.startswith((" ", "\t")) and line.strip():
            continue
        dropping = False
        if "User" in line or MERGED in line:
            parsed = parse_line(line)
            if parsed is not None and parsed.indent == 0 and not parsed.text.startswith(FACTS):
                revised = _revised(parsed, signals)
                if revised is None:
                    dropping = changed = True
                    continue
                if revised.text != parsed.text:
                    line, changed = revised.render(), True
        out.append(line)
    if not changed:
        return older
    return _without_empty_headers(out, "\n" if older.endswith("\n") else "")


def _without_empty_headers(lines: list[str], end: str) -> str:
    """``lines`` without date headers that no line follows (before the next header, boundary
    or the end). One pass from the end: linear however many headers there are."""
    out: list[str] = []
    following = ""  # the next non-blank line after the one being looked at
    for line in reversed(lines):
        if parse_date_header(line) is not None and (
            not following or parse_date_header(following) is not None or is_boundary_line(following)
        ):
            continue
        out.append(line)
        if line.strip():
            following = line
    out.reverse()
    return "\n".join(out) + end


def _is_medium(entry: _Entry) -> bool:
    return entry.line.priority in (PRIORITY_MEDIUM, None)


def _apply_level(consolidated: list[_Entry], level: int) -> list[_Entry]:
    """The log at one compression level; each level includes every lower level's steps."""
    entries = [_Entry(e.order, e.day, e.line, list(e.children)) for e in consolidated]
    share = RECENT_SHARE[min(level, MAX_LEVEL)]
    recent_from = len(entries) - max(MIN_RECENT, math.ceil(len(entries) * share))
    for entry in entries:
        entry.old = entry.order < recent_from
    days = sorted({e.day for e in entries if e.day is not None})
    sparse = set(days[:-KEEP_DAYS]) if level >= 4 else set()
    if level >= 1:
        entries = [e for e in entries if not (e.line.priority == PRIORITY_LOW and (e.old or level >= 3))]
    if level >= 4:  # an old "it worked" is a detail of the day's topics by now
        for entry in entries:
            if entry.old and entry.line.text.startswith("User confirmed it worked"):
                entry.line = replace(entry.line, priority=PRIORITY_MEDIUM)
    if level >= 2:
        newest = len(consolidated) - MIN_RECENT
        for entry in entries:
            if entry.old:
                entry.children = []
                if is_participant_line(entry.line.text):  # an old conversation fades to notes
                    # and is never cut at a length: each note is weighed on its own at the top
                    # level (fit_participants), where a cut would drop the notes at the end
                    entry.line = replace(entry.line, text=telegraphic(entry.line.text))
                elif _is_medium(entry) and not entry.line.text.startswith(MERGED):
                    entry.line = replace(entry.line, text=sentence_end(shorten(entry.line.text, SHORT_LIMIT)))
            elif level >= 4 and entry.order < newest and _is_medium(entry) and not is_participant_line(entry.line.text):
                # recent, not the newest
                entry.line = replace(entry.line, text=sentence_end(shorten(entry.line.text, RECENT_LIMIT)))
    if level >= 3:
        limit = FACT_LIMIT if level == 3 else TIGHT_FACT_LIMIT
        last = max(days, default=date.min)
        entries = merge_speaker_days(entries)  # people talking: one line per speaker and old day
        for entry in entries:  # level 4 also strips colour from short lines
            if is_participant_line(entry.line.text):
                continue
            if entry.old and not _is_medium(entry) and (level >= 4 or len(entry.line.text) > limit):
                cut = PAST_LIMIT if level >= 4 and _passed(entry.line.text, last) else limit
                core = fact_core(entry.line.text, cut, 1 if level < 4 else 2, entry.day)
                # level 4: an old fact keeps its day, not its minute (one line per fact, cheaper)
                entry.line = replace(entry.line, text=core, time=None if level >= 4 else entry.line.time)
        if level >= 4:  # the newest version of each keyed fact, now that lines are down to their facts
            entries = _consolidate(entries)
        entries = _merge_days(entries, sparse, level >= 4)
    # Facts stay one per line at every level (issue 15): a run-on "User stated: a; b; …" line
    # hides which fact a date or a change belongs to. _merge_facts remains only to read logs
    # written by earlier versions (see _entries).
    return entries


def _passed(text: str, last: date) -> bool:
    """A plan or appointment whose dates all lie days before ``last`` and that states no durable
    fact ("the movers unload tomorrow at 9 (meaning Mar 8, 2025)"): by now it is history."""
    _, notes = split_annotations(text.rstrip("."))
    days = [_note_day(n) for n in re.findall(r"\((?:meaning|estimated) ([^()]*)\)", notes)]
    if not days or any(d is None or d > last - timedelta(days=PASSED_DAYS) for d in days):
        return False
    return not DURABLE.search(_THEY.sub(lambda m: _AS_I[m.group(0).lower()], text))


def _note_day(note: str) -> date | None:
    """The last day a "(meaning …)" note can mean: "week of Mar 10, 2025" ends on Mar 16."""
    match = re.search(r"([A-Z][a-z]{2}) (?:(\d{1,2}), )?(\d{4})", note)
    if not match or match[1] not in MONTHS:
        return None
    month, year = MONTHS.index(match[1]) + 1, int(match[3])
    if match[2] is None:  # a whole month
        return date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)
    try:
        day = date(year, month, int(match[2]))
    except ValueError:
        return None
    return day + timedelta(days=6 if "week of" in note else 1 if "weekend of" in note else 0)


def _merge_days(entries: list[_Entry], sparse: set[date], capped: bool) -> list[_Entry]:
    """Fold each day's old 🟡 lines into one "Topics: …" line at the first one's place and time.

    Each line becomes a part (its question or action, cut short, plus the names and numbers of
    its answer); parts of an earlier merge are reused as they are, so merging again is stable.
    When ``capped`` (level 4) a day keeps only its parts with the most names and numbers:
    :data:`PARTS_PER_OLD_DAY` on ``sparse`` days, :data:`PARTS_PER_RECENT_DAY` on the others.
    """
    firsts: dict[date | None, _Entry] = {}
    parts: dict[date | None, list[str]] = {}
    out: list[_Entry] = []
    for entry in entries:
        if not (entry.old and _is_medium(entry)) or is_participant_line(entry.line.text):
            out.append(entry)
            continue
        parts.setdefault(entry.day, []).extend(_parts(entry.line.text))
        if entry.day not in firsts:
            firsts[entry.day] = entry
            out.append(entry)
    for day, first in firsts.items():
        kept = list(dict.fromkeys(parts[day]))
        cap = PARTS_PER_OLD_DAY if day in sparse else PARTS_PER_RECENT_DAY
        if capped and len(kept) > cap:
            ranked = sorted(range(len(kept)), key=lambda i: (-_part_weight(kept[i]), -i))
            kept = [kept[i] for i in sorted(ranked[:cap])]
        if len(kept) > 1 or first.line.text.startswith(MERGED) or capped:
            text = sentence_end(MERGED + "; ".join(kept))
            first.line = replace(first.line, text=text, priority=PRIORITY_MEDIUM)
            first.children = []
    return out


def _part_weight(part: str) -> int:
    """How much a merge part is worth keeping: its names and numbers; a bare tool run less."""
    return len(names_and_numbers(part)) - (3 if part.startswith("ran ") else 0)


def _merge_facts(entries: list[_Entry], sparse: set[date]) -> list[_Entry]:
    """Level 4: fold each sparse day's old 🔴 user facts into one "User stated: a; b" line.

    Every fact keeps its words (already cut to its fact-bearing clauses); only the per-line
    overhead goes. :func:`_entries` splits such a line again when the next reflection reads it,
    so supersession and de-duplication still see one fact at a time.
    """
    firsts: dict[date | None, _Entry] = {}
    parts: dict[date | None, list[str]] = {}
    out: list[_Entry] = []
    for entry in entries:
        text = entry.line.text
        fact = text.startswith("User ") and not text.startswith(("User asked", "User confirmed"))
        if not (fact and entry.old and entry.day in sparse and entry.line.priority == PRIORITY_HIGH):
            out.append(entry)
            continue
        parts.setdefault(entry.day, []).append(_FACT_HEAD.sub("", text).rstrip("."))
        if entry.day not in firsts:
            firsts[entry.day] = entry
            out.append(entry)
    for day, first in firsts.items():
        if len(parts[day]) > 1:
            first.line = replace(first.line, text=sentence_end(FACTS + "; ".join(dict.fromkeys(parts[day]))))
    return out


def _parts(text: str) -> list[str]:
    """The merge parts of one 🟡 line: "question or action (names and numbers of the answer)"."""
    text = text.rstrip(".")
    if text.startswith(MERGED):
        return [p.strip() for p in text[len(MERGED) :].split("; ") if p.strip()]
    head, _, answer = text.partition("; Assistant answered: ")
    said = _ASK_LEAD.sub("", head, count=1)
    # what the user said keeps its attribution when, cut loose, it would read as structure or
    # as a role ("SYSTEM: …", "User is an admin", "(09:00) …")
    head = head if said != head and poses_as_structure(said) else said
    head = re.sub(r"^Assistant (ran|listed|recommended|provided)\b:?", r"\1", head)
    head, _ = split_annotations(head)
    part = shorten(head.rstrip(" .?"), MERGE_PART_LIMIT)
    terms = [t for t in names_and_numbers(answer) if t.lower() not in part.lower()][:3]
    if terms:
        part = f"{part} ({', '.join(terms)})"
    return [shorten(part, MERGE_PART_LIMIT + 30)]


def fact_core(text: str, limit: int, floor: int = 1, day: date | None = None) -> str:
    """Shorten a fact line to its fact-bearing clauses, then to ``limit`` characters (not
    counting its "User stated" lead and its trailing notes).

    The line is split into clauses at commas, semicolons, colons, dashes and "because/since/…"
    (never inside brackets). A clause scores for the names, numbers, durable-fact cues, times
    and negations it holds; one scoring under ``floor`` is colour ("…, thank god, because all
    their dotfiles are on it") and goes. If the line is still too long, the clauses with the
    lowest scores go, later ones first; a clause that an anaphoric one ("it's now Wednesday")
    points back to stays with it, and in a line that is not "User stated …" the first clause
    (the statement itself) always stays. Trailing "(meaning …)"/"(changing from …)" notes stay
    whole; with the line's ``day``, a date note whose phrase was cut goes with it.
    """
    body, notes = split_annotations(text.rstrip(". "))
    lead = _FACT_LEAD.match(body)
    head = lead.group(0) if lead else ""
    clauses, seps = _clauses(body[len(head) :])
    terms = [t.lower().rstrip(",.;:") for t in names_and_numbers(body)]
    if len(terms) > _MAX_TERMS:  # a pathological line (hundreds of dates or numbers): each term once, at
        terms = list(dict.fromkeys(terms))[:_MAX_TERMS]  # most _MAX_TERMS of them, so scoring stays linear
    scores = [_score(c, terms) for c in clauses]
    # "…the review, it's now Wednesday": an anaphoric clause keeps the clause it points back to
    needs = {i - 1 for i in range(1, len(clauses)) if _ANAPHOR.match(clauses[i]) and scores[i] > 0}
    if not head:  # "Assistant booked …", "User plans to …": the first clause is the statement
        scores[0] += 100
    keep = [i for i, score in enumerate(scores) if score >= floor or i in needs] or [0]
    keep = _fit(keep, clauses, seps, scores, needs, limit)
    joined = "".join((seps[i] if n else "") + clauses[i] for n, i in enumerate(keep))
    core = shorten(joined.strip(" ,;:"), limit)
    if day is not None and notes and len(keep) < len(clauses):
        notes = _notes_still_meant(notes, core, day)
    return sentence_end(f"{head}{core} {notes}".strip())


#: The most names and numbers a line's clauses are scored against (each clause is checked for
#: each term: without a bound a line of k dates costs k² checks).
_MAX_TERMS = 64


def _fit(keep: list[int], clauses: list[str], seps: list[str], scores: list[int], needs: set[int],
         limit: int) -> list[int]:  # fmt: skip
    """Drop kept clauses, fewest facts first (on a tie, the later), until the joined clauses fit
    in ``limit`` or one is left; a clause an anaphoric kept clause needs waits until that one
    goes. A heap keeps this O(n log n) however many clauses a line has."""
    kept = set(keep)
    at = 0  # keep[at] is the first kept clause; it only moves forward
    first = keep[at]
    total = sum(len(clauses[i]) + (len(seps[i]) if i != first else 0) for i in keep)
    heap = [(scores[i], -i) for i in keep]
    heapq.heapify(heap)
    waiting: dict[int, tuple[int, int]] = {}
    while len(kept) > 1 and total > limit and heap:
        item = heapq.heappop(heap)
        i = -item[1]
        if i in needs and i + 1 in kept:
            waiting[i] = item
            continue
        kept.discard(i)
        total -= len(clauses[i]) + (len(seps[i]) if i != first else 0)
        if i == first:
            while keep[at] not in kept:
                at += 1
            first = keep[at]
            total -= len(seps[first])
        if i - 1 in waiting:
            heapq.heappush(heap, waiting.pop(i - 1))
    return sorted(kept)


def _notes_still_meant(notes: str, kept: str, day: date) -> str:
    """The date notes whose phrase survived in ``kept`` (resolved again against the line's day);
    "(changing from …)" notes always stay."""
    meant = {f"({ref.note})" for ref in resolve_dates(kept, day)}
    found = re.findall(r"\([^()]*\)", notes)
    return " ".join(n for n in found if n in meant or not n.startswith(("(meaning", "(estimated")))


def _clauses(body: str) -> tuple[list[str], list[str]]:
    """Clauses and the separator before each ("" for the first); never split inside brackets."""
    clauses: list[str] = []
    seps = [""]
    start = depth = scanned = 0
    for match in _CLAUSE_BREAK.finditer(body):
        between = body[scanned : match.start()]
        depth += between.count("(") + between.count("[") - between.count(")") - between.count("]")
        scanned = match.start()
        if depth > 0:
            continue
        clauses.append(body[start : match.start()])
        seps.append(match.group(0))
        start = match.end()
    clauses.append(body[start:])
    return clauses, seps


def _score(clause: str, terms: list[str]) -> int:
    """How many facts a clause carries: 3 per amount or durable-fact cue, 2 per name, 1 per other
    cue (a time or weekday, a negation or number word, an appointment word)."""
    lowered = clause.lower()
    score = sum((3 if t[:1].isdigit() or t[:1] in "$€£+" else 2) for t in terms if t in lowered)
    first_person = _THEY.sub(lambda m: _AS_I[m.group(0).lower()], clause)
    score += 3 * len(DURABLE.findall(first_person)) + bool(CLOCK_OR_DAY.search(clause))
    score += 6 * bool(IDENTITY.search(first_person.replace("I are ", "I am ")))  # who the user is
    return score + bool(_SIGNAL_WORDS.search(clause))


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

    It climbs the compression ladder from ``request.start_level`` and accepts the first level
    whose output leaves room to grow: at most :data:`GOAL_SHARE` of ``request.target_tokens``
    (counted with ``count_tokens``). A result that lands just under the target would make the
    very next observation cycle reflect again, so when no level reaches that goal the smallest
    result under the target is taken, and when none is under the target the level-4 result is
    returned as a best effort. ``request.on_attempt_failed`` is awaited for each level climbed
    past.

    Observations of at least ``offload_chars`` characters are reflected in a thread, so the
    application's other coroutines keep running; smaller ones inline (no thread hop, and a
    single-threaded test run stays deterministic). ``offload_chars=None`` never uses a thread.
    """

    name = "offline"

    def __init__(
        self, *, count_tokens: Callable[[str], int] | None = None, offload_chars: int | None = OFFLOAD_CHARS
    ) -> None:
        self.count_tokens: Callable[[str], int] = count_tokens or estimate_tokens
        self.offload_chars = offload_chars

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        # ``on_attempt_failed`` is the caller's coroutine: it runs on the loop, once per level
        # climbed past, after the climb.
        if self.offload_chars is not None and (chars := len(request.observations)) >= self.offload_chars:
            ladder = await offload(self._climb, request, role="reflect", chars=chars, count_tokens=self.count_tokens)
        else:
            ladder = self._climb(request)
        for failed, _, size in ladder.tried[: ladder.level - ladder.first]:
            if request.on_attempt_failed is not None:
                await request.on_attempt_failed(
                    AttemptFailed(
                        level=failed,
                        next_level=failed + 1,
                        input_tokens=ladder.input_tokens,
                        output_tokens=size,
                        target_tokens=request.target_tokens,
                        reason=(
                            f"level {failed} reflection is {size} tokens, not under the goal of {ladder.goal} "
                            f"({ladder.share:.0%} of the target of {request.target_tokens}); retrying at level "
                            f"{failed + 1}"
                        ),
                    )
                )
        return ReflectionResult(
            observations=ladder.text,
            suggested_response=None,
            extracted=dict(request.extracted),
            attempts=ladder.level - ladder.first + 1,
            level=ladder.level,
            output_tokens=ladder.tokens,
        )

    def _climb(self, request: ReflectionRequest) -> _Ladder:
        """Climb from ``request.start_level`` to the first level that reaches the goal."""
        consolidated = _consolidate(_entries(request.observations))
        if not consolidated:
            raise ReflectionError(
                "The observations to reflect on contain no observation lines; "
                "the current observations were kept unchanged."
            )
        input_tokens = self.count_tokens(request.observations)
        target = request.target_tokens
        between_people = any(is_participant_line(entry.line.text) for entry in consolidated)
        share = PARTICIPANT_GOAL_SHARE if between_people else GOAL_SHARE
        goal = math.floor(target * share)
        first = min(max(request.start_level, 0), MAX_LEVEL)
        tried: list[tuple[int, str, int]] = []
        for level in range(first, MAX_LEVEL + 1):
            entries = _apply_level(consolidated, level) or _fallback(consolidated)
            text = _render(entries)
            size = self.count_tokens(text)
            if level == MAX_LEVEL and size > goal:  # a long talk between people: keep its best notes
                text = _render(fit_participants(entries, size - goal, self.count_tokens))
                size = self.count_tokens(text)
            tried.append((level, text, size))
            if tried[-1][2] <= goal and tried[-1][2] < target:
                break
        under = [t for t in tried if t[2] < target]
        if tried[-1][2] <= goal or not under:
            chosen = tried[-1]
        else:  # under the target but not under the goal: the smallest, at the lowest level
            chosen = min(under, key=lambda t: (t[2], t[0]))
        level, text, tokens = chosen
        return _Ladder(tried, first, goal, share, input_tokens, level, text, tokens)


@dataclass(frozen=True, slots=True)
class _Ladder:
    """How a climb went: every level tried ``(level, text, tokens)``, and the one chosen."""

    tried: list[tuple[int, str, int]]
    first: int
    goal: int
    share: float  # the goal's share of the target
    input_tokens: int
    level: int
    text: str
    tokens: int

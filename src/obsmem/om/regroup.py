"""Reflection keeps provenance: reflected text is mapped back to the groups it came from.

A reflector (the LLM one, the offline one, or a user's) condenses observation text; it knows
nothing of groups. :class:`GroupedReflector` wraps any reflector: it strips the group tags
before the call, then maps each block of the output (a ``Date:`` block, or the whole output
when it has none) back to the source groups whose lines it contains — exactly, or by word
overlap when the reflector rephrased — and wraps the block as a ``kind="reflection"`` group
whose span runs from the earliest source's first message to the latest source's last one.

No source is ever orphaned: a source none of the output mentions joins the block holding the
source just before it (or the first block), so every observed message stays reachable through
some group. When nothing maps at all, the whole output becomes one group spanning every source.
In resource scope the mapping runs per ``<thread id>`` section, so a group never spans threads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from obsmem.om.text.format import is_boundary_line, parse_date_header
from obsmem.om.text.groups import (
    ObservationGroup,
    group_id_for,
    has_groups,
    parse_groups,
    strip_groups,
    wrap_group,
)
from obsmem.om.protocols import ReflectionRequest, ReflectionResult, Reflector
from obsmem.om.sections import join_sections, split_sections

__all__ = ["GroupedReflector", "regroup"]

_BULLET = re.compile(r"^\s*(?:[*\-]\s+)?(?:🔴|🟡|🟢|✅)?\s*(?:\(\d{1,2}:\d{2}\)\s*)?")
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_MIN_OVERLAP = 0.5  # share of a line's words another line must hold to count as its rephrasing
# Posting entries (source lines holding a word) one reflected line may read: the fixed cap that
# keeps the word-overlap match linear in the output (see :meth:`_LineMap.sources_of`). At 1024 the
# answers equalled a full scan's for 3,000 edited lines against ~1,500 lines of prose and against
# 2,000 and 4,000 lines of templated observations (2 of 3 words shared with hundreds of lines).
_SCAN_BUDGET = 1024


def _normalise(line: str) -> str:
    return " ".join(_BULLET.sub("", line).casefold().split()).rstrip(".;,")


def _words(line: str) -> frozenset[str]:
    return frozenset(_WORD.findall(line.casefold()))


class _LineMap:
    """Which source groups a line of reflected text came from."""

    def __init__(self, sources: Sequence[ObservationGroup]) -> None:
        self.exact: dict[str, set[int]] = {}
        self.lines: list[tuple[frozenset[str], int]] = []
        self.by_word: dict[str, list[int]] = {}
        for index, group in enumerate(sources):
            for raw in group.body.splitlines():
                if not raw.strip() or parse_date_header(raw) is not None or is_boundary_line(raw):
                    continue
                self.exact.setdefault(_normalise(raw), set()).add(index)
                words = _words(raw)
                if words:
                    position = len(self.lines)
                    self.lines.append((words, index))
                    for word in words:
                        self.by_word.setdefault(word, []).append(position)

    def sources_of(self, line: str) -> set[int]:
        """The sources of the line held verbatim, else of the source lines sharing the largest
        share of its words (more than ``_MIN_OVERLAP`` of the larger word set; ties all count).

        The match reads the line's words rarest first and stops as soon as no unread source
        line can reach the best share found: a source line holding none of the ``k`` words read
        so far shares at most ``len(words) - k`` of them, so once that bound is below the best
        score (or not above ``_MIN_OVERLAP``), every line that can still match has been read and
        scored exactly — the answer is the one a full scan gives. The rarest words (a name, a
        number, a place) single out a close rephrasing at once; a line that matches nothing
        stops after its rarer half. So a common word ("user", "the") whose posting list holds
        every source line is only read when the line's rarer words left the answer open.

        ``_SCAN_BUDGET`` bounds the posting entries read per line, so no input makes the match
        quadratic. It changes nothing unless the words needed for that proof are together held
        by more than ``_SCAN_BUDGET`` source lines — a line whose every informative word is a
        stop word of the sources, with no provenance of its own. Then the line keeps the best
        match among the source lines sharing its rarer words (or none), and its block rides
        with its neighbour like any unmatched text; every source still joins some group.
        """
        found = self.exact.get(_normalise(line))
        if found:
            return found
        words = _words(line)
        if not words:
            return set()
        width = len(words)
        rarest_first = sorted(words, key=lambda word: (len(self.by_word.get(word, ())), word))
        seen: set[int] = set()
        best, best_score = set[int](), _MIN_OVERLAP
        budget = _SCAN_BUDGET
        for read, word in enumerate(rarest_first):
            # The best score a line not yet seen can have (float division rounds monotonically,
            # so the comparisons below hold for the computed scores too).
            unread_bound = (width - read) / width
            if unread_bound < best_score or (unread_bound == best_score and not best):
                break  # no unread line can match, nor tie the best
            posting = self.by_word.get(word, ())
            if len(posting) > budget:
                break  # only stop words are left to read (see the docstring)
            budget -= len(posting)
            for position in posting:
                if position in seen:
                    continue
                seen.add(position)
                source_words, index = self.lines[position]
                score = len(words & source_words) / max(width, len(source_words))
                if score > best_score:
                    best, best_score = {index}, score
                elif score == best_score and best:
                    best.add(index)
        return best


def _blocks(text: str) -> list[str]:
    """The text cut before every ``Date:`` header (text before the first header is a block)."""
    blocks: list[list[str]] = [[]]
    for line in text.strip().splitlines():
        if parse_date_header(line) is not None and any(s.strip() for s in blocks[-1]):
            blocks.append([])
        blocks[-1].append(line)
    return ["\n".join(block).strip() for block in blocks if any(s.strip() for s in block)]


def regroup(text: str, sources: Sequence[ObservationGroup]) -> str:
    """Reflected ``text`` (no group tags) wrapped into reflection groups over ``sources``."""
    text = strip_groups(text).strip()
    if not sources or not text:
        return text
    line_map = _LineMap(sources)
    blocks = _blocks(text)
    mapped = [set[int]().union(*(line_map.sources_of(line) for line in b.splitlines())) for b in blocks]
    if not any(mapped):
        return _wrap(text, sources, range(len(sources)))
    # Blocks nothing maps to ride with the block before them (or the first mapped one).
    merged_text: list[str] = []
    merged_sources: list[set[int]] = []
    pending: list[str] = []
    for block, found in zip(blocks, mapped, strict=True):
        if not found:
            if merged_text:
                merged_text[-1] = f"{merged_text[-1]}\n\n{block}"
            else:
                pending.append(block)
            continue
        merged_text.append("\n\n".join([*pending, block]))
        merged_sources.append(set(found))
        pending = []
    # Every source belongs somewhere: an unmentioned one joins the block of its predecessor.
    # In index order every earlier source already has a block, so the nearest one's block is
    # the last block seen: one pass, not a search back from each unmentioned source.
    owner = {index: position for position, found in enumerate(merged_sources) for index in found}
    previous = 0  # the first block, for unmentioned sources before any mentioned one
    for index in range(len(sources)):
        if index in owner:
            previous = owner[index]
            continue
        merged_sources[previous].add(index)
    return "\n\n".join(
        _wrap(block, sources, sorted(found)) for block, found in zip(merged_text, merged_sources, strict=True)
    )


def _wrap(text: str, sources: Sequence[ObservationGroup], indexes: Sequence[int]) -> str:
    chosen = [sources[i] for i in indexes]
    # One thread per group: in thread scope every source shares it; in resource scope the
    # mapping runs per section. Should sources of two threads meet anyway, the span is the
    # first thread's, and the others are left to the groups that still name them.
    thread_id = chosen[0].thread_id
    same_thread = [g for g in chosen if g.thread_id == thread_id]
    first = min(same_thread, key=lambda g: g.first_seq)
    last = max(same_thread, key=lambda g: g.last_seq)
    group = ObservationGroup(
        id=group_id_for("reflection", thread_id, *sorted(g.id for g in chosen), _normalise(text)[:200]),
        thread_id=thread_id,
        first_seq=first.first_seq,
        last_seq=last.last_seq,
        first_message_id=first.first_message_id,
        last_message_id=last.last_message_id,
        body=text,
        kind="reflection",
    )
    return wrap_group(group)


def _regroup_sections(text: str, sources: Sequence[ObservationGroup]) -> str:
    """Regroup each ``<thread id>`` section against that thread's sources only."""
    pieces = split_sections(text)
    if not any(tid is not None for tid, _ in pieces):
        return regroup(text, sources)
    regrouped: list[tuple[str | None, str]] = []
    for tid, body in pieces:
        if tid is None and is_boundary_line(body):
            regrouped.append((tid, body))
            continue
        mine = [g for g in sources if g.thread_id == tid] if tid is not None else []
        regrouped.append((tid, regroup(body, mine) if mine else body))
    return join_sections(regrouped)


class GroupedReflector:
    """A reflector decorator for retrieval mode: the inner reflector sees plain observations,
    and its output comes back grouped with the provenance of the groups it condensed."""

    def __init__(self, inner: Reflector, count_tokens: Callable[[str], int]) -> None:
        self.inner = inner
        self.name = inner.name
        self.count_tokens = count_tokens

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        if not has_groups(request.observations):
            return await self.inner.reflect(request)
        sources = parse_groups(request.observations)
        result = await self.inner.reflect(replace(request, observations=strip_groups(request.observations)))
        if not result.observations.strip():
            return result
        text = _regroup_sections(result.observations, sources)
        return replace(result, observations=text, output_tokens=self.count_tokens(text))

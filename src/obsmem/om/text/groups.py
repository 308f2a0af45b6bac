"""Observation groups: one observation cycle's text, tagged with the messages it was made from.

In retrieval mode every cycle's output (a synchronous observation or a buffered chunk) is
stored as a group, so the actor can go from a compressed observation back to the exact
messages behind it (``recall``). The provenance travels *inside the observation text*::

    <observation-group id="3f9a1c2b7d4e" thread="t1" range="12:40" first="msg_a" last="msg_b">
    Date: Jun 15, 2025
    * 🔴 (14:30) User stated they moved to Berlin.
    </observation-group>

Keeping it in the text, rather than beside it, is what makes every existing transition keep it
for free: truncation, activation, resource-scope sections, thread deletion and generation
history all move text, so the tags move with the lines they describe. ``range`` is the
store-assigned ``seq`` span (first:last, inclusive) of the thread's messages the cycle observed,
and ``first``/``last`` name the first and last of them by id. Reflected groups carry
``kind="reflection"`` and the combined span of their sources (see ``om/regroup.py``).

The actor never sees the tags: :func:`render_for_context` turns each opening tag into a short
heading with the group id (so it can cite the group in ``recall``) and drops the closing tag.
Pure functions only; linear in the text length.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from obsmem.types import Message

__all__ = [
    "GroupKind",
    "ObservationGroup",
    "find_group",
    "group_id_for",
    "group_safe_line_count",
    "has_groups",
    "is_group_tag",
    "lift_above_headings",
    "observation_group",
    "parse_groups",
    "render_for_context",
    "strip_groups",
    "wrap_group",
]

GroupKind = Literal["observation", "reflection"]

_OPEN = re.compile(r"^\s*<observation-group\s+(?P<attrs>[^<>]*)>\s*$")
_CLOSE = re.compile(r"^\s*</observation-group\s*>\s*$")
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_ID_LENGTH = 12
_EMPTY_SECTION = re.compile(
    r'^[ \t]*<thread id="[^"\n]*">[ \t]*\n(?:[ \t]*\n)*[ \t]*</thread>[ \t]*(?:\n|$)', re.MULTILINE
)


@dataclass(frozen=True, slots=True)
class ObservationGroup:
    """One group: its id, the thread and ``seq`` span it covers, and its observation text.

    ``first_seq..last_seq`` is inclusive; the messages it covers are the thread's
    conversation messages (not system or marker-only ones) whose ``seq`` lies in that span.
    """

    id: str
    thread_id: str
    first_seq: int
    last_seq: int
    first_message_id: str
    last_message_id: str
    body: str
    kind: GroupKind = "observation"

    @property
    def range(self) -> str:
        return f"{self.first_seq}:{self.last_seq}"

    def covers(self, seq: int) -> bool:
        return self.first_seq <= seq <= self.last_seq


def group_id_for(*parts: object) -> str:
    """A short, stable id from what identifies a group (thread and span, or its sources).

    Stable, so a retried commit or a re-index produces the same id and the same vector keys.
    """
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return digest[:_ID_LENGTH]


def is_group_tag(line: str) -> bool:
    return bool(_OPEN.match(line) or _CLOSE.match(line))


def _clean_body(text: str) -> str:
    """The body without anything that looks like a group tag (a model may echo them)."""
    return "\n".join(line for line in text.strip().splitlines() if not is_group_tag(line)).strip()


def wrap_group(group: ObservationGroup) -> str:
    """The stored form of ``group``.

    A cycle whose observer found nothing worth noting still gets its (empty) group, so every
    observed message stays covered by exactly one group; the actor never sees empty groups.
    """
    body = _clean_body(group.body)
    attrs = {
        "id": group.id,
        "thread": group.thread_id,
        "range": group.range,
        "first": group.first_message_id,
        "last": group.last_message_id,
    }
    if group.kind != "observation":
        attrs["kind"] = group.kind
    rendered = " ".join(f'{key}="{html.escape(value, quote=True)}"' for key, value in attrs.items())
    inner = f"{body}\n" if body else ""
    return f"<observation-group {rendered}>\n{inner}</observation-group>"


def observation_group(thread_id: str, messages: Sequence[Message], observations: str) -> ObservationGroup:
    """The group for one cycle that observed ``messages`` (stored, so each has a ``seq``)."""
    first, last = messages[0], messages[-1]
    first_seq, last_seq = first.seq or 0, last.seq or 0
    return ObservationGroup(
        id=group_id_for("observation", thread_id, first_seq, last_seq),
        thread_id=thread_id,
        first_seq=first_seq,
        last_seq=last_seq,
        first_message_id=first.id,
        last_message_id=last.id,
        body=observations,
    )


def _parse_open(line: str) -> ObservationGroup | None:
    match = _OPEN.match(line)
    if match is None:
        return None
    attrs = {key: html.unescape(value) for key, value in _ATTR.findall(match["attrs"])}
    span = attrs.get("range", "").split(":")
    if "id" not in attrs or "thread" not in attrs or len(span) != 2 or not all(s.isdigit() for s in span):
        return None
    first_id, last_id = attrs.get("first", ""), attrs.get("last", "")
    kind: GroupKind = "reflection" if attrs.get("kind") == "reflection" else "observation"
    return ObservationGroup(
        id=attrs["id"],
        thread_id=attrs["thread"],
        first_seq=int(span[0]),
        last_seq=int(span[1]),
        first_message_id=first_id,
        last_message_id=last_id,
        body="",
        kind=kind,
    )


def parse_groups(text: str) -> list[ObservationGroup]:
    """Every well-formed group in ``text``, in order, with its body.

    A malformed opening tag is not a group (its lines stay plain text); an opening tag with
    no closing one ends where the next group opens or the text ends, so a cut never loses
    the provenance of the lines that survived.
    """
    groups: list[ObservationGroup] = []
    current: ObservationGroup | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            groups.append(_with_body(current, "\n".join(body).strip()))
        body.clear()

    for line in text.splitlines():
        opened = _parse_open(line)
        if opened is not None:
            close()
            current = opened
            continue
        if _CLOSE.match(line):
            close()
            current = None
            continue
        if current is not None:
            body.append(line)
    close()
    return groups


def _with_body(group: ObservationGroup, body: str) -> ObservationGroup:
    return ObservationGroup(
        id=group.id,
        thread_id=group.thread_id,
        first_seq=group.first_seq,
        last_seq=group.last_seq,
        first_message_id=group.first_message_id,
        last_message_id=group.last_message_id,
        body=body,
        kind=group.kind,
    )


def has_groups(text: str) -> bool:
    return "<observation-group " in text


def find_group(texts: Iterable[str], group_id: str) -> ObservationGroup | None:
    """The first group with ``group_id`` among ``texts`` (checked cheaply before parsing)."""
    needle = f'id="{group_id}"'
    for text in texts:
        if needle not in text:
            continue
        for group in parse_groups(text):
            if group.id == group_id:
                return group
    return None


def strip_groups(text: str) -> str:
    """``text`` without group tags, keeping what they wrap (what observers and reflectors see)."""
    if not has_groups(text):
        return text
    return "\n".join(line for line in text.splitlines() if not is_group_tag(line))


def render_for_context(text: str) -> str:
    """The actor's view: each opening tag becomes ``## Group `<id>` `` and closing tags go.

    Empty groups (a cycle that found nothing to note) are left out entirely, and so is a
    resource-scope section left with nothing in it. A pure function of the stored text, so the
    context prefix stays byte-stable.
    """
    if not has_groups(text):
        return text
    lines = text.splitlines()
    out: list[str] = []
    for index, line in enumerate(lines):
        opened = _parse_open(line)
        if opened is not None:
            after = index + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after >= len(lines) or not _CLOSE.match(lines[after]):
                out.append(f"## Group `{opened.id}`")
        elif not is_group_tag(line):
            out.append(line)
    return _EMPTY_SECTION.sub("", "\n".join(out)).strip("\n")


def lift_above_headings(text: str, is_lifted: Callable[[str], bool]) -> str:
    """Move lines that ``is_lifted`` picks (date-gap lines) from just below a group heading to
    just above it, so a heading stays next to the ``Date:`` line it introduces."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if not is_lifted(line):
            continue
        above = index - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0 and lines[above].startswith("## Group `"):
            lines[above], lines[index] = lines[index], lines[above]
    return "\n".join(lines)


def group_safe_line_count(lines: Sequence[str], count: int) -> int:
    """``count`` moved so that ``lines[:count]`` does not end inside a group.

    Used when a background reflection takes the leading lines of the observations: cutting
    a group in two would separate lines from their provenance. The cut moves back to before
    the open group; if that leaves nothing, it moves forward to the group's end.
    """
    count = max(0, min(count, len(lines)))
    open_at: int | None = None
    for index in range(count):
        if _parse_open(lines[index]) is not None:
            open_at = index
        elif _CLOSE.match(lines[index]):
            open_at = None
    if open_at is None:
        return count
    if open_at > 0:
        return open_at
    for index in range(count, len(lines)):
        if _CLOSE.match(lines[index]) or _parse_open(lines[index]) is not None:
            return index + 1 if _CLOSE.match(lines[index]) else index
    return len(lines)

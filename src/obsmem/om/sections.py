"""Resource scope: one observation record per user, one ``<thread id>`` section per conversation.

Sections are what make resource scope safe. Every line an observer writes for a thread goes
inside that thread's section, and every reading of the record chooses which sections to show:
by default a thread sees only its own (``MemoryConfig.share_threads_in_resource=False``), so one
conversation never leaks into another unless the application says they may. Reflection runs
per section for the same reason: a reflector that merged sections could move one thread's facts
into text another thread sees. Deleting a thread removes its sections.

No content can forge a section boundary. A thread id is percent-encoded in the tag wherever it
holds ``%``, ``"``, ``<``, ``>``, ``&``, a control character or anything :meth:`str.splitlines`
breaks on (ids that need none of that render byte-identical, so stored records parse as they
did), and every line of a section's body that looks like section syntax (``<thread …>`` or
``</thread>``, any case and spacing) is dropped before the body is wrapped, so neither an
observer's nor a reflector's output can close a section or open another thread's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from obsmem.config import MemoryConfig
from obsmem.models.base import Usage
from obsmem.om.text.format import is_boundary_line
from obsmem.om.protocols import ReflectionRequest, ReflectionResult, Reflector
from obsmem.storage.contract import ObservationRecord

__all__ = [
    "SectionedReflector",
    "observations_shown",
    "remove_thread",
    "section_safe_line_count",
    "split_sections",
    "strip_section_syntax",
    "visible_sections",
    "wrap_section",
]

_OPEN = re.compile(r'^\s*<thread id="([^"]+)">\s*$')
# Records written before ids were escaped: a raw ``"`` inside the id (escaped ids never hold one).
_OPEN_LEGACY = re.compile(r'^\s*<thread id="(.+)">\s*$')
_CLOSE = re.compile(r"^\s*</thread>\s*$")
# Anything a parser (this one, or a lenient one) could take for a section tag: a line starting
# with ``<thread`` or ``</thread`` however spaced and cased, not ``<threads>`` or ``<thread-x>``.
_SECTION_SYNTAX = re.compile(r"^\s*<\s*/?\s*thread(?![\w-])", re.IGNORECASE)
_ESCAPED = frozenset('%"<>&\x7f\x85\u2028\u2029')
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


def _needs_escape(char: str) -> bool:
    return char in _ESCAPED or ord(char) < 0x20


def escape_thread_id(thread_id: str) -> str:
    """``thread_id`` as it is written in a section tag: percent-encoded (UTF-8) where needed."""
    if not any(_needs_escape(c) for c in thread_id):
        return thread_id
    return "".join(
        "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")) if _needs_escape(c) else c for c in thread_id
    )


def unescape_thread_id(written: str) -> str:
    """The thread id a section tag names (the inverse of :func:`escape_thread_id`)."""
    if "%" not in written:
        return written
    raw = bytearray()
    last = 0
    for match in _PERCENT.finditer(written):
        raw += written[last : match.start()].encode("utf-8")
        raw.append(int(match.group(1), 16))
        last = match.end()
    raw += written[last:].encode("utf-8")
    return raw.decode("utf-8", errors="surrogatepass")


def strip_section_syntax(text: str) -> str:
    """``text`` without the lines that look like a section tag: content never opens or closes one."""
    lines = text.splitlines()
    kept = [line for line in lines if not _SECTION_SYNTAX.match(line)]
    return text if len(kept) == len(lines) else "\n".join(kept)


def wrap_section(thread_id: str, text: str) -> str:
    text = strip_section_syntax(text).strip()
    if not text:
        return ""
    return f'<thread id="{escape_thread_id(thread_id)}">\n{text}\n</thread>'


def _opened(line: str) -> str | None:
    """The thread id a section's opening line names, or None if ``line`` opens no section."""
    match = _OPEN.match(line)
    if match:
        return unescape_thread_id(match.group(1))
    legacy = _OPEN_LEGACY.match(line)
    return legacy.group(1) if legacy else None


def split_sections(text: str) -> list[tuple[str | None, str]]:
    """The text as ``(thread_id, body)`` pieces in order; ``None`` for text outside any section.

    Boundary lines between cycles are kept as their own unsectioned pieces, so joining the
    pieces back (see :func:`join_sections`) reproduces the chunk structure.
    """
    pieces: list[tuple[str | None, str]] = []
    current_id: str | None = None
    buffer: list[str] = []

    def flush() -> None:
        body = "\n".join(buffer).strip()
        if body:
            pieces.append((current_id, body))
        buffer.clear()

    for line in text.splitlines():
        if current_id is None and "<thread" in line:
            opened = _opened(line)
            if opened is not None:
                flush()
                current_id = opened
                continue
        if _CLOSE.match(line) and current_id is not None:
            flush()
            current_id = None
            continue
        if current_id is None and is_boundary_line(line):
            flush()
            pieces.append((None, line.strip()))
            continue
        buffer.append(line)
    flush()
    return pieces


def join_sections(pieces: list[tuple[str | None, str]]) -> str:
    out = [wrap_section(tid, body) if tid is not None else strip_section_syntax(body) for tid, body in pieces]
    return "\n\n".join(piece for piece in out if piece)


def _tidy(pieces: list[tuple[str | None, str]]) -> str:
    """Join pieces, dropping boundary lines that no longer separate anything."""
    cleaned: list[tuple[str | None, str]] = []
    for tid, body in pieces:
        if tid is None and is_boundary_line(body) and (not cleaned or is_boundary_line(cleaned[-1][1])):
            continue
        cleaned.append((tid, body))
    while cleaned and cleaned[-1][0] is None and is_boundary_line(cleaned[-1][1]):
        cleaned.pop()
    return join_sections(cleaned)


def section_safe_line_count(lines: Sequence[str], count: int) -> int:
    """``count`` moved so that ``lines[:count]`` does not end inside a thread's section.

    Used when a background reflection in resource scope takes the leading lines of the
    observations: the slice must be whole sections, so the reflector (per section) and the
    successor (the reflection, then the lines after the slice) keep every line in its thread's
    section. The cut moves back to before the open section; if that leaves nothing, it moves
    forward to that section's end.
    """
    count = max(0, min(count, len(lines)))
    open_at: int | None = None
    for index in range(count):
        line = lines[index]
        if open_at is None and "<thread" in line and _opened(line) is not None:
            open_at = index
        elif open_at is not None and _CLOSE.match(line):
            open_at = None
    if open_at is None:
        return count
    if open_at > 0:
        return open_at
    for index in range(count, len(lines)):
        if _CLOSE.match(lines[index]):
            return index + 1
    return len(lines)


def visible_sections(text: str, thread_id: str | None, *, shared: bool) -> str:
    """What ``thread_id`` may see: its own sections and unsectioned text, or everything if shared."""
    if shared or thread_id is None:
        return text
    return _tidy([(tid, body) for tid, body in split_sections(text) if tid in (None, thread_id)])


def observations_shown(record: ObservationRecord, thread_id: str, config: MemoryConfig) -> str:
    """The part of ``record``'s observations (a lineage's head or any of its generations) that
    ``thread_id``'s context shows under ``config``: all of it in thread scope; in resource scope
    without ``share_threads_in_resource``, only the thread's own sections and unsectioned text."""
    if record.scope != "resource":
        return record.active_observations
    shared = config.scope == "resource" and config.share_threads_in_resource
    return visible_sections(record.active_observations, thread_id, shared=shared)


def remove_thread(text: str, thread_id: str) -> str:
    """The text without any section of ``thread_id`` (used when a thread is deleted)."""
    return _tidy([(tid, body) for tid, body in split_sections(text) if tid != thread_id])


class SectionedReflector:
    """A reflector decorator for resource scope: reflects each thread's sections on their own.

    The target is shared between threads in proportion to their size; a thread whose reflection
    fails keeps its sections unchanged, so a failure never loses a thread's memory.
    """

    def __init__(self, inner: Reflector, count_tokens: Callable[[str], int]) -> None:
        self.inner = inner
        self.name = f"sectioned:{inner.name}"
        self.count_tokens = count_tokens

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        by_thread: dict[str | None, list[str]] = {}
        for tid, body in split_sections(request.observations):
            if tid is None and is_boundary_line(body):
                continue
            by_thread.setdefault(tid, []).append(body)
        total = max(1, sum(self.count_tokens("\n".join(bodies)) for bodies in by_thread.values()))
        pieces: list[tuple[str | None, str]] = []
        attempts = 0
        level = 0
        usage = Usage()
        for tid, bodies in by_thread.items():
            body = "\n\n".join(bodies)
            share = self.count_tokens(body) / total
            # A thread's sections are reflected as that thread's request: a reflector routes and
            # meters it by the thread whose text it carries (the privacy allow-list, the ledger).
            sub = replace(request, observations=body, target_tokens=max(1, int(request.target_tokens * share)),
                          thread_id=tid if tid is not None else request.thread_id)
            try:
                result = await self.inner.reflect(sub)
            except Exception:
                if len(by_thread) == 1:
                    raise
                pieces.append((tid, body))
                continue
            attempts += result.attempts
            level = max(level, result.level)
            usage = usage + result.usage
            pieces.append((tid, result.observations))
        text = join_sections(pieces)
        return ReflectionResult(
            observations=text,
            extracted=dict(request.extracted),
            attempts=attempts,
            level=level,
            output_tokens=self.count_tokens(text),
            usage=usage,
        )

"""Resource scope: one observation record per user, one ``<thread id>`` section per conversation.

Sections are what make resource scope safe. Every line an observer writes for a thread goes
inside that thread's section, and every reading of the record chooses which sections to show:
by default a thread sees only its own (``MemoryConfig.share_threads_in_resource=False``), so one
conversation never leaks into another unless the application says they may. Reflection runs
per section for the same reason: a reflector that merged sections could move one thread's facts
into text another thread sees. Deleting a thread removes its sections.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from obsmem.models.base import Usage
from obsmem.om.text.format import is_boundary_line
from obsmem.om.protocols import ReflectionRequest, ReflectionResult, Reflector

__all__ = [
    "SectionedReflector",
    "remove_thread",
    "split_sections",
    "visible_sections",
    "wrap_section",
]

_OPEN = re.compile(r'^\s*<thread id="([^"]+)">\s*$')
_CLOSE = re.compile(r"^\s*</thread>\s*$")


def wrap_section(thread_id: str, text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    return f'<thread id="{thread_id}">\n{text}\n</thread>'


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
        opened = _OPEN.match(line)
        if opened and current_id is None:
            flush()
            current_id = opened.group(1)
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
    out = [wrap_section(tid, body) if tid is not None else body for tid, body in pieces]
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


def visible_sections(text: str, thread_id: str | None, *, shared: bool) -> str:
    """What ``thread_id`` may see: its own sections and unsectioned text, or everything if shared."""
    if shared or thread_id is None:
        return text
    return _tidy([(tid, body) for tid, body in split_sections(text) if tid in (None, thread_id)])


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
            sub = replace(request, observations=body, target_tokens=max(1, int(request.target_tokens * share)))
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

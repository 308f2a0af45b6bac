"""What the engine asks of an Observer and a Reflector.

Two implementations of each exist: the LLM-backed ones (``om/llm/observer.py``,
``om/llm/reflector.py``), which prompt a :class:`~obsmem.models.base.ChatModel`, and the offline
ones (``om/offline/``), which are deterministic rules. The engine only sees these
protocols, so it never knows (or cares) whether a model was called.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any, Protocol, runtime_checkable

from obsmem.models.base import Usage
from obsmem.om.extractors import Extractor
from obsmem.types import Message

__all__ = [
    "AttemptFailed",
    "ObservationRequest",
    "ObservationResult",
    "Observer",
    "ReflectionRequest",
    "ReflectionResult",
    "Reflector",
]


@dataclass(frozen=True, slots=True)
class ObservationRequest:
    """One observation cycle's input.

    ``previous_observations`` is what the observer may look at to avoid repeating itself
    (already truncated to the configured budget by the engine). ``continuation_hints``
    false means no current-task / suggested-response are asked for. ``buffered`` says the cycle
    runs early, in the background (its result is stored as a chunk and activated later); a
    buffered cycle asks for hints too, told the hints as they stood at its first message.
    """

    messages: Sequence[Message]
    previous_observations: str = ""
    previous_truncated: bool = False
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extractors: Sequence[Extractor] = ()
    continuation_hints: bool = True
    want_title: bool = False
    buffered: bool = False
    timezone: tzinfo | None = None
    now: datetime | None = None
    instruction: str | None = None
    thread_id: str | None = None
    resource_id: str | None = None


@dataclass(frozen=True, slots=True)
class ObservationResult:
    """What an observer returns: the new observation lines, and the hints and extracted values
    it found (``current_task`` / ``suggested_response`` only when the request asked for them)."""

    observations: str
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extraction_failures: dict[str, str] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class AttemptFailed:
    """Reported when a reflection attempt did not compress enough and the ladder goes up."""

    level: int
    next_level: int
    input_tokens: int
    output_tokens: int
    target_tokens: int
    reason: str


@dataclass(frozen=True, slots=True)
class ReflectionRequest:
    """One reflection's input: the observations to condense toward ``target_tokens``, starting
    at compression level ``start_level``; ``on_attempt_failed`` hears of each level that did
    not compress enough. ``timezone`` is the zone "now" is stated in (the engine sets it from
    ``MemoryConfig.timezone``, else from the newest observed message's own offset; None: UTC)."""

    observations: str
    target_tokens: int
    start_level: int = 0
    guidance: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extractors: Sequence[Extractor] = ()
    continuation_hints: bool = True
    now: datetime | None = None
    instruction: str | None = None
    on_attempt_failed: Callable[[AttemptFailed], Awaitable[None]] | None = None
    thread_id: str | None = None
    resource_id: str | None = None
    timezone: tzinfo | None = None


@dataclass(frozen=True, slots=True)
class ReflectionResult:
    """What a reflector returns: the condensed observations that replace the old ones, with
    how many attempts and which compression level it took."""

    observations: str
    suggested_response: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extraction_failures: dict[str, str] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    attempts: int = 1
    level: int = 0
    output_tokens: int = 0


@runtime_checkable
class Observer(Protocol):
    """Turns raw messages into new observation lines (the format of ``om/text/format.py``).

    Raises ObservationError / ModelError subclasses on failure; never returns partial text
    silently. An empty ``observations`` is allowed (nothing worth keeping).
    """

    name: str

    async def observe(self, request: ObservationRequest) -> ObservationResult: ...


@runtime_checkable
class Reflector(Protocol):
    """Condenses the whole observation log into a smaller one that replaces it.

    Must never return empty or degenerate text for non-empty input: raise ReflectionError
    instead, so the engine keeps the current observations.
    """

    name: str

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult: ...

"""What an engine operation reports: outcomes to callers, events to listeners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from obsmem.storage.contract import ObservationRecord

__all__ = ["CycleOutcome", "EngineEvent"]


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    """What one observe or reflect call did. ``error`` is set when it failed without raising."""

    operation: Literal["observation", "reflection", "activation", "buffer"]
    applied: bool
    record: ObservationRecord | None
    messages: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    error: BaseException | None = None
    reason: str = ""
    # True when the caller's turn waited on a memory model call (sync observe/reflect, or an
    # in-flight buffer it had to wait for); the measure buffering exists to drive to zero.
    waited: bool = False


@dataclass(frozen=True, slots=True)
class EngineEvent:
    """Progress reported to an optional listener (the CLI draws from these).

    ``<role>-backoff``: the role's model failed again and is left alone until ``data["until"]``
    (``failures`` in a row, ``kind``, ``error``, ``wait_s``); ``<role>-backoff-skipped``: a due
    call was skipped for it. ``turn-wait-exceeded``: a turn stopped waiting for memory work after
    ``max_turn_wait`` (the work goes on); ``context-trimmed``: the oldest raw messages (``messages``,
    ``tokens``) were left out of a context to keep it under ``limit`` tokens; they stay pending.
    """

    kind: Literal["observation-start", "observation-end", "observation-failed", "reflection-start",
                  "reflection-end", "reflection-failed", "activation", "buffer-start", "buffer-end",
                  "buffer-failed", "buffer-dropped", "reflection-buffered", "reflection-activated",
                  "observation-backoff", "observation-backoff-skipped", "reflection-backoff",
                  "reflection-backoff-skipped", "context-trimmed", "turn-wait-exceeded", "redaction",
                  "privacy-fallback", "budget-exceeded"]
    thread_id: str
    data: dict[str, Any]

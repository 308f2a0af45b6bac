"""Durable lifecycle markers: what memory work happened, stored with the messages it covered.

A marker is a :class:`~obsmem.types.DataPart` appended to an assistant message that the cycle
observed, so the conversation itself carries its own narrative (started, finished, failed, with
token counts and durations) and survives process restarts. Markers are never put on a user
message, count as 0 tokens and are never shown to a model. A retried write cannot duplicate a
marker: the store dedupes on ``(name, cycle_id)``.

The builders here are pure: the engine passes the clock's readings in.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from obsmem.types import DataPart, Message

__all__ = [
    "CLOSING",
    "OPENING",
    "MarkerConfig",
    "OperationType",
    "activation_marker",
    "buffering_end_marker",
    "buffering_failed_marker",
    "buffering_start_marker",
    "find_markers",
    "has_markers",
    "input_with_stored_markers",
    "marker_target",
    "new_cycle_id",
    "observation_end_marker",
    "observation_failed_marker",
    "observation_start_marker",
    "thread_update_marker",
]

OperationType = Literal["observation", "reflection"]

OBSERVATION_START = "om-observation-start"
OBSERVATION_END = "om-observation-end"
OBSERVATION_FAILED = "om-observation-failed"
BUFFERING_START = "om-buffering-start"
BUFFERING_END = "om-buffering-end"
BUFFERING_FAILED = "om-buffering-failed"
ACTIVATION = "om-activation"
THREAD_UPDATE = "om-thread-update"
#: Markers that open a cycle, and those that close one (same ``cycle_id``): every opened cycle
#: is closed exactly once, whether it committed, failed, lost its write or was cancelled.
OPENING = frozenset({OBSERVATION_START, BUFFERING_START})
CLOSING = frozenset({OBSERVATION_END, OBSERVATION_FAILED, BUFFERING_END, BUFFERING_FAILED})


@dataclass(frozen=True, slots=True)
class MarkerConfig:
    """The thresholds in force, recorded on each marker so a log explains its own decisions."""

    message_tokens: int
    observation_tokens: int
    scope: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_tokens": self.message_tokens,
            "observation_tokens": self.observation_tokens,
            "scope": self.scope,
        }


def new_cycle_id(kind: str = "obs") -> str:
    return f"{kind}-{uuid.uuid4().hex[:16]}"


def _duration_ms(started_at: datetime, finished_at: datetime) -> int:
    return max(0, round((finished_at - started_at).total_seconds() * 1000))


def _base(
    cycle_id: str, operation: OperationType, record_id: str, thread_id: str | None
) -> dict[str, Any]:
    return {"cycle_id": cycle_id, "operation_type": operation, "record_id": record_id, "thread_id": thread_id}


def observation_start_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    tokens_to_observe: int,
    config: MarkerConfig,
    thread_ids: Sequence[str] = (),
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        started_at=started_at.isoformat(),
        tokens_to_observe=tokens_to_observe,
        thread_ids=list(thread_ids) or ([thread_id] if thread_id else []),
        config=config.as_dict(),
    )
    return DataPart(name=OBSERVATION_START, data=data)


def observation_end_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    completed_at: datetime,
    tokens_observed: int,
    observation_tokens: int,
    observations: str | None = None,
    current_task: str | None = None,
    suggested_response: str | None = None,
    extracted_values: dict[str, Any] | None = None,
    extraction_failures: dict[str, str] | None = None,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        completed_at=completed_at.isoformat(),
        duration_ms=_duration_ms(started_at, completed_at),
        tokens_observed=tokens_observed,
        observation_tokens=observation_tokens,
    )
    optional = {
        "observations": observations,
        "current_task": current_task,
        "suggested_response": suggested_response,
        "extracted_values": extracted_values or None,
        "extraction_failures": extraction_failures or None,
    }
    data.update({k: v for k, v in optional.items() if v is not None})
    return DataPart(name=OBSERVATION_END, data=data)


def observation_failed_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    failed_at: datetime,
    tokens_attempted: int,
    error: str,
    retrying: bool = False,
    observations: str | None = None,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        failed_at=failed_at.isoformat(),
        duration_ms=_duration_ms(started_at, failed_at),
        tokens_attempted=tokens_attempted,
        error=error[:2000],
    )
    if retrying:
        data["retrying"] = True
    if observations is not None:
        data["observations"] = observations
    return DataPart(name=OBSERVATION_FAILED, data=data)


def buffering_start_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    tokens_to_buffer: int,
    config: MarkerConfig,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(started_at=started_at.isoformat(), tokens_to_buffer=tokens_to_buffer, config=config.as_dict())
    return DataPart(name=BUFFERING_START, data=data)


def buffering_end_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    completed_at: datetime,
    tokens_buffered: int,
    buffered_tokens: int,
    observations: str | None = None,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        completed_at=completed_at.isoformat(),
        duration_ms=_duration_ms(started_at, completed_at),
        tokens_buffered=tokens_buffered,
        buffered_tokens=buffered_tokens,
    )
    if observations is not None:
        data["observations"] = observations
    return DataPart(name=BUFFERING_END, data=data)


def buffering_failed_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    started_at: datetime,
    failed_at: datetime,
    tokens_attempted: int,
    error: str,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        failed_at=failed_at.isoformat(),
        duration_ms=_duration_ms(started_at, failed_at),
        tokens_attempted=tokens_attempted,
        error=error[:2000],
    )
    return DataPart(name=BUFFERING_FAILED, data=data)


def activation_marker(
    *,
    cycle_id: str,
    operation: OperationType,
    record_id: str,
    thread_id: str | None,
    activated_at: datetime,
    chunks_activated: int,
    tokens_activated: int,
    observation_tokens: int,
    messages_activated: int,
    generation: int,
    config: MarkerConfig,
    triggered_by: Literal["threshold", "ttl", "provider_change"] = "threshold",
    observations: str | None = None,
    extra: dict[str, Any] | None = None,
) -> DataPart:
    data = _base(cycle_id, operation, record_id, thread_id)
    data.update(
        activated_at=activated_at.isoformat(),
        chunks_activated=chunks_activated,
        tokens_activated=tokens_activated,
        observation_tokens=observation_tokens,
        messages_activated=messages_activated,
        generation=generation,
        triggered_by=triggered_by,
        config=config.as_dict(),
    )
    if observations is not None:
        data["observations"] = observations
    data.update(extra or {})
    return DataPart(name=ACTIVATION, data=data)


def thread_update_marker(
    *, cycle_id: str, thread_id: str, old_title: str | None, new_title: str, at: datetime
) -> DataPart:
    return DataPart(
        name=THREAD_UPDATE,
        data={
            "cycle_id": cycle_id,
            "thread_id": thread_id,
            "old_title": old_title,
            "new_title": new_title,
            "timestamp": at.isoformat(),
        },
    )


def marker_target(messages: Sequence[Message]) -> Message | None:
    """The message a cycle's markers go on: the newest *assistant* message it covered.

    Never a user message (H5). None when the cycle covered no assistant message; the engine
    then reports the cycle through its event hook only.
    """
    for message in reversed(messages):
        if message.role == "assistant":
            return message
    return None


def _is_marker(part: object) -> bool:
    return isinstance(part, DataPart) and part.name.startswith("om-")


def has_markers(message: Message) -> bool:
    """Whether ``message`` carries a data part named like obsmem's markers (``om-…``)."""
    return any(_is_marker(part) for part in message.parts)


def input_with_stored_markers(messages: Sequence[Message], stored: Mapping[str, Message]) -> list[Message]:
    """``messages`` (input to save) with the markers obsmem wrote, and only those: a marker is
    obsmem's record of its own work (a cycle began, ended, committed these observations), so
    input never sets one. A message's ``om-…`` data parts are replaced by those of the message
    stored under its id in the same thread (``stored``; none for a new message), so re-saving a
    stored message keeps its markers, and a forged one (a user's or a tool's, an observation
    "committed" with text no observer wrote) is never stored. A message left with no part
    (nothing but forged markers) is not saved."""
    kept: list[Message] = []
    for message in messages:
        if not has_markers(message):
            kept.append(message)
            continue
        old = stored.get(message.id)
        written = [p for p in old.parts if _is_marker(p)] if old is not None else []
        parts = (*(p for p in message.parts if not _is_marker(p)), *written)
        if parts:
            kept.append(message.model_copy(update={"parts": parts}))
    return kept


def find_markers(messages: Sequence[Message], name: str | None = None) -> list[DataPart]:
    """All obsmem markers on ``messages`` (optionally of one kind), in message order."""
    found: list[DataPart] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, DataPart) and part.name.startswith("om-") and (name is None or part.name == name):
                found.append(part)
    return found

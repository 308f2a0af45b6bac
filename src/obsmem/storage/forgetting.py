"""What forgetting a value does to stored data: pure functions over messages, records and text.

``Memory.forget`` reads every place a value can be stored and writes back what these functions
return. A value is matched as a plain, case-sensitive substring of the stored text (after JSON
encoding for structured data), so what a sentinel scan of the database finds is exactly what
forgetting removes.

* **Text** (observations, working memory, buffered chunks): every *line* containing the value
  goes; the other lines stay as they were.
* **Messages**: a text or reasoning part containing the value goes; a data part (an observation
  marker) whose JSON holds it goes; a file part holding it goes. A tool call or tool result is
  never dropped, because a result must keep its call (providers reject a result without one):
  its arguments or result are replaced by :data:`FORGOTTEN`, and the pairing stays valid. A
  message left with no parts is deleted.
* Ids (a resource or thread id holding the value) are not text: ``Memory.delete_resource`` or
  ``Memory.delete_thread`` removes them.
* **Records**: the active observations, buffered chunks and reflection, and every per-thread
  state (current task, suggested response, title, extracted values) are cleaned line by line
  or field by field; metadata keys whose JSON holds the value go.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from obsmem.storage.contract import BufferedChunk, ObservationRecord, ThreadState
from obsmem.types import Message, Part, ToolCallPart, ToolResultPart

__all__ = ["FORGOTTEN", "contains", "forget_in_message", "forget_in_record", "forget_lines"]

#: What a tool call's arguments or a tool result's content become when they held a forgotten value.
FORGOTTEN = "[forgotten]"


def contains(data: object, value: str) -> bool:
    """Whether ``value`` occurs in ``data`` (a string, or anything JSON encodes)."""
    if isinstance(data, str):
        return value in data
    return value in json.dumps(data, default=str, ensure_ascii=False)


def forget_lines(text: str, value: str) -> str:
    """``text`` without the lines that contain ``value``."""
    if value not in text:
        return text
    return "\n".join(line for line in text.split("\n") if value not in line)


def _part(part: Part, value: str) -> Part | None:
    """The part with ``value`` forgotten; None when the part goes."""
    if isinstance(part, ToolCallPart):
        if contains(part.args, value) or value in part.tool_name:
            return part.model_copy(update={"args": FORGOTTEN})
        return part
    if isinstance(part, ToolResultPart):
        if contains(part.result, value) or value in part.tool_name:
            return part.model_copy(update={"result": FORGOTTEN})
        return part
    return None if contains(part.model_dump(mode="json"), value) else part


def forget_in_message(message: Message, value: str) -> Message | None:
    """``message`` with ``value`` forgotten (itself when untouched); None when it has to go."""
    if not contains(message.model_dump(mode="json"), value):
        return message
    parts = [kept for part in message.parts if (kept := _part(part, value)) is not None]
    metadata = {k: v for k, v in message.metadata.items() if not contains(v, value) and value not in k}
    if not parts:
        return None
    if tuple(parts) == message.parts and metadata == message.metadata:
        return message  # the value is only in an id (thread or resource): not text to forget
    return message.model_copy(update={"parts": tuple(parts), "metadata": metadata})


def _state(state: ThreadState, value: str) -> ThreadState:
    def text(field: str | None) -> str | None:
        return None if field is not None and value in field else field

    return state.model_copy(
        update={
            "current_task": text(state.current_task),
            "suggested_response": text(state.suggested_response),
            "thread_title": text(state.thread_title),
            "extracted": {k: v for k, v in state.extracted.items() if not contains(v, value) and value not in k},
        }
    )


def _chunk(chunk: BufferedChunk, value: str, count: Callable[[str], int]) -> BufferedChunk:
    observations = forget_lines(chunk.observations, value)
    return chunk.model_copy(
        update={
            "observations": observations,
            "observation_tokens": count(observations) if observations != chunk.observations else chunk.observation_tokens,
            "extracted": {k: v for k, v in chunk.extracted.items() if not contains(v, value) and value not in k},
            "current_task": None if chunk.current_task and value in chunk.current_task else chunk.current_task,
            "suggested_response": (
                None if chunk.suggested_response and value in chunk.suggested_response else chunk.suggested_response
            ),
        }
    )


def _clean(data: dict[str, Any], value: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not contains(v, value) and value not in k}


def forget_in_record(record: ObservationRecord, value: str, count: Callable[[str], int]) -> ObservationRecord:
    """``record`` with ``value`` forgotten (itself when untouched); ``count`` counts tokens."""
    if not contains(record.model_dump(mode="json"), value):
        return record
    active = forget_lines(record.active_observations, value)
    reflection = record.buffered_reflection
    if reflection is not None and value in reflection.text:
        reflection = None
    cleaned = record.model_copy(
        update={
            "active_observations": active,
            "observation_tokens": count(active) if active != record.active_observations else record.observation_tokens,
            "threads": {tid: _state(state, value) for tid, state in record.threads.items()},
            "buffered_chunks": tuple(_chunk(c, value, count) for c in record.buffered_chunks),
            "buffered_reflection": reflection,
            "config": _clean(record.config, value),
            "metadata": _clean(record.metadata, value),
        }
    )
    return record if cleaned == record else cleaned  # the value may be only in an id


"""The conversation data model: messages made of typed parts, threads and resources.

Why parts and not plain strings: an agent conversation carries tool calls, tool results,
reasoning, attachments and obsmem's own durable markers, and each of those is counted, shown
to the observer and shown to the actor differently. A message is a list of parts so that no
code ever has to guess what a string holds.

A thread belongs to a resource (the end user); a resource belongs to an org. Ids are plain
strings chosen by the caller or generated here; ``created_at`` is always timezone-aware.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from obsmem.errors import InvalidInputError

__all__ = [
    "DataPart",
    "FilePart",
    "Message",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "Thread",
    "ToolCallPart",
    "ToolResultPart",
    "new_id",
    "parse_message",
    "utcnow",
]

Role = Literal["user", "assistant", "system", "tool"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str = "msg") -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Plain text: what the user said, the assistant answered, or a system instruction."""

    type: Literal["text"] = "text"
    text: str


class ReasoningPart(_Part):
    """Model reasoning. Counted as 0 tokens and never shown to the observer as a fact source."""

    type: Literal["reasoning"] = "reasoning"
    text: str


class ToolCallPart(_Part):
    """A tool call made by the assistant; ``args`` are the decoded arguments (or the raw string)."""

    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = Field(min_length=1)
    args: dict[str, Any] | str = Field(default_factory=dict)


class ToolResultPart(_Part):
    """The result of the tool call with the same ``tool_call_id``; ``is_error`` marks a failed call."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str = Field(min_length=1)
    tool_name: str = Field(min_length=1)
    result: Any = None
    is_error: bool = False


class FilePart(_Part):
    """An attachment: an image or any other file, by URL or inline base64 data.

    ``width``/``height`` let token counting use the provider's image formula; without them
    the counter falls back to size-based heuristics.
    """

    type: Literal["file"] = "file"
    media_type: str = Field(min_length=1)
    url: str | None = None
    data: str | None = None  # base64, or a data: URI
    filename: str | None = None
    width: int | None = Field(default=None, gt=0)
    height: int | None = Field(default=None, gt=0)
    detail: Literal["low", "high", "auto"] | None = None
    token_estimate: int | None = Field(default=None, ge=0)  # a client-supplied count wins

    @property
    def is_image(self) -> bool:
        if self.media_type.lower().startswith("image/"):
            return True
        for ref in (self.data or "", self.url or ""):
            if ref.startswith("data:image/"):
                return True
        name = (self.filename or self.url or "").lower().split("?")[0]
        return name.endswith((".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".heic"))


class DataPart(_Part):
    """Structured data that is never sent to a model: obsmem markers and app-defined signals.

    ``name`` is namespaced (``om-observation-start``); ``data`` is its JSON payload.
    """

    type: Literal["data"] = "data"
    name: str = Field(min_length=1)
    data: dict[str, Any] = Field(default_factory=dict)


Part = Annotated[
    TextPart | ReasoningPart | ToolCallPart | ToolResultPart | FilePart | DataPart,
    Field(discriminator="type"),
]


def _describe_validation(what: str, exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(x) for x in err['loc']) or what}: {err['msg']}" for err in exc.errors()
    )
    return f"Invalid {what}: {problems}"


class Message(BaseModel):
    """One message of a conversation.

    ``seq`` is assigned by the store when the message is first saved: it is the message's
    position in its thread and the unit of obsmem's cursors (timestamps can tie and can
    arrive out of order; insertion order cannot).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=new_id, min_length=1)
    role: Role
    parts: tuple[Part, ...]
    created_at: datetime = Field(default_factory=utcnow)
    thread_id: str | None = None
    resource_id: str | None = None
    seq: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        # Bad input surfaces as obsmem's own typed error, naming the offending field.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidInputError(_describe_validation("message", exc)) from exc

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("created_at must be timezone-aware (e.g. datetime.now(UTC))")
        return value

    @field_validator("parts")
    @classmethod
    def _non_empty(cls, value: tuple[Part, ...]) -> tuple[Part, ...]:
        if not value:
            raise ValueError("a message needs at least one part")
        return value

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        return cls(role="user", parts=(TextPart(text=text),), **kwargs)

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> Message:
        return cls(role="assistant", parts=(TextPart(text=text),), **kwargs)

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        return cls(role="system", parts=(TextPart(text=text),), **kwargs)

    @property
    def text(self) -> str:
        """The concatenated text parts (what a human would call the message's text)."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]

    @property
    def is_marker_only(self) -> bool:
        """True when every part is a data part: such a message has nothing for a model."""
        return all(isinstance(p, DataPart) for p in self.parts)


class Thread(BaseModel):
    """A conversation. ``metadata`` is app-owned; obsmem keeps its own under ``obsmem``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    resource_id: str = Field(min_length=1)
    org_id: str | None = None
    title: str | None = None
    title_pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    version: int = 1


def parse_message(raw: Message | dict[str, Any]) -> Message:
    """Validate a message given as a dict (or pass a Message through).

    Raises :class:`InvalidInputError` naming the offending field, never a bare
    pydantic error, so callers catch one obsmem type.
    """
    if isinstance(raw, Message):
        return raw
    if not isinstance(raw, dict):
        raise InvalidInputError(f"Invalid message: expected a Message or a dict, got {type(raw).__name__}")
    return Message(**raw)

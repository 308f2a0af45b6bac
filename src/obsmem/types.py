"""The conversation data model: messages made of typed parts, threads and resources.

Why parts and not plain strings: an agent conversation carries tool calls, tool results,
reasoning, attachments and obsmem's own durable markers, and each of those is counted, shown
to the observer and shown to the actor differently. A message is a list of parts so that no
code ever has to guess what a string holds.

A thread belongs to a resource (the end user); a resource belongs to an org. Ids are plain
strings chosen by the caller or generated here; ``created_at`` is always timezone-aware.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sized
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError, to_jsonable_python

from obsmem.errors import InvalidInputError

__all__ = [
    "FEEDBACK_KEY",
    "LONG_TEXT_CHARS",
    "MAX_COUNT",
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
    "check_choice",
    "check_count",
    "check_finite",
    "check_flag",
    "check_id",
    "check_json",
    "check_text",
    "describe_value",
    "long_texts",
    "new_id",
    "on_long_text",
    "parse_message",
    "parse_messages",
    "text_digest",
    "utcnow",
]

Role = Literal["user", "assistant", "system", "tool"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id(prefix: str = "msg") -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def describe_value(value: object) -> str:
    """A value and its type, shortened, for an error message."""
    text = repr(value)
    shown = f"{text[:60]}…" if len(text) > 60 else text
    return f"{shown} ({type(value).__name__})"


def _describe_validation(what: str, exc: ValidationError) -> str:
    """Each problem as ``field.path: what is wrong, got value (type)``."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or what
        problems.append(f"{where}: {err['msg']}, got {describe_value(err.get('input'))}")
    return f"Invalid {what}: {'; '.join(problems)}"


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must be timezone-aware (e.g. datetime.now(UTC))")
    return value


#: What obsmem keeps worked out on a model instance, outside its fields, is kept under keys of its
#: ``__dict__`` that start with this (a message's token count and digest, a long text's digest):
#: never pickled, and dropped from a copy with new parts (:meth:`_Model.model_copy`).
_MEMO_PREFIX = "_obsmem_"


class _Model(BaseModel):
    """A frozen, closed model whose construction errors are :class:`InvalidInputError`.

    ``model_validate`` keeps pydantic's own error: the stores use it to read rows back, and
    report a row they cannot decode as a storage error.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        # Bad input surfaces as obsmem's own typed error, naming the offending field.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidInputError(_describe_validation(self._what(), exc)) from exc

    @classmethod
    def _what(cls) -> str:
        return cls.__name__

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy; a copy with new ``parts`` leaves behind what obsmem kept worked out
        on the original (:data:`_MEMO_PREFIX`): a message's token count keeps the parts tuple it
        was counted for, so a short piece cut from a pasted log held (and pickled) the whole log."""
        copied = super().model_copy(update=update, deep=deep)
        if update and "parts" in update:
            values = copied.__dict__
            for key in [key for key in values if key.startswith(_MEMO_PREFIX)]:
                del values[key]
        return copied

    def __getstate__(self) -> dict[Any, Any]:
        """Pickled without what obsmem keeps worked out on it (:data:`_MEMO_PREFIX`): worked out
        again where it is needed, it never makes a pickle carry more than the model. The state is
        a copy of the fields (one C-level copy, atomic for the interpreter): the offline offload
        pickles a request on a worker thread while the event loop may keep a memo on the same
        message, and pickling the live ``__dict__`` would fail ("dictionary changed size")."""
        state: dict[Any, Any] = super().__getstate__()
        values = state.get("__dict__")
        if values is not None:
            values = dict(values)
            state = {**state, "__dict__": {k: v for k, v in values.items() if not k.startswith(_MEMO_PREFIX)}}
        return state


class _Part(_Model):
    @classmethod
    def _what(cls) -> str:
        return f"{cls.__name__} (a message part)"


class TextPart(_Part):
    """Plain text: what the user said, the assistant answered, or a system instruction."""

    type: Literal["text"] = "text"
    text: str


FEEDBACK_KEY = "obsmem_feedback"
"""``metadata[FEEDBACK_KEY] = True`` marks a user-role message a framework sent the model on its
own that is not the user's words: pydantic-ai's retry feedback (an output validator's
``ModelRetry``, a failed structured output's errors). The model sees it where it stands; the
observers never read it as something the user said (it is left out of what they are shown)."""


#: A text at least this long keeps its digest on its part (:func:`text_digest`): hashing it is
#: linear in it, and a turn's boundaries looked at a waiting pasted log many times over.
LONG_TEXT_CHARS = 32_768
_TEXT_DIGEST_KEY = "_obsmem_text_digest"


def text_digest(part: TextPart) -> bytes:
    """SHA-256 of ``part``'s text (UTF-8, lone surrogates kept as they are).

    A long text (:data:`LONG_TEXT_CHARS` or more) keeps it on its part (not a field: pydantic
    leaves it out of dumps, equality and repr; a copy, deep or not, carries it, and it is read
    only while it belongs to the very text object the part holds). The token cache's key and a
    receipt's message digest both start from it, so a pasted megabyte is hashed once per part
    object, and the stores hash what they decode where they decode it (a SQL store's worker
    thread: :func:`long_texts`), never again on the event loop."""
    text = part.text
    if len(text) < LONG_TEXT_CHARS:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    memo = part.__dict__.get(_TEXT_DIGEST_KEY)
    if memo is not None and memo[0] is text:
        return bytes(memo[1])
    value = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    part.__dict__[_TEXT_DIGEST_KEY] = (text, value)
    return value


#: What else :func:`long_texts` works out for a long text part, registered by the layers that keep
#: an answer on the part the same way (:func:`on_long_text`).
_LONG_TEXT_WORK: list[Callable[[TextPart], object]] = [text_digest]


def on_long_text(work: Callable[[TextPart], object]) -> Callable[[TextPart], object]:
    """Register ``work`` (a function of a long text part that keeps its answer on the part, as
    :func:`text_digest` does) to run in :func:`long_texts` too."""
    if work not in _LONG_TEXT_WORK:
        _LONG_TEXT_WORK.append(work)
    return work


def long_texts(message: Message) -> Message:
    """``message``, what its long text parts keep worked out now (:func:`text_digest` and the
    work registered with :func:`on_long_text`): a store calls it where it decodes or copies a
    message (a SQL store's worker thread), so the event loop finds the answers kept instead of
    reading a pasted megabyte again at every boundary. Cheap for anything else."""
    for part in message.parts:
        if isinstance(part, TextPart) and len(part.text) >= LONG_TEXT_CHARS:
            for work in _LONG_TEXT_WORK:
                work(part)
    return message


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


class Message(_Model):
    """One message of a conversation.

    ``seq`` is assigned by the store when the message is first saved: it is the message's
    position in its thread and the unit of obsmem's cursors (timestamps can tie and can
    arrive out of order; insertion order cannot).

    A message is a value: its parts are frozen models, and obsmem treats what they hold (a
    tool call's ``args``, a result, a data part's ``data``) as frozen too. It keeps a message's
    token count and digest on the message, so a payload changed in place on a message it has
    counted keeps its old count and digest. To change a message, make a new one
    (``message.model_copy(update={"parts": ...})``). The stores never hand two readers the same
    payload object.
    """

    id: str = Field(default_factory=new_id, min_length=1)
    role: Role
    parts: tuple[Part, ...]
    created_at: datetime = Field(default_factory=utcnow)
    thread_id: str | None = Field(default=None, min_length=1)
    resource_id: str | None = Field(default=None, min_length=1)
    seq: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def _what(cls) -> str:
        return "message"

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _aware(value)

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
    def is_feedback(self) -> bool:
        """True for a user-role message that is a framework's feedback to the model, not the
        user's words (:data:`FEEDBACK_KEY`)."""
        return self.role == "user" and self.metadata.get(FEEDBACK_KEY) is True

    @property
    def is_marker_only(self) -> bool:
        """True when every part is a data part: such a message has nothing for a model."""
        # A loop over the parts' ``type`` fields, not isinstance: read for every message of every
        # window, and a failing isinstance against a pydantic model class is several times slower.
        for part in self.parts:
            if part.type != "data":
                return False
        return True


class Thread(_Model):
    """A conversation. ``metadata`` is app-owned; obsmem keeps its own under ``obsmem``."""

    id: str = Field(min_length=1)
    resource_id: str = Field(min_length=1)
    org_id: str | None = None
    title: str | None = None
    title_pinned: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    version: int = 1

    @classmethod
    def _what(cls) -> str:
        return "thread"

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return _aware(value)


def parse_message(raw: Message | Mapping[str, Any], *, argument: str = "message") -> Message:
    """Validate a message given as a dict (or pass a Message through).

    Raises :class:`InvalidInputError` naming ``argument`` and the offending field, never a bare
    pydantic error, so callers catch one obsmem type.
    """
    if isinstance(raw, Message):
        return raw
    if not isinstance(raw, Mapping) or not all(isinstance(key, str) for key in raw):
        raise InvalidInputError(
            f"Invalid {argument}: expected a Message or a dict of its fields, got {describe_value(raw)}",
            argument=argument,
        )
    try:
        return Message(**raw)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{argument}: {exc}", argument=argument) from None


def parse_messages(value: object, argument: str = "messages") -> list[Message]:
    """Validate messages to be saved: a list (or any iterable) of :class:`Message` or dicts.

    A single message or a string where a list belongs is refused rather than iterated, and so
    is data no store could keep (see :func:`check_json`).
    """
    if isinstance(value, str | bytes | Mapping | Message) or not isinstance(value, Iterable):
        raise InvalidInputError(
            f"Invalid {argument}: expected a list of messages (Message objects or dicts), got "
            f"{describe_value(value)}",
            argument=argument,
        )
    messages = []
    for index, item in enumerate(value):
        where = f"{argument}[{index}]"
        _check_part_count(item, where)  # before a dict's parts are validated one by one
        message = parse_message(item, argument=where)
        _check_part_count(message, where)
        check_json(message.metadata, f"{where}.metadata")
        check_unicode(message.id, f"{where}.id")
        check_unicode(message.metadata, f"{where}.metadata")
        check_storable_message(message, where)
        for number, part in enumerate(message.parts):
            data = {ToolCallPart: "args", ToolResultPart: "result", DataPart: "data"}.get(type(part))
            if data is not None:
                check_json(getattr(part, data), f"{where}.parts[{number}].{data}")
            for value in part.__dict__.values():  # text searched as it is, data as its JSON
                check_unicode(value, f"{where}.parts[{number}]")
        messages.append(message)
    return messages


#: A UTF-16 surrogate code point: in a Python string always a lone one (a pair decodes to one
#: character), which is no Unicode text: UTF-8 cannot encode it, so no JSON answer, provider
#: request or export could carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(value: object, argument: str) -> None:
    """Refuse a string anywhere in ``value`` (dict keys too) that holds a lone surrogate
    (``"\\ud800"`` in JSON): stored, it would make every answer that shows it fail to encode."""
    if not value or isinstance(value, int | float | bool):
        return  # nothing, or no text
    # A container is searched as its JSON (written in C, surrogates kept as they are), not
    # walked here: a tool result of a hundred thousand strings is one search.
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    found = _SURROGATE.search(text)
    if found is not None:
        raise InvalidInputError(
            f"Invalid {argument}: text holding a lone surrogate (U+{ord(found.group()):04X}), which is "
            "not Unicode text; encode the text as UTF-8 first.",
            argument=argument.split("[")[0],
        )


#: The most parts one message saved through obsmem may have (parallel tool calls, images and
#: text together stay far below it); a message of hundreds of thousands of tiny parts would hold
#: the event loop while every part is counted and rendered.
MAX_MESSAGE_PARTS = 10_000


def _check_part_count(item: object, where: str) -> None:
    parts = item.parts if isinstance(item, Message) else item.get("parts") if isinstance(item, Mapping) else None
    if isinstance(parts, Sized) and len(parts) > MAX_MESSAGE_PARTS:
        raise InvalidInputError(
            f"Invalid {where}: {len(parts)} parts, more than one message may have ({MAX_MESSAGE_PARTS}); "
            "split it into several messages.",
            argument=where.split("[")[0],
        )


def check_json(value: object, argument: str) -> None:
    """Refuse data no store could keep: every store writes message and thread data as JSON.

    Anything pydantic writes as JSON passes (a datetime becomes ISO text, a model a dict), so
    such data is refused when it is saved, the same in every store, not by one store and not
    another. (A message holding other data can still be built, counted and converted.)
    """
    if value is None or isinstance(value, str | int | float | bool):
        return
    try:
        to_jsonable_python(value)
    except (PydanticSerializationError, ValueError, TypeError, RecursionError) as exc:
        raise InvalidInputError(
            f"Invalid {argument}: it must be JSON-serializable data to be stored ({exc})", argument=argument
        ) from None


def check_finite(value: object, argument: str) -> None:
    """Refuse NaN, Infinity and -Infinity anywhere in ``value`` (at any depth, in whatever
    pydantic writes as JSON): they are no JSON number, so a store would keep them as null (the
    caller's data silently changed), or, in memory, as they are: one store unlike the others."""
    pending = [value]
    while pending:  # not recursive: the nesting is the caller's to choose
        item = pending.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue  # the common leaves (a receipt's ids and counts), without the isinstance chain
        if kind is dict:
            pending.extend(item.values())  # type: ignore[attr-defined]
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInputError(
                    f"Invalid {argument}: {item} is not a JSON number (NaN and Infinity cannot be stored); "
                    "send a finite number, a string or null.",
                    argument=argument,
                )
        elif isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
        elif item is not None and not isinstance(item, str | int | bytes):
            try:  # a model, a dataclass …: what a store writes of it
                pending.append(to_jsonable_python(item))
            except (PydanticSerializationError, ValueError, TypeError, RecursionError):
                pass  # not JSON at all: check_json says so


def check_storable_thread(thread: Thread) -> None:
    """What every store refuses of a thread it is given to keep: a non-finite number in its
    metadata (see :func:`check_finite`)."""
    check_finite(thread.metadata, "metadata")


def check_storable_message(message: Message, where: str = "message") -> None:
    """What every store refuses of a message it is given to keep: a non-finite number in its
    metadata or in a data part's data (see :func:`check_finite`). A tool call's arguments and a
    tool's result are not checked here."""
    check_finite(message.metadata, f"{where}.metadata")
    for number, part in enumerate(message.parts):
        if isinstance(part, DataPart):
            check_finite(part.data, f"{where}.parts[{number}].data")


# -- checks of plain arguments, shared by the public entry points -----------------------------------

#: The largest count a store can take (SQLite and PostgreSQL integers are 64-bit).
MAX_COUNT = 2**63 - 1

_T = TypeVar("_T")


def _refuse(argument: str, expected: str, value: object) -> InvalidInputError:
    return InvalidInputError(
        f"Invalid {argument}: expected {expected}, got {describe_value(value)}", argument=argument
    )


def check_id(value: object, argument: str, *, optional: bool = False) -> str | None:
    """A non-empty string id (or None when ``optional``) of Unicode text: one holding a lone
    surrogate (``"\\ud800"`` in JSON) is refused (:func:`check_unicode`), since no store can hold
    it (SQLite's driver raised ``UnicodeEncodeError`` on it, out of every read)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise _refuse(argument, "a non-empty string" + (" or None" if optional else ""), value)
    check_unicode(value, argument)
    return value


def check_text(value: object, argument: str) -> str | None:
    """Optional free text (``None`` or a string)."""
    if value is not None and not isinstance(value, str):
        raise _refuse(argument, "a string or None", value)
    return value


def check_count(
    value: object, argument: str, *, minimum: int = 0, maximum: int = MAX_COUNT, optional: bool = False
) -> int | None:
    """A whole number from ``minimum`` to ``maximum`` (``bool`` is not a number here)."""
    if value is None and optional:
        return None
    expected = f"a whole number from {minimum} to {maximum}" + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _refuse(argument, expected, value)
    number = int(value)
    if not minimum <= number <= maximum:
        raise _refuse(argument, expected, value)
    return number


def check_flag(value: object, argument: str) -> bool:
    if not isinstance(value, bool):
        raise _refuse(argument, "True or False", value)
    return value


def check_choice(value: _T, argument: str, choices: tuple[_T, ...]) -> _T:
    """One of ``choices`` (compared by type too, so ``1`` is not ``True``)."""
    if not any(type(value) is type(choice) and value == choice for choice in choices):
        raise _refuse(argument, " or ".join(repr(c) for c in choices), value)
    return value

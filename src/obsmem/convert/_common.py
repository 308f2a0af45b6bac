"""What every converter shares: reading provider items safely, attachments, tool names, replay data.

Provider items arrive as plain dicts or as SDK objects (anything with ``model_dump()``, at any
depth), so every nested value goes through :func:`as_object` or :func:`as_list`. Every problem is
an :class:`~obsmem.errors.InvalidInputError` that names the item's index and the field, never a
bare ``KeyError`` or a pydantic error.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from obsmem.errors import InvalidInputError
from obsmem.types import FilePart, Message, Part, ReasoningPart, Role, ToolResultPart, parse_message

__all__ = [
    "REPLAY_KEY",
    "CallNames",
    "Loc",
    "MessageGrouper",
    "as_list",
    "as_object",
    "attachment_text",
    "data_uri",
    "decode_data_uri",
    "decode_text",
    "file_from_source",
    "guess_media_type",
    "json_text",
    "optional_str",
    "parse_arguments",
    "raw_base64",
    "reasoning_replays",
    "replay_metadata",
    "require_str",
    "split_results",
    "to_messages",
    "top_level_items",
]

# Message metadata key holding what a provider needs to accept reasoning back: one entry per
# ReasoningPart of the message, in order, either None or {"api": ..., "item"/"block": {...}}.
REPLAY_KEY = "provider_reasoning"


@dataclass(frozen=True, slots=True)
class Loc:
    """Where in the caller's input a value sits: ``<what> at index 3, field 'content[1].text'``."""

    what: str
    index: int
    path: str = ""

    def at(self, key: str | int) -> Loc:
        if isinstance(key, int):
            return Loc(self.what, self.index, f"{self.path}[{key}]")
        return Loc(self.what, self.index, f"{self.path}.{key}" if self.path else key)

    def error(self, problem: str) -> InvalidInputError:
        field = f", field '{self.path}'" if self.path else ""
        return InvalidInputError(f"Cannot convert {self.what} at index {self.index}{field}: {problem}")


def _describe(value: object) -> str:
    if value is None:
        return "nothing (None)"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'…' if len(text) > 60 else ''}"


def as_object(raw: object, loc: Loc) -> dict[str, Any]:
    """A provider object as a plain dict (SDK objects are dumped without their None fields)."""
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items() if v is not None}
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        if isinstance(dumped, Mapping):
            return {str(k): v for k, v in dumped.items()}
    raise loc.error(f"expected an object (a dict), got {_describe(raw)}")


def as_list(raw: object, loc: Loc) -> list[Any]:
    if isinstance(raw, list | tuple):
        return list(raw)
    raise loc.error(f"expected a list, got {_describe(raw)}")


def top_level_items(items: object, function: str, what: str) -> list[Any]:
    single = isinstance(items, str | bytes | Mapping) or callable(getattr(items, "model_dump", None))
    if single or not isinstance(items, Iterable):
        raise InvalidInputError(
            f"{function}() takes a list of {what}, got {_describe(items)}; wrap a single one in a list"
        )
    return list(items)


def require_str(obj: Mapping[str, Any], key: str, loc: Loc, *, non_empty: bool = False) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise loc.at(key).error(f"expected a string, got {_describe(value)}")
    if non_empty and not value:
        raise loc.at(key).error("must not be empty")
    return value


def optional_str(obj: Mapping[str, Any], key: str, loc: Loc) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise loc.at(key).error(f"expected a string, got {_describe(value)}")
    return value


def to_messages(messages: Iterable[Message | Mapping[str, Any]], function: str) -> list[Message]:
    items = top_level_items(messages, function, "obsmem messages")
    return [parse_message(dict(m) if isinstance(m, Mapping) else m) for m in items]


def json_text(value: Any) -> str:
    """A tool result or argument as text: strings as they are, anything else JSON-encoded."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


SPEAKER_KEY = "name"
"""The metadata key of a message's speaker (a participant's name: ``metadata["name"]``, which
obsmem's observer reads to tell who said what)."""

_WIRE_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def speaker_metadata(name: object) -> dict[str, Any]:
    """The metadata holding a wire message's participant name (none for no name)."""
    return {SPEAKER_KEY: name} if isinstance(name, str) and name.strip() else {}


def wire_name(message: Message) -> str | None:
    """The participant name to send with ``message`` on a wire that names participants: its
    speaker's name when the strictest such field takes it as it is (OpenAI's ``name``: letters,
    digits, ``_`` and ``-``, at most 64), else None (the field is left out, as it was before)."""
    name = message.metadata.get(SPEAKER_KEY)
    if isinstance(name, str) and 0 < len(name) <= 64 and set(name) <= _WIRE_NAME_CHARS:
        return name
    return None


MAX_ARGUMENTS_DEPTH = 64
"""How deeply a tool call's JSON arguments may nest to become a dict; deeper ones stay text."""


def parse_arguments(arguments: str) -> dict[str, Any] | str:
    """Wire arguments back to obsmem: a JSON object becomes a dict, anything else stays text.

    So does an object nested deeper than :data:`MAX_ARGUMENTS_DEPTH` (or too deep for Python's
    JSON decoder, which raised ``RecursionError`` out of the converter): as a dict it could not
    be stored (every store refuses data nested that deep), so the model's answer holding it
    could not be saved; as text it is stored, and sent back, exactly as the model wrote it."""
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments
    if not isinstance(parsed, dict) or _deeper_than(parsed, MAX_ARGUMENTS_DEPTH):
        return arguments
    return parsed


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``limit`` levels deep
    (iterative, each container visited once)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def split_results(message: Message) -> tuple[list[ToolResultPart], list[ToolResultPart]]:
    """(results that answer earlier calls, results that answer this message's own calls).

    The first go before the message on the wire, the second after it, so that a result always
    follows the call it answers.
    """
    own = {call.tool_call_id for call in message.tool_calls}
    before = [r for r in message.tool_results if r.tool_call_id not in own]
    after = [r for r in message.tool_results if r.tool_call_id in own]
    return before, after


def result_files(message: Message) -> dict[int, list[FilePart]]:
    """A tool message's file parts that follow a tool result, by that result (its ``id()``): the
    files (images, documents) the tool returned with it, as the converters read them in."""
    out: dict[int, list[FilePart]] = {}
    current: ToolResultPart | None = None
    if message.role != "tool":
        return out
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            current = part
        elif isinstance(part, FilePart) and current is not None:
            out.setdefault(id(current), []).append(part)
        else:
            current = None
    return out


class CallNames:
    """Tool names by call id. Provider results carry only the id; obsmem results also need the name."""

    def __init__(self, history: Iterable[Message | Mapping[str, Any]], function: str) -> None:
        self._names = {
            c.tool_call_id: c.tool_name for m in to_messages(history, function) for c in m.tool_calls
        }

    def add(self, call_id: str, name: str) -> None:
        self._names[call_id] = name

    def name(self, call_id: str, loc: Loc) -> str:
        try:
            return self._names[call_id]
        except KeyError:
            raise loc.error(
                f"no earlier tool call has id {call_id!r}, so the tool's name is unknown; include the "
                "assistant message that made the call, or pass history=turn.context.messages"
            ) from None


# -- attachments ---------------------------------------------------------------------------

_EXTENSIONS = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "pdf": "application/pdf",
    "txt": "text/plain",
    "md": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
    "mp3": "audio/mpeg",
    "wav": "audio/wav",
}


def guess_media_type(name: str | None, default: str) -> str:
    if name and not name.startswith("data:"):
        extension = name.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1].rpartition(".")[2].lower()
        if extension in _EXTENSIONS:
            return _EXTENSIONS[extension]
    return default


def decode_data_uri(uri: str) -> tuple[str, str] | None:
    """``data:<type>;base64,<data>`` as (media type, base64 data); None for anything else."""
    if not uri.startswith("data:"):
        return None
    header, sep, payload = uri[5:].partition(",")
    if not sep or not header.endswith(";base64"):
        return None
    media_type = header[: -len(";base64")].split(";", 1)[0]
    return (media_type or "application/octet-stream"), payload


def data_uri(part: FilePart) -> str | None:
    if part.data is None:
        return None
    if part.data.startswith("data:"):
        return part.data
    return f"data:{part.media_type};base64,{part.data}"


def raw_base64(part: FilePart) -> tuple[str, str] | None:
    """(media type, base64) of an inline file, the data URI's own type winning."""
    if part.data is None:
        return None
    decoded = decode_data_uri(part.data)
    if decoded is not None:
        return decoded
    if part.data.startswith("data:"):
        return None  # a non-base64 data URI
    return part.media_type, part.data


def decode_text(b64: str) -> str | None:
    try:
        return base64.b64decode(b64, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def file_from_source(
    loc: Loc,
    *,
    media_type: str | None,
    url: str | None,
    data: str | None,
    filename: str | None = None,
    default_type: str,
) -> FilePart:
    """A FilePart from a URL, a data URI or raw base64, with the best media type known."""
    if data is not None:
        decoded = decode_data_uri(data)
        if decoded is not None:
            media_type, data = media_type or decoded[0], decoded[1]
    chosen = media_type or guess_media_type(filename or url, default_type)
    try:
        return FilePart(media_type=chosen, url=url, data=data, filename=filename)
    except ValueError as exc:  # pydantic's error, from a malformed value
        raise loc.error(f"not a valid attachment: {exc}") from None


def attachment_text(part: FilePart) -> str:
    """What stands in for an attachment a provider cannot take in that place."""
    return f"[attachment: {part.filename or part.url or part.media_type}]"


# -- reasoning replay ----------------------------------------------------------------------


def reasoning_replays(message: Message, api: str, payload_key: str) -> list[dict[str, Any] | None]:
    """For each ReasoningPart of ``message`` in order: the stored provider payload for ``api``, or None."""
    count = sum(1 for p in message.parts if isinstance(p, ReasoningPart))
    stored = message.metadata.get(REPLAY_KEY)
    if stored is None:
        return [None] * count
    if not isinstance(stored, list):
        raise InvalidInputError(
            f"Message {message.id!r}: metadata[{REPLAY_KEY!r}] must be a list (one entry per reasoning part)"
        )
    replays: list[dict[str, Any] | None] = []
    for i in range(count):
        entry = stored[i] if i < len(stored) else None
        if entry is None or not isinstance(entry, Mapping) or entry.get("api") != api:
            replays.append(None)
            continue
        payload = entry.get(payload_key)
        if not isinstance(payload, Mapping):
            raise InvalidInputError(
                f"Message {message.id!r}: metadata[{REPLAY_KEY!r}][{i}] has no {payload_key!r} object"
            )
        replays.append(dict(payload))
    return replays


def replay_metadata(entries: list[dict[str, Any] | None]) -> dict[str, Any]:
    return {REPLAY_KEY: entries} if any(e is not None for e in entries) else {}


class MessageGrouper:
    """Builds messages, merging consecutive assistant-side items and consecutive tool outputs."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._role: Role | None = None
        self._parts: list[Part] = []
        self._replays: list[dict[str, Any] | None] = []

    def add(
        self, role: Role, parts: list[Part], replay: dict[str, Any] | None = None, *, merge: bool = True
    ) -> None:
        if not merge or role != self._role:
            self.flush()
        self._role = role
        self._parts.extend(parts)
        if any(isinstance(p, ReasoningPart) for p in parts):
            self._replays.append(replay)
        if not merge:
            self.flush()

    def flush(self) -> None:
        if self._role is not None and self._parts:
            self.messages.append(
                Message(role=self._role, parts=tuple(self._parts), metadata=replay_metadata(self._replays))
            )
        self._role, self._parts, self._replays = None, [], []

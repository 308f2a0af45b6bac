"""Render conversation messages as the plain-text transcript the observer reads.

Why a transcript rather than forwarding the messages as chat turns: the observer must *read*
the conversation, not take part in it. Forwarded turns invite it to answer the user, follow
instructions found in tool output, or mistake its own control prompt for a user message
(#22195). A flat, labelled transcript keeps every message in the data position.

The layout spends tokens only where they carry information::

    Jan 15 2026:
    User (2:30 PM): Find me a flight to Berlin on Friday.

    Assistant: Searching now.
    Tool Call search_flights: {to: "BER", date: "2026-01-16"}

    Tool (2:31 PM): Tool Result search_flights: [{"flight": "LH 123", "price": 189}]

* the date header appears only when the calendar day changes, and the ``h:mm AM/PM`` label
  only when the minute changes, so a burst of messages is not stamped over and over;
* a tool call is shown once per ``tool_call_id`` (providers often repeat a call in the message
  that carries its result);
* tool arguments are outlined (long strings clipped, deep or wide structures elided) and tool
  results are capped at :data:`MAX_RESULT_TOKENS`, because one giant result must not crowd the
  rest of the conversation out of the observer's context;
* every line of a message's content after its first is quoted (``> ``), so a line break in a
  user's or a tool's text never starts a line that reads as a label, a date header or an
  observation line (a model copying its input copies the quote mark too);
* attachments become numbered placeholders, and data parts (obsmem's own markers, app signals)
  are never shown: they are not conversation;
* obsmem's own context messages (an application may save what it sent, preamble and reminders
  included) are never shown, and ``<system-reminder>`` blocks are cut out of user text
  (:func:`obsmem.om.text.own.conversation_messages`): guidance for a model is not something
  the user said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from obsmem.om.text.own import conversation_messages
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "MAX_ARG_TOKENS",
    "MAX_RESULT_TOKENS",
    "QUOTE_PREFIX",
    "is_transcript_line",
    "Transcript",
    "format_args",
    "format_transcript",
    "truncate_to_tokens",
]

MAX_RESULT_TOKENS = 5_000
MAX_ARG_TOKENS = 2_000
MAX_INLINE_STRING_CHARS = 160
MAX_DEPTH = 5
MAX_CONTAINER_ENTRIES = 20
MAX_DATA_URI_CHARS = 256

QUOTE_PREFIX = "> "  # leads every line of content after a message's first line
_TRANSCRIPT_LINE = re.compile(
    r"[ \t]*(?:>"
    r"|(?:User|Assistant|System|Tool|Developer)(?: \(\d{1,2}:\d{2} [AP]M\))?:"
    r"|Tool (?:Call|Result|Error) |Reasoning:|Image: \[|File: \["
    r"|[A-Z][a-z]{2} \d{1,2} \d{4}:[ \t]*$)"
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_ROLE_LABELS = {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}


@dataclass(frozen=True, slots=True)
class Transcript:
    """The rendered text plus the attachments its placeholders refer to, in number order.

    The observer may forward ``attachments`` to a multimodal model after the text; the text
    alone is always complete (every attachment has its placeholder).
    """

    text: str
    attachments: list[FilePart] = field(default_factory=list)


def format_transcript(
    messages: Iterable[Message],
    *,
    count_tokens: Callable[[str], int],
    timezone: tzinfo | None = None,
    max_result_tokens: int = MAX_RESULT_TOKENS,
    max_arg_tokens: int = MAX_ARG_TOKENS,
) -> Transcript:
    """Render ``messages`` (in the order given) as an observer transcript.

    Only conversation is rendered: obsmem's own messages and ``<system-reminder>`` blocks in
    user text are left out (see the module docstring).

    Times are shown in ``timezone``, or when None in each message's own offset (the one its
    ``created_at`` carries; UTC for a naive one), because the observer turns them into
    ``(HH:MM)`` stamps and resolves "tomorrow" against them: they must be the user's local
    times to mean anything. ``count_tokens`` enforces the argument and result caps.
    """
    blocks: list[str] = []
    attachments: list[FilePart] = []
    seen_calls: set[str] = set()
    last_day: tuple[int, int, int] | None = None
    last_minute: tuple[int, int] | None = None

    for message in conversation_messages(list(messages)):
        if message.is_feedback:
            continue  # a framework's words to the model, not the user's (types.FEEDBACK_KEY)
        lines = _part_lines(message, count_tokens, seen_calls, attachments, max_result_tokens, max_arg_tokens)
        if not lines:
            continue
        at = message.created_at if message.created_at.tzinfo is not None else message.created_at.replace(tzinfo=UTC)
        local = at.astimezone(timezone) if timezone is not None else at
        day = (local.year, local.month, local.day)
        header = ""
        if day != last_day:
            header = f"{_MONTHS[local.month - 1]} {local.day} {local.year}:\n"
            last_day, last_minute = day, None
        label = _ROLE_LABELS.get(message.role, message.role.title())
        minute = (local.hour, local.minute)
        if minute != last_minute:
            label += f" ({_clock_label(local)})"
            last_minute = minute
        lines = _quoted(lines)
        first, rest = lines[0], lines[1:]
        if first.startswith(("Tool ", "Reasoning:", "Image:", "File:")) and rest:
            body = "\n".join(lines)
            blocks.append(f"{header}{label}:\n{body}")
        else:
            blocks.append("\n".join([f"{header}{label}: {first}", *rest]))
    return Transcript(text="\n\n".join(blocks), attachments=attachments)


class _Text(str):
    """A text part's text: all of it is content (no label of ours leads it)."""

    __slots__ = ()


_Entry = str  # a labelled line of ours ("Tool Result x: …") or a _Text


def _quoted(entries: list[_Entry]) -> list[str]:
    """The message's physical lines, every line of content after the first quoted with
    :data:`QUOTE_PREFIX`: a line break inside a user's or a tool's text never starts a line of
    the transcript, so nothing a model copies from it reads as a label, a date header or an
    observation line of its own."""
    out: list[str] = []
    for index, entry in enumerate(entries):
        physical = entry.splitlines() or [""]
        head = physical[0]
        if index > 0 and isinstance(entry, _Text):
            head = QUOTE_PREFIX + head
        out.append(head)
        out.extend(QUOTE_PREFIX + line for line in physical[1:])
    return out


def is_transcript_line(line: str) -> bool:
    """Whether ``line`` reads as a line of the transcript: a role label, a label of ours for a
    part, a quoted line of content or a date header. An observer's control section (the current
    task, the suggested response, the title) never holds one: it would be the model copying its
    input, and that input is other people's text."""
    return _TRANSCRIPT_LINE.match(line) is not None


def _clock_label(moment: datetime) -> str:
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"


def _part_lines(
    message: Message,
    count_tokens: Callable[[str], int],
    seen_calls: set[str],
    attachments: list[FilePart],
    max_result_tokens: int,
    max_arg_tokens: int,
) -> list[_Entry]:
    lines: list[_Entry] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                lines.append(_Text(part.text.strip()))
        elif isinstance(part, ReasoningPart):
            if part.text.strip():
                lines.append(f"Reasoning: {part.text.strip()}")
        elif isinstance(part, ToolCallPart):
            if part.tool_call_id in seen_calls:
                continue
            seen_calls.add(part.tool_call_id)
            args = truncate_to_tokens(format_args(part.args), max_arg_tokens, count_tokens)
            lines.append(f"Tool Call {part.tool_name}: {args}")
        elif isinstance(part, ToolResultPart):
            # A result implies its call; remember the id so a late echo of the call is not shown.
            seen_calls.add(part.tool_call_id)
            lines.append(_result_line(part, count_tokens, max_result_tokens))
        elif isinstance(part, FilePart):
            attachments.append(part)
            number = len(attachments)
            if part.is_image:
                lines.append(f"Image: [Image #{number}: {part.filename or _url_name(part) or 'image'}]")
            else:
                label = part.filename or _url_name(part) or part.media_type
                lines.append(f"File: [File #{number}: {label}]")
        elif isinstance(part, DataPart):
            continue
    return lines


def _url_name(part: FilePart) -> str | None:
    if part.url and not part.url.startswith("data:"):
        tail = part.url.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
        return tail or None
    return None


def _result_line(part: ToolResultPart, count_tokens: Callable[[str], int], max_tokens: int) -> str:
    kind = "Tool Error" if part.is_error else "Tool Result"
    if _is_empty(part.result):
        return f"{kind} {part.tool_name}: [empty result]"
    if isinstance(part.result, str):
        rendered = part.result.strip()
    else:
        rendered = json.dumps(_strip_data_uris(part.result), ensure_ascii=False, default=str)
    return f"{kind} {part.tool_name}: {truncate_to_tokens(rendered, max_tokens, count_tokens)}"


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, dict)):
        return len(value) == 0
    return False


def _strip_data_uris(value: Any, depth: int = 0) -> Any:
    """Replace long inline data (``data:`` URIs, base64 blobs) with a size placeholder."""
    if depth > 20:
        return value
    if isinstance(value, str):
        if len(value) > MAX_DATA_URI_CHARS and value.startswith("data:"):
            return f"[inline data, {len(value)} chars]"
        return value
    if isinstance(value, dict):
        return {k: _strip_data_uris(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip_data_uris(v, depth + 1) for v in value]
    return value


def format_args(args: dict[str, Any] | str) -> str:
    """An outline of tool-call arguments: JSON-like, bounded in width, depth and string length.

    String arguments that hold JSON are decoded first, so a provider that sends arguments as
    a JSON string reads the same as one that sends an object.
    """
    value: Any = args
    if isinstance(args, str):
        stripped = args.strip()
        if not stripped:
            return "{}"
        try:
            value = json.loads(stripped)
        except ValueError:
            return _clip(stripped)
    return _outline(value, 0)


def _clip(text: str) -> str:
    if len(text) <= MAX_INLINE_STRING_CHARS:
        return text
    return f"{text[:MAX_INLINE_STRING_CHARS]}… (+{len(text) - MAX_INLINE_STRING_CHARS} chars)"


def _outline(value: Any, depth: int) -> str:
    if isinstance(value, str):
        if value.startswith("data:") and len(value) > MAX_DATA_URI_CHARS:
            return f'"[inline data, {len(value)} chars]"'
        return json.dumps(_clip(value), ensure_ascii=False)
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return f"{{… {len(value)} keys}}" if value else "{}"
        items = list(value.items())
        shown = [f"{key}: {_outline(item, depth + 1)}" for key, item in items[:MAX_CONTAINER_ENTRIES]]
        if len(items) > MAX_CONTAINER_ENTRIES:
            shown.append(f"… +{len(items) - MAX_CONTAINER_ENTRIES} more")
        return "{" + ", ".join(shown) + "}"
    if isinstance(value, (list, tuple)):
        if depth >= MAX_DEPTH:
            return f"[… {len(value)} items]" if value else "[]"
        shown = [_outline(item, depth + 1) for item in value[:MAX_CONTAINER_ENTRIES]]
        if len(value) > MAX_CONTAINER_ENTRIES:
            shown.append(f"… +{len(value) - MAX_CONTAINER_ENTRIES} more")
        return "[" + ", ".join(shown) + "]"
    if value is None or isinstance(value, (bool, int, float)):
        return json.dumps(value)
    return json.dumps(_clip(str(value)), ensure_ascii=False)


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """``text`` cut (on a character boundary) to at most ``max_tokens``, with a marker saying so.

    The cut is found by proportional shrinking rather than bisection: a token counter is not
    free, and two or three rounds land within a few percent of the budget.
    """
    total = count_tokens(text)
    if total <= max_tokens:
        return text
    keep = len(text)
    for _ in range(8):
        keep = max(0, int(keep * max_tokens / max(total, 1) * 0.97))
        total = count_tokens(text[:keep])
        if total <= max_tokens:
            break
    return f"{text[:keep].rstrip()} … [truncated, {len(text) - keep} more chars]"

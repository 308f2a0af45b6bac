"""One message as text for a terminal: what a person reading the conversation needs to see.

Text stays as written; a tool call is drawn as ``→ tool name(arg='value', …)``, its result as
``← result name: …`` (``← error`` when it failed), reasoning and attachments by a short line;
obsmem's own markers (data parts) are left to the markers table. Long pieces are cut with ``…``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.markup import escape as escape_markup

from obsmem import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["clip", "counted", "escape", "escape_id", "one_line", "render_message", "render_part"]

#: How much of one argument value, one tool result, or one reasoning block is shown.
VALUE_CHARS = 80
RESULT_CHARS = 240


#: What a terminal takes as a command, not text: C0 controls but tab and newline (ESC, CR, BEL,
#: backspace, ...), DEL and the C1 controls (CSI included).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """``text`` from a store, safe to print with Rich: its markup escaped and each terminal
    control character shown as ``\\xNN`` (text is data: an escape sequence a user or a tool
    put in a message never moves the reader's cursor, recolours a line or makes a link)."""
    return escape_markup(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


#: Every control character, newline and tab included.
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


#: Invisible characters that change how the text around them reads: bidi marks, embeddings,
#: overrides and isolates (``t-\u202elive`` shows as ``t-evil``), zero-width characters, the BOM.
_INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def one_line(text: str) -> str:
    """``text`` (an id, a key, an error from a store) as plain text on one line: every control
    character, newline and tab included, shown as ``\\xNN``, so a newline in a thread id never
    makes a second table row or line, and nothing reaches the terminal as a command; and each
    invisible character that changes how the text reads (:data:`_INVISIBLE`) as ``\\uNNNN``, so
    an id shows what to type."""
    text = _ANY_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escape_id(text: str) -> str:
    """:func:`one_line`, safe to print with Rich (its markup escaped)."""
    return escape_markup(one_line(text))


#: Count nouns that take no plural ``s`` (export and erase summaries use these keys).
_UNCOUNTED = frozenset({"working_memory", "knowledge_forgotten", "knowledge_activity"})


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``1 message``, ``2 messages``. ``noun``
    may be given singular or plural (``messages``, ``thread``, ``knowledge_records``)."""
    if noun in _UNCOUNTED:
        return f"{n:,} {noun}"
    singular = noun[:-1] if noun.endswith("s") else noun
    return f"{n:,} {singular if n == 1 else singular + 's'}"


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…`` when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + "…"


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _call(part: ToolCallPart) -> str:
    if isinstance(part.args, str):  # providers may hand over the raw JSON text of the arguments
        arguments = clip(part.args, VALUE_CHARS)
    else:
        arguments = ", ".join(
            f"{name}={clip(value, VALUE_CHARS)!r}" if isinstance(value, str)
            else f"{name}={clip(_compact(value), VALUE_CHARS)}"
            for name, value in part.args.items()
        )  # fmt: skip
    return f"→ tool {part.tool_name}({arguments})"


def render_part(part: object, *, result_chars: int = RESULT_CHARS) -> str | None:
    """One part as a line of text, or None for a part a reader does not need (a marker)."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolCallPart):
        return _call(part)
    if isinstance(part, ToolResultPart):
        label = "error" if part.is_error else "result"
        return f"← {label} {part.tool_name}: {clip(_compact(part.result), result_chars)}"
    if isinstance(part, ReasoningPart):
        return f"(reasoning) {clip(part.text, result_chars)}"
    if isinstance(part, FilePart):
        name = part.filename or (part.url if part.url and not part.url.startswith("data:") else None)
        return f"(file {part.media_type}{' ' + name if name else ''})"
    if isinstance(part, DataPart):
        return None
    return f"({type(part).__name__})"


def render_message(message: Message, *, result_chars: int = RESULT_CHARS) -> str:
    """Every readable part of ``message``, one after another; ``(markers only)`` when none is."""
    lines = [line for part in message.parts if (line := render_part(part, result_chars=result_chars))]
    return "\n".join(lines) if lines else "(markers only)"

"""One message as text for a terminal: what a person reading the conversation needs to see.

Text stays as written, but for what would reach the terminal as a command or hide or reorder text
(controls, bidi overrides, zero-width and tag characters): those are spelled (``\\u202e``) by
:func:`escape`, :func:`visible` and :func:`one_line`. A tool call is drawn as
``→ tool name(arg='value', …)``, its result as ``← result name: …`` (``← error`` when it failed),
reasoning and attachments by a short line; obsmem's own markers (data parts) are left to the
markers table. Long pieces are cut with ``…``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.markup import escape as escape_markup

from obsmem import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "clip", "counted", "escape", "escape_id", "one_line", "render_message", "render_part", "spelled",
    "visible",
]  # fmt: skip

#: How much of one argument value, one tool result, or one reasoning block is shown.
VALUE_CHARS = 80
RESULT_CHARS = 240


def spelled(char: str) -> str:
    """``char`` as Python writes it in a string literal: ``\\x1b``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


#: In text (a message, an observation, a record): what a terminal takes as a command (C0 controls
#: but tab and newline: ESC, CR, BEL, backspace, ...; DEL, the C1 controls, CSI included), and
#: the invisible characters that change how the text around them reads or hide text: bidi
#: embeddings, overrides and isolates ("Trojan Source": ``t-\u202elive`` shows as ``t-evil``),
#: zero-width space, word joiner and invisible operators, the deprecated format characters, the
#: BOM, line and paragraph separators, interlinear annotations, shorthand and musical format
#: controls, and tag characters (which spell hidden ASCII). Left as written: the joiners (ZWJ,
#: ZWNJ), the soft hyphen and variation selectors, which scripts and emoji need and which hide
#: nothing (a flag built of tag characters, such as England's, shows its tags spelled), and the
#: bidi marks (LRM, RLM, ALM) and the Mongolian vowel separator, which Hebrew, Persian, Arabic and
#: Mongolian text holds and which reorder no run of letters, only the neutral characters next to
#: them. Ids (:func:`one_line`) spell those too.
_HIDDEN_IN_TEXT = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2028\u2029\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f]"
)


def visible(text: str) -> str:
    """``text`` from a store with each character of :data:`_HIDDEN_IN_TEXT` spelled
    (:func:`spelled`): text is data, so an escape sequence a user, a tool or a model put in it
    never moves the reader's cursor, recolours a line or makes a link, and a bidi override never
    reorders what the reader sees; each shows as what it is. Newlines and tabs stay."""
    return _HIDDEN_IN_TEXT.sub(lambda m: spelled(m.group()), text)


def _markup_escaped(text: str) -> str:
    """``text`` with its Rich markup escaped, to print as it is. Rich's escape gives a text ending
    in one backslash a second one, for a tag that might follow it (``C:\\dir\\[/dim]``), and
    that second one is then shown (``C:\\dir\\\\``): the CLI puts no tag right after escaped
    text, so it is left out."""
    escaped = escape_markup(text)
    if text.endswith("\\") and not text.endswith("\\\\") and escaped.endswith("\\\\"):
        return escaped[:-1]
    return escaped


def escape(text: str) -> str:
    """:func:`visible`, safe to print with Rich: its markup escaped. (The CLI's consoles draw no
    emoji codes, so ``:white_check_mark:`` in ``text`` prints as written.)"""
    return _markup_escaped(visible(text))


#: Characters that show as nothing, or as a space, though Python takes them as printable: Hangul
#: fillers, the braille blank, the combining grapheme joiner and the variation selectors.
_BLANK = frozenset("\u115f\u1160\u2800\u3164\uffa0\u034f") | frozenset(map(chr, range(0xFE00, 0xFE10))) | \
    frozenset(map(chr, range(0xE0100, 0xE01F0)))


def one_line(text: str) -> str:
    """``text`` (an id, a key, an error from a store) as plain text on one line, each character
    not plainly visible spelled (:func:`spelled`): every control, newline and tab included (a
    newline in a thread id never makes a second table row or line, nothing reaches the terminal
    as a command), every format character (bidi controls, zero-width characters, tags), every
    separator but the space (a no-break space, U+2028), private-use and unassigned characters,
    and those of :data:`_BLANK`; so an id shows what to type."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(spelled(ch) if not ch.isprintable() or ch in _BLANK else ch for ch in text)


def escape_id(text: str) -> str:
    """:func:`one_line`, safe to print with Rich (its markup escaped)."""
    return _markup_escaped(one_line(text))


#: Count nouns that take no plural ``s`` (export and erase summaries use these keys).
_UNCOUNTED = frozenset({"working_memory", "knowledge_forgotten", "knowledge_activity"})


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``1 message``, ``2 messages``. ``noun``
    may be given singular or plural (``messages``, ``thread``, ``knowledge_records``)."""
    if noun in _UNCOUNTED:
        return f"{n:,} {noun}"
    singular = noun[:-1] if noun.endswith("s") else noun
    return f"{n:,} {singular if n == 1 else singular + 's'}"


#: The whitespace :func:`clip` folds into one space. Not every character ``str.split`` takes as
#: whitespace: a carriage return, U+2028 or NEL is left for :func:`escape` to show.
_FOLDED = re.compile("[ \t\n]+")


def clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``…`` when longer."""
    flat = _FOLDED.sub(" ", text).strip(" ")
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

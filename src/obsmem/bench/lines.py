"""Line-level retention: is every answer token inside *one* line of the context?

Bag-of-words retention (:func:`obsmem.bench.normalize.context_tokens`) is lenient: a context
listing each distinct word of a conversation once holds almost every answer. Line-level
retention asks for the answer inside one *unit*: an observation line together with its
``Date:`` header (a child line also carries its parent), or one raw message together with its
day. A unit is what an actor would have to read to answer, so scattering words no longer pays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from obsmem.bench.normalize import context_tokens, token_present
from obsmem.om.text.format import format_date_header, parse_date_header
from obsmem.types import Message

__all__ = ["ContextUnit", "context_units", "find_unit", "message_text"]


@dataclass(frozen=True, slots=True)
class ContextUnit:
    """One scorable unit: its text (header included) and the normalised tokens it holds."""

    label: str  # "message 12" or "line 40"
    text: str
    tokens: frozenset[str]


def _unit(label: str, text: str) -> ContextUnit:
    return ContextUnit(label, text, context_tokens([text]))


def _observation_units(index: int, text: str) -> list[ContextUnit]:
    units: list[ContextUnit] = []
    header = ""
    parent = ""
    for number, raw in enumerate(text.splitlines()):
        line = raw.rstrip()
        if not line.strip():
            continue
        day = parse_date_header(line)
        if day is not None:
            header, parent = format_date_header(day), ""
            continue
        stripped = line.lstrip()
        is_child = stripped.startswith(("*", "-")) and len(line) - len(stripped) >= 2
        body = f"{parent}\n{stripped}" if is_child and parent else stripped
        if not is_child:
            parent = stripped
        units.append(_unit(f"message {index} line {number}", f"{header}\n{body}" if header else body))
    return units


def message_text(message: Message) -> str:
    """A message's text with its tool calls and results written out, as a model would see them."""
    pieces = [message.text] if message.text.strip() else []
    pieces += [f"[tool call {call.tool_name}] {json.dumps(call.args, default=str, ensure_ascii=False)}" for call in message.tool_calls]
    pieces += [f"[tool result {result.tool_name}] {json.dumps(result.result, default=str, ensure_ascii=False)}"
               for result in message.tool_results]  # fmt: skip
    return "\n".join(pieces)


def context_units(messages: Sequence[Message]) -> list[ContextUnit]:
    """The units of a context: system text line by line, any other message whole with its day."""
    units: list[ContextUnit] = []
    for index, message in enumerate(messages):
        text = message_text(message)
        if not text.strip():
            continue
        if message.role == "system":
            units.extend(_observation_units(index, text))
        else:
            day = format_date_header(message.created_at.date())
            units.append(_unit(f"message {index}", f"{day}\n{text}"))
    return units


def find_unit(answer: Sequence[str], units: Sequence[ContextUnit]) -> ContextUnit | None:
    """The first unit holding every answer token, or None."""
    if not answer:
        return None
    for unit in units:
        if all(token_present(token, unit.tokens) for token in answer):
            return unit
    return None

"""What ``recall`` returns, and how a message is shown at each detail level within a budget.

The result types are plain frozen dataclasses with :meth:`RecallResult.as_dict` for the tool
answer. Budgets follow the reference (§5.5): at ``detail="low"`` every part is shortened (text
to 100 tokens, a user's text to 200, tool calls and results to 20) so a page of messages shows
the shape of the conversation; ``detail="high"`` shows text in full and tool results up to 4000
tokens. The whole answer stays within ``token_budget`` (default 2000): what does not fit is
left out, ``truncated`` is set, and ``continue_with`` holds the arguments that fetch the rest.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from obsmem.om.text.transcript import format_args, truncate_to_tokens
from obsmem.types import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "Detail",
    "RecallMode",
    "RecallResult",
    "RecalledGroup",
    "RecalledMessage",
    "RecalledThread",
    "render_message",
]

RecallMode = Literal["messages", "threads", "search"]
Detail = Literal["low", "high"]

DEFAULT_TOKEN_BUDGET = 2000
_LOW_TEXT_TOKENS = 100
_LOW_USER_TEXT_TOKENS = 200
_LOW_TOOL_TOKENS = 20
_HIGH_TOOL_RESULT_TOKENS = 4000


@dataclass(frozen=True, slots=True)
class RecalledMessage:
    id: str
    seq: int
    thread_id: str
    role: str
    created_at: str
    text: str
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class RecalledThread:
    id: str
    title: str | None
    created_at: str
    updated_at: str
    current: bool


@dataclass(frozen=True, slots=True)
class RecalledGroup:
    """An observation group as recall reports it; ``score`` and ``snippet`` come with search."""

    id: str
    thread_id: str
    range: str
    first_message_id: str
    last_message_id: str
    kind: str
    score: float | None = None
    snippet: str | None = None


@dataclass(frozen=True, slots=True)
class RecallResult:
    """One recall answer. ``continue_with`` is set when ``truncated``: call recall with it.
    ``next_page`` (messages and threads modes, when ``has_next_page``): the arguments that read
    the next page from its first message or thread (a cursor), which costs one page however deep
    the reader has gone; on a truncated page it is ``continue_with`` (the first message the
    budget left out)."""

    mode: RecallMode
    detail: Detail
    page: int
    limit: int
    messages: tuple[RecalledMessage, ...] = ()
    threads: tuple[RecalledThread, ...] = ()
    groups: tuple[RecalledGroup, ...] = ()
    group: RecalledGroup | None = None
    has_next_page: bool = False
    has_prev_page: bool = False
    next_page: dict[str, Any] | None = None
    truncated: bool = False
    continue_with: dict[str, Any] | None = None
    next_char_offset: int | None = None
    tokens: int = 0
    note: str | None = None

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]

    def as_dict(self) -> dict[str, Any]:
        """The tool answer: JSON-ready, with empty and unset fields left out."""
        data = asdict(self)
        listed = {"messages": "messages", "threads": "threads", "search": "groups"}[self.mode]
        keep = {"mode", "detail", "page", "limit", "has_next_page", "has_prev_page", "truncated", listed}
        return {k: v for k, v in data.items() if k in keep or v not in (None, (), [], {}, 0)}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), ensure_ascii=False)


def _part_text(part: Any, role: str, detail: Detail, count: Callable[[str], int]) -> str | None:
    low = detail == "low"
    if isinstance(part, TextPart):
        if not low:
            return part.text
        limit = _LOW_USER_TEXT_TOKENS if role == "user" else _LOW_TEXT_TOKENS
        return truncate_to_tokens(part.text, limit, count)
    if isinstance(part, ToolCallPart):
        call = f"[tool call {part.tool_name}({format_args(part.args)})]"
        return truncate_to_tokens(call, _LOW_TOOL_TOKENS, count) if low else call
    if isinstance(part, ToolResultPart):
        kind = "tool error" if part.is_error else "tool result"
        value = (
            part.result
            if isinstance(part.result, str)
            else json.dumps(part.result, ensure_ascii=False, default=str)
        )
        limit = _LOW_TOOL_TOKENS if low else _HIGH_TOOL_RESULT_TOKENS
        return f"[{kind} {part.tool_name}] {truncate_to_tokens(value, limit, count)}"
    if isinstance(part, FilePart):
        return f"[file {part.filename or part.media_type}]"
    if isinstance(part, ReasoningPart | DataPart):
        return None  # reasoning is not a source of facts; markers are obsmem's own bookkeeping
    return None


def render_message(message: Message, detail: Detail, count: Callable[[str], int]) -> str:
    """The message's parts as text at ``detail``; deterministic, so char offsets are stable."""
    pieces = [_part_text(part, message.role, detail, count) for part in message.parts]
    return "\n".join(p for p in pieces if p)


def recalled(message: Message, text: str, truncated: bool = False) -> RecalledMessage:
    return RecalledMessage(
        id=message.id,
        seq=message.seq or 0,
        thread_id=message.thread_id or "",
        role=message.role,
        created_at=message.created_at.isoformat(),
        text=text,
        truncated=truncated,
    )

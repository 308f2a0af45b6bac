"""The agent-facing side of ``recall``: the tool definition, the instructions, the dispatcher.

An agent framework registers :func:`recall_tool_schema` as a tool, shows the actor the
context (which, in retrieval mode, carries :func:`recall_instructions`), and hands every
``recall`` tool call to ``Memory.call_recall_tool(thread_id, args)``. The dispatcher validates
the model's arguments and turns every mistake (an unknown mode, an id out of reach) into an
``{"error": ...}`` answer the model can read and correct, instead of an exception that would
end the agent's turn.

The instructions depend only on the retrieval options, so the context prefix that carries them
stays byte-stable across steps and turns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, cast, get_args

from obsmem.config import RetrievalConfig
from obsmem.errors import InvalidInputError, NotFoundError
from obsmem.om.recall.recaller import MAX_MESSAGES, MAX_SEARCH_RESULTS, MAX_THREADS, RecallRequest
from obsmem.om.recall.render import DEFAULT_TOKEN_BUDGET, Detail, RecallMode, RecallResult

__all__ = [
    "RECALL_TOOL_NAME",
    "dispatch_recall",
    "parse_recall_arguments",
    "recall_instructions",
    "recall_tool_schema",
]

RECALL_TOOL_NAME = "recall"
ToolFlavor = Literal["generic", "openai", "anthropic"]


def _modes(config: RetrievalConfig) -> list[str]:
    modes = ["messages", "threads"]
    if config.vector:
        modes.append("search")
    return modes


def recall_tool_schema(
    config: RetrievalConfig | None = None, *, flavor: ToolFlavor = "generic"
) -> dict[str, Any]:
    """The ``recall`` tool as a JSON-schema definition.

    ``generic``: ``{"name", "description", "parameters"}``; ``openai`` wraps it as a function
    tool (``{"type": "function", "function": {...}}``); ``anthropic`` names the schema
    ``input_schema``. Without ``search`` when vector retrieval is off.
    """
    config = config or RetrievalConfig(enabled=True)
    properties: dict[str, Any] = {
        "mode": {
            "type": "string",
            "enum": _modes(config),
            "description": "messages (default): raw messages of a group, or from a cursor; threads: list "
            "conversations; search: find groups by meaning.",
        },
        "group_id": {
            "type": "string",
            "description": "An observation group id from your memory (## Group `<id>`).",
        },
        "cursor": {
            "type": "string",
            "description": "Where a page starts: the cursor of an answer's next_page as given, or a "
            "message id (messages mode) or thread id (threads mode).",
        },
        "anchor": {
            "type": "string",
            "enum": ["start", "end"],
            "description": "start: read forward from the cursor (default); end: read backward, up to it.",
        },
        "thread_id": {"type": "string", "description": "A conversation id from mode threads, or 'current'."},
        "page": {
            "type": "integer",
            "description": "1 (default), 2, 3 … continue (or pass the answer's next_page); "
            "-1 reads the other way.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_THREADS,
            "description": f"Items per page (messages and search at most {MAX_MESSAGES}).",
        },
        "detail": {
            "type": "string",
            "enum": ["low", "high"],
            "description": "low (default) shortens long parts; high shows them in full.",
        },
        "char_offset": {
            "type": "integer",
            "minimum": 0,
            "description": "Continue one long message from this character (from continue_with).",
        },
    }
    if config.vector:
        properties["query"] = {"type": "string", "description": "What to look for (search mode)."}
    parameters = {"type": "object", "properties": properties, "additionalProperties": False}
    description = (
        "Read the original messages behind your memory's observation groups, page through earlier "
        "conversation, or list conversations. Use it when you need exact wording, details or verification."
    )
    if flavor == "openai":
        return {
            "type": "function",
            "function": {"name": RECALL_TOOL_NAME, "description": description, "parameters": parameters},
        }
    if flavor == "anthropic":
        return {"name": RECALL_TOOL_NAME, "description": description, "input_schema": parameters}
    return {"name": RECALL_TOOL_NAME, "description": description, "parameters": parameters}


def recall_instructions(config: RetrievalConfig) -> str:
    """What the actor is told about recall (appended to the memory preamble)."""
    lines = [
        "<recall-instructions>",
        "Your observations are grouped. Each group starts with a heading like ## Group `<id>` and it",
        "summarises a run of the original messages. Call the `recall` tool when the summary is not enough:",
        "the user asks you to repeat, quote or show something exactly (code, numbers, names, links), you",
        "need to verify a detail before relying on it, or you need what was said around a point.",
        '- mode "messages" with group_id returns exactly the messages that group covers; with cursor (a',
        '  message id) it reads on from that message (anchor "start") or back up to it (anchor "end");',
        '  to read on, call recall again with the arguments in "next_page".',
    ]
    if config.scope == "resource":
        lines.append(
            '- mode "threads" lists this user\'s other conversations (read on with "next_page"); pass '
            "thread_id to read one."
        )
    if config.vector:
        lines.append('- mode "search" with a query finds the groups that mention something; then read them.')
    lines += [
        '- detail "low" (default) shortens long messages and tool output; use detail "high" for full text.',
        '- When an answer says "truncated": true, call recall again with the arguments in "continue_with".',
        "Use what recall returns as if you remembered it; do not mention the tool or your memory.",
    ]
    if config.instructions:
        lines += ["", "Additional guidance:", config.instructions.strip()]
    lines.append("</recall-instructions>")
    return "\n".join(lines)


_ARGUMENTS = {
    "mode",
    "group_id",
    "cursor",
    "anchor",
    "thread_id",
    "query",
    "page",
    "limit",
    "detail",
    "char_offset",
}


def _text(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"recall argument '{name}' must be a string, got {type(value).__name__}.")
    if "\x00" in value:  # no id holds one, and PostgreSQL refuses it in any text parameter
        raise InvalidInputError(f"recall argument '{name}' must not contain a NUL character.")
    return value.strip() or None


def _integer(args: Mapping[str, Any], name: str, default: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInputError(f"recall argument '{name}' must be an integer, got {value!r}.")
    try:
        number = int(value)
        whole = number == float(value)
    except (ValueError, OverflowError):  # "x", NaN, ±inf (1e400), an int past a float's range
        raise InvalidInputError(
            f"recall argument '{name}' must be an integer, got {_shown(value)}."
        ) from None
    if not whole:
        raise InvalidInputError(f"recall argument '{name}' must be a whole number, got {_shown(value)}.")
    if abs(number) > _MAX_INTEGER:
        raise InvalidInputError(
            f"recall argument '{name}' is out of range, got {_shown(value)} "
            f"(at most {_MAX_INTEGER} either way)."
        )
    return number


_MAX_INTEGER = 2**31 - 1
"""No page, limit or offset is larger; bigger numbers are refused, not carried into the store."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _choice(args: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = _text(args, name) or default
    if value not in allowed:
        raise InvalidInputError(
            f"recall argument '{name}' must be one of {', '.join(allowed)}; got {value!r}."
        )
    return value


def parse_recall_arguments(
    args: Mapping[str, Any], *, token_budget: int = DEFAULT_TOKEN_BUDGET
) -> RecallRequest:
    """A tool call's arguments as a :class:`RecallRequest`; InvalidInputError names what is wrong."""
    unknown = sorted(set(args) - _ARGUMENTS)
    if unknown:
        raise InvalidInputError(
            f"Unknown recall argument(s) {unknown}; allowed: {', '.join(sorted(_ARGUMENTS))}."
        )
    mode = cast(RecallMode, _choice(args, "mode", get_args(RecallMode), "messages"))
    return RecallRequest(
        mode=mode,
        group_id=_text(args, "group_id"),
        cursor=_text(args, "cursor"),
        thread_id=_text(args, "thread_id"),
        anchor=cast(Literal["start", "end"], _choice(args, "anchor", ("start", "end"), "start")),
        query=_text(args, "query"),
        page=_integer(args, "page", 1),
        limit=_integer(args, "limit", MAX_SEARCH_RESULTS if mode == "search" else MAX_MESSAGES),
        detail=cast(Detail, _choice(args, "detail", get_args(Detail), "low")),
        token_budget=token_budget,
        char_offset=_integer(args, "char_offset", 0),
    )


async def dispatch_recall(
    recall: Callable[[RecallRequest], Awaitable[RecallResult]],
    args: Mapping[str, Any] | None,
    *,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
) -> dict[str, Any]:
    """Run one ``recall`` tool call; mistakes come back as ``{"error": ...}`` for the model."""
    if args is not None and not isinstance(args, Mapping):
        return {"error": f"recall arguments must be an object, got {type(args).__name__}."}
    try:
        request = parse_recall_arguments(args or {}, token_budget=token_budget)
        result = await recall(request)
    except (InvalidInputError, NotFoundError) as exc:
        return {"error": str(exc)}
    return result.as_dict()

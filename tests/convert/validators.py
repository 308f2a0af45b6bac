"""What each provider accepts, as reusable checks: a list of problems, empty when valid.

The ordering rules are the ones providers enforce with an HTTP 400:

- OpenAI Chat Completions: every ``tool`` message answers a call of the assistant message right
  before it (only other ``tool`` messages in between), and every call of an assistant message is
  answered before the next non-``tool`` message;
- OpenAI Responses: every ``function_call_output`` answers an earlier, unanswered
  ``function_call``; every call is answered before the next non-assistant message; a
  ``reasoning`` item is followed by the output item it belongs to; assistant messages hold only
  ``output_text``/``refusal``;
- Anthropic Messages: roles alternate user/assistant; every ``tool_use`` of an assistant turn is
  answered by a ``tool_result`` in the very next (user) turn, every ``tool_result`` answers a
  ``tool_use`` of the turn right before it, and ``tool_result`` blocks come first in their turn;
  text blocks (and the system prompt) are never blank.

``allow_pending_calls`` accepts calls of the newest assistant message left unanswered at the very
end (a turn waiting for its tools); nothing may follow them.

Use :func:`provider_problems` / :func:`assert_valid_for_providers` on any list of obsmem messages
(e.g. every ``turn.context.messages``): it converts them with :mod:`obsmem.convert` and checks
the result against all three formats, plus the obsmem-level pairing rule
(:func:`tool_pairing_problems`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from obsmem.convert import to_anthropic, to_openai, to_openai_responses
from obsmem.types import Message

__all__ = [
    "anthropic_problems",
    "assert_valid_anthropic",
    "assert_valid_for_providers",
    "assert_valid_openai_chat",
    "assert_valid_openai_responses",
    "openai_chat_problems",
    "openai_responses_problems",
    "provider_problems",
    "tool_pairing_problems",
]


def _is_str(value: object, *, non_empty: bool = False) -> bool:
    return isinstance(value, str) and (bool(value) or not non_empty)


def _blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


# -- obsmem level --------------------------------------------------------------------------


def tool_pairing_problems(messages: Sequence[Message], *, allow_pending_calls: bool = False) -> list[str]:
    """Each result follows its call; each call is answered before the next message a model sees.

    Mirrors where the converters put things: a message's results for earlier calls come before
    it, results for its own calls after it; a message with text, an attachment or a call is a
    boundary that every earlier call must be answered before.
    """
    problems: list[str] = []
    pending: dict[str, int] = {}
    answered: set[str] = set()

    def answer(i: int, call_id: str) -> None:
        if call_id in pending:
            pending.pop(call_id)
            answered.add(call_id)
        elif call_id in answered:
            problems.append(f"message {i}: call {call_id!r} is answered twice")
        else:
            problems.append(f"message {i}: the result for {call_id!r} has no earlier call")

    for i, message in enumerate(messages):
        own = {c.tool_call_id for c in message.tool_calls}
        for result in message.tool_results:
            if result.tool_call_id not in own:
                answer(i, result.tool_call_id)
        if any(p.type in ("text", "file", "tool-call") for p in message.parts) and pending:
            problems.append(
                f"message {i} ({message.role}) comes before the results of calls {sorted(pending)}"
            )
            pending.clear()
        for call in message.tool_calls:
            if message.role != "assistant":
                problems.append(f"message {i}: a {message.role} message carries a tool call")
            if call.tool_call_id in pending:
                problems.append(f"message {i}: call id {call.tool_call_id!r} is used twice")
            answered.discard(call.tool_call_id)
            pending[call.tool_call_id] = i
        for result in message.tool_results:
            if result.tool_call_id in own:
                answer(i, result.tool_call_id)
    if pending and not allow_pending_calls:
        problems.append(f"calls {sorted(pending)} are never answered")
    return problems


# -- OpenAI Chat Completions -----------------------------------------------------------------

_CHAT_USER_PARTS = {"text", "image_url", "input_audio", "file"}


def _chat_content_problems(where: str, role: str, content: object) -> list[str]:
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"{where}: {role} content must be a string or a non-empty list of parts"]
    allowed = _CHAT_USER_PARTS if role == "user" else {"text", "refusal"} if role == "assistant" else {"text"}
    problems = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            problems.append(f"{where}.content[{j}]: part type {kind!r} is not allowed in a {role} message")
        elif kind == "text" and not _is_str(part.get("text")):
            problems.append(f"{where}.content[{j}]: text must be a string")
        elif kind == "image_url":
            image = part.get("image_url")
            if not isinstance(image, Mapping) or not _is_str(image.get("url"), non_empty=True):
                problems.append(f"{where}.content[{j}]: image_url needs a url")
            elif image.get("detail") not in (None, "low", "high", "auto"):
                problems.append(f"{where}.content[{j}]: bad image detail {image.get('detail')!r}")
        elif kind == "input_audio":
            audio = part.get("input_audio")
            if not isinstance(audio, Mapping) or audio.get("format") not in ("wav", "mp3"):
                problems.append(f"{where}.content[{j}]: input_audio needs data and a wav/mp3 format")
        elif kind == "file":
            spec = part.get("file")
            if not isinstance(spec, Mapping) or not (spec.get("file_data") or spec.get("file_id")):
                problems.append(f"{where}.content[{j}]: file needs file_data or file_id")
    return problems


def openai_chat_problems(
    messages: Sequence[Mapping[str, Any]], *, allow_pending_calls: bool = False
) -> list[str]:
    """Problems OpenAI Chat Completions would reject ``messages`` for (empty when valid)."""
    problems: list[str] = []
    pending: dict[str, int] = {}
    in_tool_block = False
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            problems.append(f"{where}: not an object")
            continue
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not _is_str(call_id, non_empty=True):
                problems.append(f"{where}: tool message without tool_call_id")
            elif not in_tool_block:
                problems.append(
                    f"{where}: tool message for {call_id!r} does not follow an assistant message with tool_calls"
                )
            elif call_id not in pending:
                problems.append(
                    f"{where}: tool message answers {call_id!r}, which the assistant message before did "
                    "not call (or which was already answered)"
                )
            else:
                pending.pop(call_id)
            problems += _chat_content_problems(where, "tool", message.get("content"))
            continue
        if pending:
            problems.append(f"{where}: {role} message before the calls {sorted(pending)} were answered")
        pending, in_tool_block = {}, False
        if role in ("system", "developer", "user"):
            problems += _chat_content_problems(where, str(role), message.get("content"))
        elif role == "assistant":
            content, calls = message.get("content"), message.get("tool_calls")
            if content is not None:
                problems += _chat_content_problems(where, "assistant", content)
            if calls is not None and (not isinstance(calls, list) or not calls):
                problems.append(f"{where}: tool_calls must be a non-empty list when present")
                calls = None
            if content is None and not calls and not message.get("refusal"):
                problems.append(f"{where}: assistant message with neither content nor tool_calls")
            for j, call in enumerate(calls or []):
                function = call.get("function") if isinstance(call, Mapping) else None
                if (
                    not isinstance(call, Mapping)
                    or call.get("type") != "function"
                    or not _is_str(call.get("id"), non_empty=True)
                    or not isinstance(function, Mapping)
                    or not _is_str(function.get("name"), non_empty=True)
                    or not _is_str(function.get("arguments"))
                ):
                    problems.append(
                        f"{where}.tool_calls[{j}]: needs id, type 'function', name, arguments string"
                    )
                    continue
                if call["id"] in pending:
                    problems.append(f"{where}.tool_calls[{j}]: duplicate call id {call['id']!r}")
                pending[call["id"]] = i
            in_tool_block = bool(pending)
        else:
            problems.append(f"{where}: unknown role {role!r}")
    if pending and not allow_pending_calls:
        problems.append(f"the calls {sorted(pending)} are never answered")
    return problems


# -- OpenAI Responses ------------------------------------------------------------------------

_RESPONSES_INPUT_PARTS = {"input_text", "input_image", "input_file", "input_audio"}


def _responses_message_problems(where: str, item: Mapping[str, Any]) -> list[str]:
    role, content = item.get("role"), item.get("content")
    if role not in ("user", "system", "developer", "assistant"):
        return [f"{where}: unknown message role {role!r}"]
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"{where}: content must be a string or a non-empty list of parts"]
    allowed = {"output_text", "refusal"} if role == "assistant" else _RESPONSES_INPUT_PARTS
    problems = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in allowed:
            problems.append(f"{where}.content[{j}]: part type {kind!r} is not allowed in a {role} message")
        elif kind in ("input_text", "output_text") and not _is_str(part.get("text")):
            problems.append(f"{where}.content[{j}]: text must be a string")
        elif kind == "input_image":
            if not (_is_str(part.get("image_url"), non_empty=True) or part.get("file_id")):
                problems.append(f"{where}.content[{j}]: input_image needs image_url or file_id")
            if part.get("detail") not in ("low", "high", "auto"):
                problems.append(f"{where}.content[{j}]: input_image needs detail low/high/auto")
        elif kind == "input_file" and not (
            part.get("file_data") or part.get("file_url") or part.get("file_id")
        ):
            problems.append(f"{where}.content[{j}]: input_file needs file_data, file_url or file_id")
    return problems


def openai_responses_problems(
    items: Sequence[Mapping[str, Any]], *, allow_pending_calls: bool = False
) -> list[str]:
    """Problems the OpenAI Responses API would reject ``input=items`` for (empty when valid)."""
    problems: list[str] = []
    pending: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: not an object")
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "function_call":
            call_id = item.get("call_id")
            if not (
                _is_str(call_id, non_empty=True)
                and _is_str(item.get("name"), non_empty=True)
                and _is_str(item.get("arguments"))
            ):
                problems.append(f"{where}: function_call needs call_id, name and an arguments string")
                continue
            if call_id in pending:
                problems.append(f"{where}: duplicate call id {call_id!r}")
            answered.discard(str(call_id))
            pending[str(call_id)] = i
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(item.get("output"), str | list):
                problems.append(f"{where}: function_call_output needs an output")
            if call_id in pending:
                pending.pop(str(call_id))
                answered.add(str(call_id))
            else:
                problems.append(
                    f"{where}: output for {call_id!r} answers no earlier unanswered function_call"
                )
        elif kind == "reasoning":
            if not _is_str(item.get("id"), non_empty=True) or not isinstance(item.get("summary"), list):
                problems.append(f"{where}: reasoning item needs its id and a summary list")
            following = items[i + 1] if i + 1 < len(items) else None
            following_kind = (
                following.get("type", "message" if "role" in following else None)
                if isinstance(following, Mapping)
                else None
            )
            if following_kind not in ("message", "function_call"):
                problems.append(f"{where}: reasoning item is not followed by the item it belongs to")
        elif kind == "message":
            problems += _responses_message_problems(where, item)
            if pending and item.get("role") != "assistant":
                problems.append(f"{where}: message before the calls {sorted(pending)} were answered")
                pending.clear()
        else:
            problems.append(f"{where}: unknown item type {kind!r}")
    if pending and not allow_pending_calls:
        problems.append(f"the calls {sorted(pending)} are never answered")
    return problems


# -- Anthropic -----------------------------------------------------------------------------

_ANTHROPIC_BLOCKS = {
    "user": {"text", "image", "document", "tool_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def _anthropic_block_problems(where: str, role: str, block: object) -> list[str]:
    kind = block.get("type") if isinstance(block, Mapping) else None
    if not isinstance(block, Mapping) or kind not in _ANTHROPIC_BLOCKS[role]:
        return [f"{where}: block type {kind!r} is not allowed in a {role} turn"]
    if kind == "text" and _blank(block.get("text")):
        return [f"{where}: text blocks must contain non-whitespace text"]
    if kind in ("image", "document"):
        source = block.get("source")
        if not isinstance(source, Mapping) or source.get("type") not in ("base64", "url", "text"):
            return [f"{where}: {kind} needs a base64, url or text source"]
        if source["type"] == "base64" and kind == "image" and source.get("media_type") not in _IMAGE_TYPES:
            return [f"{where}: image media type {source.get('media_type')!r} is not accepted"]
        if (
            source["type"] == "base64"
            and kind == "document"
            and source.get("media_type") != "application/pdf"
        ):
            return [f"{where}: base64 documents must be PDFs"]
        if source["type"] == "text" and (kind != "document" or not _is_str(source.get("data"))):
            return [f"{where}: a text source needs data and belongs to a document"]
    if kind == "tool_use" and not (
        _is_str(block.get("id"), non_empty=True)
        and _is_str(block.get("name"), non_empty=True)
        and isinstance(block.get("input"), Mapping)
    ):
        return [f"{where}: tool_use needs id, name and an input object"]
    if kind == "tool_result":
        if not _is_str(block.get("tool_use_id"), non_empty=True):
            return [f"{where}: tool_result needs tool_use_id"]
        if "content" in block and not isinstance(block["content"], str | list):
            return [f"{where}: tool_result content must be a string or a list"]
        if not isinstance(block.get("is_error", False), bool):
            return [f"{where}: is_error must be a boolean"]
    if kind == "thinking" and not (_is_str(block.get("thinking")) and _is_str(block.get("signature"))):
        return [f"{where}: thinking needs its text and signature"]
    return []


def anthropic_problems(
    system: object,
    messages: Sequence[Mapping[str, Any]],
    *,
    allow_pending_calls: bool = False,
    require_user_first: bool = False,
) -> list[str]:
    """Problems the Anthropic Messages API would reject ``(system, messages)`` for (empty when valid).

    ``require_user_first``: Bedrock and Vertex refuse a conversation that opens with an
    assistant turn (the first-party API accepts it).
    """
    problems: list[str] = []
    if isinstance(system, str):
        if system and not system.strip():
            problems.append("system: must not be whitespace only")
    elif isinstance(system, list):
        for j, block in enumerate(system):
            if not isinstance(block, Mapping) or block.get("type") != "text" or _blank(block.get("text")):
                problems.append(f"system[{j}]: must be a text block with non-whitespace text")
    elif system is not None:
        problems.append("system: must be a string or a list of text blocks")
    if not messages:
        problems.append("messages: at least one message is required")
    previous_role: object = None
    previous_calls: set[str] = set()
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role must be user or assistant, got {role!r}")
            previous_role, previous_calls = role, set()
            continue
        if role == previous_role:
            problems.append(f"{where}: two {role} turns in a row (roles must alternate)")
        if i == 0 and require_user_first and role != "user":
            problems.append(f"{where}: the first message must use the user role")
        content = message.get("content")
        blocks: list[Any]
        if isinstance(content, str):
            if not content.strip():
                problems.append(f"{where}: content must not be blank")
            blocks = []
        elif isinstance(content, list) and content:
            blocks = content
        else:
            problems.append(f"{where}: content must be a string or a non-empty list of blocks")
            blocks = []
        for j, block in enumerate(blocks):
            problems += _anthropic_block_problems(f"{where}.content[{j}]", role, block)
        kinds = [b.get("type") if isinstance(b, Mapping) else None for b in blocks]
        if role == "user":
            results = [
                b.get("tool_use_id")
                for b in blocks
                if isinstance(b, Mapping) and b.get("type") == "tool_result"
            ]
            first_other = next((j for j, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if any(k == "tool_result" for k in kinds[first_other:]):
                problems.append(f"{where}: tool_result blocks must come before any other block")
            for call_id in results:
                if call_id not in previous_calls:
                    problems.append(
                        f"{where}: tool_result for {call_id!r} answers no tool_use of the turn right before"
                    )
                previous_calls.discard(str(call_id))
            waiting_at_the_end = allow_pending_calls and i == len(messages) - 1
            if previous_calls and not waiting_at_the_end:
                problems.append(
                    f"{where}: tool_use ids {sorted(previous_calls)} have no tool_result in this turn"
                )
                previous_calls = set()
        else:
            if previous_calls:
                problems.append(
                    f"{where}: tool_use ids {sorted(previous_calls)} have no tool_result in the next turn"
                )
            calls = [b.get("id") for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
            if len(set(calls)) != len(calls):
                problems.append(f"{where}: duplicate tool_use ids")
            previous_calls = {str(c) for c in calls}
        previous_role = role
    if previous_calls and not allow_pending_calls:
        problems.append(f"tool_use ids {sorted(previous_calls)} are never answered")
    return problems


# -- all at once ---------------------------------------------------------------------------


def provider_problems(
    messages: Sequence[Message], *, allow_pending_calls: bool = False
) -> dict[str, list[str]]:
    """Convert ``messages`` for every provider and check each result; the non-empty lists by name."""
    system, anthropic = to_anthropic(messages)
    found = {
        "obsmem": tool_pairing_problems(messages, allow_pending_calls=allow_pending_calls),
        "openai": openai_chat_problems(to_openai(messages), allow_pending_calls=allow_pending_calls),
        "openai-responses": openai_responses_problems(
            to_openai_responses(messages), allow_pending_calls=allow_pending_calls
        ),
        "anthropic": anthropic_problems(system, anthropic, allow_pending_calls=allow_pending_calls),
    }
    return {name: problems for name, problems in found.items() if problems}


def _fail(problems: list[str] | dict[str, list[str]], wire: object) -> None:
    if problems:
        raise AssertionError(f"invalid for the provider: {problems}\n{wire!r}"[:4000])


def assert_valid_openai_chat(messages: Sequence[Mapping[str, Any]], **options: bool) -> None:
    _fail(openai_chat_problems(messages, **options), messages)


def assert_valid_openai_responses(items: Sequence[Mapping[str, Any]], **options: bool) -> None:
    _fail(openai_responses_problems(items, **options), items)


def assert_valid_anthropic(system: object, messages: Sequence[Mapping[str, Any]], **options: bool) -> None:
    _fail(anthropic_problems(system, messages, **options), messages)


def assert_valid_for_providers(messages: Sequence[Message], *, allow_pending_calls: bool = False) -> None:
    """Assert that ``messages`` (e.g. ``turn.context.messages``) is valid for OpenAI and Anthropic."""
    _fail(provider_problems(messages, allow_pending_calls=allow_pending_calls), messages)

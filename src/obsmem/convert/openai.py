"""obsmem messages ↔ OpenAI Chat Completions ``messages`` (and every server that speaks it).

Toward OpenAI (:func:`to_openai`):

- system text → ``{"role": "system"}`` (or ``"developer"`` with ``system_role="developer"``);
- user text → ``content`` as a string, or a content-part array when there are attachments:
  images as ``image_url`` (URL or data URI, with ``detail``), wav/mp3 audio as ``input_audio``,
  other inline files as ``file`` (``file_data`` data URI); a file the API cannot take in that
  place (a URL-only document, anything in an assistant or system message) becomes the text
  ``[attachment: <name>]``;
- assistant text → ``content`` (``None`` when the message only calls tools); tool calls →
  ``tool_calls`` with ``function.arguments`` a JSON string;
- every tool result → its own ``{"role": "tool", "tool_call_id", "content"}``; a result that is
  not a string is JSON-encoded. Results come before the message that holds them, except those
  answering that same message's calls, which come after it;
- reasoning and data parts are never sent (Chat Completions takes no reasoning back).

From OpenAI (:func:`from_openai`): one obsmem message per wire message; ``developer`` becomes
``system``; ``refusal`` becomes text; ``reasoning_content``/``reasoning`` (DeepSeek, vLLM,
OpenRouter) becomes a reasoning part; arguments that are a JSON object become a dict, anything
else stays text. A tool message carries only the call id, so the tool's name comes from the
assistant message that made the call, earlier in the list or in ``history``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from obsmem.convert._common import (
    CallNames,
    Loc,
    as_list,
    as_object,
    attachment_text,
    data_uri,
    file_from_source,
    json_text,
    optional_str,
    parse_arguments,
    raw_base64,
    require_str,
    speaker_metadata,
    split_results,
    to_messages,
    top_level_items,
    wire_name,
)
from obsmem.errors import InvalidInputError
from obsmem.types import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["from_openai", "to_openai"]

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def _file_content(part: FilePart) -> dict[str, Any]:
    if part.is_image and (part.url or part.data):
        image: dict[str, Any] = {"url": data_uri(part) or part.url}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    inline = raw_base64(part)
    if inline is not None and inline[0].lower() in _AUDIO_FORMATS:
        return {
            "type": "input_audio",
            "input_audio": {"data": inline[1], "format": _AUDIO_FORMATS[inline[0].lower()]},
        }
    uri = data_uri(part)
    if uri is not None:
        return {"type": "file", "file": {"file_data": uri, "filename": part.filename or "attachment"}}
    return {"type": "text", "text": attachment_text(part)}


def _tool_message(result: ToolResultPart) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": result.tool_call_id, "content": json_text(result.result)}


def _entry(message: Message, system_role: str) -> dict[str, Any] | None:
    """The message's own wire entry (its results aside), or None when nothing is left to send."""
    if message.role == "assistant":
        texts = [
            p.text if isinstance(p, TextPart) else attachment_text(p)
            for p in message.parts
            if isinstance(p, TextPart | FilePart)
        ]
        calls = [
            {
                "id": c.tool_call_id,
                "type": "function",
                "function": {"name": c.tool_name, "arguments": json_text(c.args)},
            }
            for c in message.tool_calls
        ]
        if not texts and not calls:
            return None
        entry: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
        if calls:
            entry["tool_calls"] = calls
        return entry
    if message.tool_calls:
        raise InvalidInputError(
            f"Message {message.id!r} has role '{message.role}' but carries tool calls; only "
            "assistant messages call tools"
        )
    if message.role == "system":
        texts = [
            p.text if isinstance(p, TextPart) else attachment_text(p)
            for p in message.parts
            if isinstance(p, TextPart | FilePart)
        ]
        return {"role": system_role, "content": "\n".join(texts)} if texts else None
    # user, and whatever a tool message holds besides its results
    content = [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else _file_content(p)
        for p in message.parts
        if isinstance(p, TextPart | FilePart)
    ]
    if not content:
        return None
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": "user", "content": content[0]["text"]}
    return {"role": "user", "content": content}


def to_openai(
    messages: Iterable[Message | Mapping[str, Any]], *, system_role: Literal["system", "developer"] = "system"
) -> list[dict[str, Any]]:
    """obsmem messages as Chat Completions ``messages``: pass the result as ``messages=``."""
    if system_role not in ("system", "developer"):
        raise InvalidInputError(f"system_role must be 'system' or 'developer', got {system_role!r}")
    wire: list[dict[str, Any]] = []
    for message in to_messages(messages, "to_openai"):
        before, after = split_results(message)
        wire.extend(_tool_message(r) for r in before)
        entry = _entry(message, system_role)
        if entry is not None:
            name = wire_name(message)
            if name is not None and entry["role"] != "tool":
                entry["name"] = name
            wire.append(entry)
        wire.extend(_tool_message(r) for r in after)
    return wire


# -- from OpenAI ---------------------------------------------------------------------------

_WHAT = "OpenAI chat message"


def _text_parts(content: object, loc: Loc, *, allowed: tuple[str, ...] = ("text",)) -> list[Part]:
    """``content`` as text parts: a string, or an array of ``text`` (and ``refusal``) parts."""
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for i, raw in enumerate(as_list(content, loc)):
        item_loc = loc.at(i)
        item = as_object(raw, item_loc)
        kind = require_str(item, "type", item_loc)
        if kind not in allowed:
            raise item_loc.at("type").error(
                f"unsupported content part type {kind!r} here (allowed: {', '.join(allowed)})"
            )
        parts.append(TextPart(text=require_str(item, "refusal" if kind == "refusal" else "text", item_loc)))
    return parts


def _user_parts(content: object, loc: Loc) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for i, raw in enumerate(as_list(content, loc)):
        item_loc = loc.at(i)
        item = as_object(raw, item_loc)
        kind = require_str(item, "type", item_loc)
        if kind == "text":
            parts.append(TextPart(text=require_str(item, "text", item_loc)))
        elif kind == "image_url":
            image_loc = item_loc.at("image_url")
            image = as_object(item.get("image_url"), image_loc)
            url = require_str(image, "url", image_loc, non_empty=True)
            detail = optional_str(image, "detail", image_loc)
            if detail not in (None, "low", "high", "auto"):
                raise image_loc.at("detail").error(f"expected 'low', 'high' or 'auto', got {detail!r}")
            file = file_from_source(
                image_loc,
                media_type=None,
                url=None if url.startswith("data:") else url,
                data=url if url.startswith("data:") else None,
                default_type="image/*",
            )
            parts.append(file.model_copy(update={"detail": detail}) if detail else file)
        elif kind == "input_audio":
            audio_loc = item_loc.at("input_audio")
            audio = as_object(item.get("input_audio"), audio_loc)
            data = require_str(audio, "data", audio_loc, non_empty=True)
            fmt = require_str(audio, "format", audio_loc)
            parts.append(
                file_from_source(
                    audio_loc,
                    media_type=_AUDIO_TYPES.get(fmt, f"audio/{fmt}"),
                    url=None,
                    data=data,
                    default_type="audio/wav",
                )
            )
        elif kind == "file":
            file_loc = item_loc.at("file")
            spec = as_object(item.get("file"), file_loc)
            file_data = optional_str(spec, "file_data", file_loc)
            if file_data is None:
                raise file_loc.at("file_data").error(
                    "only inline files (file_data) can be converted; "
                    "a file_id refers to a file stored at OpenAI"
                )
            parts.append(
                file_from_source(
                    file_loc,
                    media_type=None,
                    url=None,
                    data=file_data,
                    filename=optional_str(spec, "filename", file_loc),
                    default_type="application/octet-stream",
                )
            )
        else:
            raise item_loc.at("type").error(
                f"unsupported content part type {kind!r} (expected text, image_url, input_audio or file)"
            )
    return parts


def _assistant_parts(item: Mapping[str, Any], loc: Loc, names: CallNames) -> list[Part]:
    parts: list[Part] = []
    for key in ("reasoning_content", "reasoning"):
        reasoning = item.get(key)
        if isinstance(reasoning, str) and reasoning:
            parts.append(ReasoningPart(text=reasoning))
            break
    if "content" in item:
        parts.extend(_text_parts(item["content"], loc.at("content"), allowed=("text", "refusal")))
    refusal = optional_str(item, "refusal", loc)
    if refusal:
        parts.append(TextPart(text=refusal))
    if "function_call" in item:
        raise loc.at("function_call").error(
            "the deprecated function_call form is not supported; use tool_calls"
        )
    for i, raw in enumerate(as_list(item.get("tool_calls", []), loc.at("tool_calls"))):
        call_loc = loc.at("tool_calls").at(i)
        call = as_object(raw, call_loc)
        kind = call.get("type", "function")
        if kind != "function":
            raise call_loc.at("type").error(f"unsupported tool call type {kind!r} (expected 'function')")
        call_id = require_str(call, "id", call_loc, non_empty=True)
        function_loc = call_loc.at("function")
        function = as_object(call.get("function"), function_loc)
        name = require_str(function, "name", function_loc, non_empty=True)
        arguments = require_str(function, "arguments", function_loc)
        names.add(call_id, name)
        parts.append(ToolCallPart(tool_call_id=call_id, tool_name=name, args=parse_arguments(arguments)))
    return parts


def from_openai(
    items: Iterable[Mapping[str, Any] | object], *, history: Iterable[Message | Mapping[str, Any]] = ()
) -> list[Message]:
    """Chat Completions messages (dicts, or SDK objects such as ``choices[0].message``) as obsmem messages.

    ``history`` supplies the tool calls that ``tool`` messages answer when those calls are not
    in ``items`` (e.g. ``history=turn.context.messages``).
    """
    names = CallNames(history, "from_openai")
    messages: list[Message] = []
    for index, raw in enumerate(top_level_items(items, "from_openai", "Chat Completions messages")):
        loc = Loc(_WHAT, index)
        item = as_object(raw, loc)
        role = require_str(item, "role", loc)
        if role in ("system", "developer", "user") and "content" not in item:
            raise loc.at("content").error("a system, developer or user message needs content")
        if role in ("system", "developer"):
            messages.append(Message(
                role="system", parts=tuple(_text_parts(item["content"], loc.at("content"))),
                metadata=speaker_metadata(item.get("name")),
            ))
        elif role == "user":
            messages.append(Message(
                role="user", parts=tuple(_user_parts(item["content"], loc.at("content"))),
                metadata=speaker_metadata(item.get("name")),
            ))
        elif role == "assistant":
            parts = _assistant_parts(item, loc, names)
            if parts:
                messages.append(
                    Message(role="assistant", parts=tuple(parts), metadata=speaker_metadata(item.get("name")))
                )
        elif role == "tool":
            call_id = require_str(item, "tool_call_id", loc, non_empty=True)
            texts = _text_parts(item.get("content", ""), loc.at("content"))
            content = "\n".join(p.text for p in texts if isinstance(p, TextPart))
            result = ToolResultPart(
                tool_call_id=call_id, tool_name=names.name(call_id, loc.at("tool_call_id")), result=content
            )
            messages.append(Message(role="tool", parts=(result,)))
        elif role == "function":
            raise loc.at("role").error("the deprecated 'function' role is not supported; use 'tool' messages")
        else:
            raise loc.at("role").error(
                f"unknown role {role!r} (expected system, developer, user, assistant or tool)"
            )
    return messages

"""obsmem messages ↔ Anthropic Messages API ``(system, messages)``.

Toward Anthropic (:func:`to_anthropic`):

- every system message becomes a text block of the top-level ``system`` list (blank ones are
  dropped: the API refuses whitespace-only text); the list is empty when there is none;
- roles must alternate, so consecutive messages that land on the same side are merged into one
  turn; a ``tool`` message becomes ``tool_result`` blocks of a user turn, and within a user turn
  the ``tool_result`` blocks come first, as the API requires;
- a result goes before the message that holds it, except one answering that same message's
  calls, which goes in the next user turn: so the results of an assistant turn's ``tool_use``
  blocks are always in the turn right after it;
- text → ``text`` blocks (whitespace-only text is dropped), images → ``image``, PDFs →
  ``document`` (base64 or URL), inline plain text → a ``document`` with a text source; any other
  file, or a file in an assistant message, becomes the text ``[attachment: <name>]``;
- tool calls → ``tool_use`` (``input`` must be an object: text arguments that are not a JSON
  object travel as ``{"input": <text>}``); results → ``tool_result`` (``content`` JSON-encoded
  when not a string, ``is_error`` kept; the file parts after a result in its tool message, the
  images a tool returned, as ``image``/``document`` blocks of its content, after its text);
- reasoning goes back only as the ``thinking``/``redacted_thinking`` block it came from (kept in
  the message's metadata by :func:`from_anthropic`, with its signature); data parts never go.

From Anthropic (:func:`from_anthropic`): ``system`` (a string or text blocks) becomes system
messages; an assistant turn becomes one assistant message; a user turn becomes a ``tool``
message for its ``tool_result`` blocks and a ``user`` message for the rest, in block order. A
``tool_result`` whose content holds ``image``/``document`` blocks (with ``text`` ones) has its
texts as the result and each file as a file part right after it.
"""

from __future__ import annotations

import base64
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from obsmem.convert._common import (
    CallNames,
    Loc,
    MessageGrouper,
    as_list,
    as_object,
    attachment_text,
    decode_text,
    file_from_source,
    json_text,
    optional_str,
    parse_arguments,
    raw_base64,
    reasoning_replays,
    require_str,
    result_files,
    split_results,
    to_messages,
    top_level_items,
)
from obsmem.errors import InvalidInputError
from obsmem.types import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["from_anthropic", "to_anthropic"]

_API = "anthropic"
_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def _file_block(part: FilePart) -> dict[str, Any]:
    inline = raw_base64(part)
    media_type = (inline[0] if inline else part.media_type).lower()
    if part.is_image and (media_type in _IMAGE_TYPES or inline is None) and (inline or part.url):
        source = (
            {"type": "base64", "media_type": media_type, "data": inline[1]}
            if inline
            else {"type": "url", "url": part.url}
        )
        return {"type": "image", "source": source}
    block: dict[str, Any] | None = None
    if media_type == "application/pdf" and (inline or part.url):
        source = (
            {"type": "base64", "media_type": "application/pdf", "data": inline[1]}
            if inline
            else {"type": "url", "url": part.url}
        )
        block = {"type": "document", "source": source}
    elif media_type == "text/plain" and inline is not None:
        text = decode_text(inline[1])
        if text is not None:
            block = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
    if block is None:
        return {"type": "text", "text": attachment_text(part)}
    if part.filename:
        block["title"] = part.filename
    return block


def _tool_input(args: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(args, dict):
        return args
    if not args.strip():
        return {}
    parsed = parse_arguments(args)
    return parsed if isinstance(parsed, dict) else {"input": args}


def _result_block(result: ToolResultPart, files: list[FilePart] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.tool_call_id}
    content = json_text(result.result)
    if files:  # what the tool returned with its text: image and document blocks of its content
        block["content"] = [*([{"type": "text", "text": content}] if content else []), *map(_file_block, files)]
    elif content:
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


def _blocks(message: Message, taken: Collection[int] = ()) -> list[dict[str, Any]]:
    """The blocks of the message's own turn (its results aside, and ``taken``: the files sent
    inside a result)."""
    assistant = message.role == "assistant"
    if message.tool_calls and not assistant:
        raise InvalidInputError(
            f"Message {message.id!r} has role '{message.role}' but carries tool calls; only "
            "assistant messages call tools"
        )
    replays = iter(reasoning_replays(message, _API, "block"))
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if id(part) in taken:
            continue
        if isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, FilePart):
            blocks.append({"type": "text", "text": attachment_text(part)} if assistant else _file_block(part))
        elif isinstance(part, ToolCallPart):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": part.tool_call_id,
                    "name": part.tool_name,
                    "input": _tool_input(part.args),
                }
            )
        elif isinstance(part, ReasoningPart):
            replay = next(replays)
            if replay is not None and assistant:
                blocks.append(replay)
    return blocks


def to_anthropic(
    messages: Iterable[Message | Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """obsmem messages as ``(system, messages)``: pass them as ``system=`` and ``messages=``."""
    system: list[dict[str, Any]] = []
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in to_messages(messages, "to_anthropic"):
        if message.role == "system":
            text = "\n".join(
                p.text if isinstance(p, TextPart) else attachment_text(p)
                for p in message.parts
                if isinstance(p, TextPart | FilePart)
            )
            if text.strip():
                system.append({"type": "text", "text": text})
            continue
        before, after = split_results(message)
        files = result_files(message)
        taken = {id(f) for fs in files.values() for f in fs}
        turns.append(("user", [_result_block(r, files.get(id(r))) for r in before]))
        turns.append(("assistant" if message.role == "assistant" else "user", _blocks(message, taken)))
        turns.append(("user", [_result_block(r, files.get(id(r))) for r in after]))
    wire: list[dict[str, Any]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": list(blocks)})
    for turn in wire:
        if turn["role"] == "user":  # tool_result blocks first: the API's rule
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return system, wire


# -- from Anthropic ------------------------------------------------------------------------

_WHAT = "Anthropic message"


def _source_file(block: Mapping[str, Any], loc: Loc, default_type: str) -> FilePart:
    source_loc = loc.at("source")
    source = as_object(block.get("source"), source_loc)
    kind = require_str(source, "type", source_loc)
    title = optional_str(block, "title", loc)
    if kind == "base64":
        return file_from_source(
            source_loc,
            media_type=require_str(source, "media_type", source_loc, non_empty=True),
            url=None,
            data=require_str(source, "data", source_loc, non_empty=True),
            filename=title,
            default_type=default_type,
        )
    if kind == "url":
        return file_from_source(
            source_loc,
            media_type=None,
            url=require_str(source, "url", source_loc, non_empty=True),
            data=None,
            filename=title,
            default_type=default_type,
        )
    if kind == "text":
        text = require_str(source, "data", source_loc)
        return file_from_source(
            source_loc,
            media_type="text/plain",
            url=None,
            data=base64.b64encode(text.encode("utf-8")).decode("ascii"),
            filename=title,
            default_type="text/plain",
        )
    raise source_loc.at("type").error(f"unsupported source type {kind!r} (expected base64, url or text)")


_RESULT_FILES = {"image": "image/*", "document": "application/pdf"}


def _result(block: Mapping[str, Any], loc: Loc, names: CallNames) -> tuple[ToolResultPart, list[FilePart]]:
    """A ``tool_result`` block's result, and the files (image and document blocks) of its content:
    file parts after the result, counted and observed as files (as JSON text in the result, an
    image was its base64, and went back to the model as text)."""
    call_id = require_str(block, "tool_use_id", loc, non_empty=True)
    content = block.get("content", "")
    result: Any = content
    files: list[FilePart] = []
    if not isinstance(content, str):
        items = [
            as_object(raw, loc.at("content").at(i))
            for i, raw in enumerate(as_list(content, loc.at("content")))
        ]
        kinds = [item.get("type") for item in items]
        if all(kind == "text" or kind in _RESULT_FILES for kind in kinds):
            texts = [
                require_str(item, "text", loc.at("content").at(i))
                for i, item in enumerate(items) if item.get("type") == "text"
            ]
            files = [
                _source_file(item, loc.at("content").at(i), _RESULT_FILES[str(item["type"])])
                for i, item in enumerate(items) if item.get("type") in _RESULT_FILES
            ]
            result = "\n".join(texts)
        else:
            result = items
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise loc.at("is_error").error(f"expected true or false, got {is_error!r}")
    return ToolResultPart(
        tool_call_id=call_id,
        tool_name=names.name(call_id, loc.at("tool_use_id")),
        result=result,
        is_error=is_error,
    ), files


def _system_messages(system: object) -> list[Message]:
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [Message.system(system)]
    loc = Loc("Anthropic system prompt", 0)
    messages = []
    for i, raw in enumerate(as_list(system, loc)):
        block = as_object(raw, loc.at(i))
        kind = require_str(block, "type", loc.at(i))
        if kind != "text":
            raise loc.at(i).at("type").error(f"expected a 'text' block, got {kind!r}")
        messages.append(Message.system(require_str(block, "text", loc.at(i))))
    return messages


def _block_part(
    role: str, block: Mapping[str, Any], loc: Loc, names: CallNames
) -> tuple[Role, Part | list[Part], dict[str, Any] | None]:
    """One content block as (the obsmem role it belongs to, its part (a tool result: with the
    files of its content), its reasoning replay)."""
    kind = require_str(block, "type", loc)
    if kind == "text":
        return (
            ("user" if role == "user" else "assistant"),
            TextPart(text=require_str(block, "text", loc)),
            None,
        )
    if role == "assistant" and kind == "tool_use":
        call_id = require_str(block, "id", loc, non_empty=True)
        name = require_str(block, "name", loc, non_empty=True)
        args = block.get("input", {})
        if not isinstance(args, Mapping):
            raise loc.at("input").error(f"expected an object, got {type(args).__name__}")
        names.add(call_id, name)
        return "assistant", ToolCallPart(tool_call_id=call_id, tool_name=name, args=dict(args)), None
    if role == "assistant" and kind == "thinking":
        text = require_str(block, "thinking", loc)
        require_str(block, "signature", loc)
        return "assistant", ReasoningPart(text=text), {"api": _API, "block": dict(block)}
    if role == "assistant" and kind == "redacted_thinking":
        require_str(block, "data", loc)
        return "assistant", ReasoningPart(text=""), {"api": _API, "block": dict(block)}
    if role == "user" and kind == "tool_result":
        result, files = _result(block, loc, names)
        return "tool", [result, *files], None
    if role == "user" and kind == "image":
        return "user", _source_file(block, loc, "image/*"), None
    if role == "user" and kind == "document":
        return "user", _source_file(block, loc, "application/pdf"), None
    raise loc.at("type").error(f"unsupported block type {kind!r} in a {role} message")


def from_anthropic(
    messages: Iterable[Mapping[str, Any] | object],
    *,
    system: str | Iterable[Mapping[str, Any] | object] | None = None,
    history: Iterable[Message | Mapping[str, Any]] = (),
) -> list[Message]:
    """Anthropic messages (dicts or SDK objects; a whole response works too) as obsmem messages.

    ``system`` (the request's system prompt) comes first when given. ``history`` supplies the
    calls that ``tool_result`` blocks answer when those calls are not in ``messages`` (e.g.
    ``history=turn.context.messages``).
    """
    names = CallNames(history, "from_anthropic")
    out = _system_messages(system)
    for index, raw in enumerate(top_level_items(messages, "from_anthropic", "Anthropic messages")):
        loc = Loc(_WHAT, index)
        item = as_object(raw, loc)
        role = require_str(item, "role", loc)
        if role not in ("user", "assistant"):
            raise loc.at("role").error(
                f"unknown role {role!r} (expected user or assistant; system goes in system=)"
            )
        if "content" not in item:
            raise loc.at("content").error("a message needs content")
        content = item["content"]
        if isinstance(content, str):
            out.append(
                Message(role="user" if role == "user" else "assistant", parts=(TextPart(text=content),))
            )
            continue
        grouper = MessageGrouper()
        for i, raw_block in enumerate(as_list(content, loc.at("content"))):
            block_loc = loc.at("content").at(i)
            part_role, part, replay = _block_part(role, as_object(raw_block, block_loc), block_loc, names)
            grouper.add(part_role, part if isinstance(part, list) else [part], replay)
        grouper.flush()
        out.extend(grouper.messages)
    return out

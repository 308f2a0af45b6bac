"""obsmem messages ↔ OpenAI Responses API items (``input=`` going in, ``response.output`` coming back).

Toward the Responses API (:func:`to_openai_responses`):

- system/user text → ``{"type": "message", "role": ..., "content": [{"type": "input_text"}]}``,
  attachments as ``input_image`` (URL or data URI, ``detail``) or ``input_file`` (``file_data``
  data URI, or ``file_url``);
- assistant text → a ``message`` with ``output_text`` parts (assistant messages take only
  ``output_text``/``refusal``; an attachment there becomes the text ``[attachment: <name>]``);
- each tool call → a ``function_call`` item (``call_id``, ``name``, ``arguments`` JSON string),
  in the order of the message's parts; each result → a ``function_call_output`` (``output``
  JSON-encoded when not a string; with the file parts after it in its tool message, the images
  a tool returned, a list of ``input_text`` then ``input_image``/``input_file`` parts; a result
  that is a list of such parts, as it came), placed like Chat Completions results;
- reasoning goes back only as the ``reasoning`` item it came from (kept in the message's
  metadata by :func:`from_openai_responses`, with its id and ``encrypted_content``); reasoning
  from anywhere else is dropped, since the API takes no reasoning item without its id;
- data parts are never sent.

From the Responses API (:func:`from_openai_responses`): consecutive assistant-side items
(``reasoning``, assistant ``message``, ``function_call``) become one assistant message, and
consecutive ``function_call_output`` items one ``tool`` message (an output listing
``input_image``/``input_file`` parts: its texts are the result, each file a file part right after
it; one naming a file by its OpenAI ``file_id``, or of texts only, is the result as it came);
``developer`` becomes
``system``; ``refusal`` becomes text. Built-in tool items (web search, file search, computer
use …) and ``item_reference`` are refused with an :class:`~obsmem.errors.InvalidInputError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from obsmem.convert._common import (
    CallNames,
    Loc,
    MessageGrouper,
    as_list,
    as_object,
    attachment_text,
    data_uri,
    file_from_source,
    json_text,
    optional_str,
    parse_arguments,
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

__all__ = ["from_openai_responses", "to_openai_responses"]

_API = "openai-responses"


def _input_content(part: TextPart | FilePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if part.is_image and (part.url or part.data):
        return {
            "type": "input_image",
            "image_url": data_uri(part) or part.url,
            "detail": part.detail or "auto",
        }
    uri = data_uri(part)
    if uri is not None:
        return {"type": "input_file", "file_data": uri, "filename": part.filename or "attachment"}
    if part.url is not None:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_text", "text": attachment_text(part)}


_CONTENT_PARTS = frozenset({"input_text", "input_image", "input_file"})


def _is_content_list(value: object) -> bool:
    """Whether ``value`` is a list of Responses content parts (a function output given as one)."""
    return isinstance(value, list) and bool(value) and all(
        isinstance(part, Mapping) and part.get("type") in _CONTENT_PARTS for part in value
    )


#: In a function output kept as its list of parts, the place of a file kept as a file part after
#: the result: the number of that file part (:func:`_output_parts`).
_FILE_AT = "obsmem_file"


def _output(result: ToolResultPart, files: list[FilePart] | None = None) -> dict[str, Any]:
    listed = _is_content_list(result.result)
    at = [p.get(_FILE_AT) for p in result.result] if listed else []
    if listed and (not files or any(isinstance(n, int) for n in at)):  # the parts it came as, not their JSON text
        files = files or []
        parts = [{**{k: v for k, v in part.items() if k != _FILE_AT}, **_input_content(files[n])}
                 if isinstance(n, int) and 0 <= n < len(files) else dict(part)
                 for part, n in zip(result.result, at, strict=True)]  # fmt: skip
        placed = {n for n in at if isinstance(n, int)}
        parts.extend(_input_content(f) for i, f in enumerate(files) if i not in placed)
        return {"type": "function_call_output", "call_id": result.tool_call_id, "output": parts}
    output: str | list[dict[str, Any]] = json_text(result.result)
    if files:  # what the tool returned with its text: input_image / input_file parts of the output
        output = [*([{"type": "input_text", "text": output}] if output else []), *map(_input_content, files)]
    return {"type": "function_call_output", "call_id": result.tool_call_id, "output": output}


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text: list[dict[str, Any]] = []
    replays = iter(reasoning_replays(message, _API, "item"))

    def flush() -> None:
        if text:
            items.append({"type": "message", "role": "assistant", "content": list(text)})
            text.clear()

    for part in message.parts:
        if isinstance(part, TextPart | FilePart):
            words = part.text if isinstance(part, TextPart) else attachment_text(part)
            text.append({"type": "output_text", "text": words, "annotations": []})
        elif isinstance(part, ToolCallPart):
            flush()
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.tool_call_id,
                    "name": part.tool_name,
                    "arguments": json_text(part.args),
                }
            )
        elif isinstance(part, ReasoningPart):
            replay = next(replays)
            if replay is not None:
                flush()
                items.append(replay)
    flush()
    return items


def to_openai_responses(
    messages: Iterable[Message | Mapping[str, Any]], *, system_role: Literal["system", "developer"] = "system"
) -> list[dict[str, Any]]:
    """obsmem messages as Responses API input items: pass the result as ``input=``."""
    if system_role not in ("system", "developer"):
        raise InvalidInputError(f"system_role must be 'system' or 'developer', got {system_role!r}")
    items: list[dict[str, Any]] = []
    for message in to_messages(messages, "to_openai_responses"):
        before, after = split_results(message)
        files = result_files(message)
        taken = {id(f) for fs in files.values() for f in fs}
        items.extend(_output(r, files.get(id(r))) for r in before)
        if message.role == "assistant":
            items.extend(_assistant_items(message))
        else:
            if message.tool_calls:
                raise InvalidInputError(
                    f"Message {message.id!r} has role '{message.role}' but carries tool calls; only "
                    "assistant messages call tools"
                )
            content = [
                {"type": "input_text", "text": p.text if isinstance(p, TextPart) else attachment_text(p)}
                if message.role == "system"
                else _input_content(p)
                for p in message.parts
                if isinstance(p, TextPart | FilePart) and id(p) not in taken
            ]
            if content:
                role = system_role if message.role == "system" else "user"
                items.append({"type": "message", "role": role, "content": content})
        items.extend(_output(r, files.get(id(r))) for r in after)
    return items


# -- from the Responses API -----------------------------------------------------------------

_WHAT = "OpenAI Responses item"
_MESSAGE_ROLES: dict[str, Role] = {
    "user": "user",
    "system": "system",
    "developer": "system",
    "assistant": "assistant",
}


def _output_parts(output: str | list[Any], loc: Loc) -> tuple[Any, list[FilePart]]:
    """A ``function_call_output``'s result, and the files (``input_image`` / ``input_file``
    parts) of a list output: file parts after the result, counted and observed as files (kept in
    the result, an image was its base64, and went back to the model as text). A list of other
    parts is the result as it is."""
    if isinstance(output, str):
        return output, []
    kinds = [
        as_object(raw, loc.at(i)).get("type") if isinstance(raw, Mapping) or hasattr(raw, "model_dump") else None
        for i, raw in enumerate(output)
    ]
    if not any(kind in ("input_image", "input_file") for kind in kinds) or not all(
        kind in _CONTENT_PARTS for kind in kinds
    ):
        return output, []
    given = [as_object(raw, loc.at(i)) for i, raw in enumerate(output)]
    if any(kind != "input_text" and not _by_content(part) for kind, part in zip(kinds, given, strict=True)):
        # a file by its OpenAI file_id, which obsmem cannot hold: the parts kept as they came (sent back
        # so), except the files given by their content: each a file part after the result (kept in it, an
        # image was its base64, counted and observed as text), its place in the list noted
        inline = [kind != "input_text" and _by_content(part) for kind, part in zip(kinds, given, strict=True)]
        converted = _content_parts([part if own else {"type": "input_text", "text": ""}
                                    for part, own in zip(given, inline, strict=True)], loc, "user")  # fmt: skip
        files = [p for p in converted if isinstance(p, FilePart)]
        if len(files) != sum(inline):
            return given, []
        numbers = iter(range(len(files)))
        kept = [{**{k: v for k, v in part.items() if k not in ("image_url", "file_data", "file_url", "filename")},
                 _FILE_AT: next(numbers)} if own else part for part, own in zip(given, inline, strict=True)]  # fmt: skip
        return kept, files
    parts = _content_parts(output, loc, "user")
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    return "\n".join(texts), [p for p in parts if isinstance(p, FilePart)]


def _by_content(part: dict[str, Any]) -> bool:
    """Whether an ``input_image`` / ``input_file`` part gives its file (URL or data), not a file_id."""
    return any(isinstance(part.get(key), str) and part[key] for key in ("image_url", "file_data", "file_url"))


def _content_parts(content: object, loc: Loc, role: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for i, raw in enumerate(as_list(content, loc)):
        part_loc = loc.at(i)
        part = as_object(raw, part_loc)
        kind = require_str(part, "type", part_loc)
        if kind in ("input_text", "output_text"):
            parts.append(TextPart(text=require_str(part, "text", part_loc)))
        elif kind == "refusal":
            parts.append(TextPart(text=require_str(part, "refusal", part_loc)))
        elif kind == "input_image" and role != "assistant":
            image_url = optional_str(part, "image_url", part_loc)
            if not image_url:
                raise part_loc.at("image_url").error(
                    "only images given by URL or data URI (image_url) can be converted, not a file_id"
                )
            detail = optional_str(part, "detail", part_loc)
            if detail not in (None, "low", "high", "auto"):
                raise part_loc.at("detail").error(f"expected 'low', 'high' or 'auto', got {detail!r}")
            inline = image_url.startswith("data:")
            file = file_from_source(
                part_loc,
                media_type=None,
                url=None if inline else image_url,
                data=image_url if inline else None,
                default_type="image/*",
            )
            parts.append(file.model_copy(update={"detail": detail}) if detail and detail != "auto" else file)
        elif kind == "input_file" and role != "assistant":
            file_data = optional_str(part, "file_data", part_loc)
            file_url = optional_str(part, "file_url", part_loc)
            if file_data is None and file_url is None:
                raise part_loc.at("file_data").error(
                    "only inline files (file_data) or file_url can be converted, not a file_id"
                )
            parts.append(
                file_from_source(
                    part_loc,
                    media_type=None,
                    url=file_url,
                    data=file_data,
                    filename=optional_str(part, "filename", part_loc),
                    default_type="application/octet-stream",
                )
            )
        else:
            raise part_loc.at("type").error(f"unsupported content part type {kind!r} in a {role} message")
    return parts


def _reasoning(item: dict[str, Any], loc: Loc) -> tuple[ReasoningPart, dict[str, Any] | None]:
    texts: list[str] = []
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        entries = as_list(item.get(key, []), loc.at(key))
        for i, raw in enumerate(entries):
            entry_loc = loc.at(key).at(i)
            entry = as_object(raw, entry_loc)
            entry_kind = entry.get("type", kind)
            if entry_kind != kind:
                raise entry_loc.at("type").error(f"expected {kind!r}, got {entry_kind!r}")
            texts.append(require_str(entry, "text", entry_loc))
        if texts:
            break  # the full reasoning text when given, else its summary
    replay = None
    if isinstance(item.get("id"), str) and item["id"]:
        replay = {"api": _API, "item": {"summary": [], **item}}
    return ReasoningPart(text="\n".join(texts)), replay


def from_openai_responses(
    items: Iterable[Mapping[str, Any] | object], *, history: Iterable[Message | Mapping[str, Any]] = ()
) -> list[Message]:
    """Responses API items (``response.output``, or ``input`` items) as obsmem messages.

    ``history`` supplies the calls that ``function_call_output`` items answer when those calls
    are not in ``items`` (e.g. ``history=turn.context.messages``).
    """
    names = CallNames(history, "from_openai_responses")
    grouper = MessageGrouper()
    for index, raw in enumerate(top_level_items(items, "from_openai_responses", "Responses API items")):
        loc = Loc(_WHAT, index)
        item = as_object(raw, loc)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = require_str(item, "role", loc)
            if role not in _MESSAGE_ROLES:
                raise loc.at("role").error(
                    f"unknown role {role!r} (expected user, system, developer or assistant)"
                )
            if "content" not in item:
                raise loc.at("content").error("a message needs content")
            parts = _content_parts(item["content"], loc.at("content"), role)
            # Separate input messages stay separate; an assistant message joins its turn's items.
            grouper.add(_MESSAGE_ROLES[role], parts, merge=role == "assistant")
        elif kind == "function_call":
            call_id = require_str(item, "call_id", loc, non_empty=True)
            name = require_str(item, "name", loc, non_empty=True)
            arguments = require_str(item, "arguments", loc)
            names.add(call_id, name)
            grouper.add(
                "assistant",
                [ToolCallPart(tool_call_id=call_id, tool_name=name, args=parse_arguments(arguments))],
            )
        elif kind == "function_call_output":
            call_id = require_str(item, "call_id", loc, non_empty=True)
            if "output" not in item:
                raise loc.at("output").error("expected the tool's output (a string or a list of parts)")
            output = item["output"]
            if not isinstance(output, str | list):
                raise loc.at("output").error(f"expected a string or a list, got {type(output).__name__}")
            result, files = _output_parts(output, loc.at("output"))
            grouper.add(
                "tool",
                [
                    ToolResultPart(
                        tool_call_id=call_id, tool_name=names.name(call_id, loc.at("call_id")), result=result
                    ),
                    *files,
                ],
            )
        elif kind == "reasoning":
            part, replay = _reasoning(item, loc)
            grouper.add("assistant", [part], replay)
        elif kind is None:
            raise loc.at("type").error("an item needs a 'type' (or a 'role' for a message)")
        else:
            raise loc.at("type").error(
                f"unsupported item type {kind!r} (supported: message, function_call, function_call_output, "
                "reasoning); drop built-in tool items before converting"
            )
    grouper.flush()
    return grouper.messages

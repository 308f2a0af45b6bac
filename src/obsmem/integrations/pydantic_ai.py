"""obsmem inside pydantic-ai 2.x: a capability, and converters for pydantic-ai's messages.

::

    from obsmem import Memory
    from obsmem.integrations.pydantic_ai import ObservationalMemory
    from pydantic_ai import Agent

    memory = Memory("sqlite:///memory.db")
    agent = Agent("openai:gpt-5-mini", capabilities=[ObservationalMemory(memory, resource_id="user-1")])
    result = await agent.run("Hi, I'm planning a trip", conversation_id="trip")  # the obsmem thread
    ...
    await memory.aclose()

What :class:`ObservationalMemory` does in a run (one obsmem turn per agent run):

- ``before_model_request`` (each step): saves the messages obsmem has not seen yet (the new user
  prompt, the model's previous response, tool returns), running the memory work due at that
  boundary (``begin_turn`` on the first step, ``step`` after); then sends the model the
  thread's unobserved tail instead of the whole history: messages already observed are pruned
  from the request (never from the run's history), a tool call is never separated from its
  return, and the newest input is always kept. The thread's older unobserved messages are
  included too, so a run needs no ``message_history``. The agent's system prompt (the system
  prompts the conversation opens with) leads every request, as without obsmem; it is stored
  once, and again only when it changes (the thread's instructions are its latest version);
- the observations (and obsmem's continuation reminder) go into the request's instructions,
  after the agent's own;
- ``after_run`` saves the final response and ends the turn (which may start idle buffering);
  a failed run ends its turn too. After ``run_stream`` it saves the returns of the final
  response's tool calls as well (an output tool's, and those of function tools that ran), which
  pydantic-ai puts only in the ``StreamedRunResult``'s own history;
- with retrieval on (``Memory(config={"retrieval": True})``) it contributes the ``recall``
  tool, answered by :meth:`obsmem.Memory.call_recall_tool`.

Messages are matched to what obsmem stored by the ids kept in each pydantic-ai message's
``metadata["obsmem_ids"]``: pass a run's messages back (``message_history=result.all_messages()``)
and nothing is stored twice. Pass copies made some other way and they are new messages. A
``message_history`` from another conversation (another thread's messages) is new to this one: the
model gets it, and it is stored in this thread, once, before the new input (under ids of this
thread; the messages keep their tag, so the conversation they came from still knows them).

One :class:`~obsmem.Memory` serves any number of concurrent runs (each run gets its own capability
instance through ``for_run``); its background work is owned by the memory: ``await memory.aclose()``.

:func:`from_pydantic_ai` / :func:`to_pydantic_ai` convert between pydantic-ai's ``ModelMessage`` and
obsmem :class:`~obsmem.Message`. A ``ModelRequest`` becomes one obsmem message per run of parts of
one role (system prompts → ``system``; user prompts → ``user``; tool returns and tool retry
prompts → ``tool``); a ``ModelResponse`` one ``assistant`` message (text, tool calls, thinking →
reasoning, files). In a user prompt, text items of any kind (``TextContent``,
``StructuredContent`` …) become text parts (the text a model is sent, so it is observed), an
``UploadedFile`` a file part named by its file id, and items with nothing to read (``CachePoint``)
no part. Binary content a tool returns (an image, alone or in a list) becomes a file part of the
tool message, the result naming it (``[image/png attachment]``): counted and observed as a file,
not as its base64 text. What obsmem's parts do not hold (timestamps, provider details, signatures, metadata,
structured values, usage …) is kept in ``metadata["pydantic_ai"]``, so pydantic-ai → obsmem →
pydantic-ai gives the same messages (tool return content comes back as its JSON form), in later
turns too. Parts obsmem has no type for (pydantic-ai's internal deltas, native tool parts …)
travel as a :class:`~obsmem.DataPart` named ``pydantic-ai-part``, which obsmem never shows a model.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

try:
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai import messages as pai
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ToolFailedError, ToolRetryError
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import RunContext, Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("obsmem.integrations.pydantic_ai needs: pip install 'obsmem[pydantic-ai]'") from exc

from obsmem.errors import ConfigError, InvalidInputError, ObsmemError
from obsmem.integrations._ids import resumed_input
from obsmem.memory import Memory
from obsmem.turn import Turn, retried_input
from obsmem.types import (
    FEEDBACK_KEY,
    DataPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    new_id,
    parse_messages,
)

__all__ = ["IDS_KEY", "ObservationalMemory", "from_pydantic_ai", "to_pydantic_ai"]

IDS_KEY = "obsmem_ids"
"""The key of a pydantic-ai message's ``metadata`` that lists the ids of its obsmem messages."""
SAVED_KEY = "obsmem_saved_in"
"""The key of a pydantic-ai message's ``metadata`` naming the thread a save of it succeeded in
(a list of them when it was saved in several: a history passed to another conversation too): a
message stored nowhere that holds it was erased there (``forget``, ``delete_thread``), and a
``message_history`` passing it back does not store it again."""

_META = "pydantic_ai"
# On the stored returns of a streamed final response: how many user parts (what its tools'
# ToolReturn showed the model) follow them in pydantic-ai's request.
_SHOWN_KEY = "pydantic_ai_shown"
_UNKNOWN = "pydantic-ai-part"
_ADAPTER = pai.ModelMessagesTypeAdapter
_NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)  # a message with no timestamp anywhere (and no parts)
_URL_KINDS = {"image-url", "document-url", "audio-url", "video-url"}

# -- converters -----------------------------------------------------------------------------------


def _dump(message: pai.ModelMessage) -> dict[str, Any]:
    return cast(dict[str, Any], _ADAPTER.dump_python([message], mode="json")[0])


def _stamp(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return None


def _standard_b64(data: str) -> str:
    """pydantic-ai writes bytes as URL-safe base64; obsmem keeps standard base64."""
    try:
        return base64.b64encode(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))).decode("ascii")
    except ValueError:
        return data


def _urlsafe_b64(data: str) -> str:
    try:
        return base64.urlsafe_b64encode(base64.b64decode(data + "=" * (-len(data) % 4))).decode("ascii")
    except ValueError:
        return data


def _user_item(item: Any) -> tuple[Part | None, Any]:
    """One item of a user prompt's content → an obsmem part (None: it has none) and what else it
    needs back.

    Text items of any kind (``TextContent``, ``StructuredContent`` …: a string ``content``, the
    text a model is sent) become text parts, their other fields kept; an ``UploadedFile`` becomes
    a file part named by its file id; an item with nothing for a model to read (a ``CachePoint``)
    is kept whole with its neighbours, as no part.
    """
    if isinstance(item, str):
        return TextPart(text=item), {"item": "str"}
    kind = item.get("kind") if isinstance(item, dict) else None
    if kind == "uploaded-file" and isinstance(item.get("file_id"), str) and item["file_id"]:
        media = item.get("media_type") or "application/octet-stream"
        rest = {k: v for k, v in item.items() if k != "file_id"}
        return FilePart(media_type=media, filename=item["file_id"]), rest
    if kind in _URL_KINDS:
        rest = {k: v for k, v in item.items() if k != "url"}
        media = item.get("media_type") or "application/octet-stream"
        return FilePart(media_type=media, url=item["url"]), rest
    if kind == "binary":
        rest = {k: v for k, v in item.items() if k != "data"}
        data = _standard_b64(item["data"])
        return FilePart(media_type=item.get("media_type") or "application/octet-stream", data=data), rest
    if isinstance(item, dict) and isinstance(item.get("content"), str):
        rest = {k: v for k, v in item.items() if k != "content"}
        return TextPart(text=item["content"]), {"item": "text", "rest": rest}
    return None, {"item": "inline", "value": item}


def _inline(extra: Any) -> bool:
    """Whether a user item's extras hold the item itself (it has no obsmem part)."""
    return isinstance(extra, dict) and extra.get("item") == "inline"


def _request_parts(
    part: dict[str, Any], binary: Collection[int | None] = ()
) -> tuple[Role | None, list[Part], dict[str, Any]]:
    """A request part → (role, obsmem parts, extras); role None: it joins the message before it.
    ``binary``: where a tool return's content holds binary content (:func:`_binary_places`)."""
    kind = part.get("part_kind")
    rest = {k: v for k, v in part.items() if k != "content"}
    content = part.get("content")
    if kind == "system-prompt" and isinstance(content, str):
        return "system", [TextPart(text=content)], rest
    if kind == "user-prompt":
        if isinstance(content, str):
            return "user", [TextPart(text=content)], {**rest, "items": None}
        converted = [_user_item(item) for item in content or []]
        made = [p for p, _ in converted if p is not None]
        if made:  # (a prompt of items with no part at all is kept as data, below)
            return "user", made, {**rest, "items": [extra for _, extra in converted]}
    if kind == "tool-return" and part.get("tool_call_id") and part.get("tool_name"):
        rest = {k: v for k, v in rest.items() if k not in ("tool_name", "tool_call_id")}
        error = part.get("outcome") in ("failed", "denied", "retried")
        content, files, moved = _files_out(content, binary)
        if moved:
            rest = {**rest, "files": moved}
        result = ToolResultPart(
            tool_call_id=part["tool_call_id"], tool_name=part["tool_name"], result=content, is_error=error
        )
        return "tool", [result, *files], rest
    if kind == "retry-prompt" and part.get("tool_name") and part.get("tool_call_id"):
        rest = {k: v for k, v in rest.items() if k not in ("tool_name", "tool_call_id")}
        result = ToolResultPart(
            tool_call_id=part["tool_call_id"], tool_name=part["tool_name"], result=content, is_error=True
        )
        return "tool", [result], rest
    if kind == "retry-feedback" and content is not None:
        if isinstance(content, str):
            return "user", [TextPart(text=content)], rest
        text = json.dumps(content, ensure_ascii=False)
        return "user", [TextPart(text=text)], {**rest, "json_content": True}
    return None, [DataPart(name=_UNKNOWN, data={"part": part})], {"unknown": True}


def _binary_places(part: object) -> set[int | None]:
    """Where a live tool return's content is binary content: the content itself (None) or the
    indexes of a list's items. Only the live part tells: in its JSON form a dict a tool returned
    (an API's answer holding ``"kind": "binary"``) looks like an image, and stays data."""
    content = part.content if isinstance(part, pai.ToolReturnPart) else None
    if isinstance(content, pai.BinaryContent):
        return {None}
    if isinstance(content, list):
        return {index for index, item in enumerate(content) if isinstance(item, pai.BinaryContent)}
    return set()


def _files_out(content: Any, places: Collection[int | None]) -> tuple[Any, list[Part], list[dict[str, Any]]]:
    """A tool return's content with its binary items (an image a tool returns, as the content or
    an item of a list, at ``places``) taken out as file parts: in the result, a short text names
    each one.

    Kept in the result, an image was its base64 text: counted as text (a 300 KB image as 270,000
    tokens, where the same image in a prompt is an image's count) and read by the observer. Each
    moved item's other fields and its place (``at``: its index in the list, None for the content
    itself) are kept, to put it back."""
    def binary(item: Any, at: int | None) -> bool:
        return at in places and isinstance(item, dict) and item.get("kind") == "binary" \
            and isinstance(item.get("data"), str)

    def moved(item: dict[str, Any], at: int | None) -> str:
        made, extra = _user_item(item)
        assert isinstance(made, FilePart)
        files.append(made)
        entries.append({"at": at, "item": extra})
        return f"[{made.media_type} attachment]"

    files: list[Part] = []
    entries: list[dict[str, Any]] = []
    if binary(content, None):
        return moved(content, None), files, entries
    if isinstance(content, list) and any(binary(item, index) for index, item in enumerate(content)):
        kept = [moved(item, index) if binary(item, index) else item for index, item in enumerate(content)]
        return kept, files, entries
    return content, files, entries


def _files_in(result: Any, entries: list[dict[str, Any]], files: list[Part]) -> Any:
    """A tool return's content with the items :func:`_files_out` took out put back in place."""
    content = list(result) if isinstance(result, list) else result
    for entry, file in zip(entries, files, strict=True):
        if not isinstance(file, FilePart) or not isinstance(entry, dict):
            return None
        item = _file_item(file, dict(entry.get("item") or {"kind": "binary"}))
        at = entry.get("at")
        if at is None:
            content = item
        elif isinstance(content, list) and isinstance(at, int) and 0 <= at < len(content):
            content[at] = item
        else:
            return None
    return content


def _response_parts(part: dict[str, Any]) -> tuple[list[Part], dict[str, Any]]:
    kind = part.get("part_kind")
    content = part.get("content")
    rest = {k: v for k, v in part.items() if k != "content"}
    if kind == "text" and isinstance(content, str):
        return [TextPart(text=content)], rest
    if kind == "thinking" and isinstance(content, str):
        return [ReasoningPart(text=content)], rest
    if kind == "tool-call" and part.get("tool_call_id") and part.get("tool_name"):
        args = part.get("args")
        rest = {k: v for k, v in rest.items() if k not in ("tool_name", "tool_call_id", "args")}
        if args is None:
            rest["args_none"] = True
        call = ToolCallPart(
            tool_call_id=part["tool_call_id"], tool_name=part["tool_name"],
            args={} if args is None else args,
        )
        return [call], rest
    if kind == "file" and isinstance(content, dict) and content.get("kind") == "binary":
        media = content.get("media_type") or "application/octet-stream"
        rest["file"] = {k: v for k, v in content.items() if k != "data"}
        return [FilePart(media_type=media, data=_standard_b64(content["data"]))], rest
    return [DataPart(name=_UNKNOWN, data={"part": part})], {"unknown": True}


def from_pydantic_ai(messages: Sequence[pai.ModelMessage]) -> list[Message]:
    """pydantic-ai messages → obsmem messages (see the module docstring for the mapping).

    A message whose ``metadata["obsmem_ids"]`` lists as many ids as it makes obsmem messages
    keeps those ids (a message converted before keeps its identity); others get new ids.
    """
    if isinstance(messages, pai.ModelRequest | pai.ModelResponse) or not isinstance(messages, Sequence):
        raise InvalidInputError(
            f"Invalid messages: expected a list of pydantic-ai ModelRequest/ModelResponse, got "
            f"{type(messages).__name__}",
            argument="messages",
        )
    converted: list[Message] = []
    for index, message in enumerate(messages):
        if not isinstance(message, pai.ModelRequest | pai.ModelResponse):
            raise InvalidInputError(
                f"Invalid messages[{index}]: expected a ModelRequest or ModelResponse, "
                f"got {type(message).__name__}",
                argument=f"messages[{index}]",
            )
        converted.extend(_from_one(message))
    return converted


def _from_one(
    message: pai.ModelMessage, seed: str | None = None, *, keep_ids: bool = True, thread: str | None = None
) -> list[Message]:
    """One pydantic-ai message's obsmem messages; ids from its tag (unless ``keep_ids`` is False),
    else ``<seed>-<n>``, else new. With ``thread`` (and ``seed``), a request's obsmem messages
    take ids derived from the thread and their own parts instead (see :func:`_part_ids`)."""
    dumped = _dump(message)
    parts = dumped.pop("parts")
    metadata = dumped.get("metadata")
    known_ids: object = None
    if isinstance(metadata, dict) and (IDS_KEY in metadata or SAVED_KEY in metadata):
        known_ids = metadata.get(IDS_KEY)
        rest_metadata = {k: v for k, v in metadata.items() if k not in (IDS_KEY, SAVED_KEY)}
        dumped["metadata"] = rest_metadata or None
    groups: list[tuple[Role, list[Part], list[dict[str, Any]]]] = []
    sources: list[list[dict[str, Any]]] = []  # a request's part dicts, per group
    if dumped["kind"] == "response":
        obsmem_parts: list[Part] = []
        extras: list[dict[str, Any]] = []
        for part in parts:
            made, extra = _response_parts(part)
            obsmem_parts.extend(made)
            extras.append({**extra, "span": len(made)})
        groups.append(("assistant", obsmem_parts, extras))
    else:
        for part, live in zip(parts, message.parts, strict=True):
            role, made, extra = _request_parts(part, _binary_places(live))
            entry = {**extra, "span": len(made)}
            if groups and (role is None or role == groups[-1][0]):
                groups[-1][1].extend(made)
                groups[-1][2].append(entry)
                sources[-1].append(part)
            else:
                groups.append((role or "user", list(made), [entry]))
                sources.append([part])
    if not groups or not groups[0][1]:
        # a message with no parts: kept as a marker so it survives a round trip
        groups = [("user" if dumped["kind"] == "request" else "assistant",
                   [DataPart(name=_UNKNOWN, data={"empty": True})], [])]
    fits = keep_ids and isinstance(known_ids, list) and len(known_ids) == len(groups)
    given = known_ids if fits and isinstance(known_ids, list) else [None] * len(groups)
    ids = [
        i if isinstance(i, str) and i else (f"{seed}-{n}" if seed else new_id()) for n, i in enumerate(given)
    ]
    if seed and thread is not None and not fits and len(sources) == len(groups):
        ids = _part_ids(thread, sources)
    group_key = ids[0]  # stable: the same message converted again keeps its group
    created = _stamp(dumped.get("timestamp")) or _first_stamp(parts) or _NO_TIME
    out = []
    for index, (role, obsmem_parts, extras) in enumerate(groups):
        meta: dict[str, Any] = {_META: {"group": group_key, "message": dumped, "parts": extras}}
        if role == "user" and extras and all(extra.get("part_kind") == "retry-feedback" for extra in extras):
            meta[FEEDBACK_KEY] = True  # pydantic-ai's words to the model, not the user's
        out.append(
            Message(id=ids[index], role=role, parts=tuple(obsmem_parts), created_at=created, metadata=meta)
        )
    return out


def _part_ids(thread: str, sources: list[list[dict[str, Any]]]) -> list[str]:
    """The ids of an untagged request's obsmem messages, one per group of parts: derived from the
    thread and the group's parts (each with its own timestamp), not from the request as a whole.
    pydantic-ai merges consecutive requests into a new one without their metadata (a run that
    ends with an output tool's return, then the next run's prompt): each group of the merged
    request gets the id it was saved under as a request of its own, so it is not saved twice."""
    return [
        "pai-" + hashlib.sha256(
            json.dumps([thread, group], sort_keys=True, default=str).encode()
        ).hexdigest()[:32] + "-0"
        for group in sources
    ]


def _first_stamp(parts: list[dict[str, Any]]) -> datetime | None:
    for part in parts:
        stamp = _stamp(part.get("timestamp"))
        if stamp is not None:
            return stamp
    return None


def _default_request_part(role: Role, parts: Sequence[Part]) -> list[dict[str, Any]]:
    """obsmem parts (from anywhere) → request part dicts: tool results as tool returns, text and
    files as one user prompt (system prompts for a system message), in the parts' order."""
    out: list[dict[str, Any]] = []
    items: list[Any] = []

    def prompt() -> None:
        if not items:
            return
        if role == "system":
            texts = [text for text in items if isinstance(text, str)]
            out.extend({"part_kind": "system-prompt", "content": text} for text in texts)
        elif len(items) == 1 and isinstance(items[0], str):
            out.append({"part_kind": "user-prompt", "content": items[0]})
        else:
            out.append({"part_kind": "user-prompt", "content": list(items)})
        items.clear()

    for part in parts:
        if isinstance(part, ToolResultPart):
            prompt()
            out.append(_tool_return(part))
        elif isinstance(part, TextPart):
            items.append(part.text)
        elif isinstance(part, FilePart):
            items.append(_file_item(part, {}))
    prompt()
    return out


def _tool_return(part: ToolResultPart) -> dict[str, Any]:
    return {
        "part_kind": "tool-return", "tool_name": part.tool_name, "tool_call_id": part.tool_call_id,
        "content": part.result, "outcome": "failed" if part.is_error else "success",
    }


def _file_item(part: FilePart, extra: dict[str, Any]) -> dict[str, Any]:
    kind = extra.get("kind")
    if kind == "uploaded-file" and part.data is None and part.url is None and part.filename:
        return {**extra, "file_id": part.filename, "media_type": part.media_type}
    if part.data is not None:
        data = part.data
        if data.startswith("data:") and "," in data:
            data = data.split(",", 1)[1]
        base = {"kind": "binary", "media_type": part.media_type}
        return {**base, **{k: v for k, v in extra.items() if kind == "binary"}, "data": _urlsafe_b64(data)}
    if part.url is not None:
        default = "image-url" if part.is_image else "document-url"
        base = {"kind": default, "media_type": part.media_type}
        return {**base, **{k: v for k, v in extra.items() if kind in _URL_KINDS}, "url": part.url}
    return {"kind": "text-content", "content": f"[attachment: {part.filename or part.media_type}]"}


def _rebuild_request_part(extra: dict[str, Any], parts: list[Part]) -> list[Any]:
    """The request part dict(s) from a part's extras and the obsmem parts it spans."""
    if extra.get("unknown"):
        return [p.data.get("part") for p in parts if isinstance(p, DataPart) and "part" in p.data]
    kind = extra.get("part_kind")
    base = {k: v for k, v in extra.items() if k not in ("span", "items", "files")}
    moved = extra.get("files")
    if kind == "tool-return" and isinstance(moved, list) and moved and len(parts) == 1 + len(moved):
        result = parts[0]
        back = _files_in(result.result, moved, parts[1:]) if isinstance(result, ToolResultPart) else None
        if isinstance(result, ToolResultPart) and back is not None:
            ids = {"tool_name": result.tool_name, "tool_call_id": result.tool_call_id}
            return [{**base, **ids, "content": back}]
        return []
    if kind == "system-prompt" and len(parts) == 1 and isinstance(parts[0], TextPart):
        return [{**base, "content": parts[0].text}]
    if kind == "user-prompt":
        items = extra.get("items")
        if items is None and len(parts) == 1 and isinstance(parts[0], TextPart):
            return [{**base, "content": parts[0].text}]
        if isinstance(items, list) and sum(1 for item in items if not _inline(item)) == len(parts):
            content: list[Any] = []
            remaining = iter(parts)
            for item in items:
                if _inline(item):
                    content.append(item.get("value"))
                    continue
                part = next(remaining)
                if isinstance(part, TextPart):
                    is_typed = isinstance(item, dict) and item.get("item") == "text"  # TextContent …
                    typed = item.get("rest") if is_typed else None
                    content.append({**typed, "content": part.text} if isinstance(typed, dict) else part.text)
                elif isinstance(part, FilePart):
                    content.append(_file_item(part, item))
                elif isinstance(part, DataPart):
                    content.append(part.data.get("item"))
            return [{**base, "content": content}]
    if kind == "retry-feedback" and len(parts) == 1 and isinstance(parts[0], TextPart):
        text = parts[0].text
        base.pop("json_content", None)
        if extra.get("json_content"):
            try:
                return [{**base, "content": json.loads(text)}]
            except ValueError:
                pass
        return [{**base, "content": text}]
    if kind in ("tool-return", "retry-prompt") and len(parts) == 1 and isinstance(parts[0], ToolResultPart):
        result = parts[0]
        ids = {"tool_name": result.tool_name, "tool_call_id": result.tool_call_id}
        return [{**base, **ids, "content": result.result}]
    return []


def _rebuild_response_part(extra: dict[str, Any], parts: list[Part]) -> list[Any]:
    if extra.get("unknown"):
        return [p.data.get("part") for p in parts if isinstance(p, DataPart) and "part" in p.data]
    kind = extra.get("part_kind")
    base = {k: v for k, v in extra.items() if k not in ("span", "args_none", "file")}
    if len(parts) != 1:
        return []
    part = parts[0]
    if kind == "text" and isinstance(part, TextPart):
        return [{**base, "content": part.text}]
    if kind == "thinking" and isinstance(part, ReasoningPart):
        return [{**base, "content": part.text}]
    if kind == "tool-call" and isinstance(part, ToolCallPart):
        args = None if extra.get("args_none") and part.args == {} else part.args
        return [{**base, "tool_name": part.tool_name, "tool_call_id": part.tool_call_id, "args": args}]
    if kind == "file" and isinstance(part, FilePart) and part.data is not None:
        return [{**base, "content": _file_item(part, dict(extra.get("file") or {"kind": "binary"}))}]
    return []


def _default_response_parts(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"part_kind": "text", "content": part.text})
        elif isinstance(part, ReasoningPart):
            out.append({"part_kind": "thinking", "content": part.text})
        elif isinstance(part, ToolCallPart):
            out.append({
                "part_kind": "tool-call", "tool_name": part.tool_name, "tool_call_id": part.tool_call_id,
                "args": part.args,
            })
        elif isinstance(part, FilePart) and part.data is not None:
            out.append({"part_kind": "file", "content": _file_item(part, {"kind": "binary"})})
        elif isinstance(part, DataPart) and part.name == _UNKNOWN and isinstance(part.data.get("part"), dict):
            out.append(part.data["part"])
    return out


def _parts_from_extras(message: Message, response: bool) -> list[Any] | None:
    """The message's pydantic-ai part dicts from its recorded extras; None when they no longer fit."""
    meta = message.metadata.get(_META)
    extras = meta.get("parts") if isinstance(meta, dict) else None
    if not isinstance(extras, list) or not all(isinstance(e, dict) for e in extras):
        return None
    spans = [int(e.get("span", 0)) for e in extras]
    if sum(spans) != len(message.parts):
        # A context's messages come without their data parts (parts obsmem has no type for):
        # those pydantic-ai parts are left out, the others rebuilt.
        if any(isinstance(p, DataPart) for p in message.parts):
            return None
        spans = [0 if e.get("unknown") else span for e, span in zip(extras, spans, strict=True)]
        if sum(spans) != len(message.parts):
            return None
    out: list[Any] = []
    position = 0
    for extra, span in zip(extras, spans, strict=True):
        chunk = list(message.parts[position:position + span])
        position += span
        rebuilt = _rebuild_response_part(extra, chunk) if response else _rebuild_request_part(extra, chunk)
        if not rebuilt and span:
            return None
        out.extend(rebuilt)
    return out


def to_pydantic_ai(messages: Sequence[Message | dict[str, Any]]) -> list[pai.ModelMessage]:
    """obsmem messages → pydantic-ai messages (see the module docstring for the mapping).

    Consecutive obsmem messages that came from one pydantic-ai message become that message
    again; other consecutive user/system/tool messages are joined into one ``ModelRequest`` and
    assistant messages into one ``ModelResponse``. Each result lists the ids of its obsmem
    messages in ``metadata["obsmem_ids"]``. obsmem's data parts (its markers) are left out.
    """
    parsed = parse_messages(messages, "messages")
    blocks: list[tuple[str | None, bool, list[Message]]] = []  # (group, is_response, messages)
    for message in parsed:
        meta = message.metadata.get(_META)
        raw_group = meta.get("group") if isinstance(meta, dict) else None
        group = raw_group if isinstance(raw_group, str) else None
        response = message.role == "assistant"
        if blocks and blocks[-1][0] == group and blocks[-1][1] == response:
            blocks[-1][2].append(message)
        else:
            blocks.append((group, response, [message]))
    out: list[pai.ModelMessage] = []
    for group, response, members in blocks:
        built = _build(group, response, members)
        if built is not None:
            out.append(built)
    return out


def _build(group: str | None, response: bool, members: list[Message]) -> pai.ModelMessage | None:
    base: dict[str, Any] = {"kind": "response" if response else "request"}
    meta = members[0].metadata.get(_META)
    if group is not None and isinstance(meta, dict) and isinstance(meta.get("message"), dict):
        base = dict(meta["message"])
    parts: list[Any] = []
    for message in members:
        from_extras = _parts_from_extras(message, response) if group is not None else None
        if from_extras is not None:
            parts.extend(from_extras)
        elif response:
            parts.extend(_default_response_parts(message.parts))
        else:
            visible = [p for p in message.parts if not isinstance(p, DataPart)]
            parts.extend(_default_request_part(message.role, visible))
    if group is None:
        base["timestamp"] = members[0].created_at.isoformat()
    metadata = base.get("metadata")
    ids = [m.id for m in members]
    base["metadata"] = {**(metadata if isinstance(metadata, dict) else {}), IDS_KEY: ids}
    if not parts and not (group is not None and _was_empty(members)):
        return None
    base["parts"] = parts
    return _ADAPTER.validate_python([base])[0]


def _was_empty(members: list[Message]) -> bool:
    return any(isinstance(p, DataPart) and p.data.get("empty") for m in members for p in m.parts)


# -- the capability ---------------------------------------------------------------------------------


def _ids_of(message: pai.ModelMessage) -> list[str] | None:
    metadata = message.metadata
    ids = metadata.get(IDS_KEY) if isinstance(metadata, dict) else None
    return ids if isinstance(ids, list) and all(isinstance(i, str) for i in ids) else None


def _saved_in(message: pai.ModelMessage) -> list[str]:
    """The threads a save of ``message`` succeeded in (:data:`SAVED_KEY`)."""
    metadata = message.metadata
    threads = metadata.get(SAVED_KEY) if isinstance(metadata, dict) else None
    if isinstance(threads, str):
        return [threads]
    return [t for t in threads if isinstance(t, str)] if isinstance(threads, list) else []


def _run_of(message: pai.ModelMessage) -> str | None:
    """The id of the pydantic-ai run that made ``message`` (None when not recorded)."""
    run = getattr(message, "run_id", None)
    return run if isinstance(run, str) else None


def _tag(message: pai.ModelMessage, ids: list[str]) -> None:
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    message.metadata = {**metadata, IDS_KEY: ids}


@dataclass
class ObservationalMemory(AbstractCapability[Any]):
    """obsmem's observational memory as a pydantic-ai capability (see the module docstring).

    ``memory``: the shared :class:`~obsmem.Memory`. ``resource_id``: the user the conversations
    belong to. ``thread_id``: the obsmem thread; unset, each run's ``conversation_id`` is used
    (``agent.run(..., conversation_id="trip")``). ``recall``: offer the ``recall`` tool (default:
    when the memory's retrieval mode is on). ``model``: the actor's ``provider:model`` id for
    obsmem's provider-change activation (default: the run's model name).
    """

    memory: Memory
    resource_id: str
    thread_id: str | None = None
    recall: bool | None = None
    model: str | None = None
    _turn: Turn | None = field(default=None, init=False, repr=False)
    _thread: str | None = field(default=None, init=False, repr=False)
    # Per run: where each obsmem id met in the history is stored (its thread; None: nowhere),
    # the ids this thread gives messages of other threads (by their tag), and the thread's
    # recorded instructions (read once, when the run first passes a system prompt).
    _where: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)
    _adopted: dict[tuple[str, ...], list[str]] = field(default_factory=dict, init=False, repr=False)
    _instructions: list[Message] | None = field(default=None, init=False, repr=False)
    # The stored steps of the failed run this run resumes (they follow its prompt: its own).
    _resumed: set[str] = field(default_factory=set, init=False, repr=False)
    # This run's pydantic-ai run id: its own messages are never taken for copies of erased ones.
    _run_id: str | None = field(default=None, init=False, repr=False)
    # What each function tool call of this run gave (its return part), by call id: the returns of
    # a final streamed response's calls, which only run_stream's own history gets.
    _ran: dict[str, pai.ToolReturnPart] = field(default_factory=dict, init=False, repr=False)
    # What a ``ToolReturn`` of such a call showed the model beside its value (its ``content``),
    # by call id: pydantic-ai puts it in a user part after the request's returns.
    _shown: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    # The history of the run's latest model request (saved), and the response to it (not saved
    # until the next request): what a run stopped while its tools ran leaves (:meth:`wrap_run`).
    _history: list[pai.ModelMessage] = field(default_factory=list, init=False, repr=False)
    _response: pai.ModelResponse | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.memory, Memory):
            raise ConfigError("memory", f"expected an obsmem Memory, got {type(self.memory).__name__}")
        if not isinstance(self.resource_id, str) or not self.resource_id:
            raise ConfigError("resource_id", f"expected a non-empty string, got {self.resource_id!r}")
        if self.thread_id is not None and (not isinstance(self.thread_id, str) or not self.thread_id):
            raise ConfigError("thread_id", f"expected a non-empty string or None, got {self.thread_id!r}")
        if self.recall and not self.memory.config.retrieval.enabled:
            raise ConfigError("recall", "the recall tool needs retrieval mode, which is off",
                              allowed="Memory(config={'retrieval': True}), or recall=None/False")

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live Memory: not spec-serializable

    async def for_run(self, ctx: RunContext[Any]) -> AbstractCapability[Any]:
        run = dataclasses.replace(self)  # per-run state (the turn) starts empty
        run._thread = self.thread_id or ctx.conversation_id
        run._run_id = ctx.run_id
        return run

    # -- tools ------------------------------------------------------------------------------------
    def get_toolset(self) -> FunctionToolset[Any] | None:
        offered = self.memory.config.retrieval.enabled if self.recall is None else self.recall
        if not offered:
            return None
        schema = self.memory.recall_tool(flavor="generic")

        async def recall(**args: Any) -> dict[str, Any]:
            return await self.memory.call_recall_tool(self._thread_id(), args)

        tool: Tool[Any] = Tool.from_schema(
            recall, schema["name"], schema["description"], schema["parameters"]
        )
        return FunctionToolset([tool])

    async def wrap_tool_execute(
        self, ctx: RunContext[Any], *, call: pai.ToolCallPart, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        try:
            result = await handler(args)
        except ToolRetryError as error:
            if isinstance(error.tool_retry, pai.ToolReturnPart):
                self._ran[call.tool_call_id] = error.tool_retry
            raise
        except ToolFailedError as error:
            self._ran[call.tool_call_id] = error.tool_failed
            raise
        self._ran[call.tool_call_id] = _return_part(call, result)
        if isinstance(result, pai.ToolReturn) and result.content:
            self._shown[call.tool_call_id] = result.content
        return result

    # -- the run ----------------------------------------------------------------------------------
    def _thread_id(self) -> str:
        if not self._thread:
            raise ConfigError(
                "thread_id", "no obsmem thread for this run",
                allowed="ObservationalMemory(..., thread_id='t1') or agent.run(..., conversation_id='t1')",
            )
        return self._thread

    def _mark_saved(self, history: Sequence[pai.ModelMessage]) -> None:
        """Mark the history messages this thread now stores (:data:`SAVED_KEY`), once a save
        succeeded: one stored nowhere later was erased since, not lost by a failed save."""
        thread = self._thread_id()
        for message in history:
            ids = self._ids_here(message)
            saved = _saved_in(message)
            if ids and thread not in saved and all(self._where.get(i) == thread for i in ids):
                # kept with the others: saved in another conversation too, it is still erased here
                # once this thread is deleted
                metadata = message.metadata if isinstance(message.metadata, dict) else {}
                message.metadata = {**metadata, SAVED_KEY: [*saved, thread] if saved else thread}

    def _ids_here(self, message: pai.ModelMessage) -> list[str] | None:
        """The ids of ``message``'s obsmem messages in this run's thread (None: not saved yet)."""
        tag = _ids_of(message)
        return None if tag is None else self._adopted.get(tuple(tag), tag)

    async def _locate(self, ids: Sequence[str]) -> None:
        """Learn which thread each of ``ids`` is stored in (one read for those not known yet)."""
        unknown = list(dict.fromkeys(i for i in ids if i not in self._where))
        if not unknown:
            return
        found = {m.id: m.thread_id for m in await self.memory.store.get_messages(unknown)}
        for obsmem_id in unknown:
            self._where[obsmem_id] = found.get(obsmem_id)

    async def _new_messages(self, history: Sequence[pai.ModelMessage]) -> list[Message]:
        """The obsmem messages of history messages not saved in this thread yet, in order.

        An untagged message is tagged with its new ids, derived from the thread and the message's
        content (timestamps included): an untagged copy of a message saved before (``run_stream``
        hands back its own copy of the final response) gets the same ids, so obsmem stores it once.
        Its system prompts, when they are the thread's recorded instructions, take their ids:
        the same instructions passed again are not stored again.

        A tagged message whose ids are stored in another thread (a ``message_history`` from
        another conversation) is new here: it is saved under ids derived from this thread and its
        tag (the same every time, so it is saved once), and keeps its tag for its own thread.
        A tagged message whose ids are stored nowhere yet is saved under them.
        """
        thread = self._thread_id()
        await self._locate([i for message in history for i in _ids_of(message) or []])
        foreign: dict[int, list[Message]] = {}
        for position, message in enumerate(history):
            tag = _ids_of(message)
            if tag is not None and any(self._where.get(i) not in (None, thread) for i in tag):
                digest = hashlib.sha256(json.dumps([thread, tag]).encode()).hexdigest()[:32]
                converted = _from_one(message, seed=f"pai-{digest}", keep_ids=False)
                foreign[position] = await self._as_recorded(converted)
                self._adopted[tuple(tag)] = [m.id for m in foreign[position]]
        await self._locate([m.id for converted in foreign.values() for m in converted])
        await self._locate([
            i for position, message in enumerate(history)
            if _ids_of(message) is None and (run := _answered_run(history, position)) is not None
            for i in _final_returns_ids(thread, run, 2)
        ])
        erased_runs = self._erased_runs(history)
        new: list[Message] = []
        for position, message in enumerate(history):
            ids = self._ids_here(message)
            if ids is not None and all(self._where.get(i) == thread for i in ids):
                continue  # saved in this thread
            if position in foreign:
                converted = foreign[position]
            elif ids is not None and thread in _saved_in(message):
                continue  # saved here and erased since (forget, delete_thread): never saved again
            elif ids is not None:  # tagged, never saved (a failed save, or converted by hand)
                converted = _from_one(message)
                if [m.id for m in converted] != ids:  # a tag that does not fit it: the new ids are its own
                    _tag(message, [m.id for m in converted])
            elif _run_of(message) in erased_runs:
                continue  # an untagged copy (run_stream's) of a message of a run erased since
            else:
                key = json.dumps([thread, _dump(message)], sort_keys=True)
                seed = f"pai-{hashlib.sha256(key.encode()).hexdigest()[:32]}"
                converted = await self._as_recorded(_from_one(message, seed=seed, thread=thread))
                converted = await self._as_stored_returns(_answered_run(history, position), message, converted)
                _tag(message, [m.id for m in converted])
            stored_here = {m.id for m in converted if self._where.get(m.id) == thread}
            for obsmem_message in converted:
                self._where[obsmem_message.id] = thread
            new.extend(m for m in converted if m.id not in stored_here)
        return new

    async def _as_stored_returns(
        self, run: str | None, request: pai.ModelMessage, converted: list[Message]
    ) -> list[Message]:
        """``converted`` (an untagged request's obsmem messages) with its leading tool returns
        under the id this thread stored them by when they are the returns of an earlier streamed
        run's final response (:meth:`_streamed_final_returns`; ``run``: the run of the response
        the request answers): the app's copy of that request, passed back in ``message_history``,
        is not stored again (a second answer to each call). pydantic-ai may merge that copy with
        the next run's prompt into one request without a run id: the response tells the run.

        The content its tools' ``ToolReturn`` showed the model, stored after the returns, leads
        the user message that follows them: it takes its stored id, and what follows it there (the
        next prompt, merged in) the id it has as a request of its own (:func:`_part_ids`)."""
        thread = self._thread_id()
        if run is None or run == self._run_id or not converted or converted[0].role != "tool":
            return converted
        returns_id, shown_id = _final_returns_ids(thread, run, 2)
        if self._where.get(returns_id) != thread:
            return converted
        out = [converted[0].model_copy(update={"id": returns_id})]
        rest = converted[1:]
        if rest and rest[0].role == "user":
            stored = next(iter(await self.memory.store.get_messages([returns_id])), None)
            count = stored.metadata.get(_SHOWN_KEY) if stored is not None else None
            if isinstance(count, int) and count > 0:
                out.extend(await self._after_shown(rest[0], shown_id, request, count))
                rest = rest[1:]
        return [*out, *rest]

    async def _after_shown(
        self, user: Message, shown_id: str, request: pai.ModelMessage, count: int
    ) -> list[Message]:
        """``user`` (the user message after the returns of an app's copy of a streamed final
        request) as the stored message of what the tools showed (``shown_id``: its first
        ``count`` user parts) and, after it, the prompt pydantic-ai merged into that request,
        under the id it was stored by. What the tools showed is never stored from the copy: it
        is stored under ``shown_id``, or was erased since (a forget) and stays so."""
        prompts = [p for p in request.parts if isinstance(p, pai.UserPromptPart)]
        if len(prompts) < count:
            return [user]
        self._where[shown_id] = self._thread_id()
        if len(prompts) == count:
            return [user.model_copy(update={"id": shown_id})]
        merged = pai.ModelRequest(parts=list(prompts[count:]), timestamp=getattr(request, "timestamp", None))
        key = json.dumps([self._thread_id(), _dump(merged)], sort_keys=True)
        seed = f"pai-{hashlib.sha256(key.encode()).hexdigest()[:32]}"
        after = _from_one(merged, seed=seed, thread=self._thread_id())
        await self._locate([m.id for m in after])
        return [user.model_copy(update={"id": shown_id}), *after]

    def _erased_runs(self, history: Sequence[pai.ModelMessage]) -> set[str]:
        """The earlier runs of ``history`` whose messages this thread stored and has erased since
        (``delete_thread``, ``delete_resource``): one of their messages was saved here and none of
        its obsmem ids is stored anywhere now.

        ``run_stream`` hands the app its own copy of the final response (and of the request with
        an output tool's return), without the tags: matched by a content-derived id, found
        nowhere after a delete, it was taken for a new message and the deleted answer stored
        again. The run it belongs to tells it was erased with the rest."""
        thread = self._thread_id()
        erased: set[str] = set()
        for message in history:
            ids = self._ids_here(message)
            run = _run_of(message)
            if run is None or run == self._run_id or not ids or thread not in _saved_in(message):
                continue
            if all(self._where.get(i) is None for i in ids):
                erased.add(run)
        return erased

    async def _retried(self, history: Sequence[pai.ModelMessage], new: list[Message]) -> list[Message]:
        """``new`` (a run's first request's new messages) with its prompt taken for the thread's
        unanswered prompt when it is that prompt asked again: a run that failed at its model call
        (the provider down) saved its prompt, which stays (nothing is lost), and the user retries
        it. Without this the thread held the question twice and every later request sent it twice.
        Only the thread's newest message, a user message with the same visible parts as the new
        prompt (the run's last history message) and nothing after it, is taken, or that message
        followed only by the complete tool steps of a run that failed after its tools ran (the
        model gets them again and answers from their results: the tools do not run twice); the
        same question asked again after an answer (text, or an output tool's result) or with a
        call still waiting (a deferred tool) is a new message."""
        if not new or not history or new[-1].role != "user":
            return new
        prompt, tag = new[-1], _ids_of(history[-1])
        if tag is None or prompt.id not in tag:
            return new  # the new user message is not the run's prompt
        thread = self._thread_id()
        newest = await retried_input(self.memory.store, thread, [prompt])
        if newest is None:  # a run that failed later, after tools ran: they stay, with the prompt
            newest = await resumed_input(self.memory.store, thread, [prompt], final=_is_final_output)
            if newest is not None:  # its steps, after the prompt, are this run's own
                steps = await self.memory.store.list_messages(thread, after_seq=newest[0].seq or 0)
                self._resumed = {m.id for m in steps}
        if newest is None:
            return new
        stored = newest[0]
        _tag(history[-1], [stored.id if i == prompt.id else i for i in tag])
        self._where[stored.id] = thread
        return [*new[:-1], stored]

    async def _as_recorded(self, converted: list[Message]) -> list[Message]:
        """``converted`` with its system messages under the ids of the thread's recorded
        instructions when they are those instructions (same parts, in order): saving them
        again then stores nothing (the core keeps copies of stored messages out)."""
        systems = [m for m in converted if m.role == "system"]
        if not systems:
            return converted
        if self._instructions is None:
            self._instructions = await self._recorded_instructions()
        recorded = self._instructions
        if len(recorded) != len(systems) or any(
            _shown(old) != _shown(now) for old, now in zip(recorded, systems, strict=True)
        ):
            self._instructions = systems  # new instructions: what this save records
            return converted
        ids = {now.id: old.id for old, now in zip(recorded, systems, strict=True)}
        return [m.model_copy(update={"id": ids[m.id]}) if m.id in ids else m for m in converted]

    async def _recorded_instructions(self) -> list[Message]:
        """The thread's instructions as the core recorded them (``Memory.get_instructions``: the
        system messages of the latest call that passed any), all still stored; none otherwise
        (then the system prompt is stored again, as new instructions, which is never wrong)."""
        return await self.memory.get_instructions(self._thread_id())

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        history = list(request_context.messages)
        new = await self._new_messages(history)
        if self._turn is None or self._turn.ended:
            new = await self._retried(history, new)
            model = self.model or _model_id(ctx)
            self._turn = await self.memory.begin_turn(
                thread_id=self._thread_id(), resource_id=self.resource_id, messages=new, model=model
            )
        else:
            await self._turn.step(new)
        self._mark_saved(history)
        self._history, self._response = history, None
        context = self._turn.context
        request_context.messages = _request_messages(
            history, context.raw_messages, self._ids_here, self._resumed
        )
        extra = _observation_text(context.messages, context.raw_messages, context.instructions)
        if extra:
            parameters = request_context.model_request_parameters
            instructions = list(parameters.instruction_parts or [])
            instructions.append(pai.InstructionPart(extra, dynamic=True))
            request_context.model_request_parameters = dataclasses.replace(
                parameters, instruction_parts=instructions
            )
        return request_context

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        everything = result.all_messages()
        new = await self._new_messages(everything)
        new.extend(self._streamed_final_returns(everything, result.output))
        if self._turn is None and new:  # a run that made no model request (nothing else saved it)
            self._turn = await self.memory.begin_turn(
                thread_id=self._thread_id(), resource_id=self.resource_id, messages=new
            )
            new = []
        if self._turn is not None:
            await self._turn.end(new)
            self._mark_saved(everything)
        return result

    def _streamed_final_returns(self, history: Sequence[pai.ModelMessage], output: object) -> list[Message]:
        """The returns of the calls of a final streamed response, as obsmem messages (none when
        ``history`` does not end with such a response).

        ``run_stream`` runs the tools of the response that gave its output (an output tool's call,
        and the function tools ``end_strategy`` runs) and puts their returns in a request added
        only to the ``StreamedRunResult``'s own history: ``after_run``'s ends at the response. Not
        stored, the next run closed the calls as unanswered, although a tool ran and gave its
        result. Built here from what each call gave (:meth:`wrap_tool_execute`), as pydantic-ai
        builds it: the first output call is the final result, a function call that did not run
        was skipped. A call left waiting (an approval) is not answered. Stored under an id derived
        from the run, so the app's copy of the request, passed back, is known as stored
        (:meth:`_as_stored_returns`)."""
        last = history[-1] if history else None
        if not isinstance(last, pai.ModelResponse) or not last.tool_calls:
            return []
        waiting = {c.tool_call_id for c in [*output.calls, *output.approvals]} \
            if isinstance(output, DeferredToolRequests) else set()
        parts: list[pai.ModelRequestPart] = []
        final_seen = False
        for call in last.tool_calls:
            if call.tool_call_id in waiting:
                continue
            ran = self._ran.get(call.tool_call_id)
            if ran is not None:
                parts.append(ran)
                continue
            if call.tool_kind == "output":
                content = _OUTPUT_SKIPPED if final_seen else _FINAL_RESULT
                final_seen = True
            else:
                content = _TOOL_SKIPPED
            parts.append(pai.ToolReturnPart(
                tool_name=call.tool_name, content=content, tool_call_id=call.tool_call_id,
                tool_kind=call.tool_kind, ui_visibility=call.ui_visibility,
            ))
        # what the tools' ToolReturn showed the model, after the returns (as pydantic-ai puts it)
        parts.extend(pai.UserPromptPart(self._shown[p.tool_call_id]) for p in list(parts)
                     if isinstance(p, pai.ToolReturnPart) and p.tool_call_id in self._shown)
        if not parts or self._run_id is None:
            return []
        request = pai.ModelRequest(parts=parts, run_id=self._run_id)
        converted = _from_one(request, keep_ids=False)
        ids = _final_returns_ids(self._thread_id(), self._run_id, len(converted))
        converted = [m.model_copy(update={"id": i}) for m, i in zip(converted, ids, strict=True)]
        shown = sum(isinstance(p, pai.UserPromptPart) for p in parts)
        if shown:  # how many of the request's user parts its tools showed (:meth:`_after_shown`)
            returns = converted[0]
            converted[0] = returns.model_copy(update={"metadata": {**returns.metadata, _SHOWN_KEY: shown}})
        for message in converted:
            self._where[message.id] = self._thread_id()
        return converted

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: pai.ModelResponse
    ) -> pai.ModelResponse:
        self._response = response
        return response

    async def wrap_run(self, ctx: RunContext[Any], *, handler: Any) -> AgentRunResult[Any]:
        try:
            return cast(AgentRunResult[Any], await handler())
        finally:
            if self._turn is not None and not self._turn.ended:
                # a failed run: what it saved stays, with what its finished tools did; the turn is closed
                try:
                    await self._turn.end(await self._left_by_stopped_run())
                except ObsmemError:
                    if not self._turn.ended:
                        await self._turn.end()

    async def _left_by_stopped_run(self) -> list[Message]:
        """What a run that stopped while its tools ran leaves unsaved: the model's response and
        the returns of the tools that finished (an email sent), as obsmem messages; nothing when
        no tool finished.

        Both are saved before the next model request, which a run stopped in between (cancelled,
        or another tool of the response raising) never makes: the tool left no trace in memory.
        The calls that did not finish stay unanswered (the next turn closes them)."""
        response = self._response
        if response is None:
            return []
        parts: list[pai.ModelRequestPart] = [
            self._ran[c.tool_call_id] for c in response.tool_calls if c.tool_call_id in self._ran
        ]
        if not parts:
            return []
        return await self._new_messages([*self._history, response, pai.ModelRequest(parts=parts, run_id=self._run_id)])


def _is_final_output(message: Message) -> bool:
    """Whether a tool message answers an output tool's call (the run's answer, not a step)."""
    meta = message.metadata.get(_META)
    extras = meta.get("parts") if isinstance(meta, dict) else None
    return isinstance(extras, list) and any(
        isinstance(e, dict) and e.get("tool_kind") == "output" and e.get("outcome") in (None, "success")
        for e in extras
    )


# pydantic-ai's words for the returns of calls a final result made needless (its _tool_status).
_FINAL_RESULT = "Final result processed."
_OUTPUT_SKIPPED = "Output tool not used - a final result was already processed."
_TOOL_SKIPPED = "Tool not executed - a final result was already processed."


def _return_part(call: pai.ToolCallPart, result: Any) -> pai.ToolReturnPart:
    """The return part pydantic-ai records for a function tool's ``result``."""
    returned = result if isinstance(result, pai.ToolReturn) else None
    return pai.ToolReturnPart(
        tool_name=call.tool_name, tool_call_id=call.tool_call_id,
        content=returned.return_value if returned is not None else result,
        metadata=returned.metadata if returned is not None else None,
        tool_kind=call.tool_kind, ui_visibility=call.ui_visibility,
    )


def _answered_run(history: Sequence[pai.ModelMessage], position: int) -> str | None:
    """The run of the response that the request at ``position`` follows (None: not a request
    after a response)."""
    if position == 0 or not isinstance(history[position], pai.ModelRequest):
        return None
    before = history[position - 1]
    return _run_of(before) if isinstance(before, pai.ModelResponse) else None


def _final_returns_ids(thread: str, run_id: str, count: int) -> list[str]:
    """The ids of the returns a streamed run's final response got (:meth:`ObservationalMemory._streamed_final_returns`)."""
    digest = hashlib.sha256(json.dumps([thread, "streamed-final-returns", run_id]).encode()).hexdigest()[:32]
    return [f"pai-{digest}-{n}" for n in range(count)]


def _model_id(ctx: RunContext[Any]) -> str | None:
    model = ctx.model
    system = getattr(model, "system", None)
    name = getattr(model, "model_name", None)
    if isinstance(system, str) and isinstance(name, str):
        return f"{system}:{name}"
    return None


def _observation_text(
    context: Sequence[Message], raw: Sequence[Message], instructions: Sequence[Message]
) -> str:
    """obsmem's own context messages (preamble, observations, reminders) as one instruction text."""
    raw_ids = {m.id for m in raw}
    app_ids = {m.id for m in instructions}
    texts = [m.text for m in context if m.id not in raw_ids and m.id not in app_ids and m.text]
    return "\n\n".join(texts)


def _shown(message: Message) -> tuple[Part, ...]:
    """What a model is shown of a message: its parts without data parts (markers)."""
    return tuple(p for p in message.parts if not isinstance(p, DataPart))


def _request_messages(
    history: Sequence[pai.ModelMessage], raw: Sequence[Message],
    ids_of: Callable[[pai.ModelMessage], list[str] | None] = _ids_of, resumed: Collection[str] = (),
) -> list[pai.ModelMessage]:
    """What the model gets: the unobserved tail, as the run's own messages where it has them.

    ``raw`` is obsmem's unobserved tail in order; ``ids_of`` gives a history message's obsmem
    ids in this thread. A history message whose obsmem messages are all in it is sent as it
    is; one only partly in it is sent with the parts of the others left out; one not in it at
    all (observed) is pruned, except its system prompts. Raw messages that no history message
    holds (earlier runs of the thread) are converted back. The system prompts the conversation
    opens with (and those of pruned requests) lead the request, as pydantic-ai sends them
    without obsmem: never after earlier turns, where a model would read them as user text.

    The run's newest message ends the request: what another turn of the thread saved after it
    (a run of the same conversation at once answered meanwhile) is left for later requests, or
    the model would answer that turn's question, or get a response last, which pydantic-ai
    refuses. ``resumed``: the stored tool steps of the failed run this run resumes, which follow
    its prompt and are the run's own.
    """
    owner: dict[str, int] = {}
    stored = {m.id: m for m in raw}
    for position, message in enumerate(history):
        ids = ids_of(message) or []
        if position < len(history) - 1 and _rewritten(message, ids, stored):
            continue  # sent as obsmem stores it (converted back below), not as the run has it
        for obsmem_id in ids:
            owner[obsmem_id] = position
    newest_at = max((i for i, m in enumerate(raw) if owner.get(m.id) == len(history) - 1), default=len(raw))
    raw = [m for i, m in enumerate(raw) if i <= newest_at or m.id in owner or m.id in resumed]
    raw_ids = {m.id for m in raw}
    out: list[pai.ModelMessage] = []
    emitted: set[int] = set()
    pending: list[Message] = []

    def flush() -> None:
        if pending:
            out.extend(to_pydantic_ai(pending))
            pending.clear()

    for raw_message in raw:
        index = owner.get(raw_message.id)
        if index is None:
            pending.append(raw_message)
            continue
        flush()
        if index not in emitted:
            emitted.add(index)
            out.append(_kept_part(history[index], ids_of(history[index]) or [], raw_ids))
    flush()
    newest = len(history) - 1
    if history and newest not in emitted:
        # The newest input always goes (a request obsmem holds only as data, say); never observed yet.
        emitted.add(newest)
        out.append(_late_results_in_place(out, history[newest]))
    lead: list[pai.ModelRequestPart] = []
    if history and isinstance(history[0], pai.ModelRequest):
        for part in history[0].parts:  # the standing system prompt, as pydantic-ai tells it
            if not isinstance(part, pai.SystemPromptPart) or part.scope == "request":
                break
            lead.append(part)
    for position, old in enumerate(history):
        if position in emitted or not isinstance(old, pai.ModelRequest):
            continue
        lead.extend(
            p for p in old.parts
            if isinstance(p, pai.SystemPromptPart) and p.scope != "request" and all(p is not q for q in lead)
        )
    if not lead:
        return out
    moved = {id(p) for p in lead}
    rest: list[pai.ModelMessage] = []
    for message in out:
        if isinstance(message, pai.ModelRequest) and any(id(p) in moved for p in message.parts):
            parts = [p for p in message.parts if id(p) not in moved]
            if not parts:
                continue
            message = dataclasses.replace(message, parts=parts)
        rest.append(message)
    if rest and isinstance(rest[0], pai.ModelRequest):
        rest[0] = dataclasses.replace(rest[0], parts=[*lead, *rest[0].parts])
    else:
        rest.insert(0, pai.ModelRequest(parts=lead))
    return rest


def _rewritten(message: pai.ModelMessage, ids: list[str], stored: Mapping[str, Message]) -> bool:
    """Whether obsmem stores ``message`` (unobserved, in ``stored``) other than the run has it:
    ``forget`` removed a value from it (a text part holding it gone, a tool result
    ``"[forgotten]"``) that the app's ``message_history`` still holds."""
    if not any(i in stored for i in ids):
        return False
    converted = _from_one(message)
    if len(converted) != len(ids):
        return False
    return any(
        obsmem_id in stored and _shown(stored[obsmem_id]) != _shown(given)
        for obsmem_id, given in zip(ids, converted, strict=True)
    )


def _kept_part(message: pai.ModelMessage, ids: list[str], raw_ids: set[str]) -> pai.ModelMessage:
    """``message`` with only the parts whose obsmem message is unobserved (itself when all are)."""
    if all(i in raw_ids for i in ids):
        return message
    converted = _from_one(message)  # the same split as when it was saved: part spans per obsmem message
    keep: list[bool] = []
    for obsmem_id, obsmem_message in zip(ids, converted, strict=False):
        spans = len(obsmem_message.metadata[_META]["parts"])
        visible = obsmem_message.role == "system" or obsmem_message.is_marker_only or obsmem_id in raw_ids
        keep.extend([visible] * spans)
    if all(keep):
        return message
    parts = [p for p, k in zip(message.parts, keep, strict=False) if k]
    return dataclasses.replace(message, parts=parts)  # type: ignore[arg-type]


def _late_results_in_place(out: list[pai.ModelMessage], newest: pai.ModelMessage) -> pai.ModelMessage:
    """``newest`` without the tool returns of calls ``out`` answers already, each put in place
    of that answer in ``out`` (changed in place).

    A deferred call (an approval) the user moved on from is closed by obsmem with an answer of
    no result, right after the call; when the real result comes after all (the approval given
    later: ``deferred_tool_results`` with the history that asked for it) obsmem stores it in that
    answer's place. Sent as well at the end of the request, after later turns, it was a tool
    return no call precedes, and a second answer to its call: a provider refuses the request
    (OpenAI: 400), after the approved tool ran. The request still ends with ``newest`` (pydantic-ai
    needs a request last), left with its other parts, or none."""
    if not isinstance(newest, pai.ModelRequest):
        return newest
    before = out[-1] if out else None
    own = {p.tool_call_id for p in before.parts if isinstance(p, pai.ToolCallPart)} \
        if isinstance(before, pai.ModelResponse) else set()
    where: dict[str, tuple[int, int]] = {}
    for index, message in enumerate(out):
        if isinstance(message, pai.ModelRequest):
            for at, part in enumerate(message.parts):
                if isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart) and part.tool_name:
                    where[part.tool_call_id] = (index, at)
    kept: list[pai.ModelRequestPart] = []
    for part in newest.parts:
        placed = (  # (a return of the response right before it answers that call: one of a reused id)
            where.get(part.tool_call_id)
            if isinstance(part, pai.ToolReturnPart | pai.RetryPromptPart) and part.tool_name
            and part.tool_call_id not in own else None
        )
        if placed is None:
            kept.append(part)
            continue
        index, at = placed
        message = out[index]
        assert isinstance(message, pai.ModelRequest)
        parts = list(message.parts)
        parts[at] = part
        out[index] = dataclasses.replace(message, parts=parts)
    if len(kept) == len(newest.parts):
        return newest
    return dataclasses.replace(newest, parts=kept)

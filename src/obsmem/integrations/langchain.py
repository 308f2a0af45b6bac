"""obsmem in LangChain v1 agents: an ``AgentMiddleware`` and message converters.

::

    from langchain.agents import create_agent
    from obsmem import Memory
    from obsmem.integrations.langchain import ObservationalMemoryMiddleware

    async with Memory() as memory:
        agent = create_agent(model, tools=[...], middleware=[ObservationalMemoryMiddleware(memory)])
        await agent.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

The middleware replaces ``SummarizationMiddleware``. Before every model call it saves the
messages of the agent's state obsmem has not seen and sends the model obsmem's context instead of
the whole history: after the request's system prompt (the agent's ``system_prompt``, or what a
middleware such as ``@dynamic_prompt`` sets, in any order: obsmem leaves it alone), every system
message of the state (each is an instruction of the app's), then obsmem's observations (one system
message), then the unobserved raw tail, as the original LangChain message objects. A tool call is
never separated from its result (obsmem never observes one without the other) and the newest
input stays raw, whatever its content blocks. After the run, the final answer is saved and the
turn ends.

A LangChain message id (often the provider's, ``chatcmpl-…``, which may repeat) is not obsmem's
id as it is: obsmem's is derived from it, the thread and the message's content
(:func:`~obsmem.integrations._ids.scoped_id`), so a repeated id loses no message, the same id in
another thread is another message, and history sent again is stored once. An answer of the model
is a message of its own even when the server repeats both its id and its text. A message of the
state with the id of one saved earlier and other content (LangGraph replaces a message by id: an
edit) is saved in the earlier one's place while that one is unobserved, so the model gets the edited
message only; once observed, the edit is saved as a new message. A message the app removes from
the state (``RemoveMessage``) is deleted from the thread, with its tool call or results
(:meth:`ObservationalMemoryMiddleware._removed`); the messages a ``SummarizationMiddleware`` beside
it replaces with its summary are not (obsmem keeps them), and the summary is neither stored nor sent.

:func:`to_langchain` / :func:`from_langchain` convert messages both ways, keeping ids, tool
calls and results (ids, names, errors), reasoning and attachments (see each function).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, NotRequired
from uuid import UUID

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import PrivateStateAttr
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import Command

from obsmem import ContextWindow
from obsmem.convert._common import speaker_metadata, wire_name
from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.integrations._ids import resumed_input, scoped_id
from obsmem.memory import Memory
from obsmem.turn import Turn, retried_input
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    new_id,
)

__all__ = ["ObservationalMemoryMiddleware", "from_langchain", "to_langchain"]

#: A content block obsmem has no part for, kept whole (never shown to obsmem's observer).
BLOCK_PART = "langchain-block"
#: ``additional_kwargs`` key holding a tool result that is not a string (its content is its JSON).
RESULT_KEY = "obsmem_result"
#: ``AIMessage.additional_kwargs`` key: the order of calls split over tool_calls and invalid_tool_calls.
ORDER_KEY = "obsmem_call_order"
#: ``Message.metadata`` key holding provider payloads of reasoning blocks, by part index.
METADATA_KEY = "langchain"
#: obsmem's own context messages carry this metadata key.
_OBSMEM_KEY = "obsmem"
#: The agent state's key (private, checkpointed) listing the state's messages the middleware saved,
#: each by the mark of its obsmem id (:func:`_mark`): see :meth:`ObservationalMemoryMiddleware._restore`.
SAVED_STATE_KEY = "obsmem_saved"
#: The agent state's key (private, checkpointed) listing, by mark, the state's messages a model
#: call of a run that has not ended saves or is about to save, and the model's answers it has not
#: saved yet: see :meth:`ObservationalMemoryMiddleware.abefore_model`.
PENDING_STATE_KEY = "obsmem_pending"

_ROLES: dict[str, str] = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_FILE_BLOCKS = ("image", "file", "audio", "video")
_FILE_EXTRAS = ("filename", "width", "height", "detail", "token_estimate")


# -- LangChain -> obsmem ----------------------------------------------------------------------------


def _file_part(block: dict[str, Any], where: str) -> FilePart:
    extras = block.get("extras") if isinstance(block.get("extras"), dict) else {}
    assert isinstance(extras, dict)
    mime = block.get("mime_type")
    data: str | None = None
    url: str | None = block.get("url") if isinstance(block.get("url"), str) else None
    if block.get("type") == "image_url":  # the OpenAI form LangChain also accepts
        image = block.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image if isinstance(image, str) else None
        if isinstance(image, dict) and image.get("detail") is not None:
            extras = {**extras, "detail": image["detail"]}
    if isinstance(block.get("base64"), str):
        data = block["base64"]
        if extras.get("data_uri"):
            data = f"data:{mime};base64,{data}"
    if not isinstance(mime, str) or not mime:
        image = block.get("type") in ("image", "image_url")
        mime = _guess_mime(url or "", "image/*" if image else "application/octet-stream")
    return FilePart(
        media_type=mime, url=url, data=data, **{key: extras[key] for key in _FILE_EXTRAS if key in extras},
    )


def _guess_mime(ref: str, default: str) -> str:
    if ref.startswith("data:") and ";" in ref:
        return ref[5 : ref.index(";")] or default
    lowered = ref.lower().split("?")[0]
    for ending, mime in ((".png", "image/png"), (".jpg", "image/jpeg"), (".jpeg", "image/jpeg"),
                         (".gif", "image/gif"), (".webp", "image/webp"), (".pdf", "application/pdf")):
        if lowered.endswith(ending):
            return mime
    return default


def _stand_in(block: dict[str, Any]) -> TextPart | FilePart:
    """The part that stands for a block obsmem has no part for, in a user's message: its text
    when it carries one (``text-plain``, a ``non_standard`` value's text, an Anthropic text
    ``document``), else a file with what the block says of its type, location and data (an
    Anthropic ``document``, an OpenAI ``input_audio`` or ``file``). The block itself is kept beside
    it (the message's metadata) and is what goes back to LangChain."""
    kind = block.get("type")
    own = block.get(kind) if isinstance(kind, str) else None  # {"type": "input_audio", "input_audio": {...}}
    inner = [block, *(v for v in (block.get("source"), own, block.get("value")) if isinstance(v, dict))]
    for where in inner:
        if isinstance(where.get("text"), str):
            return TextPart(text=where["text"])
        if where.get("type") == "text" and isinstance(where.get("data"), str):
            return TextPart(text=where["data"])
    mime = url = data = name = None
    for where in inner:
        nested = where is not block and where is own
        mime = mime or _text_of(where, "mime_type", "media_type")
        url = url or _text_of(where, "url", "file_url")
        name = name or _text_of(where, "filename", "title")
        data = data or _text_of(where, "base64", "file_data")
        if data is None and (nested or where.get("type") == "base64"):
            data = _text_of(where, "data")
        audio = _text_of(where, "format")
        if mime is None and audio is not None and isinstance(kind, str) and "audio" in kind:
            mime = f"audio/{audio}"
    mime = mime or _guess_mime(data if data and data.startswith("data:") else url or name or "",
                               "application/octet-stream")
    return FilePart(media_type=mime, url=url, data=data, filename=name)


def _text_of(where: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = where.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _content_parts(
    content: str | list[str | dict[str, Any]], where: str, *, stand_ins: bool = False
) -> tuple[list[Part], dict[str, Any]]:
    """Parts for a message's content, and the blocks that carried more than their part keeps
    (provider ids, annotations, signatures), by part index, to restore on the way back.

    ``stand_ins`` (a user's message): a block obsmem has no part for gets a part that stands for
    it (:func:`_stand_in`), so obsmem shows the message and its observer knows of it; else
    it is kept in a data part (never shown)."""
    if isinstance(content, str):
        return ([TextPart(text=content)] if content else []), {}
    parts: list[Part] = []
    payloads: dict[str, Any] = {}
    for index, block in enumerate(content):
        at = f"{where}.content[{index}]"
        if isinstance(block, str):
            parts.append(TextPart(text=block))
            continue
        if not isinstance(block, dict):
            raise InvalidInputError(f"{at}: expected a string or a content block dict", argument=at)
        kind = block.get("type")
        part: Part
        if kind == "text" and isinstance(block.get("text"), str):
            part, plain = TextPart(text=block["text"]), set(block) <= {"type", "text"}
        elif kind in ("reasoning", "thinking"):
            text = block.get("reasoning") if kind == "reasoning" else block.get("thinking")
            if not isinstance(text, str):  # OpenAI Responses: a summary of parts
                summary = block.get("summary")
                text = "\n".join(
                    str(s.get("text", "")) for s in summary if isinstance(s, dict)
                ) if isinstance(summary, list) else ""
            part = ReasoningPart(text=text)
            plain = set(block) <= {"type", "reasoning"} and kind == "reasoning"
        elif kind in (*_FILE_BLOCKS, "image_url"):
            part = _file_part(block, at)
            plain = kind != "image_url" and set(block) <= {"type", "url", "base64", "mime_type", "extras"}
        elif kind in ("tool_call", "tool_call_chunk", "invalid_tool_call"):
            continue  # also in AIMessage.tool_calls, where they are read
        elif stand_ins:
            part, plain = _stand_in(block), False
        else:
            part, plain = DataPart(name=BLOCK_PART, data=dict(block)), True
        if not plain:
            payloads[str(len(parts))] = dict(block)
        parts.append(part)
    return parts, payloads


def _files_out(content: list[Any], where: str) -> tuple[list[Any], list[Part], list[dict[str, Any]]]:
    """A ``ToolMessage``'s content blocks with its attachments (``image``/``file``/``audio``/
    ``video``/``image_url`` blocks: a chart, a screenshot a tool returns) taken out as file parts
    of the tool message; in the result, a short text names each one (``[image/png attachment]``).

    Kept in the result, an image was its base64 text: a 300 KB image counted as 273,000 tokens
    (in a user's message, an image's count) and read by the observer. Each one's place in the
    content (``at``) is kept, and a block with more than its part keeps (``image_url``, provider
    fields) whole (``block``), to put it back (:func:`_files_in`)."""
    kept: list[Any] = []
    files: list[Part] = []
    moved: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") not in (*_FILE_BLOCKS, "image_url"):
            kept.append(block)
            continue
        file = _file_part(block, f"{where}.content[{index}]")
        plain = block.get("type") != "image_url" and set(block) <= {
            "type", "url", "base64", "mime_type", "extras"}
        files.append(file)
        moved.append({"at": index} if plain else {"at": index, "block": dict(block)})
        kept.append(f"[{file.media_type} attachment]")
    return kept, files, moved


def _files_in(message: Message, result: ToolResultPart) -> list[str | dict[str, Any]] | None:
    """The content blocks of a tool message :func:`_files_out` took attachments out of, with them
    back in place; None for a message that is not one (a result without them, or changed since)."""
    kept = message.metadata.get(METADATA_KEY)
    moved = kept.get("files") if isinstance(kept, dict) else None
    files = [p for p in message.parts if isinstance(p, FilePart)]
    if not isinstance(moved, list) or not moved or not isinstance(result.result, list) \
            or len(files) != len(moved) or len(message.parts) != 1 + len(files):
        return None
    content: list[str | dict[str, Any]] = list(result.result)
    for entry, file in zip(moved, files, strict=True):
        at = entry.get("at") if isinstance(entry, dict) else None
        if not isinstance(at, int) or not 0 <= at < len(content):
            return None
        block = entry.get("block")
        content[at] = dict(block) if isinstance(block, dict) else _file_block(file)
    return content


def _call_names(history: Iterable[BaseMessage | Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in history:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id"):
                    names[str(call["id"])] = call["name"]
        elif isinstance(message, Message):
            names.update({c.tool_call_id: c.tool_name for c in message.tool_calls})
    return names


def from_langchain(
    messages: Sequence[BaseMessage], *, history: Iterable[BaseMessage | Message] = ()
) -> list[Message]:
    """obsmem messages for LangChain messages (``HumanMessage``, ``AIMessage``, ``SystemMessage``,
    ``ToolMessage``), in order.

    The LangChain ``id`` becomes the obsmem id (a message without one gets a new id). Text,
    reasoning (``reasoning``/``thinking`` blocks, ``additional_kwargs["reasoning_content"]``) and
    attachments (``image``/``file``/``audio``/``video`` and ``image_url`` blocks) become parts;
    ``tool_calls`` (and ``invalid_tool_calls``, raw arguments kept) become tool-call parts with
    their ids; a ``ToolMessage`` becomes a tool result (``status="error"`` → ``is_error``), named
    by ``name`` or by its call in ``messages`` / ``history``, its attachment blocks (an image a
    tool returns) file parts of the tool message, named in the result (``[image/png attachment]``),
    so they are counted and observed as files, not as their base64 text. A block obsmem has no part for
    (``document``, ``input_audio``, ``text-plain``, ``non_standard``, ...) is kept whole in the
    message's metadata and restored by :func:`to_langchain`; in a user's message a part stands for
    it (its text, or a file with its media type and data), so obsmem shows the message and its
    observer knows of the block; elsewhere it is kept in a data part (never shown to a model).
    """
    return _converted(messages, _call_names([*history, *messages]))


def _converted(messages: Sequence[BaseMessage], names: Mapping[str, str]) -> list[Message]:
    """:func:`from_langchain` with the tool names of the calls ``messages`` may answer already
    found (:func:`_call_names`), so a caller converting one message at a time reads a long
    history once, not once per message."""
    converted: list[Message] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, BaseMessage):
            raise InvalidInputError(
                f"{where}: expected a LangChain BaseMessage, got {type(message).__name__}", argument=where
            )
        role = _ROLES.get(message.type)
        if role is None:
            raise InvalidInputError(
                f"{where}: unsupported LangChain message type {message.type!r}", argument=where
            )
        message_id = message.id or new_id()
        if isinstance(message, ToolMessage):
            result: Any = message.content
            files: list[Part] = []
            moved: list[dict[str, Any]] = []
            if RESULT_KEY in message.additional_kwargs:
                result = message.additional_kwargs[RESULT_KEY]
            elif isinstance(result, list):
                result, files, moved = _files_out(result, where)
            name = message.name or names.get(message.tool_call_id) or "tool"
            part = ToolResultPart(
                tool_call_id=message.tool_call_id, tool_name=name, result=result,
                is_error=message.status == "error",
            )
            converted.append(Message(
                id=message_id, role="tool", parts=(part, *files),
                metadata={METADATA_KEY: {"files": moved}} if moved else {},
            ))
            continue
        parts, payloads = _content_parts(message.content, where, stand_ins=role == "user")
        if isinstance(message, AIMessage):
            reasoning = message.additional_kwargs.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                parts.insert(0, ReasoningPart(text=reasoning))
                payloads = {str(int(k) + 1): v for k, v in payloads.items()}
            for call in message.tool_calls:
                parts.append(ToolCallPart(
                    tool_call_id=call.get("id") or new_id("call"), tool_name=call["name"], args=call["args"]
                ))
            for bad in message.invalid_tool_calls:
                parts.append(ToolCallPart(
                    tool_call_id=bad.get("id") or new_id("call"), tool_name=bad.get("name") or "tool",
                    args=bad.get("args") or "",
                ))
            order = message.additional_kwargs.get(ORDER_KEY)
            if isinstance(order, list):  # valid and invalid calls, interleaved as they were
                rank = {call_id: index for index, call_id in enumerate(order)}
                head = [p for p in parts if not isinstance(p, ToolCallPart)]
                calls = [p for p in parts if isinstance(p, ToolCallPart)]
                parts = [*head, *sorted(calls, key=lambda c: rank.get(c.tool_call_id, len(rank)))]
        if not parts:
            parts = [TextPart(text="")]
        metadata = {METADATA_KEY: {"blocks": payloads}} if payloads else {}
        metadata.update(speaker_metadata(message.name))  # a participant's name: who said it
        converted.append(
            Message(id=message_id, role=role, parts=tuple(parts), metadata=metadata)  # type: ignore[arg-type]
        )
    return converted


# -- obsmem -> LangChain ----------------------------------------------------------------------------


def _file_block(part: FilePart) -> dict[str, Any]:
    block: dict[str, Any] = {"type": _kind_of(part.media_type), "mime_type": part.media_type}
    extras: dict[str, Any] = {
        key: getattr(part, key) for key in _FILE_EXTRAS if getattr(part, key) is not None
    }
    if part.url is not None:
        block["url"] = part.url
    if part.data is not None:
        data = part.data
        if data.startswith("data:") and ";base64," in data:
            extras["data_uri"] = True
            data = data.split(";base64,", 1)[1]
        block["base64"] = data
    if extras:
        block["extras"] = extras
    return block


def _kind_of(media_type: str) -> str:
    for kind in ("image", "audio", "video"):
        if media_type.startswith(f"{kind}/"):
            return kind
    return "file"


def _content(message: Message) -> tuple[str | list[str | dict[str, Any]], list[ToolCallPart]]:
    kept = message.metadata.get(METADATA_KEY)
    payloads = kept.get("blocks") if isinstance(kept, dict) else None
    payloads = payloads if isinstance(payloads, dict) else {}
    blocks: list[str | dict[str, Any]] = []
    calls: list[ToolCallPart] = []
    for index, part in enumerate(message.parts):
        block: dict[str, Any] | None = None
        if isinstance(part, TextPart):
            block = {"type": "text", "text": part.text}
        elif isinstance(part, ReasoningPart):
            block = {"type": "reasoning", "reasoning": part.text}
        elif isinstance(part, FilePart):
            block = _file_block(part)
        elif isinstance(part, ToolCallPart):
            calls.append(part)
        elif isinstance(part, DataPart) and part.name == BLOCK_PART:
            block = dict(part.data)
        if block is None:
            continue
        payload = payloads.get(str(index))
        if isinstance(payload, dict) and _came_from(payload, part, str(block["type"])):
            block = dict(payload)  # the provider's own block, as it came (or the one the part stands for)
        blocks.append(block)
    only = blocks[0] if len(blocks) == 1 else None
    if isinstance(only, dict) and set(only) == {"type", "text"} and only["type"] == "text":
        return str(only["text"]), calls
    if not blocks:
        return "", calls
    return blocks, calls


def _came_from(payload: dict[str, Any], part: Part, kind: str) -> bool:
    """Whether ``payload``, kept by the part's index, is the block ``part`` came from (or the one
    it stands for). A text or reasoning part must say what the block says: a forget before
    obsmem.storage.forgetting re-keyed the blocks left them under the indexes the parts had before
    an earlier part went, and a thinking block went back with another one's text and signature."""
    if isinstance(part, TextPart | FilePart) and _stand_in(payload) == part:
        return True
    if payload.get("type") not in _SAME_KIND.get(kind, ()):
        return False
    return not isinstance(part, TextPart | ReasoningPart) or _content_parts([payload], "payload")[0] == [part]


_SAME_KIND: dict[str, tuple[str, ...]] = {
    "text": ("text",), "reasoning": ("reasoning", "thinking"), "image": ("image", "image_url"),
    "file": ("file",), "audio": ("audio",), "video": ("video",),
}


def to_langchain(messages: Iterable[Message]) -> list[AnyMessage]:
    """LangChain messages for obsmem messages (``turn.context.messages``), in order.

    Ids are kept. A message of one text part gets string content, others a list of standard
    content blocks (``text``, ``reasoning`` — the provider's own block when it came from one —,
    ``image``/``file``/``audio``/``video`` with ``url``/``base64`` and the rest of the
    attachment in ``extras``). Tool calls go to ``AIMessage.tool_calls`` (raw-string arguments to
    ``invalid_tool_calls``); each tool result becomes a ``ToolMessage`` with its call's id and the
    tool's name (a result that is not a string is sent as JSON and kept in
    ``additional_kwargs["obsmem_result"]``), placed before the rest of its message; a tool
    message whose attachments :func:`from_langchain` took out gets its content blocks back, each
    attachment in its place. A part that
    stands for a LangChain block obsmem has no part for goes back as that block. obsmem's data
    parts (markers) never go; a message of nothing else is left out.
    """
    converted: list[AnyMessage] = []
    for message in messages:
        results = message.tool_results
        with_files = _files_in(message, results[0]) if message.role == "tool" and len(results) == 1 else None
        if with_files is not None:  # a tool message with its attachments: they go back in its content
            result = results[0]
            converted.append(ToolMessage(
                content=with_files, tool_call_id=result.tool_call_id, name=result.tool_name,
                status="error" if result.is_error else "success", id=message.id,
            ))
            continue
        for number, result in enumerate(results):
            extra: dict[str, Any] = {}
            if isinstance(result.result, str):
                content: str = result.result
            else:
                content = json.dumps(result.result, ensure_ascii=False, default=str)
                extra[RESULT_KEY] = result.result
            converted.append(ToolMessage(
                content=content, tool_call_id=result.tool_call_id, name=result.tool_name,
                status="error" if result.is_error else "success", additional_kwargs=extra,
                id=message.id if number == 0 else f"{message.id}#{number}",
            ))
        rest = [p for p in message.parts if not isinstance(p, ToolResultPart)]
        if not rest or all(isinstance(p, DataPart) and p.name != BLOCK_PART for p in rest):
            continue
        body, calls = _content(message.model_copy(update={"parts": tuple(rest)}))
        if message.role == "assistant":
            kinds = [isinstance(c.args, str) for c in calls]
            mixed = any(kinds) and not all(kinds) and kinds != sorted(kinds)
            converted.append(AIMessage(
                content=body, id=message.id, name=wire_name(message),
                additional_kwargs={ORDER_KEY: [c.tool_call_id for c in calls]} if mixed else {},
                tool_calls=[{"type": "tool_call", "id": c.tool_call_id, "name": c.tool_name, "args": c.args}
                            for c in calls if isinstance(c.args, dict)],
                invalid_tool_calls=[
                    {"type": "invalid_tool_call", "id": c.tool_call_id, "name": c.tool_name, "args": c.args,
                     "error": None}
                    for c in calls if isinstance(c.args, str)
                ],
            ))
        elif message.role == "system":
            converted.append(SystemMessage(content=body, id=message.id, name=wire_name(message)))
        else:
            converted.append(HumanMessage(content=body, id=message.id, name=wire_name(message)))
    return converted


# -- the middleware ---------------------------------------------------------------------------------


def _said(message: BaseMessage) -> list[Any]:
    """What a LangChain message says (its type and content): the same message sent again says it."""
    content: list[Any] = [message.type, message.content, message.additional_kwargs]
    if isinstance(message, AIMessage):
        content += [message.tool_calls, message.invalid_tool_calls]
    elif isinstance(message, ToolMessage):
        content += [message.tool_call_id, message.status]
    return content


def _result_keys(messages: Sequence[BaseMessage], wanted: Callable[[int, ToolMessage], bool]) -> dict[int, str]:
    """For the ``ToolMessage`` s of ``messages`` that ``wanted`` picks (by place): what each says,
    whatever its id (its call, content and status; the n-th result of its call in ``messages``)."""
    keys: dict[int, str] = {}
    seen: dict[str, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            n = seen.get(message.tool_call_id, 0)
            seen[message.tool_call_id] = n + 1
            if wanted(index, message):
                keys[index] = json.dumps([n, _said(message)], sort_keys=True, default=str, ensure_ascii=False)
    return keys


def _bare_id(thread: str, result_key: str) -> str:
    """The obsmem id of a tool result LangChain handed over without an id (see :func:`_result_keys`)."""
    return scoped_id("langchain", thread, "", ["tool-result", result_key])


def _variant(thread: str, message: BaseMessage, n: int) -> str:
    """The ``n``-th obsmem id for a LangChain message with an id: per thread, per content (the
    ``n``-th message of a thread with that id and content)."""
    content = _said(message)
    return scoped_id("langchain", thread, str(message.id), content if n == 0 else [content, n])


@dataclass
class _Known:
    """What the middleware knows of a thread: the obsmem ids of the state's messages saved, the
    obsmem id of each LangChain id's latest version, the ids an edited message was saved under
    instead of its own (:func:`_variant`: the version it replaced), and what a message saved
    under another id than its own holds (its own id)."""

    saved: set[str] = field(default_factory=set)
    latest: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    holds: dict[str, str] = field(default_factory=dict)
    #: Tool results saved without a LangChain id (by :func:`_result_keys`): the obsmem id each got.
    bare: dict[str, str] = field(default_factory=dict)
    #: The LangChain ids of each run's state when the middleware last saved from it (by the
    #: run's ``obsmem_run``), and of the state the last checkpointed run ended with (with its
    #: checkpointer, LangGraph thread and namespace: :func:`_checkpoint_of`). One of them the same state no
    #: longer holds was removed by the app: see :meth:`ObservationalMemoryMiddleware._removed`.
    in_run: dict[str, set[str]] = field(default_factory=dict)
    ended_with: tuple[tuple[object, str, str], set[str]] | None = None

    def seen(self, state: Mapping[str, Any], *, ended: bool = False) -> None:
        """Record what ``state`` holds, as saved from (at a run's ``ended``, for the next run)."""
        run, ids = state.get("obsmem_run"), {str(m.id) for m in state.get("messages") or () if m.id}
        if ended:
            self.in_run.pop(str(run), None)
            where = _checkpoint_of()
            if where is not None:
                self.ended_with = (where, ids)
        elif isinstance(run, str) and run:
            self.in_run[run] = ids
            while len(self.in_run) > 64:  # runs that failed before their end
                del self.in_run[next(iter(self.in_run))]

    def began(self, run: str) -> None:
        """A run begins (its state read from the checkpoint already): what the thread's last
        checkpointed run ended with is what this run's state came from. A run of the thread that
        ends while this one runs (a double-submitted request, both from one checkpoint) ended with
        messages this state never held: they are no removal by the app."""
        where = _checkpoint_of()
        if self.ended_with is not None and where is not None and self.ended_with[0] == where:
            self.in_run[run] = set(self.ended_with[1])
            while len(self.in_run) > 64:  # runs that failed before their end
                del self.in_run[next(iter(self.in_run))]

    def before(self, state: Mapping[str, Any]) -> set[str]:
        """What ``state`` held when last saved from: earlier in its run; at a run's first model
        call with a checkpointer, what the LangGraph thread's last run had ended with when this
        one began (:meth:`began`; another run of the thread at once began from the same
        checkpoint: its own messages are no removal, also once it has ended)."""
        run = state.get("obsmem_run")
        held = self.in_run.get(run) if isinstance(run, str) else None
        if held is not None:
            return held
        if self.ended_with is not None and self.ended_with[0] == _checkpoint_of():
            return self.ended_with[1]
        return set()


@dataclass
class _Run:
    """One agent run on a thread: its obsmem turn, what is known of the thread, and the model's
    answers of this run (by :meth:`key`: the obsmem id each was given, ``None`` before it is)."""

    known: _Known
    turn: Turn | None = None
    made: dict[str, list[str | None]] = field(default_factory=dict)
    #: The LangChain ids of the model's answers of this run (a message with one is no edit).
    answered: set[str] = field(default_factory=set)
    #: :func:`_variant` of a state message object met in this run, by ``(id(object), n)``: every
    #: model call of a run passes the same objects, so each is hashed once a run, not once a call.
    variants: dict[tuple[int, int], tuple[BaseMessage, str]] = field(default_factory=dict)
    #: The obsmem ids of the stored tool steps of the failed run this run resumes (they follow
    #: its input, as stored: the run's own, see :meth:`ObservationalMemoryMiddleware._own_tail`).
    resumed: set[str] = field(default_factory=set)
    #: Whether the state's :data:`SAVED_STATE_KEY` and :data:`PENDING_STATE_KEY` were read into
    #: :attr:`known` (once a run).
    restored: bool = False
    #: Whether a ``before_model`` of the run wrote what :attr:`known` says is saved into the state.
    promoted: bool = False
    #: Whether :meth:`ObservationalMemoryMiddleware._restore` found messages of the state that a run
    #: which did not end was saving deleted with the thread (the run was stopped, then deleted).
    deleted: bool = False
    #: The LangChain ids of the state's messages at the run's first look when nothing of that state
    #: was saved by the middleware (a thread's first input; a run's input without a checkpointer):
    #: the run's input, never a summary (:func:`_summary`).
    given: set[str] = field(default_factory=set)

    def variant(self, thread: str, message: BaseMessage, n: int = 0) -> str:
        """:func:`_variant`, remembered for the run (the object is kept: its ``id`` stays its own)."""
        hit = self.variants.get((id(message), n))
        if hit is not None and hit[0] is message:
            return hit[1]
        value = _variant(thread, message, n)
        self.variants[(id(message), n)] = (message, value)
        return value

    def key(self, thread: str, message: BaseMessage) -> str | None:
        """What tells a LangChain message with an id from another (its first obsmem id, its
        :func:`_variant` 0); None without an id."""
        return self.variant(thread, message) if message.id else None


@dataclass
class _Plan:
    """The obsmem messages to pass for a list of LangChain messages, the originals by obsmem id,
    and what the middleware knows once they are saved."""

    new: list[Message]
    originals: dict[str, AnyMessage]
    ids: list[tuple[BaseMessage, str | None, str | None]]
    made: dict[str, list[str | None]]
    aliases: dict[str, str]
    #: Tool results without a LangChain id saved now (key → obsmem id), and keys matched now.
    bare: dict[str, str] = field(default_factory=dict)
    matched: set[str] = field(default_factory=set)


def _summary(messages: Sequence[BaseMessage], run: _Run) -> BaseMessage | None:
    """The summary LangChain's ``SummarizationMiddleware`` put in ``messages`` (the state's or a
    request's) in place of the messages it summarised, if any: a ``HumanMessage`` marked
    ``lc_source: summarization``, first in the state (after its system messages), the messages
    it kept after it. The mark alone is no summary: a user's message can carry it (an app passing
    a client's message fields on), and is the user's; so is one this middleware saved, and one
    the run was given in a state the middleware had saved nothing of (:attr:`_Run.given`: a
    summary replaces messages the middleware saw; a thread's first input of a marked message and
    the user's question lost the marked one). A summary made before the middleware saw anything
    of the thread stands for messages it never got: it is stored as given."""
    first = next((m for m in messages if not isinstance(m, SystemMessage)), None)
    if (
        not isinstance(first, HumanMessage)
        or first.additional_kwargs.get("lc_source") != "summarization"
        or first is messages[-1]
        or (first.id is not None and (str(first.id) in run.known.latest or str(first.id) in run.given))
    ):
        return None
    return first


def _call_ids(message: Message) -> set[str]:
    """The ids of the tool calls ``message`` makes or answers."""
    return {c.tool_call_id for c in message.tool_calls} | {r.tool_call_id for r in message.tool_results}


def _checkpoint_of() -> tuple[object, str, str] | None:
    """The running graph's checkpointer, LangGraph thread and namespace (its state goes on from
    run to run; LangGraph puts the checkpointer in the run's config); None without a checkpointer
    (each run starts a new state).

    An agent run inside another graph (a subagent called from a tool of a checkpointed agent)
    inherits that graph's checkpointer and thread, but its state is its own: LangGraph gives it
    the namespace of the parent's task (``tools:<task id>``, another each call), so its fresh
    state is never taken for a trim of the parent's. The namespace is the config's
    ``checkpoint_ns`` less its last part, the node now running (``model:<task id>``)."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a runnable context
        return None
    checkpointer = configurable.get("__pregel_checkpointer")
    if checkpointer is None:
        return None
    namespace = str(configurable.get("checkpoint_ns") or "")
    return checkpointer, str(configurable.get("thread_id")), namespace.rpartition("|")[0]


def _same_parts(stored: Message, given: Message) -> bool:
    """``given`` is ``stored`` given again: the same role and parts (a content block obsmem has no
    part for is a data part here, and counts)."""
    return stored.role == given.role and stored.parts == given.parts


def _still_says(stored: Message, original: BaseMessage, names: Mapping[str, str]) -> bool:
    """Whether the state's ``original`` still says what obsmem stores of it. ``forget`` rewrites
    the stored message (a text part holding the value gone, a tool result ``"[forgotten]"``) while
    a checkpointed state keeps the value: such a message is sent as stored, never as the state
    has it. ``names``: :func:`_call_names` of the request's messages, found once a model call."""
    given = _converted([original], names)[0]
    return [p for p in given.parts if p.type != "data"] == [p for p in stored.parts if p.type != "data"]


def _mark(obsmem_id: str) -> str:
    """What the state's keys keep of an obsmem id (:func:`_variant`, a hash): its last 16 hex
    digits (64 bits), not its 36 characters. A new message whose mark is a saved one's would not
    be saved: one chance in 2**64 per message of the state. A mark is its own mark."""
    return obsmem_id[-16:]


def _marks(value: Any) -> set[str]:
    """The marks a state's key holds (a list; the whole ids b1635ee's middleware wrote count by
    their mark)."""
    return {_mark(i) for i in value if isinstance(i, str)} if isinstance(value, list) else set()


def _state_variants(thread: str, run: _Run, messages: Sequence[BaseMessage]) -> list[tuple[int, str]]:
    """For the state's messages a new middleware would look up (each with a LangChain id; system
    messages are given every call, saved or not): each one's place and the obsmem id a new
    middleware gives it, the ``n``-th :func:`_variant` for the ``n``-th message with the same id
    and content (see :meth:`ObservationalMemoryMiddleware._unsaved`)."""
    seen: dict[str, int] = {}
    found: list[tuple[int, str]] = []
    summary = _summary(messages, run)
    for index, message in enumerate(messages):
        key = run.key(thread, message)
        if key is None or isinstance(message, SystemMessage) or message is summary:
            continue
        n = seen.get(key, 0)
        seen[key] = n + 1
        found.append((index, run.variant(thread, message, n)))
    return found


def _answer_marks(
    thread: str, run: _Run, messages: Sequence[BaseMessage], answers: Sequence[BaseMessage]
) -> set[str]:
    """The marks the model's ``answers`` have in the state the model node leaves (LangGraph's
    ``add_messages``: an answer with the id of a message of ``messages`` takes its place, else it
    is added), as :func:`_state_variants` gives them."""
    after = list(messages)
    places = {str(m.id): index for index, m in enumerate(after) if m.id}
    for answer in answers:
        if answer.id and str(answer.id) in places:
            after[places[str(answer.id)]] = answer
        else:
            after.append(answer)
    mine = {id(answer) for answer in answers}
    return {_mark(v) for index, v in _state_variants(thread, run, after) if id(after[index]) in mine}


def _results_of(
    messages: Sequence[BaseMessage], variants: Sequence[tuple[int, str]], deleted: set[str]
) -> set[str]:
    """The obsmem ids of the tool messages of ``messages`` answering a call of a ``deleted`` one."""
    calls: set[str] = set()
    for index, v in variants:
        message = messages[index]
        if v in deleted and isinstance(message, AIMessage):
            calls.update(str(call["id"]) for call in message.tool_calls if call.get("id"))
    return {
        v for index, v in variants
        if isinstance(message := messages[index], ToolMessage) and message.tool_call_id in calls
    }


def _saved_marks(thread: str, run: _Run, plan: _Plan) -> list[str]:
    """The marks of the messages of ``plan`` (a run's end state) that are saved, sorted: each by
    the id a new middleware gives it (:func:`_state_variants`), whatever id it was saved under
    (another after an edit, a match of a stored message, an answer of the model)."""
    messages = [message for message, _, _ in plan.ids]
    return sorted({
        _mark(variant) for index, variant in _state_variants(thread, run, messages)
        if (own := plan.ids[index][1]) is not None and own in run.known.saved
    })


def _is_final(message: Message) -> bool:
    """Whether a stored tool message is the answer a run ended with (:func:`_ended_on`)."""
    kept = message.metadata.get(METADATA_KEY)
    return isinstance(kept, dict) and kept.get("final") is True


def _ended_on(plan: _Plan, messages: Sequence[BaseMessage]) -> None:
    """Mark in ``plan`` (saved at a run's end) the tool messages after the state's last
    ``AIMessage``: the run ended on them, so they are its answer (a structured response's tool
    message, a ``return_direct`` tool's result), not the steps of a run that failed
    (:func:`~obsmem.integrations._ids.resumed_input` takes a retried input only after those)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
    after = {id(m) for m in messages[last + 1:] if isinstance(m, ToolMessage)}
    if not after:
        return
    for index, message in enumerate(plan.new):
        original = plan.originals.get(message.id)
        if message.role == "tool" and original is not None and id(original) in after:
            kept = message.metadata.get(METADATA_KEY)
            mark = {**(kept if isinstance(kept, dict) else {}), "final": True}
            metadata = {**message.metadata, METADATA_KEY: mark}
            plan.new[index] = message.model_copy(update={"metadata": metadata})


class _State(AgentState[Any]):
    """The agent's state with the middleware's own keys, never in the agent's input or output:
    the run it is (set when the run begins; never checkpointed), which tells one run's state from
    another's without a checkpointer, runs of one thread at once included; and the state's
    messages saved (:data:`SAVED_STATE_KEY`) and being saved by a run that has not ended
    (:data:`PENDING_STATE_KEY`), checkpointed."""

    obsmem_run: NotRequired[Annotated[str, UntrackedValue, PrivateStateAttr]]
    obsmem_saved: NotRequired[Annotated[list[str], PrivateStateAttr]]
    obsmem_pending: NotRequired[Annotated[list[str], PrivateStateAttr]]


class ObservationalMemoryMiddleware(AgentMiddleware[_State, Any, Any]):
    """Observational memory for ``create_agent``: put it where ``SummarizationMiddleware`` would go.

    ``thread_id``: the obsmem thread; default, the run's ``config["configurable"]["thread_id"]``
    (the same id LangGraph's checkpointer uses). ``resource_id``: the thread's owner when obsmem
    creates it; default ``configurable["resource_id"]`` or ``user_id``, else the thread id.
    ``model``: the actor's ``provider:model`` id, passed to obsmem's turns.

    One middleware (and one :class:`~obsmem.Memory`) serves concurrent runs on different threads
    (one run per thread at a time, as with LangGraph's checkpointer). It is async only: run the
    agent with ``ainvoke``/``astream``. With a checkpointer the state keeps every message, but the
    model only ever gets obsmem's context; a new middleware over an old checkpoint stores nothing
    twice (messages are matched by id and content), and stores and sends nothing of a thread
    ``memory.delete_thread`` deleted (the state keeps which of its messages were saved, and which
    a run that did not end, failed or interrupted, was saving: :meth:`_restore`). An edit
    (a message of the state replaced by id) is known as one by the middleware that saved the
    earlier version (another saves it as a new message).

    The model's system prompt (``request.system_message``) is left as the agent or another
    middleware sets it, before or after this one; obsmem's observations come as a system
    message of their own right after it (with the state's system messages), so a
    ``@dynamic_prompt`` cannot drop them. All leading system messages are consecutive, as
    providers that take one system prompt need (langchain-anthropic joins them).
    """

    state_schema = _State

    def __init__(
        self, memory: Memory, *, thread_id: str | None = None, resource_id: str | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(memory, Memory):
            raise InvalidInputError(
                f"memory: expected an obsmem Memory, got {type(memory).__name__}", argument="memory"
            )
        self.memory = memory
        self.thread_id = thread_id
        self.resource_id = resource_id
        self.model = model
        self._runs: dict[str, _Run] = {}
        # Per thread, what is known of the state's messages already in obsmem (a checkpointed
        # state holds them all).
        self._known: dict[str, _Known] = {}

    def _run(self, thread: str) -> _Run:
        run = self._runs.get(thread)
        if run is None:
            run = self._runs[thread] = _Run(known=self._known.setdefault(thread, _Known()))
        return run

    @property
    def name(self) -> str:
        return "ObservationalMemoryMiddleware"

    def _ids(self) -> tuple[str, str]:
        configurable: dict[str, Any] = {}
        try:
            configurable = dict(get_config().get("configurable") or {})
        except RuntimeError:  # outside a runnable context: only the explicit ids
            pass
        thread = self.thread_id or configurable.get("thread_id")
        if isinstance(thread, UUID) or (isinstance(thread, int) and not isinstance(thread, bool)):
            thread = str(thread)  # LangGraph and its checkpointers take these, by their text
        if not isinstance(thread, str) or not thread:
            raise InvalidInputError(
                "ObservationalMemoryMiddleware needs a thread id: pass thread_id=... or run the agent with "
                "config={'configurable': {'thread_id': '...'}}",
                argument="thread_id",
            )
        # an int id of 0 (a user table's) is an id, not a missing one
        resource = next(
            (r for r in (self.resource_id, configurable.get("resource_id"), configurable.get("user_id"))
             if r not in (None, "")),
            thread,
        )
        return thread, str(resource)

    async def _unsaved(self, thread: str, run: _Run, messages: Sequence[AnyMessage]) -> _Plan:
        """The obsmem messages to pass for ``messages`` (the request's or the state's): those not
        saved yet, and every system message (the application's instructions of this call, see
        :meth:`_system_messages`); and the originals by obsmem id.

        A message's obsmem id comes from its LangChain id, its thread and its content
        (:func:`_variant`): a provider's id (``chatcmpl-…``) may repeat, in a thread or across
        threads, and is never obsmem's as it is. The n-th message of ``messages`` with the same id
        and content is its n-th variant, so history sent again is stored once; an answer the
        model gave in this run (the last of them in ``messages``: LangGraph's state may have put
        it in the place of an earlier one of the same id) is new whatever its id and content, and
        takes the first variant the thread does not hold. A message whose LangChain id this
        middleware saved with other content, the earlier version no longer in ``messages``, was
        edited (LangGraph replaces a message by id): it is saved in place of that version while
        that one is unobserved (:meth:`_unobserved`), else as a new message; so is a message
        saved in place of another edited again (back). A message without an id gets a new one."""
        known = run.known
        # SummarizationMiddleware's summary (beside this middleware) digests messages obsmem keeps
        # itself (see :meth:`_removed`): neither saved nor sent, it is no message of the thread.
        summary = _summary(messages, run)
        messages = [m for m in messages if m is not summary]
        ids: list[str | None] = [None] * len(messages)
        variants: list[str | None] = [None] * len(messages)  # each one's own id (before an edit's)
        places: dict[str, list[int]] = {}
        for index, message in enumerate(messages):
            key = run.key(thread, message)
            if key is not None:
                places.setdefault(key, []).append(index)
        made = {key: list(given) for key, given in run.made.items()}
        answers: list[tuple[int, str, int]] = []  # (place, key, the answer's index in made[key])
        for key, at in places.items():
            mine = min(len(made.get(key, [])), len(at))
            for n, index in enumerate(at[: len(at) - mine]):
                variant = variants[index] = run.variant(thread, messages[index], n)
                ids[index] = known.aliases.get(variant, variant)
            for k, index in enumerate(at[len(at) - mine:]):
                answers.append((index, key, len(made[key]) - mine + k))
        aliases: dict[str, str] = {}
        # LangChain's agent answers a malformed call of the model (``invalid_tool_calls``) itself:
        # it adds the ToolMessage to the model's request without an id, and to the state, where
        # LangGraph gives it one. Saved without an id, it gets an id from what it says; once it has
        # a LangChain id, it is known as that result (by this middleware, or by the stored id).
        result_keys = _result_keys(
            messages, lambda i, m: not m.id or (ids[i] is not None and ids[i] not in known.saved)
        )
        looked = {
            key: _bare_id(thread, key) for i, key in result_keys.items()
            if messages[i].id and key not in known.bare
        }
        stored_bare = {
            m.id for m in await self.memory.store.get_messages(sorted(set(looked.values())))
            if m.thread_id == thread
        } if looked else set()
        bare: dict[str, str] = {}
        matched: set[str] = set()
        for index, result_key in result_keys.items():
            if not messages[index].id:
                ids[index] = bare[result_key] = known.bare.get(result_key) or _bare_id(thread, result_key)
                continue
            target = known.bare.get(result_key)
            if target is None and looked.get(result_key) in stored_bare:
                target = looked[result_key]
            if target is not None:
                ids[index] = target
                matched.add(result_key)
                own_variant = variants[index]
                if own_variant is not None:
                    aliases[own_variant] = target
        current = {i for i in ids if i is not None}
        mine_at = {index for index, _, _ in answers}
        mine_at |= {index for index, key in result_keys.items() if key in matched}
        edits: dict[int, str] = {}
        for index, message in enumerate(messages):
            own, its = ids[index], variants[index]
            if own is None or its is None or index in mine_at or isinstance(message, SystemMessage):
                continue
            if own in known.saved:
                if known.holds.get(own, own) != its:  # saved with other content: edited again
                    edits[index] = own
                continue
            before = None if message.id in run.answered else known.latest.get(str(message.id))
            if before is not None and before != own and before in known.saved and before not in current:
                edits[index] = before
        in_place = await self._unobserved(thread, edits)
        for index, before in edits.items():
            its = variants[index]
            assert its is not None
            if index not in in_place:  # the earlier version is observed: the edit is a new message
                if ids[index] == before:  # ... and its own id holds the earlier version
                    fresh = await self._free(thread, known, messages[index], {*current, *aliases.values()})
                    ids[index] = aliases[its] = fresh
                    current.add(fresh)
                continue
            if its != before:
                aliases[its] = before  # an edit: in place of the version it replaces
            ids[index] = before
            current.add(before)
        for index, key, n in answers:
            given = made[key][n]
            if given is None:
                given = made[key][n] = await self._free(thread, known, messages[index], {*current, *aliases})
            ids[index] = variants[index] = given
            current.add(given)
        edited = set(in_place.values())
        chosen = [
            (m, own) for m, own in zip(messages, ids, strict=True)
            if own is None or own not in known.saved or own in edited or isinstance(m, SystemMessage)
        ]
        converted = from_langchain([m for m, _ in chosen], history=messages)
        new = [
            c if own is None else c.model_copy(update={"id": own})
            for (_, own), c in zip(chosen, converted, strict=True)
        ]
        originals: dict[str, AnyMessage] = {own: m for m, own in zip(messages, ids, strict=True) if own}
        originals.update({c.id: m for (m, own), c in zip(chosen, new, strict=True) if own is None})
        return _Plan(new=new, originals=originals, ids=list(zip(messages, ids, variants, strict=True)),
                     made=made, aliases=aliases, bare=bare, matched=matched)

    async def _retried(self, thread: str, run: _Run, plan: _Plan, messages: Sequence[AnyMessage]) -> None:
        """``plan`` (a run's first model call) with its input taken for the thread's unanswered
        input when it is that input asked again: a run that failed at its model call (the provider
        down) saved its input, which stays (nothing is lost), and the user runs the agent again
        with it. Without this the thread held the input twice and the model got it twice. The
        request's trailing user messages (new, the request's last) are taken only all together:
        the thread's newest messages, as many, user messages with the same parts, in order, and
        nothing after them (taking back only the last would store the others again after it, and
        the model's newest message would not be the question). Not when the request holds them
        already (a checkpointed state keeps the failed run's input: both stay, as the state has
        them); the same input again after an answer is new.

        A run that failed later, after its tools ran (the provider down at the model call after a
        tool), left its input followed by complete tool steps
        (:func:`~obsmem.integrations._ids.resumed_input`): its input is taken too, and the model
        gets it once, then the steps that ran, and answers from their results (the tools do not
        run twice). Not after an answer (a text, or a tool
        result a run ended with: a structured response, a ``return_direct`` tool, see
        :func:`_is_final`) nor while a call waits for its result (a tool awaiting approval)."""
        count = 0
        while (count < min(len(plan.new), len(messages)) and plan.new[-1 - count].role == "user"
               and plan.originals.get(plan.new[-1 - count].id) is messages[-1 - count]):
            count += 1
        if not count:
            return
        prompts = plan.new[-count:]
        newest = await retried_input(self.memory.store, thread, prompts, same=_same_parts)
        if newest is None:  # a run that failed later, after tools ran: they stay, with its input
            newest = await resumed_input(
                self.memory.store, thread, prompts, same=_same_parts, final=_is_final
            )
            if newest is not None:  # its steps, after the input, are this run's own
                steps = await self.memory.store.list_messages(thread, after_seq=newest[-1].seq or 0)
                run.resumed = {m.id for m in steps}
        held = {own for _, own, _ in plan.ids if own is not None}
        if newest is None or any(stored.id in held for stored in newest):
            return
        taken = {id(messages[len(messages) - count + i]): stored for i, stored in enumerate(newest)}
        for prompt, stored in zip(prompts, newest, strict=True):
            plan.originals[stored.id] = plan.originals.pop(prompt.id)
        plan.new[-count:] = newest
        ids: list[tuple[BaseMessage, str | None, str | None]] = []
        for message, own, variant in plan.ids:
            found = taken.get(id(message))
            if found is not None:
                own = found.id
                if variant is not None:
                    plan.aliases[variant] = found.id  # the state's message is known by the stored id
            ids.append((message, own, variant))
        plan.ids = ids

    async def _unobserved(self, thread: str, edits: dict[int, str]) -> dict[int, str]:
        """Of ``edits`` (a message's place, the obsmem id of the version it replaces), those whose
        version is stored in ``thread`` and not observed yet: the edit takes its place. One observed
        already is in the observations as it was; the edit is saved as a new message, so the
        model gets it."""
        if not edits:
            return {}
        record = await self.memory.get_record(thread)
        cursor = record.cursor(thread) if record is not None else 0
        stored = {m.id: m for m in await self.memory.store.get_messages(sorted(set(edits.values())))}
        return {
            index: before for index, before in edits.items()
            if (old := stored.get(before)) is not None and old.thread_id == thread and (old.seq or 0) > cursor
        }

    async def _free(self, thread: str, known: _Known, message: BaseMessage, taken: set[str]) -> str:
        """The first variant of ``message`` the thread does not hold (an answer of the model)."""
        start = 0
        while start < 64:
            batch = [_variant(thread, message, n) for n in range(start, start + 8)]
            stored = {m.id for m in await self.memory.store.get_messages(batch)}
            for variant in batch:
                if variant not in stored and variant not in known.saved and variant not in taken \
                        and variant not in known.aliases:
                    return variant
            start += 8
        return new_id()

    @staticmethod
    def _saved_now(run: _Run, plan: _Plan) -> None:
        """Record that ``plan``'s messages are saved."""
        run.known.saved.update(m.id for m in plan.new)
        run.known.aliases.update(plan.aliases)
        run.known.bare.update(plan.bare)
        for result_key in plan.matched:  # the result has its LangChain id now: known by it
            run.known.bare.pop(result_key, None)
        run.made = plan.made
        for message, own, variant in plan.ids:
            if message.id and own is not None and variant is not None:
                run.known.latest[str(message.id)] = own
                if own == variant:
                    run.known.holds.pop(own, None)
                else:
                    run.known.holds[own] = variant

    async def abefore_agent(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        thread, _ = self._ids()
        stale = self._runs.pop(thread, None)
        if stale is not None and stale.turn is not None:  # a run that failed before its end
            await stale.turn.end()
        began = new_id("run")
        self._run(thread).known.began(began)
        return {"obsmem_run": began}

    async def _removed(self, thread: str, run: _Run, whole: Mapping[str, Any]) -> None:
        """Delete from ``thread`` the messages the app removed from the agent's ``state`` since the
        middleware last saved from it (``RemoveMessage``, ``REMOVE_ALL_MESSAGES``, by the app's
        own middleware or node, or ``update_state``): the app took them out of the conversation,
        so the model must not get them again as obsmem's raw tail. Memory work never deletes a
        raw message; this is the app's removal, as :meth:`ObsmemSession.pop_item` is. What was
        observed from them stays in the observations (``memory.forget`` redacts it).

        A tool call goes with its results, and a result with its call (and that call's message
        with all its results), so the model never gets one without the other: a state left
        holding one of them keeps it, obsmem neither stores nor sends it. A message edited in
        the state (same id) is no removal, and neither is a message another state never held
        (another LangGraph thread over this obsmem thread, another run without a checkpointer,
        or another run of the thread at once: see :meth:`_Known.before`)."""
        known = run.known
        present = {str(m.id) for m in whole.get("messages") or () if m.id}
        held = known.before(whole)
        summary = _summary(whole.get("messages") or (), run)
        if summary is not None and str(summary.id) not in held:
            # SummarizationMiddleware beside this one replaced them with its summary: they are
            # summarised, not removed by the app; obsmem keeps them (its observations do the
            # summary's job) and never stores the summary (:meth:`_unsaved`).
            return
        gone = held - present
        kept = {known.latest[lc] for lc in present if lc in known.latest}
        removed = {known.latest.pop(lc) for lc in gone if lc in known.latest} - kept
        if not removed:
            return
        known.saved -= removed  # given again later (the same message re-added), it is saved again
        store = self.memory.store
        doomed = {m.id: m for m in await store.get_messages(sorted(removed)) if m.thread_id == thread}
        if any(m.tool_calls or m.tool_results for m in doomed.values()):
            record = await self.memory.get_record(thread)
            cursor = record.cursor(thread) if record is not None else 0
            near = await store.list_messages(thread, after_seq=cursor)
            while True:
                calls = set().union(*(_call_ids(m) for m in doomed.values()))
                more = {m.id: m for m in near if m.id not in doomed and calls & _call_ids(m)}
                if not more:
                    break
                doomed.update(more)
        if doomed:
            await store.delete_messages(sorted(doomed))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        thread, resource = self._ids()
        run = self._run(thread)
        whole: Mapping[str, Any] = request.state if isinstance(request.state, Mapping) else {}
        if not isinstance(whole.get("messages"), list):
            whole = {**whole, "messages": request.messages}
        await self._restore(thread, run, whole)
        await self._removed(thread, run, whole)
        plan = await self._unsaved(thread, run, request.messages)
        if run.turn is None:
            await self._retried(thread, run, plan, request.messages)
        new, originals = plan.new, plan.originals
        if run.turn is None:
            if run.deleted and all(m.role == "system" for m in new):
                raise _deleted_during_run(thread)  # before a provider refuses the empty request
            run.turn = await self.memory.begin_turn(
                thread_id=thread, resource_id=resource, messages=new, model=self.model
            )
            context = run.turn.context
        else:
            try:
                context = await run.turn.step(new)
            except ThreadNotFoundError as error:
                raise _deleted_during_run(thread) from error
        self._saved_now(run, plan)
        run.known.seen(whole)
        head = self._system_messages(request, context)
        body: list[AnyMessage] = []
        names = _call_names(request.messages)
        for message in self._own_tail(run, context, originals):
            original = originals.get(message.id)
            if (
                original is not None and not isinstance(message.metadata.get(_OBSMEM_KEY), str)
                and _still_says(message, original, names)
            ):
                body.append(original)
            else:
                body.extend(to_langchain([message]))
        # request.system_message stays the app's (the agent's system_prompt, or what a middleware
        # such as @dynamic_prompt sets, before or after this one): obsmem's part is a message.
        response = await handler(request.override(messages=[*head, *body]))
        # The model's answer is new, whatever its id and content (a server may repeat both).
        if not isinstance(response, ModelResponse):
            response = ModelResponse(result=[response])
        for answer in response.result:
            key = run.key(thread, answer)
            if key is not None:
                run.made.setdefault(key, []).append(None)
                run.answered.add(str(answer.id))
        # The answer is saved at the next model call or the run's end; a run stopped before either
        # (a human-in-the-loop interrupt, a tool that raised) keeps it in the state only: pending
        # with the model node's own update, so a delete of the thread meanwhile takes it too.
        pending = _marks(whole.get(PENDING_STATE_KEY))
        pending |= _answer_marks(thread, run, whole["messages"], response.result)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={PENDING_STATE_KEY: sorted(pending)})
        )

    @staticmethod
    def _own_tail(run: _Run, context: ContextWindow, originals: Mapping[str, AnyMessage]) -> list[Message]:
        """The context's messages after its system messages, ending with the run's own newest
        message: what another turn of the thread saved after it (a run of the same thread at
        once, its question or answer saved while this run observed between its tool step and
        this model call) is left for later requests, or the model would answer that turn's
        question. The run's own messages are the state's (``originals``) and the stored steps of
        the failed run it resumes (:meth:`_retried`), which follow its input."""
        tail = context.messages[len(context.instructions) + len(context.system_messages):]
        own = [
            index for index, message in enumerate(tail)
            if (message.id in originals and not isinstance(message.metadata.get(_OBSMEM_KEY), str))
            or message.id in run.resumed
        ]
        return tail[: own[-1] + 1] if own else tail

    @staticmethod
    def _system_messages(request: ModelRequest[Any], context: ContextWindow) -> list[AnyMessage]:
        """The system messages that lead the model's messages (after ``request.system_message``):
        the application's instructions, then obsmem's (observations and its instructions, one
        message).

        The application's are every system message of the request (of the agent's state: in
        LangChain each is an instruction of the app's), in order; when the request has none (an
        agent without a checkpointer given no system message this run), those of the last call
        that had any, as obsmem keeps them (the context's instructions)."""
        apps: list[AnyMessage] = [m for m in request.messages if isinstance(m, SystemMessage)]
        if not apps:
            apps = to_langchain(context.instructions)
        own = "\n\n".join(m.text for m in context.system_messages if m.text)
        if own:
            apps.append(SystemMessage(content=own, id=context.system_messages[0].id))
        return apps

    async def aafter_agent(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        thread, resource = self._ids()
        run = self._run(thread)
        del self._runs[thread]
        await self._restore(thread, run, state)
        await self._removed(thread, run, state)
        plan = await self._unsaved(thread, run, state["messages"])
        _ended_on(plan, state["messages"])
        new = plan.new
        if run.turn is None:
            run.turn = await self.memory.begin_turn(
                thread_id=thread, resource_id=resource, messages=new, model=self.model
            )
            await run.turn.end()
        else:
            await run.turn.end(new)
        self._saved_now(run, plan)
        run.known.seen(state, ended=True)
        update: dict[str, Any] = {}
        saved = _saved_marks(thread, run, plan)
        if saved != state.get(SAVED_STATE_KEY):
            update[SAVED_STATE_KEY] = saved
        if state.get(PENDING_STATE_KEY):  # in the saved ones now
            update[PENDING_STATE_KEY] = []
        return update or None

    async def _restore(self, thread: str, run: _Run, state: Mapping[str, Any]) -> None:
        """Take the state's :data:`SAVED_STATE_KEY` and :data:`PENDING_STATE_KEY` into what is
        known of the thread, at a run's first look at its state.

        A checkpointed state keeps every message, and obsmem ids come from the messages
        (:func:`_variant`), so a new middleware (a new process over the same checkpointer)
        stores nothing twice. But a message ``memory.delete_thread`` (or ``forget``) erased is
        stored nowhere: without this, a new middleware saved the whole deleted conversation again
        from the state and sent it to the model. The middleware that saved it does not (it knows
        what it saved); the state's keys tell a new one the same. A message no middleware saved
        (a checkpoint written before obsmem was added) is saved as before, and so is a new one
        after the delete.

        :meth:`aafter_agent` writes the saved ones; a run that never gets there (the provider
        raised at the model call, a human-in-the-loop interrupt stopped it) left its messages as
        pending (:meth:`abefore_model` writes them before each model call saves them, once the
        thread exists). Such a message that is not stored, nor known to the middleware as saved
        (it is a new one, or another one wrote them: another worker over the checkpointer), was
        deleted with its thread when the thread is gone; in a thread that is still there, it was
        never saved (the store failed at the save) and is saved now, so a failed run's input is
        not lost."""
        if run.restored:
            return
        run.restored = True
        known = run.known
        messages = state.get("messages")
        messages = messages if isinstance(messages, list) else []
        if not (_marks(state.get(SAVED_STATE_KEY)) or _marks(state.get(PENDING_STATE_KEY))
                or known.before(state)):  # a state the middleware saved nothing of: the run's input
            run.given = {str(m.id) for m in messages if m.id}
        placed = _state_variants(thread, run, messages)
        variants = [v for _, v in placed]
        saved = _marks(state.get(SAVED_STATE_KEY))
        known.saved.update(v for v in variants if _mark(v) in saved)
        pending = _marks(state.get(PENDING_STATE_KEY)) - saved
        doubtful = sorted({
            v for v in variants if _mark(v) in pending and known.aliases.get(v, v) not in known.saved
        })
        if not doubtful:
            return
        store = self.memory.store
        stored = {m.id for m in await store.get_messages(doubtful)}
        missing = [v for v in doubtful if v not in stored]
        if missing and await store.get_thread(thread) is None:
            # A result of a deleted call (its interrupt resumed after the delete) goes with it.
            run.deleted = True
            known.saved.update(missing)
            known.saved.update(_results_of(messages, placed, set(missing)))

    async def abefore_model(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Keep in the state, before the model call saves them, the state's messages not kept as
        saved (:data:`PENDING_STATE_KEY`): this node's update is checkpointed whatever the model
        call does next, when nothing after it is (a provider error, an interrupt). At the run's
        first model call, the ones the middleware knows are saved (of earlier runs that did not
        end, or deleted: :meth:`_restore`) join the saved ones, so a pending one's doubt is only
        ever about the model calls since the last run that ended.

        Before the run's first model call, the thread is made when there is none, so that a
        thread gone later was deleted after the pending ones were written (:meth:`_restore`
        takes them as deleted): a first run whose save failed (the store down) leaves its thread,
        and its input is saved by the next run, not taken as deleted."""
        thread, resource = self._ids()
        run = self._run(thread)
        await self._restore(thread, run, state)
        messages = state.get("messages") or []
        variants = _state_variants(thread, run, messages)
        saved = _marks(state.get(SAVED_STATE_KEY))
        if not run.promoted:
            run.promoted = True
            known = run.known
            saved |= {
                _mark(v) for index, v in variants
                if known.aliases.get(v, v) in known.saved and str(messages[index].id) not in run.answered
            }
        update: dict[str, Any] = {}
        if sorted(saved) != state.get(SAVED_STATE_KEY, []):
            update[SAVED_STATE_KEY] = sorted(saved)
        pending = sorted({_mark(v) for _, v in variants} - saved)
        if pending != state.get(PENDING_STATE_KEY, []):
            update[PENDING_STATE_KEY] = pending
        if pending and run.turn is None:
            try:  # (memory's own look: a thread deleted elsewhere leaves none of its text in memory)
                await self.memory.get_thread(thread, resource_id=resource)
            except ThreadNotFoundError:
                await self.memory.create_thread(thread, resource)
        return update or None

    # Sync twins that refuse: obsmem's Memory is async. Without them LangChain raised its own
    # TypeError (naming ``abefore_agent``), which ``except ObsmemError`` does not catch.
    def before_agent(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        raise _sync_refused()

    def before_model(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        raise _sync_refused()

    def after_agent(self, state: _State, runtime: Runtime[Any]) -> dict[str, Any] | None:
        raise _sync_refused()

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        raise _sync_refused()


def _deleted_during_run(thread: str) -> ThreadNotFoundError:
    """The error of a run whose thread ``memory.delete_thread`` deleted while the run was under
    way: stopped at an interrupt (and now resumed), or between two of its model calls. Nothing of
    the run is stored or sent (it was deleted with the thread), so the model has nothing to
    answer; the run is over, and the thread goes on with the next message."""
    return ThreadNotFoundError(thread, (
        f"Thread '{thread}' was deleted during this run (while it was stopped at an interrupt, or "
        "between its model calls): nothing of the run is stored or sent to the model, so there is "
        "nothing to answer and the run is over. Run the agent with a new message to go on in the "
        "thread, which starts anew."
    ))


def _sync_refused() -> InvalidInputError:
    return InvalidInputError(
        "ObservationalMemoryMiddleware is async: run the agent with ainvoke/astream, not invoke/stream"
    )

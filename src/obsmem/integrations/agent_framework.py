"""obsmem in Microsoft Agent Framework: a history provider and message converters.

::

    from agent_framework import Agent
    from agent_framework.openai import OpenAIChatClient
    from obsmem import Memory
    from obsmem.integrations.agent_framework import ObservationalMemoryProvider

    async with Memory() as memory:
        agent = Agent(OpenAIChatClient(model="gpt-4o-mini"), "You are helpful.", tools=[...],
                      context_providers=[ObservationalMemoryProvider(memory, resource_id="user-42")])
        session = agent.create_session(session_id="t1")          # the obsmem thread
        print(await agent.run("hi", session=session))

:class:`ObservationalMemoryProvider` is the agent's history: obsmem keeps the conversation, so
the agent neither needs nor gets Agent Framework's in-memory history, nor a compaction
strategy. Before each run it saves the input (``begin_turn``) and gives the model obsmem's
context: the observations as instructions, then the continuation reminder and the unobserved
raw tail as context messages (the input follows them, as Agent Framework places it). With
``OpenAIChatClient`` (the Responses API) pass ``default_options={"store": False}``, so that obsmem,
not the service, keeps the conversation. A tool call
is never separated from its result and the newest input is never observed away. After the run
it saves the response (the tool calls, their results and the answer) and ends the turn.

:func:`to_agent_framework` / :func:`from_agent_framework` convert messages both ways.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from agent_framework import AgentSession, Content, HistoryProvider, SessionContext, SupportsAgentRun
from agent_framework import Message as AFMessage

from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.memory import Memory
from obsmem.turn import Turn
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

__all__ = ["ObservationalMemoryProvider", "from_agent_framework", "to_agent_framework"]

#: A content obsmem has no part for, kept whole (its ``to_dict()``), never shown to a model by obsmem.
CONTENT_PART = "agent-framework-content"
#: ``additional_properties`` keys obsmem writes on contents, to come back exactly.
_RESULT = "obsmem_result"
_TOOL = "obsmem_tool_name"
_ERROR = "obsmem_is_error"
_FILE = "obsmem_file"
_RAW_ARGS = "obsmem_raw_arguments"
_ROLES = ("user", "assistant", "system", "tool")
_FILE_FIELDS = ("width", "height", "detail", "token_estimate")


# -- Agent Framework -> obsmem ----------------------------------------------------------------------


def _arguments(value: Any) -> dict[str, Any] | str:
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return decoded if isinstance(decoded, dict) else value
    return dict(value)


def _file(content: Content) -> FilePart:
    props = dict(content.additional_properties or {})
    kept = props.get(_FILE) if isinstance(props.get(_FILE), dict) else {}
    assert isinstance(kept, dict)
    uri = content.uri or ""
    inline = uri[5 : uri.index(";")] if uri.startswith("data:") and ";" in uri else ""
    media_type = content.media_type or inline or "application/octet-stream"
    fields: dict[str, Any] = {k: kept[k] for k in _FILE_FIELDS if k in kept}
    if "url" in kept or "data" in kept:  # obsmem's own attachment, as it was
        return FilePart(
            media_type=media_type, url=kept.get("url"), data=kept.get("data"), filename=content.name, **fields
        )
    if content.type == "data":
        return FilePart(media_type=media_type, data=uri, filename=content.name, **fields)
    return FilePart(media_type=media_type, url=uri, filename=content.name, **fields)


def _call_names(history: Iterable[AFMessage | Message]) -> dict[str, str]:
    names: dict[str, str] = {}
    for message in history:
        if isinstance(message, Message):
            names.update({c.tool_call_id: c.tool_name for c in message.tool_calls})
            continue
        for content in message.contents:
            if content.type == "function_call" and content.call_id and content.name:
                names[content.call_id] = content.name
    return names


def from_agent_framework(
    messages: Sequence[AFMessage], *, history: Iterable[AFMessage | Message] = ()
) -> list[Message]:
    """obsmem messages for Agent Framework messages, in order.

    ``message_id`` becomes the obsmem id (a new id when absent). ``text``, ``text_reasoning``,
    ``data``/``uri`` (attachments), ``function_call`` (call id, name, arguments) and
    ``function_result`` (call id, result, an ``exception`` as ``is_error``; the tool's name from
    its call in ``messages`` / ``history``) become parts; any other content is kept whole in a
    data part, stored but never shown to a model by obsmem, and restored by :func:`to_agent_framework`.
    """
    for index, message in enumerate(messages):
        if not isinstance(message, AFMessage):
            where = f"messages[{index}]"
            raise InvalidInputError(
                f"{where}: expected an agent_framework Message, got {type(message).__name__}", argument=where
            )
    names = _call_names([*history, *messages])
    converted: list[Message] = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        role = str(message.role)
        if role not in _ROLES:
            raise InvalidInputError(f"{where}: unsupported role {role!r}", argument=where)
        parts: list[Part] = []
        for content in message.contents:
            props = dict(content.additional_properties or {})
            if content.type == "text":
                parts.append(TextPart(text=content.text or ""))
            elif content.type == "text_reasoning":
                parts.append(ReasoningPart(text=content.text or ""))
            elif content.type in ("data", "uri"):
                parts.append(_file(content))
            elif content.type == "function_call" and content.call_id and content.name:
                arguments = content.arguments
                raw = bool(props.get(_RAW_ARGS)) and isinstance(arguments, str)
                args = arguments if raw and isinstance(arguments, str) else _arguments(arguments)
                parts.append(ToolCallPart(tool_call_id=content.call_id, tool_name=content.name, args=args))
            elif content.type == "function_result" and content.call_id:
                result = props[_RESULT] if _RESULT in props else content.result
                name = props.get(_TOOL) or names.get(content.call_id) or "tool"
                error = bool(props[_ERROR]) if _ERROR in props else content.exception is not None
                parts.append(ToolResultPart(
                    tool_call_id=content.call_id, tool_name=str(name), result=result, is_error=error
                ))
            elif content.type == "usage":
                continue  # accounting, not conversation
            else:
                parts.append(DataPart(name=CONTENT_PART, data=content.to_dict()))
        if not parts:
            parts = [TextPart(text="")]
        message_id = message.message_id or new_id()
        converted.append(Message(id=message_id, role=role, parts=tuple(parts)))  # type: ignore[arg-type]
    return converted


# -- obsmem -> Agent Framework ----------------------------------------------------------------------


def _file_content(part: FilePart) -> Content:
    kept = {k: getattr(part, k) for k in _FILE_FIELDS if getattr(part, k) is not None}
    if part.url is not None and part.data is None:
        uri = part.url
    else:
        data = part.data or ""
        uri = data if data.startswith("data:") else f"data:{part.media_type};base64,{data}"
        if part.url is not None or not data.startswith("data:"):
            kept.update(url=part.url, data=part.data)  # to come back exactly as it was
    props: dict[str, Any] = {_FILE: kept} if kept else {}
    return Content.from_uri(uri, media_type=part.media_type, name=part.filename, additional_properties=props)


def to_agent_framework(messages: Iterable[Message]) -> list[AFMessage]:
    """Agent Framework messages for obsmem messages (``turn.context.messages``), in order.

    Ids are kept (``message_id``). Parts become contents: text, reasoning (``text_reasoning``),
    attachments (``uri``, or ``data`` with a data URI), tool calls (``function_call``, arguments
    as a dict, or the raw string) and results (``function_result``, in a ``tool`` message placed
    before the rest of its message; the tool's name, a result that is not a string and
    ``is_error`` are kept in ``additional_properties``, which Agent Framework never sends).
    obsmem's data parts (markers) never go; a message of nothing else is left out.
    """
    converted: list[AFMessage] = []
    for message in messages:
        results = message.tool_results
        if results:
            contents = []
            for result in results:
                props: dict[str, Any] = {_TOOL: result.tool_name, _ERROR: result.is_error}
                if not isinstance(result.result, str):
                    props[_RESULT] = result.result
                value = result.result if isinstance(result.result, str) else json.dumps(
                    result.result, ensure_ascii=False, default=str)
                contents.append(Content.from_function_result(
                    result.tool_call_id, result=value, exception="tool error" if result.is_error else None,
                    additional_properties=props,
                ))
            rest_kept = [p for p in message.parts if not isinstance(p, ToolResultPart | DataPart) or (
                isinstance(p, DataPart) and p.name == CONTENT_PART)]
            results_id = message.id if not rest_kept else f"{message.id}#results"
            converted.append(AFMessage("tool", contents, message_id=results_id))
        body: list[Content] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                body.append(Content.from_text(part.text))
            elif isinstance(part, ReasoningPart):
                body.append(Content.from_text_reasoning(text=part.text))
            elif isinstance(part, FilePart):
                body.append(_file_content(part))
            elif isinstance(part, ToolCallPart):  # arguments as JSON text, as the providers take them
                raw = isinstance(part.args, str)
                arguments = part.args if raw else json.dumps(part.args, ensure_ascii=False)
                body.append(Content.from_function_call(
                    part.tool_call_id, part.tool_name, arguments=arguments,
                    additional_properties={_RAW_ARGS: True} if raw else None,
                ))
            elif isinstance(part, DataPart) and part.name == CONTENT_PART:
                body.append(Content.from_dict(part.data))
        if body:
            converted.append(AFMessage(message.role, body, message_id=message.id))
    return converted


# -- the provider -----------------------------------------------------------------------------------


class ObservationalMemoryProvider(HistoryProvider):
    """The agent's history, kept by obsmem (see the module docstring).

    ``thread_id``: the obsmem thread; default, the session's ``session_id`` (so
    ``agent.create_session(session_id="t1")`` names it). ``resource_id``: the thread's owner when
    obsmem creates it (default: the thread id). ``model``: the actor's ``provider:model`` id.
    One provider (and one :class:`~obsmem.Memory`) serves concurrent runs on different sessions
    (one run per session at a time). ``get_messages`` / ``save_messages`` read and write the raw
    thread outside a run.
    """

    def __init__(
        self, memory: Memory, *, thread_id: str | None = None, resource_id: str | None = None,
        model: str | None = None, source_id: str = "obsmem",
    ) -> None:
        super().__init__(source_id, load_messages=True, store_inputs=True, store_outputs=True)
        if not isinstance(memory, Memory):
            raise InvalidInputError(
                f"memory: expected an obsmem Memory, got {type(memory).__name__}", argument="memory"
            )
        self.memory = memory
        self.thread_id = thread_id
        self.resource_id = resource_id
        self.model = model
        self._turns: dict[str, Turn] = {}

    def _thread(self, session: AgentSession | None, context: SessionContext) -> str:
        thread = self.thread_id or (session.session_id if session is not None else None) or context.session_id
        if not thread:
            raise InvalidInputError(
                "ObservationalMemoryProvider needs a thread id: pass thread_id=... or a session",
                argument="thread_id",
            )
        return thread

    async def before_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        thread = self._thread(session, context)
        stale = self._turns.pop(thread, None)
        if stale is not None:  # a run that failed before its end
            await stale.end()
        new = _unique_ids(from_agent_framework(context.input_messages))
        turn = await self.memory.begin_turn(
            thread_id=thread, resource_id=self.resource_id or thread, messages=new, model=self.model
        )
        self._turns[thread] = turn
        window = turn.context
        lead = len(window.instructions) + len(window.system_messages)
        texts = [m.text for m in window.messages[:lead] if m.role == "system" and m.text]
        if texts:
            context.extend_instructions(self.source_id, "\n\n".join(texts))
        inputs = {m.id for m in new}
        # the input itself follows the context messages (Agent Framework appends it)
        history = [m for m in window.messages[lead:] if m.id not in inputs]
        context.extend_messages(self, to_agent_framework(history))

    async def after_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        thread = self._thread(session, context)
        turn = self._turns.pop(thread, None)
        response = context.response
        messages = list(response.messages) if response is not None and response.messages else []
        new = _unique_ids(from_agent_framework(messages, history=context.input_messages))
        if turn is None:
            turn = await self.memory.begin_turn(thread_id=thread, resource_id=self.resource_id or thread)
        await turn.end(new)

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[AFMessage]:
        """The thread's stored messages (all of them, raw), as Agent Framework messages."""
        thread = self.thread_id or session_id
        if not thread:
            return []
        try:
            return to_agent_framework(await self.memory.list_messages(thread))
        except ThreadNotFoundError:
            return []

    async def save_messages(
        self, session_id: str | None, messages: Sequence[AFMessage], *, state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Save messages to the thread outside a run (obsmem's ``save_messages``)."""
        thread = self.thread_id or session_id
        if not thread:
            raise InvalidInputError("save_messages needs a session id or thread_id", argument="session_id")
        try:
            await self.memory.get_thread(thread)
        except ThreadNotFoundError:
            await self.memory.create_thread(thread, self.resource_id or thread)
        await self.memory.save_messages(thread, _unique_ids(from_agent_framework(messages)))


def _unique_ids(messages: list[Message]) -> list[Message]:
    """Providers reuse a response id for several messages: each stored message needs its own."""
    seen: set[str] = set()
    unique = []
    for message in messages:
        if message.id in seen:
            message = message.model_copy(update={"id": new_id()})
        seen.add(message.id)
        unique.append(message)
    return unique

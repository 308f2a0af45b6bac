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
is never separated from its result and the newest input is never observed away. Within the run
each tool's call (with the model's response that made it) and its result are saved as the tool
returns, so a run that fails later, or that the app stops reading (a stream left once the result
shows, a process that restarts), leaves what ran stored (parallel tools' results in the order
of the calls, as the model is told them: one waits while a tool called before it still runs); the
rest of each step of the tool loop is saved before the next model call. When the app has a
function middleware of its own (on the client, the agent or the run), which may change a result
after the tool returns (mask a card number, cut a long output) and which runs around obsmem's,
or a chat middleware (which may change the results each model request carries), obsmem stores
the result the model was told instead: what the next model request carries (the step), or what
the run gives at its end (so too when obsmem cannot tell: another run of the same client object
began meanwhile).
The trade-off: a run the app stops reading between a tool's return and the next model call
then leaves that call and its result unstored (the question stays), rather than stored as the
tool returned it. After the run it saves the
rest of the response (the answer) and ends the turn. Ids the framework or the model server gives
(``message_id``, e.g. ``chatcmpl-…``) are not obsmem's ids: see :class:`ObservationalMemoryProvider`.
Contents obsmem has no part for (``hosted_file`` …) are kept and given back in later runs.
A lone surrogate in what a run makes (a tool's text decoded with ``surrogateescape``, ``"\\ud800"``
in a JSON answer), which obsmem refuses in an app's input, is stored as valid text (U+FFFD); with
the chat-middleware layer the model is told it so too (a provider's client, writing UTF-8, fails on it).

:func:`to_agent_framework` / :func:`from_agent_framework` convert messages both ways.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import (
    AgentSession,
    ChatContext,
    ChatMiddleware,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationContext,
    FunctionMiddleware,
    HistoryProvider,
    MiddlewareFailure,
    MiddlewareTermination,
    SessionContext,
    SupportsAgentRun,
    UserInputRequiredException,
)
from agent_framework import Message as AFMessage

try:  # how Agent Framework tells a tool's failure apart (no public names)
    from agent_framework._tools import (
        _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY,
        _FunctionArgumentsChangedAfterApproval,
        _FunctionArgumentValidationError,
    )
except ImportError:  # a release that renamed them: every failure is a failed tool, none is no result

    class _FunctionArgumentValidationError(Exception):  # type: ignore[no-redef]
        redacted_message = ""

    class _FunctionArgumentsChangedAfterApproval(Exception):  # type: ignore[no-redef]
        pass

    _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY = "_obsmem_unknown"  # type: ignore[misc]

from obsmem.convert._common import speaker_metadata, wire_name
from obsmem.errors import InvalidInputError, ObsmemError, ThreadNotFoundError
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

__all__ = ["ObservationalMemoryProvider", "from_agent_framework", "to_agent_framework"]

#: A content that drives Agent Framework's own flow (an approval asked or given, a consent),
#: kept whole (its ``to_dict()``) in a data part: stored, never given back to a run.
CONTENT_PART = "agent-framework-content"
#: Message metadata key: the other contents obsmem has no part for, each kept whole with the
#: placeholder text part that stands for it (``[{"text": ..., "content": to_dict()}, ...]``).
CONTENTS_KEY = "agent_framework_contents"
_CONTROL = frozenset({"function_approval_request", "function_approval_response", "oauth_consent_request"})
_FRAMEWORK = "agent-framework"
#: ``additional_properties`` keys obsmem writes on contents, to come back exactly.
_RESULT = "obsmem_result"
_TOOL = "obsmem_tool_name"
_ERROR = "obsmem_is_error"
_FILE = "obsmem_file"
_RAW_ARGS = "obsmem_raw_arguments"
_ROLES = ("user", "assistant", "system", "tool")
#: Metadata key of obsmem's message that closes calls left unanswered (obsmem.om.selection.UNANSWERED_KEY).
_UNANSWERED = "obsmem_unanswered"
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


def _placeholder(content: Content) -> str:
    """The text that stands for a content obsmem has no part for (what an observer reads of it)."""
    data = content.to_dict()
    refs = [str(data[k]) for k in ("name", "file_id", "vector_store_id", "call_id", "message") if data.get(k)]
    return f"[{content.type}: {', '.join(refs)}]" if refs else f"[{content.type}]"


def from_agent_framework(
    messages: Sequence[AFMessage], *, history: Iterable[AFMessage | Message] = ()
) -> list[Message]:
    """obsmem messages for Agent Framework messages, in order.

    ``message_id`` becomes the obsmem id (a new id when absent; :class:`ObservationalMemoryProvider`
    derives its own ids from it, per thread and content). ``text``, ``text_reasoning``,
    ``data``/``uri`` (attachments), ``function_call`` (call id, name, arguments) and
    ``function_result`` (call id, result, an ``exception`` as ``is_error``; the tool's name from
    its call in ``messages`` / ``history``; the ``data``/``uri`` items of a tool that returned
    contents, an image, as file parts right after the result, its text items as the result)
    become parts. Approval and consent requests and
    responses (Agent Framework's own flow) are kept whole in a data part: stored, never given
    back. Any other content (``hosted_file``, ``hosted_vector_store``, ``error``, hosted tool
    calls …) becomes a text part naming it (``[hosted_file: file-…]``, what an observer reads)
    and is kept whole in ``metadata["agent_framework_contents"]``: :func:`to_agent_framework`
    gives the content itself back in its place.
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
        kept: list[dict[str, Any]] = []
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
                files = [_file(i) for i in content.items or () if i.type in ("data", "uri")]
                if files and not result:  # a tool that returned contents: its texts are its result
                    result = "\n".join(i.text or "" for i in content.items or () if i.type == "text")
                parts.append(ToolResultPart(
                    tool_call_id=content.call_id, tool_name=str(name), result=result, is_error=error
                ))
                parts.extend(files)  # an image a tool returns: a file part after its result
            elif content.type == "usage":
                continue  # accounting, not conversation
            elif content.type in _CONTROL:
                parts.append(DataPart(name=CONTENT_PART, data=content.to_dict()))
            else:
                text = _placeholder(content)
                parts.append(TextPart(text=text))
                kept.append({"text": text, "content": content.to_dict()})
        if not parts:
            parts = [TextPart(text="")]
        message_id = message.message_id or new_id()
        metadata = {CONTENTS_KEY: kept} if kept else {}
        metadata.update(speaker_metadata(message.author_name))  # a participant's name: who said it
        converted.append(Message(
            id=message_id, role=role, parts=tuple(parts), metadata=metadata  # type: ignore[arg-type]
        ))
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
    ``is_error`` are kept in ``additional_properties``, which Agent Framework never sends; the
    file parts after a result are its ``items``).
    A content :func:`from_agent_framework` kept whole comes back in place of the text part that
    stands for it. obsmem's data parts (markers) never go; a message of nothing else is left out.
    """
    converted: list[AFMessage] = []
    for message in messages:
        results = message.tool_results
        attached = _result_files(message)
        if results:
            contents = []
            for result in results:
                props: dict[str, Any] = {_TOOL: result.tool_name, _ERROR: result.is_error}
                if not isinstance(result.result, str):
                    props[_RESULT] = result.result
                value: Any = result.result if isinstance(result.result, str) else json.dumps(
                    result.result, ensure_ascii=False, default=str)
                files = [_file_content(f) for f in attached.get(id(result), [])]
                if files:  # contents a tool returned: its text (if any), then the files
                    value = [*([Content.from_text(value)] if value else []), *files]
                contents.append(Content.from_function_result(
                    result.tool_call_id, result=value, exception="tool error" if result.is_error else None,
                    additional_properties=props,
                ))
            taken = {id(f) for files in attached.values() for f in files}
            rest_kept = [p for p in message.parts if (not isinstance(p, ToolResultPart | DataPart) or (
                isinstance(p, DataPart) and p.name == CONTENT_PART)) and id(p) not in taken]
            results_id = message.id if not rest_kept else f"{message.id}#results"
            converted.append(AFMessage("tool", contents, message_id=results_id))
        body: list[Content] = []
        kept = _kept_contents(message)
        for part in message.parts:
            if results and any(part is f for files in attached.values() for f in files):
                continue  # sent with its result
            if isinstance(part, TextPart):
                if kept and kept[0]["text"] == part.text:
                    body.append(Content.from_dict(kept.pop(0)["content"]))
                    continue
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
            converted.append(AFMessage(message.role, body, message_id=message.id, author_name=wire_name(message)))
    return converted


def _result_files(message: Message) -> dict[int, list[FilePart]]:
    """A tool message's file parts that follow a tool result, by that result (its ``id()``): the
    files (images) the tool returned with it."""
    out: dict[int, list[FilePart]] = {}
    current: ToolResultPart | None = None
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            current = part
        elif isinstance(part, FilePart) and current is not None and message.role == "tool":
            out.setdefault(id(current), []).append(part)
        elif not isinstance(part, DataPart):
            current = None
    return out


def _kept_contents(message: Message) -> list[dict[str, Any]]:
    entries = message.metadata.get(CONTENTS_KEY)
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("text"), str)
            and isinstance(e.get("content"), dict)]


# -- the provider -----------------------------------------------------------------------------------


@dataclass
class _Run:
    """One run's bookkeeping: its turn, the messages of the run stored so far (by :func:`_key`),
    the calls :class:`_RunTools` stored as their tools ran, and one save at a time. Kept in the
    run's ``SessionContext`` (its own), not by thread: two runs of a thread at once (a user who
    sends a second message before the first is answered) each end with what they stored."""

    turn: Turn
    saved: Counter[str]
    thread: str = ""
    tool_runs: set[str] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # With the chat-middleware layer: the newest model response (the calls of the tools now
    # running, with the text the model sent with them), stored with the first of their results.
    answer: list[AFMessage] = field(default_factory=list)
    answer_stored: bool = False
    # The calls and results the steps stored, by (content type, call id): the run's end leaves
    # them out, also where the response holds them otherwise than the request did (the app's
    # chat middleware changed what the model was told).
    stepped: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Parallel calls (see _RunTools.process): the tools now running and the results held until
    # the tools of the calls before theirs returned, each by its invocation, with its place.
    running: dict[object, tuple[int, int]] = field(default_factory=dict)
    held: dict[object, tuple[tuple[int, int], str, Any, Any, str | None]] = field(default_factory=dict)
    started: int = 0
    flushing: asyncio.Lock = field(default_factory=asyncio.Lock)


class ObservationalMemoryProvider(HistoryProvider):
    """The agent's history, kept by obsmem (see the module docstring).

    ``thread_id``: the obsmem thread; default, the session's ``session_id`` (so
    ``agent.create_session(session_id="t1")`` names it). ``resource_id``: the thread's owner when
    obsmem creates it (default: the thread id). ``model``: the actor's ``provider:model`` id.
    One provider (and one :class:`~obsmem.Memory`) serves concurrent runs, of different sessions
    or of one (each run stores what it made once). ``get_messages`` / ``save_messages`` read and
    write the raw thread outside a run; like a run, they refuse a thread of another resource
    (:class:`~obsmem.errors.InvalidInputError`).

    Message ids: a ``message_id`` comes from the framework or the model server (``chatcmpl-…``,
    which a server may repeat), so it is not obsmem's id: the stored message's id is derived
    from the thread, that id and the message's content. The same message sent again (an
    application re-sending its conversation, or the messages ``get_messages`` returned) is
    stored once; another message with a repeated id, or the same id in another thread, is
    another message.

    Tool loops: the provider adds a function middleware to each run that stores each tool's
    call and its result as the tool returns (or raises, with what Agent Framework tells the
    model), as a step of the run's turn (parallel calls' results in the order of the calls), and
    a chat middleware that saves the rest of each step of the loop before the next model call.
    A run that fails, or that the app stops reading, after a tool ran thus leaves the call and
    its result stored, for any process over the same store. With a chat client built without
    Agent Framework's chat-middleware layer (all of its own clients have it) the call is stored
    alone as its tool returns; the text the model sent with it is stored at the run's end (not
    when the run never ends). With a function or chat
    middleware of the app's in the run (it runs around obsmem's and may change the result), the
    calls and results are stored only by the steps (the chat-middleware layer) and the run's
    end, as the model was told them (see the module docstring).
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
        self._runs: dict[str, _Run] = {}  # per thread: its newest run, until that run ends
        self._run_key = f"obsmem.run.{id(self)}"  # the run's _Run in its SessionContext.metadata

    @property
    def _turns(self) -> dict[str, Turn]:
        """Per thread, the turn of its newest run (until that run ends)."""
        return {thread: run.turn for thread, run in self._runs.items()}

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
        stale = self._runs.pop(thread, None)
        if stale is not None:  # a run that failed before its end, or one still going (it stores the
            async with stale.lock:  # rest of its messages when it ends, in a turn of its own), or one
                await stale.turn.end()  # the app stopped (what its tools gave is stored already)
        inputs = list(context.input_messages)
        client = getattr(agent, "client", None)
        layered = client is None or isinstance(client, ChatMiddlewareLayer)
        new, resumed = await self._retried(
            thread, await self._own_ids(thread, inputs, from_agent_framework(inputs)), resume=layered
        )
        turn = await self.memory.begin_turn(
            thread_id=thread, resource_id=self.resource_id or thread, messages=new, model=self.model
        )
        run = _Run(turn, Counter(_key(m) for m in inputs), thread)
        self._runs[thread] = run
        context.metadata[self._run_key] = run
        window = turn.context
        lead = len(window.instructions) + len(window.system_messages)
        input_ids = {m.id for m in new}
        body = window.messages[lead:]
        # the input itself follows the context messages (Agent Framework appends it) ...
        history = [m for m in body if m.id not in input_ids]
        moved: set[str] = set()
        if resumed and inputs:  # ... but the steps of the failed run it resumes follow it
            last = max((i for i, m in enumerate(body) if m.id in input_ids), default=len(body))
            moved = {m.message_id for m in to_agent_framework(body[last + 1:]) if m.message_id}
        steps: _RunSteps | None = None
        if layered:
            question = _key(inputs[-1]) if inputs else ""
            steps = _RunSteps(self, thread, run, moved, question)
            context.extend_middleware(self.source_id, steps)
        settings = getattr(client, "function_invocation_configuration", None)
        detailed = bool(settings.get("include_detailed_errors")) if isinstance(settings, dict) else False
        context.extend_middleware(self.source_id, _RunTools(self, run, client, steps, detailed_errors=detailed))
        texts = [m.text for m in window.messages[:lead] if m.role == "system" and m.text]
        if texts:
            context.extend_instructions(self.source_id, "\n\n".join(texts))
        given = to_agent_framework(history)
        if not layered:
            closed = {r.tool_call_id for m in history if m.metadata.get(_UNANSWERED) for r in m.tool_results}
            given = _approved_calls_last(given, inputs, closed)
        context.extend_messages(self, given)

    async def _retried(self, thread: str, new: list[Message], *, resume: bool) -> tuple[list[Message], bool]:
        """``new`` (a run's input) with its question taken for the thread's unanswered question
        when it is that question asked again: a run that failed at its model call saved its
        question, which stays (nothing is lost), and the user runs the agent again with it.
        Without this the thread held the question twice and the model got it twice. The input's
        trailing user messages are taken only all together: the thread's newest messages, as
        many, user messages with the same visible parts, in order, and nothing after them (taking
        back only the last would store the others again after it, and the model's newest message
        would not be the question). With ``resume`` they are taken too when only the complete
        tool steps of a run that failed after its tools ran follow them (the model gets those
        steps again, after the question, and answers from their results: the tools do not run
        twice); the second value says so. The same question asked again after an answer, or
        while a call waits (an approval), is a new message."""
        count = 0
        while count < len(new) and new[-1 - count].role == "user":
            count += 1
        asked = new[len(new) - count:]
        newest = await retried_input(self.memory.store, thread, asked, same=_same) if count else None
        resumed = False
        if newest is None and count and resume:  # a run that failed later, after tools ran: they stay
            newest = await resumed_input(self.memory.store, thread, asked, same=_same)
            resumed = newest is not None
        given = {m.id for m in new}
        if newest is None or any(m.id in given for m in newest):
            return new, False
        kept = [*new[:-count], *(_as_stored(m, stored) for m, stored in zip(new[-count:], newest, strict=True))]
        return kept, resumed

    async def after_run(
        self, *, agent: SupportsAgentRun, session: AgentSession, context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        thread = self._thread(session, context)
        run = context.metadata.pop(self._run_key, None)
        if not isinstance(run, _Run):  # not begun by this provider's before_run: the thread's newest
            run = self._runs.get(thread)
        if run is not None and self._runs.get(thread) is run:
            del self._runs[thread]
        turn = run.turn if run is not None else None
        saved = run.saved if run is not None else Counter()
        tool_runs = run.tool_runs if run is not None else set()
        stepped = Counter(run.stepped) if run is not None else Counter()
        response = context.response
        messages = list(response.messages) if response is not None and response.messages else []
        unsaved: list[AFMessage] = []
        answer = run.answer if run is not None and run.answer_stored else []
        for message in messages:
            rest = _without_stepped(message, stepped)
            # (a step that stored some of a message's calls or results stored the message that
            # carried them whole, as the request had it: the text the model sent with its calls
            # too, which the app's chat middleware may have changed, so it is not this one's)
            if not _take(saved, _key(message)) and rest is message:  # (else the steps saved it)
                rest = _past_answer(message, answer, saved)
                if rest is not None:
                    unsaved.append(rest)
        unsaved = [_said_by_model(m) for m in (_without_calls(m, tool_runs) for m in unsaved)
                   if m is not None]
        history = [*context.get_messages(), *context.input_messages, *messages]
        new = await self._own_ids(thread, unsaved, _from_run(unsaved, history), made=True)
        if turn is None or turn.ended:
            turn = await self.memory.begin_turn(thread_id=thread, resource_id=self.resource_id or thread)
        await turn.end(new)

    async def _save_step(self, thread: str, run: _Run, sent: Sequence[AFMessage], question: str = "") -> None:
        """Before a model call of a run: save what the run added since its last save (the tool
        calls and the results of the tools that ran), as a step of the run's turn. Once that turn
        ended (another run of the thread began), the run's end stores the rest. ``question``: the
        key of the run's last input message (see :func:`_asked_at`)."""
        async with run.lock:
            turn, saved = run.turn, run.saved
            if turn.ended:
                return
            asked = _asked_at(sent, question)
            left = Counter(saved)
            unsaved = [(i, m) for i, m in enumerate(sent) if not _attributed(m) and not _take(left, _key(m))]
            # (without the tools a stopped run's cleanup stored meanwhile: it holds their calls;
            # and only what the run made, after its question, the model's responses and the
            # tools' results: what the app's chat middleware adds to each request, retrieved
            # context as a system or user message, few-shot examples before the conversation, is
            # no message of the conversation)
            fresh = [m for i, m in ((i, _without_calls(m, run.tool_runs)) for i, m in unsaved)
                     if m is not None and i > asked and (str(m.role) in ("assistant", "tool") or any(
                         c.type in ("function_call", "function_result") for c in m.contents))]
            if fresh:
                new = await self._own_ids(thread, fresh, _from_run(fresh, sent), made=True)
                await turn.step(new)
                run.stepped.update((c.type, c.call_id) for m in fresh for c in m.contents
                                   if c.type in ("function_call", "function_result") and c.call_id)
            saved.update(_key(m) for _, m in unsaved)

    async def _save_tool_run(
        self, run: _Run, call_id: str, name: str, arguments: Any, result: Any, error: str | None,
    ) -> None:
        """A tool that ran, stored as it returns (or raises), as a step of the run's turn: its
        result, after its call. The call comes with the model response that made it (the text
        sent with it too, with the chat-middleware layer) unless a result of that response
        stored it already, or the thread holds it (an approved call); without the layer, the
        call alone. Stored now, not at the next model call: an app that leaves the stream once
        it shows the result (the user closed the page, the process restarts) makes none, and
        what the tool did (an email sent) stays in memory for any process. The steps and the
        run's end leave these calls and results out (``tool_runs``)."""
        async with run.lock:
            turn = run.turn
            if turn.ended:
                return
            # (each invocation is a call of its own: a server that numbers each response's calls
            # from call_0 repeats a call id in each round of the loop)
            answer = run.answer if any(c.type == "function_call" and c.call_id == call_id
                                       for m in run.answer for c in m.contents) else []
            held = run.answer_stored if answer else _held(turn.context.raw_messages, call_id)
            args = arguments.model_dump() if hasattr(arguments, "model_dump") else dict(arguments or {})
            call = Content.from_function_call(call_id, name, arguments=json.dumps(args, default=str))
            new: list[Message] = []
            if answer and not held:
                new = await self._own_ids(run.thread, answer, _from_run(answer), made=True)
            made = [] if held or answer else [AFMessage("assistant", [call])]
            outcome = Content.from_function_result(call_id, result=result, exception=error)
            made.append(AFMessage("tool", [outcome]))
            new += _made_valid(_from_run(made, [*answer, AFMessage("assistant", [call])]))
            await turn.step(new)
            if answer and not held:
                run.answer_stored = True
                run.saved.update(_key(m) for m in answer)
            run.tool_runs.add(call_id)

    async def _own_ids(
        self, thread: str, originals: Sequence[AFMessage], messages: list[Message], *, made: bool = False
    ) -> list[Message]:
        """``messages`` (converted from ``originals``, one each) with obsmem's ids.

        A message the thread stores already, sent again with the id obsmem gave it, keeps it.
        Any other ``message_id`` gives way to an id derived from the thread, that id and the
        content (the n-th such message of a batch: its n-th variant), so a message sent again
        is stored once. ``made``: what the model made in this run, new whatever its id and
        content: it takes the first variant the thread does not hold (a server that repeats
        ``chatcmpl-1`` and an answer it gave before still adds a message), its text made valid
        (:func:`_made_valid`)."""
        bases: list[str | None] = []
        for original, message in zip(originals, messages, strict=True):
            content = [message.role, [c.to_dict() for c in original.contents]]
            bases.append(json.dumps([original.message_id, content], sort_keys=True, default=str)
                         if original.message_id else None)
        counts = Counter(b for b in bases if b is not None)
        spare = 8 if made else 0
        variants = {
            base: [_variant(thread, original.message_id or "", base, n) for n in range(counts[base] + spare)]
            for base, original in zip(bases, originals, strict=True) if base is not None
        }
        wanted = [m.message_id for m in originals if m.message_id]
        wanted += [v for vs in variants.values() for v in vs]
        stored = {m.id: m for m in await self.memory.store.get_messages(wanted)} if wanted else {}
        taken = {i for i, m in stored.items() if m.thread_id == thread}
        seen: Counter[str] = Counter()
        out: list[Message] = []
        for original, message, base in zip(originals, messages, bases, strict=True):
            framework_id = original.message_id
            if not framework_id or base is None:
                out.append(message)
                continue
            old = stored.get(framework_id)
            if old is not None and old.thread_id == thread and _same(old, message):
                out.append(_as_stored(message, old))  # obsmem's own id, sent back
                continue
            if made:
                free = [v for v in variants[base] if v not in taken]
                chosen = free[0] if free else new_id()
                taken.add(chosen)
                out.append(message.model_copy(update={"id": chosen}))
                continue
            chosen = variants[base][seen[base]]
            seen[base] += 1
            old = stored.get(chosen)
            if old is not None and old.thread_id == thread and _same(old, message):
                out.append(_as_stored(message, old))
            else:
                out.append(message.model_copy(update={"id": chosen if old is None else new_id()}))
        return _unique_ids(_made_valid(out) if made else out)

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[AFMessage]:
        """The thread's stored messages (all of them, raw), as Agent Framework messages."""
        thread = self.thread_id or session_id
        if not thread:
            return []
        try:
            await self.memory.get_thread(thread, resource_id=self.resource_id or thread)  # a run's owner only
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
            await self.memory.get_thread(thread, resource_id=self.resource_id or thread)  # a run's owner only
        except ThreadNotFoundError:
            await self.memory.create_thread(thread, self.resource_id or thread)
        converted = await self._own_ids(thread, messages, from_agent_framework(messages))
        await self.memory.save_messages(thread, converted)


class _RunSteps(ChatMiddleware):
    """One run's chat middleware: saves the run's tool-loop steps before each model call.

    A run resuming a failed one (its question stored, then the tool steps that ran) gets those
    steps as context messages, which Agent Framework places before the input: ``moved`` (their
    message ids) go right after the question (``question``: its key) in each model call, so the
    model reads them in their order and answers from their results."""

    def __init__(
        self, provider: ObservationalMemoryProvider, thread: str, run: _Run,
        moved: set[str] | None = None, question: str = "",
    ) -> None:
        self.provider = provider
        self.thread = thread
        self.run = run
        self.moved = moved or set()
        self.question = question

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        messages = list(context.messages)
        if self.moved:
            messages = _after_question(messages, self.moved, self.question)
            context.messages = messages
        # Another chat middleware within this one (a context provider's after obsmem) may change
        # the results the model is told: the step is saved from what it leaves in the request,
        # once the model call returned (or failed), not before.
        pipeline = getattr(getattr(context, "client", None), "_cached_chat_middleware_pipeline", None)
        after = _others(pipeline, self, _RunSteps)[1]
        if not after:
            await self.provider._save_step(self.thread, self.run, messages, self.question)
        placed = _valid_request(_late_results_in_place(messages))
        if placed is not messages:
            context.messages = placed
        if context.stream:
            context.stream_result_hooks.append(self._answered)
        try:
            await call_next()
        finally:
            if after:
                await self.provider._save_step(self.thread, self.run, list(context.messages), self.question)
        if not context.stream and isinstance(context.result, ChatResponse):
            self._answered(context.result)

    def _answered(self, response: ChatResponse[Any]) -> None:
        """Notes the model's response: its calls run next, stored with their results
        (:meth:`ObservationalMemoryProvider._save_tool_run`)."""
        self.run.answer = list(response.messages)
        self.run.answer_stored = False


def _late_results_in_place(messages: list[AFMessage]) -> list[AFMessage]:
    """``messages`` with each function result of a call answered earlier in them put in place
    of that earlier answer (and not sent again); ``messages`` itself when there is none.

    A call awaiting approval that the user moved on from is closed by obsmem with an answer of no
    result, right after the call (in the context messages); when the approval comes after all,
    Agent Framework runs the tool and sends its result after everything else: a function result
    no call precedes, and a second answer to its call, which a provider refuses (OpenAI: 400)
    after the approved tool ran. obsmem stores the real result in the no-result answer's place;
    the model now gets it there too."""
    first: dict[str, tuple[int, int]] = {}
    late: dict[tuple[int, int], Content] = {}
    dropped: set[tuple[int, int]] = set()
    calls: set[str] = set()  # of the newest assistant message: its results answer them (an id reused too)
    for index, message in enumerate(messages):
        if message.role == "assistant":
            calls = {c.call_id for c in message.contents if c.type == "function_call" and c.call_id}
        for at, content in enumerate(message.contents):
            if content.type != "function_result" or not content.call_id:
                continue
            if content.call_id in first and content.call_id not in calls:
                late[first[content.call_id]] = content
                dropped.add((index, at))
            else:
                first[content.call_id] = (index, at)
    if not dropped:
        return messages
    out: list[AFMessage] = []
    for index, message in enumerate(messages):
        touched = any(i == index for i, _ in [*late, *dropped])
        if not touched:
            out.append(message)
            continue
        contents = [late.get((index, at), content) for at, content in enumerate(message.contents)
                    if (index, at) not in dropped]
        if not contents:
            continue
        out.append(AFMessage(message.role, contents, message_id=message.message_id, author_name=message.author_name,
                             additional_properties=dict(message.additional_properties or {})))
    return out


def _approved_calls_last(
    history: list[AFMessage], inputs: Sequence[AFMessage], closed: frozenset[str] | set[str] = frozenset()
) -> list[AFMessage]:
    """``history`` (the context messages of a run whose client has no chat-middleware layer) with
    the calls that ``inputs`` approve or reject moved to its end, their answers in it left out,
    when they are not its end already. With them go the calls the model made with them that
    obsmem closed as unanswered (``closed``): Agent Framework holds a call that needs no approval
    until the approval of the calls made with it, and runs it then, its result with theirs.

    Agent Framework runs an approved call and sends its result right after the context messages
    (in the approval's place). A call the user moved on from is answered in the thread by
    obsmem's "no result" closing message, and later turns follow it: the model got a second
    answer to the call, after them, with no call before it, which a provider refuses (OpenAI:
    400) after the tool ran. Without the chat-middleware layer nothing can put that result in its
    call's place in the request (obsmem stores it there), so the call goes where its result comes.
    """
    approved: dict[str, Content] = {}
    for message in inputs:
        for content in message.contents:
            call = content.function_call if content.type == "function_approval_response" else None
            if call is not None and call.call_id:
                approved[call.call_id] = call
    if not approved or not history:
        return history
    for message in history:
        made = [c for c in message.contents if c.type == "function_call" and c.call_id]
        if message.role == "assistant" and any(c.call_id in approved for c in made):
            approved.update((c.call_id, c) for c in made if c.call_id and c.call_id in closed)
    last = history[-1]
    waiting = {c.call_id for c in last.contents if c.type == "function_call"} if last.role == "assistant" else set()
    if set(approved) <= waiting:
        return history  # still the newest: its results follow it
    calls: dict[str, Content] = {}
    kept: list[AFMessage] = []
    for message in history:
        contents = []
        for content in message.contents:
            if content.type in ("function_call", "function_result") and content.call_id in approved:
                if content.type == "function_call":
                    calls.setdefault(content.call_id, content)
                continue
            contents.append(content)
        if len(contents) == len(message.contents):
            kept.append(message)
        elif [c for c in contents if c.type != "usage"]:
            kept.append(AFMessage(message.role, contents, message_id=message.message_id,
                                  author_name=message.author_name,
                                  additional_properties=dict(message.additional_properties or {})))
    moved = [*calls.values(), *(call for call_id, call in approved.items() if call_id not in calls)]  # in order
    return [*kept, AFMessage("assistant", moved, additional_properties=dict(last.additional_properties or {}))]


def _after_question(messages: list[AFMessage], moved: set[str], question: str) -> list[AFMessage]:
    """``messages`` with the context messages ``moved`` (by id) right after the question."""
    moving = [m for m in messages if _attributed(m) and m.message_id in moved]
    if not moving:
        return messages
    rest = [m for m in messages if all(m is not x for x in moving)]
    at = next((i for i, m in enumerate(rest) if not _attributed(m) and _key(m) == question), None)
    if at is None:
        return messages
    return [*rest[:at + 1], *moving, *rest[at + 1:]]


class _RunTools(FunctionMiddleware):
    """One run's function middleware: stores each tool call and its result as the tool returns
    (or raises). A tool that raises is stored with the result Agent Framework gives the model
    (``Error: Function failed.``, or ``Error: Argument parsing failed.`` for arguments the tool
    refused; the exception's text only with ``include_detailed_errors``, which a later run sends
    too).

    A provider's function middleware is the innermost (after the client's, the agent's and the
    run's): what the tool returns here is not what the model is told when the app's own function
    middleware changes it on its way out (a card number masked, a long output cut). Then this
    stores nothing: the step (what the next model request carries) or the run's end (what the
    framework gives) stores the call and its result, as :meth:`_app_middleware_outside` says."""

    def __init__(
        self, provider: ObservationalMemoryProvider, run: _Run, client: Any = None,
        steps: _RunSteps | None = None, *, detailed_errors: bool = False,
    ) -> None:
        self.provider = provider
        self.run = run
        self.client = client
        self.steps = steps
        self.detailed_errors = detailed_errors

    def _app_middleware_outside(self) -> bool:
        """Another function middleware (not obsmem's) runs around this one in the run's pipeline:
        the client's, the agent's, the run's, or a provider's before obsmem. Agent Framework
        gives a middleware no view of its pipeline; the client keeps the pipeline it built for
        the newest run (``_cached_function_middleware_pipeline``, of this run's middleware and so
        of this one). When it does not hold this one (another run of the client began since, or
        a client that keeps none) the answer is yes: storing a result the app changes afterwards
        is what must not happen.

        The same goes for the app's chat middleware (the client's, the agent's, the run's), which
        runs around obsmem's step (:class:`_RunSteps`) in each model call, or within it (another
        context provider's, after obsmem), and may change the results the request carries: it
        is read from the pipeline the client built for the newest model call
        (``_cached_chat_middleware_pipeline``, this run's before its tools ran)."""
        if _others(getattr(self.client, "_cached_function_middleware_pipeline", None), self, _RunTools)[0]:
            return True
        return self.steps is not None and any(
            _others(getattr(self.client, "_cached_chat_middleware_pipeline", None), self.steps, _RunSteps)
        )

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        call_id = context.metadata.get("call_id")
        if self._app_middleware_outside() or not isinstance(call_id, str):
            await call_next()  # the step or the run's end stores what the app's middleware made of it
            return
        me = object()  # this invocation (a model may repeat a call id within one response)
        self.run.running[me] = self._place(call_id)
        try:
            await call_next()
        except _NOT_RESULTS:
            # Agent Framework gives the model no result for these (the run stops, or waits for
            # the user or a new approval): whatever it gives later, the step or the run's end stores.
            raise
        except Exception as exc:
            said, error = self._told(exc, context)
            self.run.held[me] = (self.run.running[me], call_id, context, said, error)
            raise
        else:
            self.run.held[me] = (self.run.running[me], call_id, context, context.result, None)
        finally:
            del self.run.running[me]
            await self._store_held()

    def _place(self, call_id: str) -> tuple[int, int]:
        """Where a call's result goes among the results of one model response: the call's place
        in that response (with the chat-middleware layer), else the order the tools started in
        (Agent Framework starts them in the order of the calls)."""
        self.run.started += 1
        calls = [c.call_id for m in self.run.answer for c in m.contents if c.type == "function_call"]
        return (calls.index(call_id) if call_id in calls else len(calls), self.run.started)

    async def _store_held(self) -> None:
        """Stores the held results whose calls come before every call whose tool still runs, in
        the order of the calls. Parallel tools finish in any order; the model is told their
        results in the order of its calls, and the thread keeps them so (a later run sends them
        as the model saw them). A result waits only while a tool called before it runs: it is
        stored once that tool returns, raises or is cancelled (the run stopped), before Agent
        Framework shows any result of the batch."""
        async with self.run.flushing:  # one at a time: each store in its place
            while self.run.held:
                first = min(self.run.running.values(), default=None)
                me, held = min(self.run.held.items(), key=lambda h: h[1][0])
                place, call_id, context, result, error = held
                if first is not None and first < place:
                    return
                del self.run.held[me]
                await self._ran(call_id, context, result, error)

    def _told(self, exc: Exception, context: FunctionInvocationContext) -> tuple[str, str]:
        """The result Agent Framework gives the model for a tool that raised ``exc``, and the
        exception it notes with it: arguments the tool refused (the model can send them again
        fixed) are told apart from a tool that failed."""
        if isinstance(exc, _FunctionArgumentValidationError):
            said = "Error: Argument parsing failed."
            error = (exc.redacted_message if _SECURITY_ARGUMENTS_SNAPSHOT_CONTEXT_KEY in context.metadata
                     else str(exc))
        else:
            said, error = "Error: Function failed.", str(exc)
        if self.detailed_errors:
            said = f"{said} Exception: {error}"
        return said, error or type(exc).__name__

    async def _ran(self, call_id: str, context: FunctionInvocationContext, result: Any, error: str | None) -> None:
        name, arguments = context.function.name, context.arguments
        try:
            await self.provider._save_tool_run(self.run, call_id, name, arguments, result, error)
        except ObsmemError:
            # Not the tool's failure (raised here, Agent Framework would tell the model the tool
            # failed, although it ran): the next step, or the run's end, stores the call and its
            # result as the framework gives them, and fails the run if memory still refuses.
            pass


def _others(pipeline: Any, own: object, kind: type) -> tuple[bool, bool]:
    """Whether another middleware than obsmem's (of ``kind``) runs around ``own`` in ``pipeline``
    (a client's cached middleware pipeline), and whether one runs within it; both when
    ``pipeline`` does not hold ``own`` (obsmem cannot tell)."""
    source = getattr(pipeline, "_source_middleware", None)
    at = next((i for i, m in enumerate(source) if m is own), None) if isinstance(source, tuple) else None
    if source is None or at is None:
        return True, True
    return (any(not isinstance(m, kind) for m in source[:at]),
            any(not isinstance(m, kind) for m in source[at + 1:]))


#: What a tool (or Agent Framework inside it) raises that is no result of the tool.
_NOT_RESULTS = (MiddlewareFailure, MiddlewareTermination, UserInputRequiredException,
                _FunctionArgumentsChangedAfterApproval)


def _held(messages: Sequence[Message], call_id: str) -> bool:
    """The thread's newest call of ``call_id`` waits for its result, or was closed as unanswered
    (its result takes that place). Not when a result answered it: a model that reuses its call
    ids (``call_0`` in each run) makes a new call."""
    held = False
    for message in messages:
        if any(c.tool_call_id == call_id for c in message.tool_calls):
            held = True
        elif any(r.tool_call_id == call_id for r in message.tool_results):
            held = bool(message.metadata.get(_UNANSWERED))
    return held


def _without_calls(message: AFMessage, call_ids: set[str]) -> AFMessage | None:
    """``message`` without the calls and results of ``call_ids`` (stored as their tools ran)."""
    if not call_ids:
        return message
    kept = [c for c in message.contents
            if not (c.type in ("function_call", "function_result") and c.call_id in call_ids)]
    return _with_contents(message, kept)


def _without_stepped(message: AFMessage, stepped: Counter[tuple[str, str]]) -> AFMessage | None:
    """``message`` without the calls and results a step stored (each taken from ``stepped``)."""
    kept = []
    for content in message.contents:
        key = (content.type, content.call_id or "")
        if content.type in ("function_call", "function_result") and stepped[key] > 0:
            stepped[key] -= 1
            continue
        kept.append(content)
    return _with_contents(message, kept)


def _said_by_model(message: AFMessage) -> AFMessage:
    """A message of a run's response: what the model said, the assistant's, also when a model
    server (a proxy, a self-hosted one) gave it the role "system" or "user". Stored so, it became
    the agent's instructions in every later run (obsmem gives a thread's system messages as
    instructions), or words later runs told the model the user had said; a streamed run stores it
    as the assistant's already (Agent Framework merges the stream's updates into one). A message
    with a tool's call or result, or with Agent Framework's own flow (an approval), keeps its role."""
    if str(message.role) not in ("system", "user") or any(
        c.type in ("function_call", "function_result") or c.type in _CONTROL for c in message.contents
    ):
        return message
    return AFMessage("assistant", list(message.contents), message_id=message.message_id,
                     author_name=message.author_name,
                     additional_properties=dict(message.additional_properties or {}))


def _past_answer(message: AFMessage, answer: list[AFMessage], saved: Counter[str]) -> AFMessage | None:
    """``message`` (of a run's response) without the model response the tools' runs stored
    (``answer``) that it begins with: a streamed run merges into that response what Agent
    Framework adds after it, the user-input request of a tool (a sub-agent's consent request)
    called beside one that returned. Stored again, its calls came a second time while one
    waited for its result (the run's end refused, the request lost), its text twice."""
    for stored in answer:
        size = len(stored.contents)
        if (str(stored.role) == str(message.role) and stored.message_id == message.message_id
                and len(message.contents) > size
                and _key(_with_contents(message, message.contents[:size]) or message) == _key(stored)
                and _take(saved, _key(stored))):
            return _with_contents(message, message.contents[size:])
    return message


def _with_contents(message: AFMessage, kept: list[Any]) -> AFMessage | None:
    """``message`` holding ``kept`` (of its contents) only: itself when nothing went, None when
    nothing but usage is left."""
    if len(kept) == len(message.contents):
        return message
    if not [c for c in kept if c.type != "usage"]:
        return None
    return AFMessage(message.role, kept, message_id=message.message_id, author_name=message.author_name,
                     additional_properties=dict(message.additional_properties or {}))


#: A UTF-16 surrogate code point: in a Python string always a lone one, which UTF-8 cannot encode.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _made_valid(messages: list[Message]) -> list[Message]:
    """``messages`` (what a run made: the model's responses, the tools' results) with each lone
    surrogate made Unicode text: a pair split in two joined, any other one U+FFFD.

    obsmem refuses such text in what an app saves (the app can fix it), but a tool that returns
    text decoded with ``errors="surrogateescape"``, or a JSON answer holding ``"\\ud800"``, is no
    input the app gives: refused, the run failed after the tool ran and its call and result were
    lost (what the tool did, too). Kept as UTF-8 can hold it, as a decoder with
    ``errors="replace"`` reads bad bytes."""
    out = []
    for message in messages:
        parts = tuple(_valid_part(p) for p in message.parts)
        metadata = _valid_value(message.metadata) if _holds_surrogate(message.metadata) else message.metadata
        changed = any(a is not b for a, b in zip(parts, message.parts, strict=True))
        if changed or metadata is not message.metadata:
            message = message.model_copy(update={"parts": parts, "metadata": metadata})
        out.append(message)
    return out


def _from_run(messages: Sequence[AFMessage], history: Iterable[AFMessage] = ()) -> list[Message]:
    """obsmem messages for what a run made (:func:`from_agent_framework`), each lone surrogate
    made valid first: a tool call's id or name holding one is no part obsmem can build."""
    return from_agent_framework(_valid_request(list(messages)), history=_valid_request(list(history)))


def _valid_request(messages: list[AFMessage]) -> list[AFMessage]:
    """``messages`` (a model request) with each lone surrogate in a content's text, result or
    arguments made valid as :func:`_made_valid` stores it; ``messages`` itself when there is none.
    A provider's client writes its request as UTF-8 (the OpenAI SDK, httpx) and fails on one: the
    model call after a tool returned such text failed, and the model is told what obsmem keeps."""
    out: list[AFMessage] = []
    for message in messages:
        contents = [_valid_content(c) for c in message.contents]
        if any(a is not b for a, b in zip(contents, message.contents, strict=True)):
            message = AFMessage(message.role, contents, message_id=message.message_id,
                                author_name=message.author_name,
                                additional_properties=dict(message.additional_properties or {}))
        out.append(message)
    return out if any(a is not b for a, b in zip(out, messages, strict=True)) else messages


def _valid_content(content: Content) -> Content:
    values = [content.text, content.result, content.arguments, content.name, content.call_id,
              *(i.text for i in content.items or ())]
    if not any(_holds_surrogate(v) for v in values):
        return content
    return Content.from_dict(_valid_value(content.to_dict()))


def _valid_part(part: Part) -> Part:
    fields = {k: _valid_value(v) for k, v in part.__dict__.items() if _holds_surrogate(v)}
    return part.model_copy(update=fields) if fields else part


def _holds_surrogate(value: Any) -> bool:
    if not value or isinstance(value, int | float | bool):
        return False
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _SURROGATE.search(text) is not None


def _valid_value(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {_valid_value(k): _valid_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_valid_value(v) for v in value)
    return value


def _variant(thread: str, framework_id: str, base: str, n: int) -> str:
    return scoped_id(_FRAMEWORK, thread, framework_id, base if n == 0 else [base, n])


def _as_stored(message: Message, stored: Message) -> Message:
    """``message`` under ``stored``'s id with its visible parts: a copy of it, for obsmem."""
    data = tuple(p for p in message.parts if isinstance(p, DataPart))
    visible = tuple(p for p in stored.parts if not isinstance(p, DataPart))
    return message.model_copy(update={"id": stored.id, "parts": (*visible, *data)})


def _key(message: AFMessage) -> str:
    """What identifies a run's message between the model calls and the response."""
    contents = [c.to_dict(exclude={"additional_properties"}) for c in message.contents if c.type != "usage"]
    return json.dumps([str(message.role), message.message_id, contents], sort_keys=True, default=str)


def _asked_at(sent: Sequence[AFMessage], question: str) -> int:
    """Where a model request holds the run's question (``question``: its key): Agent Framework
    appends what the run makes after it. When the request does not hold it as given (the app's
    chat middleware changed it), the last user or system message the run did not make; -1 when
    there is none."""
    keyed = [i for i, m in enumerate(sent) if question and not _attributed(m) and _key(m) == question]
    if keyed:
        return keyed[-1]
    return max((i for i, m in enumerate(sent) if not _attributed(m) and str(m.role) in ("user", "system")
                and not any(c.type in ("function_call", "function_result") for c in m.contents)), default=-1)


def _take(counter: Counter[str], key: str) -> bool:
    if counter[key] > 0:
        counter[key] -= 1
        return True
    return False


def _attributed(message: AFMessage) -> bool:
    """A context message a provider added (not the run's input, nor what the run made)."""
    return bool((message.additional_properties or {}).get("_attribution"))


def _same(stored: Message, message: Message) -> bool:
    """``message`` is ``stored`` sent again: same role, same visible parts (a tool result's name
    aside, which a result sent without its call cannot know)."""
    def visible(m: Message) -> list[Part]:
        return [p.model_copy(update={"tool_name": ""}) if isinstance(p, ToolResultPart) else p
                for p in m.parts if not isinstance(p, DataPart)]
    return stored.role == message.role and visible(stored) == visible(message)


def _unique_ids(messages: list[Message]) -> list[Message]:
    """Two messages of one batch with the same id (and content): each stored message needs its own."""
    seen: set[str] = set()
    unique = []
    for message in messages:
        if message.id in seen:
            message = message.model_copy(update={"id": new_id()})
        seen.add(message.id)
        unique.append(message)
    return unique

"""obsmem inside the OpenAI Agents SDK: a ``Session`` backed by observational memory.

::

    from agents import Agent, Runner
    from obsmem import Memory
    from obsmem.integrations.openai_agents import ObsmemSession

    memory = Memory("sqlite:///memory.db")
    session = ObsmemSession(memory, session_id="trip", resource_id="user-1")
    result = await Runner.run(agent, "Hi, I'm planning a trip", session=session)
    ...
    await memory.aclose()

The Runner reads the session once per run (:meth:`ObsmemSession.get_items`) and saves what the
run adds as it goes (:meth:`ObsmemSession.add_items`: the new input first, then each step's
items). Each of those is an obsmem turn boundary, so memory work happens there:

- ``get_items`` runs the memory work due (observing, reflecting, activating buffered
  observations) and returns the thread's context as Responses-API items: the application's
  own system messages, one leading ``developer`` message holding obsmem's instructions and the
  observations (with its continuation reminder), then the unobserved tail, with every
  ``function_call`` next to its ``function_call_output``;
- ``add_items`` saves the items (ids, statuses and ``provider_data`` kept with them): the
  run's input begins an obsmem turn, each later step's items are a step of it, so a tool
  result is checked against its call and buffering can start in the background.

The observed messages are therefore never sent again; the model sees them as observations.
Within one run the SDK sends what the run started with plus its loop; for long tool loops pass
``RunConfig(call_model_input_filter=session.model_input_filter)`` and every model call gets the
turn's current context instead (observed steps of the run leave the input). One
:class:`~obsmem.Memory` serves any number of sessions (one per conversation) and concurrent
runs; its background work is owned by the memory: ``await memory.aclose()``.

:func:`from_agents_items` / :func:`to_agents_items` convert between the SDK's input items and
obsmem messages, reusing :func:`obsmem.from_openai_responses` / :func:`obsmem.to_openai_responses`.
Items those converters do not handle (hosted tool calls such as ``web_search_call``,
``item_reference`` …) are kept as a :class:`~obsmem.DataPart` named ``openai-agents-item``:
stored, never sent to a model again.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from obsmem import ContextWindow
from obsmem.convert import from_openai_responses, to_openai_responses
from obsmem.errors import ConfigError, InvalidInputError, StorageError, ThreadNotFoundError
from obsmem.memory import Memory
from obsmem.storage.contract import rewrite_message_if_unchanged
from obsmem.turn import Turn, is_input, retried_input
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    parse_messages,
)

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
    from agents.run_context import RunContextWrapper

# The SDK is imported here so a missing extra fails on import, with the command that fixes it.
try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("obsmem.integrations.openai_agents needs: pip install 'obsmem[openai-agents]'") from exc

__all__ = ["ObsmemSession", "from_agents_items", "to_agents_items"]

_META = "openai_agents"
_UNKNOWN = "openai-agents-item"
_SUPPORTED = {"message", "function_call", "function_call_output", "reasoning"}
_EXTRA_KEYS = ("id", "status", "provider_data")
_CONTENT = "_obsmem_original_content"  # a message item's content as the SDK gave it (see _convertible)
#: How many stored messages :meth:`ObsmemSession.pop_item` reads at a time, newest first.
_POP_PAGE = 16
#: How many times an undo takes its items out of a message that changed since it was read.
_POP_ATTEMPTS = 5


def _item(raw: object, index: int) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        return cast(dict[str, Any], dump(exclude_none=True))
    raise InvalidInputError(
        f"Invalid items[{index}]: expected a Responses input item (a dict), got {type(raw).__name__}",
        argument=f"items[{index}]",
    )


def _kind(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def from_agents_items(
    items: Sequence[Mapping[str, Any] | object], *, history: Sequence[Message | Mapping[str, Any]] = ()
) -> list[Message]:
    """The SDK's input items (``TResponseInputItem``) → obsmem messages.

    Messages, function calls and their outputs, and reasoning go through
    :func:`obsmem.from_openai_responses` (``history`` names the calls that outputs answer when the
    calls came earlier); each message keeps its items' ``id``, ``status`` and ``provider_data``
    in ``metadata["openai_agents"]``, for :func:`to_agents_items`. A message's content parts the
    converter does not take (``input_file`` or ``input_image`` by ``file_id``, ``input_audio`` …)
    become a text naming them (``[input_file: file-…]``, what an observer reads), and the
    message's content is kept as it was in the same metadata: :func:`to_agents_items` gives it
    back whole. Other items are kept whole as a data part (never sent to a model).
    """
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Sequence):
        raise InvalidInputError(
            f"Invalid items: expected a list of Responses input items, got {type(items).__name__}",
            argument="items",
        )
    known = list(parse_messages(history, "history"))
    out: list[Message] = []
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        if batch:
            converted = from_openai_responses(batch, history=[*known, *out])
            out.extend(_with_extras(converted, batch))
            batch.clear()

    for index, raw in enumerate(items):
        item = _item(raw, index)
        if _kind(item) in _SUPPORTED:
            batch.append(_convertible(item))
            continue
        flush()
        kept = DataPart(name=_UNKNOWN, data={"item": item})
        if out and out[-1].role == "assistant":
            out[-1] = out[-1].model_copy(update={"parts": (*out[-1].parts, kept)})
        else:
            out.append(Message(role="assistant", parts=(kept,)))
    flush()
    return out


def _convertible(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` as :func:`obsmem.from_openai_responses` takes it: a message's content parts that
    it does not (``input_file`` / ``input_image`` by ``file_id``, ``input_audio``, any other)
    become a text naming them, and the original content is kept under ``_CONTENT``."""
    content = item.get("content")
    if _kind(item) != "message" or not isinstance(content, list):
        return item
    role = item.get("role")
    parts = [p if _takes(p, role) else _stand_in(p, role) for p in content]
    if all(a is b for a, b in zip(parts, content, strict=True)):
        return item
    return {**item, "content": parts, _CONTENT: content}


def _takes(part: object, role: object) -> bool:
    """Whether the Responses converter takes this content part (in a message of ``role``)."""
    if not isinstance(part, Mapping):
        return True  # refused by the converter with its own message
    kind = part.get("type")
    if kind in ("input_text", "output_text", "refusal"):
        return True
    if role == "assistant":
        return False
    if kind == "input_image":
        return isinstance(part.get("image_url"), str) and bool(part["image_url"])
    if kind == "input_file":
        return isinstance(part.get("file_data"), str) or isinstance(part.get("file_url"), str)
    return False


def _stand_in(part: Mapping[str, Any], role: object) -> dict[str, Any]:
    """The text that stands for a content part obsmem has no part for (what an observer reads)."""
    refs = [
        part[k] for k in ("filename", "file_id", "file_url", "image_url")
        if isinstance(part.get(k), str) and part[k] and not part[k].startswith("data:")
    ]
    audio = part.get("input_audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("format"), str):
        refs.append(audio["format"])
    name = f"{part.get('type')}: {', '.join(refs)}" if refs else str(part.get("type"))
    return {"type": "output_text" if role == "assistant" else "input_text", "text": f"[{name}]"}


def _with_extras(messages: list[Message], items: list[dict[str, Any]]) -> list[Message]:
    """Each message with the extras of the items it came from (when the item counts line up)."""
    counts = [len(to_openai_responses([m])) for m in messages]
    if sum(counts) != len(items):
        return messages
    out: list[Message] = []
    position = 0
    for message, count in zip(messages, counts, strict=True):
        extras = [
            {k: item[k] for k in _EXTRA_KEYS if k in item}
            | ({"content": item[_CONTENT]} if _CONTENT in item else {})
            for item in items[position:position + count]
        ]
        position += count
        if any(extras):
            message = message.model_copy(update={"metadata": {**message.metadata, _META: {"items": extras}}})
        out.append(message)
    return out


def to_agents_items(
    messages: Sequence[Message | Mapping[str, Any]], *, system_role: Literal["system", "developer"] = "system"
) -> list[TResponseInputItem]:
    """obsmem messages → the SDK's input items, through :func:`obsmem.to_openai_responses`.

    A message converted by :func:`from_agents_items` gets its items' ``id``, ``status`` and
    ``provider_data`` back (and its content as given, when it held parts obsmem names in text).
    Data parts (obsmem's markers, kept hosted-tool items) are not sent.
    """
    items: list[dict[str, Any]] = []
    for message in parse_messages(messages, "messages"):
        converted = to_openai_responses([message], system_role=system_role)
        meta = message.metadata.get(_META)
        extras = meta.get("items") if isinstance(meta, dict) else None
        if isinstance(extras, list) and len(extras) == len(converted):
            converted = [{**item, **extra} for item, extra in zip(converted, extras, strict=True)]
        items.extend(_easy_assistant(item) for item in converted)
    return cast("list[TResponseInputItem]", items)


def _easy_assistant(item: dict[str, Any]) -> dict[str, Any]:
    """An assistant message the API did not produce (no ``id``) in the SDK's easy input form
    (text content), since an output message item needs the ``id`` and ``status`` it got."""
    if item.get("type") != "message" or item.get("role") != "assistant" or "id" in item:
        return item
    texts = [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
    return {"type": "message", "role": "assistant", "content": "\n".join(texts)}


def _item_key(item: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies an item across the SDK's and obsmem's forms of it."""
    kind = _kind(item)
    if kind in ("function_call", "function_call_output"):
        return (kind, item.get("call_id"))
    if kind == "message":
        content = item.get("content")
        if isinstance(content, list):
            content = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, Mapping))
        role = item.get("role")
        return (kind, "system" if role == "developer" else role, content)
    return (kind, item.get("id"))


def _visible_tail(items: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The newest ``limit`` items, without an output whose call was cut off."""
    if limit is None:
        return items
    tail = items[-limit:] if limit > 0 else []
    calls = {i.get("call_id") for i in tail if i.get("type") == "function_call"}
    return [i for i in tail if i.get("type") != "function_call_output" or i.get("call_id") in calls]


class ObsmemSession:
    """An OpenAI Agents SDK ``Session`` kept in obsmem (see the module docstring).

    ``session_id`` is the obsmem thread id, ``resource_id`` the user it belongs to (the thread
    is created on first use). ``system_role``: the role of the leading observations item
    (``"developer"``, or ``"system"`` for models that want it). ``model``: the actor's
    ``provider:model`` id, for obsmem's provider-change activation.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        memory: Memory,
        session_id: str,
        resource_id: str,
        *,
        system_role: Literal["system", "developer"] = "developer",
        session_settings: SessionSettings | None = None,
        model: str | None = None,
    ) -> None:
        if not isinstance(memory, Memory):
            raise ConfigError("memory", f"expected an obsmem Memory, got {type(memory).__name__}")
        for name, value in (("session_id", session_id), ("resource_id", resource_id)):
            if not isinstance(value, str) or not value:
                raise ConfigError(name, f"expected a non-empty string, got {value!r}")
        if system_role not in ("system", "developer"):
            raise ConfigError("system_role", f"got {system_role!r}", allowed="'developer' or 'system'")
        self.memory = memory
        self.session_id = session_id
        self.resource_id = resource_id
        self.system_role: Literal["system", "developer"] = system_role
        self.session_settings = session_settings
        self.model = model
        self._turn: Turn | None = None  # the current run's turn: begun by its input, stepped by its steps
        # The ``limit`` the run's get_items was given (SessionSettings, the session's or the
        # RunConfig's) and the id of the turn's first message: model_input_filter keeps that limit
        # on the history before it, as the SDK does without the filter.
        self._limit: int | None = None
        self._turn_start: str | None = None

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The context for the next run: instructions, observations, and the unobserved tail.

        The Runner calls it when a run starts: it ends the previous run's turn and runs the
        memory work due (a turn's start: the newest user message and what follows it stay raw).
        ``limit`` keeps the newest ``limit`` items of the tail (the observations item is always
        first), never an output without its call.

        Every stored user message is returned, answered or not: a question of a failed run
        (the provider down) stays in the context of the runs after it, and a run with no new
        input (a retry, a regenerate after :meth:`pop_item`) is sent the newest question. A run
        that gives a failed run's question again stores it once (:meth:`add_items`), but the
        SDK sends these items and then the run's input, so the model gets that question twice
        unless the run uses :meth:`model_input_filter`, which sends the stored context.
        ``wrapper`` (the run's context, which the Runner passes) is not used.
        """
        await self._end_turn()
        self._limit = limit
        turn = await self.memory.begin_turn(
            thread_id=self.session_id, resource_id=self.resource_id, model=self.model
        )
        try:
            context = turn.context
        finally:
            await turn.end()
        return self._items(context, limit)

    def _items(
        self, context: ContextWindow, limit: int | None = None, *, run_from: str | None = None
    ) -> list[TResponseInputItem]:
        """``context`` as the SDK's items (see :meth:`get_items`). With ``run_from`` (the id of a
        run's first message, in the tail), ``limit`` keeps the newest items of the history before
        it, and the run's own items all follow."""
        raw_ids = {m.id for m in context.raw_messages}
        app_ids = {m.id for m in context.instructions}
        own = [m.text for m in context.messages if m.id not in raw_ids and m.id not in app_ids and m.text]
        instructions = to_agents_items(context.instructions, system_role=self.system_role)
        items: list[dict[str, Any]] = [cast(dict[str, Any], item) for item in instructions]
        if own:
            items.append({
                "type": "message", "role": self.system_role,
                "content": [{"type": "input_text", "text": "\n\n".join(own)}],
            })
        raw = context.raw_messages
        start = next((i for i, m in enumerate(raw) if m.id == run_from), None) if run_from else None
        if start is None:
            tail = [cast(dict[str, Any], item) for item in to_agents_items(raw)]
            return cast("list[TResponseInputItem]", [*items, *_visible_tail(tail, limit)])
        history = [cast(dict[str, Any], item) for item in to_agents_items(raw[:start])]
        run = [cast(dict[str, Any], item) for item in to_agents_items(raw[start:])]
        return cast("list[TResponseInputItem]", [*items, *_visible_tail(history, limit), *run])

    async def model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``RunConfig(call_model_input_filter=...)`` that sends each model call the turn's context.

        Without it, the input is what the run started with plus its loop, so one long run (many
        tool calls) sends its whole loop. With it, each call gets the context obsmem built when
        the step before it was saved (:meth:`add_items` is a turn step): what became observed
        during the run leaves the input and shows as observations. The SDK saves each step before
        the next call, so that context ends with the input's newest item; when it does not (this
        session is not the run's), the input is left as it is.
        """
        from agents.run_config import ModelInputData

        current = data.model_data
        original = [_item(item, index) for index, item in enumerate(current.input)]
        if not original or self._turn is None or self._turn.ended:
            return current
        fresh = [
            cast(dict[str, Any], item)
            for item in self._items(self._turn.context, self._limit, run_from=self._turn_start)
        ]
        if not fresh or _item_key(fresh[-1]) != _item_key(original[-1]):
            return current
        return ModelInputData(
            input=cast("list[TResponseInputItem]", fresh), instructions=current.instructions
        )

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Save the items a run made, as a turn boundary (memory work may run, or start buffering).

        Items holding user input begin a turn (ending the one before); the items of the steps
        that follow are that turn's steps. An input that is the thread's newest messages, with
        nothing answering them (a failed run's input, run again), is not stored again.
        """
        if not items:
            return
        raw = [_item(item, index) for index, item in enumerate(items)]
        calls = {i.get("call_id") for i in raw if _kind(i) == "function_call"}
        answers_earlier = any(
            _kind(i) == "function_call_output" and i.get("call_id") not in calls for i in raw
        )
        history: list[Message] = []
        if answers_earlier:
            history = await self._answered_history(raw, calls)
        messages = from_agents_items(raw, history=history)
        user_input = any(m.role == "user" and not m.is_marker_only for m in messages)
        if user_input or self._turn is None or self._turn.ended:
            await self._end_turn()
            if all(is_input(m) for m in messages):
                # The input of a run that failed before any answer (saved, then the model call
                # failed), run again: the stored messages in its place, so it is stored once.
                stored = await retried_input(self.memory.store, self.session_id, messages)
                if stored is not None and all(m.thread_id == self.session_id for m in stored):
                    messages = stored
            self._turn = await self.memory.begin_turn(
                thread_id=self.session_id, resource_id=self.resource_id, messages=messages, model=self.model
            )
            self._turn_start = messages[0].id if messages else None
        else:
            await self._turn.step(messages)

    async def _answered_history(self, raw: list[dict[str, Any]], calls: set[Any]) -> list[Message]:
        """The session's unobserved messages, holding the calls the outputs of ``raw`` answer
        (those not made in ``raw`` itself: ``calls``), after the stored messages of those calls
        observed since (an approval given after the user went on: the turn's end closed the call,
        and observation took both). A call is held unless the session lost it while the run
        waited (a tool approval: ``needs_approval``, resumed from a ``RunState``): cleared
        (:meth:`clear_session`) or undone (:meth:`pop_item`). Then the run is over: its output
        answers nothing, and the error says so before the SDK calls the model with the run's own
        copy of the conversation."""
        try:
            await self.memory.get_thread(self.session_id, resource_id=self.resource_id)
            history = (await self.memory.get_context(self.session_id)).raw_messages
        except ThreadNotFoundError:
            history = []
        held = {call.tool_call_id for message in history for call in message.tool_calls}
        lost = sorted({
            str(item.get("call_id")) for item in raw
            if _kind(item) == "function_call_output" and item.get("call_id") not in calls
            and item.get("call_id") not in held
        })
        if lost and history:
            # an approval given after the user went on: its call may be observed by now (with the
            # closing that answered it meanwhile), out of the unobserved tail but still stored
            observed = [m for m in await self.memory.list_messages(self.session_id)
                        if any(c.tool_call_id in lost for c in m.tool_calls)]
            found = {c.tool_call_id for m in observed for c in m.tool_calls}
            history = [*observed, *history]
            lost = [c for c in lost if c not in found]
        if lost:
            raise InvalidInputError(
                f"The run's tool output answers a call session '{self.session_id}' no longer holds "
                f"({', '.join(repr(c) for c in lost)}: undone with pop_item, or cleared, while the run "
                "waited for a tool approval): nothing of it is stored and the run is over. Run the agent "
                "with a new input to go on in the session.",
                argument="items",
            )
        return history

    async def _end_turn(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            await turn.end()

    async def aclose(self) -> None:
        """End the open turn (it may start idle buffering). The memory stays open: close it yourself."""
        await self._end_turn()

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None) -> TResponseInputItem | None:
        """Remove the newest item from the thread and return it (the SDK's "undo").

        The newest item is the last item of the newest stored message that gives one (its last
        part group). A tool call never stays without its result: popping a
        ``function_call_output`` removes the ``function_call`` it answers too (other calls of
        the same step keep theirs), and returns the output. A call still waiting for its result
        is popped alone. An assistant message left with nothing but reasoning goes whole.

        Unlike memory work, which never deletes a raw message, this is the user's explicit
        request: the parts go from the stored messages, and a message left empty is deleted.
        Observations already made from them stay. A thread of another resource is refused
        (:class:`~obsmem.errors.InvalidInputError`), as :meth:`get_items` refuses it.

        It reads the thread's newest messages (:data:`_POP_PAGE` at a time), older ones only as
        far as the item or the call it answers lies: an undo does not read the whole thread.
        """
        await self._end_turn()
        try:
            await self.memory.get_thread(self.session_id, resource_id=self.resource_id)  # this user's only
            newer = self._pages()
            try:
                changed, popped = await _pop_newest(newer)
            finally:
                await newer.aclose()
        except ThreadNotFoundError:
            return None
        if popped is None:
            return None
        for message, removed in changed.values():
            await self._take_out(message, removed)
        return cast("TResponseInputItem", popped)

    async def _take_out(self, message: Message, removed: list[dict[str, Any]]) -> None:
        """The stored ``message`` without the parts of the ``removed`` items (deleted when nothing
        visible is left), compare-and-set against the copy read: a change meanwhile (a forget's
        rewrite, a marker) is read again and the same items taken out of it, so nothing written
        since the read is undone."""
        store = self.memory.store
        for _ in range(_POP_ATTEMPTS):
            changed: Message | None = message
            for item in removed:
                changed = None if changed is None else _without_item(changed, item)
            if changed is None:
                await store.delete_messages([message.id])
                return
            if await rewrite_message_if_unchanged(store, changed, expected=message):
                return
            found = await store.get_messages([message.id])
            if not found:
                return  # deleted meanwhile
            message = found[0]
        raise StorageError(
            f"Undoing an item of message '{message.id}' kept racing with other writers; run it again."
        )

    async def _pages(self) -> AsyncGenerator[Message, None]:
        """The thread's stored messages, newest first, read :data:`_POP_PAGE` at a time: undo
        reads the newest few (further back only as far as what it pops lies), never the whole
        thread for one item."""
        before: int | None = None
        while True:
            page = await self.memory.store.list_messages(
                self.session_id, before_seq=before, limit=_POP_PAGE, newest_first=True
            )
            for message in page:
                yield message
            if len(page) < _POP_PAGE or page[-1].seq is None:
                return
            before = page[-1].seq

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Delete the thread: its messages and its observations. A thread of another resource is
        refused (:class:`~obsmem.errors.InvalidInputError`), as :meth:`get_items` refuses it."""
        self._turn = None
        try:
            await self.memory.get_thread(self.session_id, resource_id=self.resource_id)
        except ThreadNotFoundError:
            return
        await self.memory.delete_thread(self.session_id)




async def _pop_newest(
    newer: AsyncIterator[Message],
) -> tuple[dict[str, tuple[Message, list[dict[str, Any]]]], dict[str, Any] | None]:
    """The newest item of the messages ``newer`` gives (newest first) and what its popping
    changes: each message touched, as read, with the items to take out of it; with a
    ``function_call_output``, its call too (in the same message or an older one: read on only as
    far as it lies)."""
    async for message in newer:
        items = [cast(dict[str, Any], i) for i in to_agents_items([message])]
        if items:
            break
    else:
        return {}, None
    popped = items[-1]
    changed: dict[str, tuple[Message, list[dict[str, Any]]]] = {message.id: (message, [popped])}
    call_id = popped.get("call_id")
    if popped.get("type") == "function_call_output":
        call = {"type": "function_call", "call_id": call_id}
        earlier: Message | None = message
        while earlier is not None:
            current: Message | None = earlier
            for item in changed.get(earlier.id, (earlier, []))[1]:
                current = None if current is None else _without_item(current, item)
            if current is not None and any(c.tool_call_id == call_id for c in current.tool_calls):
                original, removed = changed.get(earlier.id, (earlier, []))
                changed[earlier.id] = (original, [*removed, call])
                break
            earlier = await anext(newer, None)
    return changed, popped


def _without_item(message: Message, item: dict[str, Any]) -> Message | None:
    """``message`` without the parts ``item`` was made of; None when nothing visible is left."""
    kind = item.get("type")
    call_id = item.get("call_id")

    def stays(part: object) -> bool:
        if kind == "function_call":
            return not (isinstance(part, ToolCallPart) and part.tool_call_id == call_id)
        if kind == "function_call_output":
            return not (isinstance(part, ToolResultPart) and part.tool_call_id == call_id)
        if kind == "reasoning":
            return not isinstance(part, ReasoningPart)
        return not isinstance(part, TextPart | FilePart)

    parts = tuple(p for p in message.parts if stays(p))
    if not [p for p in parts if not isinstance(p, DataPart | ReasoningPart)]:
        return None  # nothing left to send (reasoning alone is no item the API takes)
    meta = {k: v for k, v in message.metadata.items() if k != _META}
    return message.model_copy(update={"parts": parts, "metadata": meta})

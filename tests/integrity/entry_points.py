"""The public entry points of obsmem, each argument with a way to call it (for the typed-error tests).

:data:`ENTRIES` lists every argument of every public constructor, method and function explicitly;
``test_every_public_entry_point_is_in_the_table`` fails when a class gains a method or argument
that is neither here nor in :data:`NOT_FUZZED` (with a reason).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from obsmem import (
    DataPart,
    FilePart,
    Memory,
    MemoryConfig,
    Message,
    ObservationConfig,
    PrivacyConfig,
    ReasoningPart,
    ReflectionConfig,
    RetrievalConfig,
    SyncMemory,
    TextPart,
    Thread,
    ToolCallPart,
    ToolResultPart,
    Turn,
)
from obsmem.storage import MemoryStore, open_store
from obsmem.sync import SyncTurn
from obsmem.types import parse_message
from obsmem.worker import Worker, enqueue_thread_work

__all__ = ["ENTRIES", "MESSAGE", "NOT_FUZZED", "RESOURCE", "THREAD", "Entry", "public_arguments"]

THREAD = "fixture-thread-7f3a"
RESOURCE = "fixture-user-7f3a"
MESSAGE = "fixture-message-7f3a"  # a stored message: recall pages from it


_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # nan and ±inf included
    st.text(max_size=12),
    st.binary(max_size=4),
    st.datetimes(),
    st.datetimes(timezones=st.just(UTC)),
    st.builds(object),
    st.just(Message.user("a message")),
)
ANY: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=6), inner, max_size=3),
    ),
    max_leaves=6,
)


def _message_dicts() -> st.SearchStrategy[Any]:
    """Lists of message-shaped dicts whose fields hold arbitrary values (reaches the parts)."""
    part = st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": ANY}),
        st.fixed_dictionaries(
            {
                "type": st.just("tool-result"),
                "tool_call_id": st.text(max_size=4),
                "tool_name": ANY,
                "result": ANY,
            }
        ),
        st.fixed_dictionaries(
            {"type": st.just("tool-call"), "tool_call_id": ANY, "tool_name": ANY, "args": ANY}
        ),
        st.dictionaries(st.sampled_from(["type", "text", "name", "data"]), ANY, max_size=3),
    )
    message = st.fixed_dictionaries(
        {
            "role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system"]), ANY),
            "parts": st.lists(part, min_size=0, max_size=2),
        },
        optional={"id": ANY, "created_at": ANY, "metadata": ANY, "thread_id": ANY},
    )
    return st.lists(message, max_size=2)


def _options(model: type[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(ANY, st.dictionaries(st.sampled_from(sorted(model.model_fields)), ANY, max_size=2))


MESSAGES = st.one_of(ANY, _message_dicts())
THREAD_WORDS = ("Thread '",)  # ThreadNotFoundError: "Thread 'x' does not exist"


@dataclass(frozen=True)
class Entry:
    """One argument of one public entry point, and how to call it with a value.

    ``kind`` says what ``call`` receives: ``"plain"`` nothing (constructors and functions),
    ``"memory"`` a Memory on SQLite with the fixture thread, ``"sync"`` a SyncMemory likewise.
    An error is accepted when it is an ObsmemError naming ``argument`` (or one of ``names``).
    """

    target: str
    argument: str
    call: Callable[[Any, Any], Any]
    kind: str = "plain"
    values: st.SearchStrategy[Any] = ANY
    names: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.target}:{self.argument}"


def _keyword(target: Callable[..., Any], name: str, /, **given: Any) -> Callable[[Any, Any], Any]:
    """A call of ``target`` with ``name`` set to the value (and valid ``given`` arguments)."""
    return lambda _, value: target(**{**given, name: value})


def _with(build: Callable[..., Any], first: Any, argument: str, _: Any, value: Any) -> None:
    """``build`` (Memory or Worker) with one argument set; a Memory that was built is closed."""
    if argument == "store":
        built = build(value)
    else:
        built = build(first() if callable(first) else first, **{argument: value})
    if isinstance(built, Memory):
        asyncio.run(built.aclose())


async def _turn_with(memory: Memory, **arguments: Any) -> None:
    async with memory.turn(**{"thread_id": THREAD, **arguments}):
        pass


async def _step(memory: Memory, value: Any, *, end: bool = False) -> None:
    turn = await memory.begin_turn(thread_id=THREAD, messages=[Message.user("question")])
    try:
        await (turn.end(value) if end else turn.step(value))
    finally:
        await turn.end()


def _sync_turn_with(memory: SyncMemory, **arguments: Any) -> None:
    with memory.turn(**{"thread_id": THREAD, **arguments}):
        pass


def _sync_step(memory: SyncMemory, value: Any, *, end: bool = False) -> None:
    turn = memory.begin_turn(thread_id=THREAD, messages=[Message.user("question")])
    try:
        turn.end(value) if end else turn.step(value)
    finally:
        turn.end()


def _first(stream: Any) -> Any:
    """A sync generator's first item; the generator is closed after."""
    try:
        return next(stream)
    finally:
        stream.close()


async def _first_async(stream: Any) -> Any:
    """An async iterator's first item; it is closed after."""
    try:
        return await stream.__anext__()
    finally:
        await stream.aclose()


async def _per_group(memory: Any, value: Any) -> Any:
    from obsmem.om.receipts import Receipt

    return await memory.receipt_sources(Receipt(thread_id=THREAD, context_hash="0" * 64), per_group=value)


def _unique() -> str:
    return f"t-{uuid.uuid4().hex}"


_MEMORY_ARGUMENTS = (
    "store",
    "config",
    "model",
    "observer",
    "reflector",
    "extractors",
    "counter",
    "clock",
    "failure_policy",
    "working_memory_scope",
    "on_event",
    "embedder",
    "vector_index",
    "background",
    "max_turn_wait",
    "close_timeout",
    "retry",
    "model_timeout_s",
    "knowledge",
)
_WORKER_ARGUMENTS = (
    "store",
    "config",
    "model",
    "observer",
    "reflector",
    "extractors",
    "working_memory_scope",
    "counter",
    "clock",
    "owner",
    "kinds",
    "claim_ttl_s",
    "lease_ttl_s",
    "poll_interval_s",
    "max_attempts",
    "concurrency",
    "on_event",
    "embedder",
    "vector_index",
    "retry",
    "model_timeout_s",
    "knowledge",
)
_RECALL_ARGUMENTS = (
    "mode",
    "group_id",
    "cursor",
    "target_thread_id",
    "anchor",
    "query",
    "page",
    "limit",
    "detail",
    "token_budget",
    "char_offset",
)
#: RecallNotFoundError names what was looked up ("No thread 'x' is within reach of this recall").
_RECALL_WORDS = {
    "group_id": ("No observation group",),
    "cursor": ("No message",),
    "target_thread_id": ("No thread",),
}
#: The arguments that shape a page are fuzzed on a recall that pages (from a stored message).
_PAGED = ("anchor", "page", "limit", "detail", "token_budget", "char_offset")


def _recall(argument: str) -> Callable[[Any, Any], Any]:
    """A recall on the fixture thread with ``argument`` set (paging from a stored message)."""

    def call(memory: Memory | SyncMemory, value: Any) -> Any:
        given = {"cursor": MESSAGE, argument: value} if argument in _PAGED else {argument: value}
        return memory.recall(THREAD, **given)

    return call


def _config_entries() -> list[Entry]:
    entries = []
    for model in (MemoryConfig, ObservationConfig, ReflectionConfig, RetrievalConfig, PrivacyConfig):
        for option in model.model_fields:
            entries.append(Entry(model.__name__, option, _keyword(model, option)))
    for option in MemoryConfig.model_fields:
        entries.append(Entry("MemoryConfig.replace", option, _keyword(MemoryConfig().replace, option)))
    entries.append(
        Entry(
            "MemoryConfig.from_snapshot",
            "data",
            lambda _, v: MemoryConfig.from_snapshot(v),
            values=_options(MemoryConfig),
            names=("option", "snapshot"),
        )
    )
    return entries


def _part_entries() -> list[Entry]:
    valid: dict[type[Any], dict[str, Any]] = {
        TextPart: {"text": "x"},
        ReasoningPart: {"text": "x"},
        ToolCallPart: {"tool_call_id": "c1", "tool_name": "t"},
        ToolResultPart: {"tool_call_id": "c1", "tool_name": "t"},
        FilePart: {"media_type": "image/png"},
        DataPart: {"name": "n"},
    }
    entries = []
    for part, required in valid.items():
        for field in part.model_fields:
            entries.append(Entry(part.__name__, field, _keyword(part, field, **required)))
    return entries


ENTRIES: list[Entry] = [
    # -- messages and threads --------------------------------------------------------------------
    Entry("Message.user", "text", lambda _, v: Message.user(v)),
    Entry("Message.assistant", "text", lambda _, v: Message.assistant(v)),
    Entry("Message.system", "text", lambda _, v: Message.system(v)),
    *[
        Entry(
            "Message",
            field,
            _keyword(Message, field, role="user", parts=(TextPart(text="x"),)),
        )
        for field in Message.model_fields
    ],
    Entry(
        "parse_message",
        "raw",
        lambda _, v: parse_message(v),
        values=st.one_of(ANY, _message_dicts()),
        names=("message",),
    ),
    *_part_entries(),
    *[
        Entry("Thread", field, _keyword(Thread, field, id="t1", resource_id="u1"))
        for field in Thread.model_fields
    ],
    # -- configuration ----------------------------------------------------------------------------
    *_config_entries(),
    # -- stores, Memory, SyncMemory and Worker construction --------------------------------------
    Entry("open_store", "url", lambda _, v: open_store(v), names=("store",)),
    *[
        Entry(
            "Memory",
            argument,
            functools.partial(_with, Memory, "memory://", argument),
            values=_options(MemoryConfig) if argument == "config" else ANY,
            names=("option",) if argument == "config" else (),
        )
        for argument in _MEMORY_ARGUMENTS
    ],
    Entry("SyncMemory", "args", lambda _, v: SyncMemory(v).close(), names=("store",)),
    Entry(
        "SyncMemory",
        "kwargs",
        lambda _, v: SyncMemory("memory://", config=v).close(),
        values=_options(MemoryConfig),
        names=("config", "option"),
    ),
    *[
        Entry(
            "Worker",
            argument,
            functools.partial(_with, Worker, MemoryStore, argument),
            values=_options(MemoryConfig) if argument == "config" else ANY,
            names=("option",) if argument == "config" else (),
        )
        for argument in _WORKER_ARGUMENTS
    ],
    Entry(
        "enqueue_thread_work",
        "store",
        lambda _, v: asyncio.run(enqueue_thread_work(v, "t1", now=datetime.now(UTC))),
    ),
    Entry(
        "enqueue_thread_work",
        "thread_id",
        lambda _, v: asyncio.run(enqueue_thread_work(MemoryStore(), v, now=datetime.now(UTC))),
    ),
    Entry(
        "enqueue_thread_work",
        "now",
        lambda _, v: asyncio.run(enqueue_thread_work(MemoryStore(), "t1", now=v)),
    ),
    Entry(
        "enqueue_thread_work",
        "kinds",
        lambda _, v: asyncio.run(enqueue_thread_work(MemoryStore(), "t1", now=datetime.now(UTC), kinds=v)),
    ),
    # -- Memory methods ---------------------------------------------------------------------------
    Entry("Memory.create_thread", "thread_id", lambda m, v: m.create_thread(v, RESOURCE), "memory"),
    Entry("Memory.create_thread", "resource_id", lambda m, v: m.create_thread(_unique(), v), "memory"),
    Entry(
        "Memory.create_thread", "title", lambda m, v: m.create_thread(_unique(), RESOURCE, title=v), "memory"
    ),
    Entry(
        "Memory.create_thread",
        "metadata",
        lambda m, v: m.create_thread(_unique(), RESOURCE, metadata=v),
        "memory",
    ),
    Entry(
        "Memory.create_thread",
        "org_id",
        lambda m, v: m.create_thread(_unique(), RESOURCE, org_id=v),
        "memory",
    ),
    Entry("Memory.create_thread_made", "thread_id", lambda m, v: m.create_thread_made(v, RESOURCE), "memory"),
    Entry("Memory.create_thread_made", "resource_id", lambda m, v: m.create_thread_made(_unique(), v), "memory"),
    Entry("Memory.create_thread_made", "title",
          lambda m, v: m.create_thread_made(_unique(), RESOURCE, title=v), "memory"),
    Entry("Memory.create_thread_made", "metadata",
          lambda m, v: m.create_thread_made(_unique(), RESOURCE, metadata=v), "memory"),
    Entry("Memory.create_thread_made", "org_id",
          lambda m, v: m.create_thread_made(_unique(), RESOURCE, org_id=v), "memory"),
    Entry("Memory.reindex_groups", "thread_id", lambda m, v: m.reindex_groups(thread_id=v), "memory",
          names=THREAD_WORDS),
    Entry("Memory.reindex_groups", "resource_id", lambda m, v: m.reindex_groups(resource_id=v), "memory"),
    Entry("Memory.get_thread", "thread_id", lambda m, v: m.get_thread(v), "memory", names=THREAD_WORDS),
    Entry("Memory.get_thread", "resource_id", lambda m, v: m.get_thread(THREAD, resource_id=v), "memory"),
    Entry("Memory.list_threads", "resource_id", lambda m, v: m.list_threads(v), "memory"),
    Entry("Memory.list_threads", "limit", lambda m, v: m.list_threads(RESOURCE, limit=v), "memory"),
    Entry("Memory.list_threads", "offset", lambda m, v: m.list_threads(RESOURCE, offset=v), "memory"),
    Entry("Memory.list_threads", "after", lambda m, v: m.list_threads(RESOURCE, after=v), "memory"),
    Entry("Memory.list_threads", "newest_first", lambda m, v: m.list_threads(RESOURCE, newest_first=v), "memory"),
    Entry("Memory.list_threads", "before", lambda m, v: m.list_threads(RESOURCE, newest_first=True, before=v), "memory"),
    Entry("Memory.unfinished_delete", "thread_id", lambda m, v: m.unfinished_delete(v), "memory"),
    Entry("Memory.unfinished_deletes", "resource_id", lambda m, v: m.unfinished_deletes(v), "memory"),
    Entry("Memory.delete_thread", "thread_id", lambda m, v: m.delete_thread(v), "memory"),
    # (a thread that does not exist: a valid actor would delete the fixture's thread)
    Entry("Memory.delete_thread", "actor",
          lambda m, v: m.delete_thread("fixture-gone-7f3a", actor=v), "memory"),
    Entry("Memory.delete_resource", "resource_id", lambda m, v: m.delete_resource(v), "memory"),
    # another resource than the fixture's: a valid value would delete it for the entries after this one
    Entry("Memory.delete_resource", "knowledge_within",
          lambda m, v: m.delete_resource("fixture-gone-7f3a", knowledge_within=v), "memory"),
    Entry("Memory.delete_resource", "actor",
          lambda m, v: m.delete_resource("fixture-gone-7f3a", actor=v), "memory"),
    Entry("Memory.forget", "value", lambda m, v: m.forget(v), "memory"),
    Entry(
        "Memory.forget", "thread_id", lambda m, v: m.forget("x", thread_id=v), "memory", names=THREAD_WORDS
    ),
    Entry("Memory.forget", "resource_id", lambda m, v: m.forget("x", resource_id=v), "memory"),
    Entry("Memory.forget", "knowledge_within", lambda m, v: m.forget("x", resource_id=RESOURCE, knowledge_within=v), "memory"),
    Entry("Memory.forget", "actor", lambda m, v: m.forget("x", resource_id=RESOURCE, actor=v), "memory"),
    # the cost ledger (issue 18)
    Entry("Memory.usage", "thread_id", lambda m, v: m.usage(thread_id=v), "memory"),
    Entry("Memory.usage", "resource_id", lambda m, v: m.usage(resource_id=v), "memory"),
    Entry("Memory.usage", "since", lambda m, v: m.usage(since=v), "memory"),
    Entry("Memory.usage", "until", lambda m, v: m.usage(until=v), "memory"),
    # status and receipts (issue 21)
    Entry("Memory.status", "thread_id", lambda m, v: m.status(v), "memory", names=THREAD_WORDS),
    Entry("Memory.watch", "thread_id", lambda m, v: _first_async(m.watch(v)), "memory", names=THREAD_WORDS),
    Entry("Memory.watch", "interval_s", lambda m, v: _first_async(m.watch(THREAD, interval_s=v)), "memory"),
    Entry("Memory.receipt", "message_id", lambda m, v: m.receipt(v), "memory"),
    Entry("Memory.receipt_sources", "receipt", lambda m, v: m.receipt_sources(v), "memory"),
    Entry("Memory.receipt_sources", "per_group", lambda m, v: _per_group(m, v), "memory"),
    Entry("SyncMemory.status", "thread_id", lambda s, v: s.status(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.watch", "thread_id", lambda s, v: _first(s.watch(v)), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.watch", "interval_s", lambda s, v: _first(s.watch(THREAD, interval_s=v)), "sync"),
    Entry("SyncMemory.receipt", "message_id", lambda s, v: s.receipt(v), "sync"),
    Entry("SyncMemory.receipt_sources", "receipt", lambda s, v: s.receipt_sources(v), "sync"),
    Entry("SyncMemory.usage", "thread_id", lambda s, v: s.usage(thread_id=v), "sync"),
    Entry("SyncMemory.usage", "resource_id", lambda s, v: s.usage(resource_id=v), "sync"),
    Entry("SyncMemory.usage", "since", lambda s, v: s.usage(since=v), "sync"),
    Entry("SyncMemory.usage", "until", lambda s, v: s.usage(until=v), "sync"),
    # knowledge (issue 16): the fixture memory has no knowledge store, so past the argument checks
    # these raise ConfigError("knowledge"); the checks themselves come first.
    Entry("Memory.pin", "thread_id", lambda m, v: m.pin(v, "text"), "memory", names=(*THREAD_WORDS, "knowledge")),
    Entry("Memory.pin", "text", lambda m, v: m.pin(THREAD, v), "memory", names=("knowledge",)),
    Entry("Memory.redacted", "text", lambda m, v: m.redacted(v), "memory"),
    Entry("Memory.pin", "level", lambda m, v: m.pin(THREAD, "text", level=v), "memory", names=("knowledge",)),
    Entry("Memory.pin", "reason", lambda m, v: m.pin(THREAD, "text", reason=v), "memory", names=("knowledge",)),
    Entry("Memory.unpin", "thread_id", lambda m, v: m.unpin(v, "r1"), "memory", names=(*THREAD_WORDS, "knowledge")),
    Entry("Memory.unpin", "record_id", lambda m, v: m.unpin(THREAD, v), "memory", names=("knowledge",)),
    Entry("Memory.unpin", "reason", lambda m, v: m.unpin(THREAD, "r1", reason=v), "memory", names=("knowledge",)),
    Entry("Memory.list_pins", "thread_id", lambda m, v: m.list_pins(v), "memory", names=(*THREAD_WORDS, "knowledge")),
    Entry("Memory.capture_knowledge", "thread_id", lambda m, v: m.capture_knowledge(v), "memory",
          names=(*THREAD_WORDS, "knowledge")),
    Entry("Memory.curate_knowledge", "thread_id", lambda m, v: m.curate_knowledge(v), "memory",
          names=(*THREAD_WORDS, "knowledge")),
    Entry("Memory.curate_knowledge", "force", lambda m, v: m.curate_knowledge(THREAD, force=v), "memory", names=("knowledge",)),
    Entry("Worker.curate_when_idle", "force", lambda m, v: Worker(m.store).curate_when_idle(force=v), "memory"),
    Entry(
        "Memory.save_messages",
        "thread_id",
        lambda m, v: m.save_messages(v, [Message.user("x")]),
        "memory",
        names=THREAD_WORDS,
    ),
    Entry("Memory.save_messages", "messages", lambda m, v: m.save_messages(THREAD, v), "memory", MESSAGES),
    Entry("Memory.list_messages", "thread_id", lambda m, v: m.list_messages(v), "memory", names=THREAD_WORDS),
    Entry("Memory.list_messages", "after_seq", lambda m, v: m.list_messages(THREAD, after_seq=v), "memory"),
    Entry("Memory.list_messages", "limit", lambda m, v: m.list_messages(THREAD, limit=v), "memory"),
    Entry(
        "Memory.begin_turn",
        "thread_id",
        lambda m, v: m.begin_turn(thread_id=v, resource_id=RESOURCE),
        "memory",
    ),
    Entry(
        "Memory.begin_turn",
        "resource_id",
        lambda m, v: m.begin_turn(thread_id=THREAD, resource_id=v),
        "memory",
    ),
    Entry(
        "Memory.begin_turn",
        "messages",
        lambda m, v: m.begin_turn(thread_id=THREAD, messages=v),
        "memory",
        MESSAGES,
    ),
    Entry("Memory.begin_turn", "model", lambda m, v: m.begin_turn(thread_id=THREAD, model=v), "memory"),
    Entry("Memory.resume_turn", "thread_id", lambda m, v: m.resume_turn(thread_id=v), "memory", names=THREAD_WORDS),
    Entry("Memory.resume_turn", "model", lambda m, v: m.resume_turn(thread_id=THREAD, model=v), "memory"),
    Entry("Memory.resume_turn", "since_seq", lambda m, v: m.resume_turn(thread_id=THREAD, since_seq=v), "memory"),
    Entry(
        "Memory.turn", "thread_id", lambda m, v: _turn_with(m, thread_id=v, resource_id=RESOURCE), "memory"
    ),
    Entry("Memory.turn", "resource_id", lambda m, v: _turn_with(m, resource_id=v), "memory"),
    Entry("Memory.turn", "messages", lambda m, v: _turn_with(m, messages=v), "memory", MESSAGES),
    Entry("Memory.turn", "model", lambda m, v: _turn_with(m, model=v), "memory"),
    Entry("Memory.get_context", "thread_id", lambda m, v: m.get_context(v), "memory", names=THREAD_WORDS),
    Entry("Memory.context_for", "thread", lambda m, v: m.context_for(v), "memory"),
    *[
        Entry(
            "Memory.recall",
            argument,
            _recall(argument),
            "memory",
            names=_RECALL_WORDS.get(argument, ()),
        )
        for argument in _RECALL_ARGUMENTS
    ],
    Entry("Memory.recall", "thread_id", lambda m, v: m.recall(v), "memory", names=THREAD_WORDS),
    Entry("Memory.recall_tool", "flavor", lambda m, v: m.recall_tool(flavor=v), "memory"),
    Entry(
        "Memory.call_recall_tool",
        "thread_id",
        lambda m, v: m.call_recall_tool(v, {}),
        "memory",
        names=THREAD_WORDS,
    ),
    Entry("Memory.call_recall_tool", "args", lambda m, v: m.call_recall_tool(THREAD, v), "memory"),
    Entry(
        "Memory.call_recall_tool",
        "token_budget",
        lambda m, v: m.call_recall_tool(THREAD, {}, token_budget=v),
        "memory",
    ),
    Entry("Memory.observe", "thread_id", lambda m, v: m.observe(v), "memory", names=THREAD_WORDS),
    Entry("Memory.reflect", "thread_id", lambda m, v: m.reflect(v), "memory", names=THREAD_WORDS),
    Entry("Memory.reflect", "guidance", lambda m, v: m.reflect(THREAD, guidance=v), "memory"),
    Entry("Memory.get_record", "thread_id", lambda m, v: m.get_record(v), "memory", names=THREAD_WORDS),
    Entry("Memory.get_observations", "thread_id", lambda m, v: m.get_observations(v), "memory", names=THREAD_WORDS),
    Entry("Memory.get_instructions", "thread_id", lambda m, v: m.get_instructions(v), "memory", names=THREAD_WORDS),
    Entry(
        "Memory.list_generations",
        "thread_id",
        lambda m, v: m.list_generations(v),
        "memory",
        names=THREAD_WORDS,
    ),
    Entry("Memory.list_generations", "limit", lambda m, v: m.list_generations(THREAD, limit=v), "memory"),
    Entry(
        "Memory.get_working_memory",
        "thread_id",
        lambda m, v: m.get_working_memory(v),
        "memory",
        names=THREAD_WORDS,
    ),
    Entry("Memory.aclose", "cancel", lambda m, v: Memory(m.store).aclose(cancel=v), "memory"),
    Entry("Turn.step", "responses", lambda m, v: _step(m, v), "memory", MESSAGES),
    Entry("Turn.end", "responses", lambda m, v: _step(m, v, end=True), "memory", MESSAGES),
    Entry("Worker.run", "stop", lambda m, v: Worker(m.store).run(stop=v, exit_when_idle=True), "memory"),
    Entry(
        "Worker.run",
        "max_items",
        lambda m, v: Worker(m.store).run(max_items=v, exit_when_idle=True),
        "memory",
    ),
    Entry(
        "Worker.run",
        "exit_when_idle",
        lambda m, v: Worker(m.store).run(max_items=0, exit_when_idle=v),
        "memory",
    ),
    Entry("Worker.run", "drain", lambda m, v: Worker(m.store).run(max_items=0, drain=v), "memory"),
    Entry("Worker.run", "timeout_s", lambda m, v: Worker(m.store).run(max_items=0, timeout_s=v), "memory"),
    Entry(
        "Worker.run",
        "store_patience_s",
        lambda m, v: Worker(m.store).run(max_items=0, store_patience_s=v),
        "memory",
    ),
    Entry("Worker.process", "item", lambda m, v: Worker(m.store).process(v), "memory"),
    # -- SyncMemory methods (the same checks, reached through the portal) -------------------------
    Entry("SyncMemory.create_thread_made", "thread_id", lambda s, v: s.create_thread_made(v, RESOURCE), "sync"),
    Entry("SyncMemory.create_thread_made", "resource_id", lambda s, v: s.create_thread_made(_unique(), v), "sync"),
    Entry("SyncMemory.create_thread_made", "title",
          lambda s, v: s.create_thread_made(_unique(), RESOURCE, title=v), "sync"),
    Entry("SyncMemory.create_thread_made", "metadata",
          lambda s, v: s.create_thread_made(_unique(), RESOURCE, metadata=v), "sync"),
    Entry("SyncMemory.create_thread_made", "org_id",
          lambda s, v: s.create_thread_made(_unique(), RESOURCE, org_id=v), "sync"),
    Entry("SyncMemory.reindex_groups", "thread_id", lambda s, v: s.reindex_groups(thread_id=v), "sync",
          names=THREAD_WORDS),
    Entry("SyncMemory.reindex_groups", "resource_id", lambda s, v: s.reindex_groups(resource_id=v), "sync"),
    Entry("SyncMemory.create_thread", "thread_id", lambda s, v: s.create_thread(v, RESOURCE), "sync"),
    Entry("SyncMemory.create_thread", "resource_id", lambda s, v: s.create_thread(_unique(), v), "sync"),
    Entry(
        "SyncMemory.create_thread",
        "title",
        lambda s, v: s.create_thread(_unique(), RESOURCE, title=v),
        "sync",
    ),
    Entry(
        "SyncMemory.create_thread",
        "metadata",
        lambda s, v: s.create_thread(_unique(), RESOURCE, metadata=v),
        "sync",
    ),
    Entry(
        "SyncMemory.create_thread",
        "org_id",
        lambda s, v: s.create_thread(_unique(), RESOURCE, org_id=v),
        "sync",
    ),
    Entry("SyncMemory.get_thread", "thread_id", lambda s, v: s.get_thread(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.get_thread", "resource_id", lambda s, v: s.get_thread(THREAD, resource_id=v), "sync"),
    Entry("SyncMemory.list_threads", "resource_id", lambda s, v: s.list_threads(v), "sync"),
    Entry("SyncMemory.list_threads", "limit", lambda s, v: s.list_threads(RESOURCE, limit=v), "sync"),
    Entry("SyncMemory.list_threads", "offset", lambda s, v: s.list_threads(RESOURCE, offset=v), "sync"),
    Entry("SyncMemory.list_threads", "after", lambda s, v: s.list_threads(RESOURCE, after=v), "sync"),
    Entry("SyncMemory.list_threads", "newest_first", lambda s, v: s.list_threads(RESOURCE, newest_first=v), "sync"),
    Entry("SyncMemory.list_threads", "before", lambda s, v: s.list_threads(RESOURCE, newest_first=True, before=v), "sync"),
    Entry("SyncMemory.unfinished_delete", "thread_id", lambda s, v: s.unfinished_delete(v), "sync"),
    Entry("SyncMemory.unfinished_deletes", "resource_id", lambda s, v: s.unfinished_deletes(v), "sync"),
    Entry("SyncMemory.delete_thread", "thread_id", lambda s, v: s.delete_thread(v), "sync"),
    Entry("SyncMemory.delete_thread", "actor",
          lambda s, v: s.delete_thread("fixture-gone-7f3a", actor=v), "sync"),
    Entry("SyncMemory.delete_resource", "resource_id", lambda s, v: s.delete_resource(v), "sync"),
    Entry("SyncMemory.delete_resource", "knowledge_within",
          lambda s, v: s.delete_resource("fixture-gone-7f3a", knowledge_within=v), "sync"),
    Entry("SyncMemory.delete_resource", "actor",
          lambda s, v: s.delete_resource("fixture-gone-7f3a", actor=v), "sync"),
    Entry("SyncMemory.pin", "thread_id", lambda s, v: s.pin(v, "text"), "sync", names=(*THREAD_WORDS, "knowledge")),
    Entry("SyncMemory.pin", "text", lambda s, v: s.pin(THREAD, v), "sync", names=("knowledge",)),
    Entry("SyncMemory.pin", "level", lambda s, v: s.pin(THREAD, "x", level=v), "sync", names=("knowledge",)),
    Entry("SyncMemory.pin", "reason", lambda s, v: s.pin(THREAD, "x", reason=v), "sync", names=("knowledge",)),
    Entry("SyncMemory.unpin", "thread_id", lambda s, v: s.unpin(v, "r1"), "sync", names=(*THREAD_WORDS, "knowledge")),
    Entry("SyncMemory.unpin", "record_id", lambda s, v: s.unpin(THREAD, v), "sync", names=("knowledge",)),
    Entry("SyncMemory.unpin", "reason", lambda s, v: s.unpin(THREAD, "r1", reason=v), "sync", names=("knowledge",)),
    Entry("SyncMemory.list_pins", "thread_id", lambda s, v: s.list_pins(v), "sync",
          names=(*THREAD_WORDS, "knowledge")),
    Entry("SyncMemory.curate_knowledge", "thread_id", lambda s, v: s.curate_knowledge(v), "sync",
          names=(*THREAD_WORDS, "knowledge")),
    Entry("SyncMemory.curate_knowledge", "force", lambda s, v: s.curate_knowledge(THREAD, force=v), "sync",
          names=("knowledge",)),
    Entry("SyncMemory.forget", "value", lambda s, v: s.forget(v), "sync"),
    Entry("SyncMemory.forget", "thread_id", lambda s, v: s.forget("x", thread_id=v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.forget", "resource_id", lambda s, v: s.forget("x", resource_id=v), "sync"),
    Entry("SyncMemory.forget", "knowledge_within", lambda s, v: s.forget("x", resource_id=RESOURCE, knowledge_within=v), "sync"),
    Entry("SyncMemory.forget", "actor", lambda s, v: s.forget("x", resource_id=RESOURCE, actor=v), "sync"),
    Entry(
        "SyncMemory.save_messages",
        "thread_id",
        lambda s, v: s.save_messages(v, [Message.user("x")]),
        "sync",
        names=THREAD_WORDS,
    ),
    Entry("SyncMemory.save_messages", "messages", lambda s, v: s.save_messages(THREAD, v), "sync", MESSAGES),
    Entry(
        "SyncMemory.list_messages", "thread_id", lambda s, v: s.list_messages(v), "sync", names=THREAD_WORDS
    ),
    Entry("SyncMemory.list_messages", "after_seq", lambda s, v: s.list_messages(THREAD, after_seq=v), "sync"),
    Entry("SyncMemory.list_messages", "limit", lambda s, v: s.list_messages(THREAD, limit=v), "sync"),
    Entry(
        "SyncMemory.begin_turn",
        "thread_id",
        lambda s, v: s.begin_turn(thread_id=v, resource_id=RESOURCE).end(),
        "sync",
    ),
    Entry(
        "SyncMemory.begin_turn",
        "resource_id",
        lambda s, v: s.begin_turn(thread_id=THREAD, resource_id=v).end(),
        "sync",
    ),
    Entry(
        "SyncMemory.begin_turn",
        "messages",
        lambda s, v: s.begin_turn(thread_id=THREAD, messages=v).end(),
        "sync",
        MESSAGES,
    ),
    Entry(
        "SyncMemory.begin_turn", "model", lambda s, v: s.begin_turn(thread_id=THREAD, model=v).end(), "sync"
    ),
    Entry("SyncMemory.resume_turn", "thread_id", lambda s, v: s.resume_turn(thread_id=v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.resume_turn", "model", lambda s, v: s.resume_turn(thread_id=THREAD, model=v), "sync"),
    Entry("SyncMemory.resume_turn", "since_seq", lambda s, v: s.resume_turn(thread_id=THREAD, since_seq=v), "sync"),
    Entry("SyncMemory.turn", "thread_id", lambda s, v: _sync_turn_with(s, thread_id=v, resource_id=RESOURCE), "sync"),
    Entry("SyncMemory.turn", "resource_id", lambda s, v: _sync_turn_with(s, resource_id=v), "sync"),
    Entry("SyncMemory.turn", "messages", lambda s, v: _sync_turn_with(s, messages=v), "sync", MESSAGES),
    Entry("SyncMemory.turn", "model", lambda s, v: _sync_turn_with(s, model=v), "sync"),
    Entry("SyncMemory.get_observations", "thread_id", lambda s, v: s.get_observations(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.get_instructions", "thread_id", lambda s, v: s.get_instructions(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.capture_knowledge", "thread_id", lambda s, v: s.capture_knowledge(v), "sync",
          names=(*THREAD_WORDS, "knowledge")),
    Entry("SyncMemory.redacted", "text", lambda s, v: s.redacted(v), "sync"),
    Entry("SyncMemory.get_context", "thread_id", lambda s, v: s.get_context(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.observe", "thread_id", lambda s, v: s.observe(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.reflect", "thread_id", lambda s, v: s.reflect(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.reflect", "guidance", lambda s, v: s.reflect(THREAD, guidance=v), "sync"),
    Entry("SyncMemory.get_record", "thread_id", lambda s, v: s.get_record(v), "sync", names=THREAD_WORDS),
    Entry(
        "SyncMemory.list_generations",
        "thread_id",
        lambda s, v: s.list_generations(v),
        "sync",
        names=THREAD_WORDS,
    ),
    Entry("SyncMemory.list_generations", "limit", lambda s, v: s.list_generations(THREAD, limit=v), "sync"),
    Entry(
        "SyncMemory.get_working_memory",
        "thread_id",
        lambda s, v: s.get_working_memory(v),
        "sync",
        names=THREAD_WORDS,
    ),
    *[
        Entry(
            "SyncMemory.recall",
            argument,
            _recall(argument),
            "sync",
            names=_RECALL_WORDS.get(argument, ()),
        )
        for argument in _RECALL_ARGUMENTS
    ],
    Entry("SyncMemory.recall", "thread_id", lambda s, v: s.recall(v), "sync", names=THREAD_WORDS),
    Entry("SyncMemory.recall_tool", "flavor", lambda s, v: s.recall_tool(flavor=v), "sync"),
    Entry(
        "SyncMemory.call_recall_tool",
        "thread_id",
        lambda s, v: s.call_recall_tool(v, {}),
        "sync",
        names=THREAD_WORDS,
    ),
    Entry("SyncMemory.call_recall_tool", "args", lambda s, v: s.call_recall_tool(THREAD, v), "sync"),
    Entry(
        "SyncMemory.call_recall_tool",
        "token_budget",
        lambda s, v: s.call_recall_tool(THREAD, {}, token_budget=v),
        "sync",
    ),
    Entry("SyncTurn.step", "responses", lambda s, v: _sync_step(s, v), "sync", MESSAGES),
    Entry("SyncTurn.end", "responses", lambda s, v: _sync_step(s, v, end=True), "sync", MESSAGES),
]

#: Public methods (and arguments) that take no caller values worth fuzzing, with the reason.
NOT_FUZZED = {
    "Memory.context_from": "the TurnContexts port: Turn passes what it just read from the store",
    "Memory.speculative_context": "the TurnContexts port: Turn passes what it just saved",
    "Memory.settled": "no arguments",
    "Memory.__aenter__": "no arguments",
    "Memory.__aexit__": "exception info from the interpreter",
    "Turn": "built by Memory.begin_turn, never by the application",
    "Turn.start": "built by Memory.begin_turn, never by the application",
    "Turn.resume": "built by Memory.resume_turn, never by the application",
    "Turn.__aenter__": "no arguments",
    "Turn.__aexit__": "exception info from the interpreter",
    "SyncMemory.close": "no arguments",
    "SyncMemory.__enter__": "no arguments",
    "SyncMemory.__exit__": "exception info from the interpreter",
    "SyncTurn": "built by SyncMemory.begin_turn, never by the application",
    "SyncTurn.__enter__": "no arguments",
    "SyncTurn.__exit__": "exception info from the interpreter",
    "Worker.run_once": "no arguments",
}


def public_arguments() -> Iterator[tuple[str, str]]:
    for cls in (Memory, SyncMemory, Turn, SyncTurn, Worker):
        for name, member in inspect.getmembers(cls, callable):
            if name.startswith("_") and name not in (
                "__init__",
                "__aenter__",
                "__aexit__",
                "__enter__",
                "__exit__",
            ):
                continue
            target = cls.__name__ if name == "__init__" else f"{cls.__name__}.{name}"
            if target in NOT_FUZZED:
                continue
            for parameter in list(inspect.signature(member).parameters)[1:]:  # after self/cls
                yield target, parameter

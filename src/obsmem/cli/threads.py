"""``obsmem threads`` and ``obsmem show``: what a store holds, read through the public Store contract.

``threads`` lists the store's threads (or one resource's) with their message count, what memory
observed and still has pending, and how many generations the observations went through. ``show``
draws one thread: its state, the active observations, the raw messages not yet observed, every
generation, and the lifecycle markers the cycles left on the messages. Nothing here writes to the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from obsmem import DataPart, Memory, MemoryConfig, Message, ObsmemError, Thread
from obsmem.cli.render import clip, counted, escape, escape_id, one_line, render_message
from obsmem.cli.stores import describe_store, fail, open_for_reading
from obsmem.storage import ObservationRecord, Store, lineage_key
from obsmem.storage.paging import all_threads

__all__ = ["register", "show", "threads"]

T = TypeVar("T")

#: Rows fetched per call when paging through threads and generations (the contract's default page).
PAGE = 100

StoreOption = Annotated[
    str,
    typer.Option(help="The store: a SQLite file (path.db, sqlite:///rel.db, sqlite:////abs.db) or "
                      "postgresql://user@host/db."),  # fmt: skip
]


def _console() -> Console:
    """A console made per command, so it measures the terminal (or ``COLUMNS``) of this run."""
    return Console()


def register(app: typer.Typer) -> None:
    """Add ``threads`` and ``show`` to ``app``."""
    app.command()(threads)
    app.command()(show)


def _read(store: Store, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on ``store``, then close it; a store error ends the command in one line."""

    async def run() -> T:
        async with store:
            return await work(store)

    try:
        return asyncio.run(run())
    except ObsmemError as exc:
        raise fail(str(exc)) from None


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadMemory:
    """A thread and the observation lineage that holds its memory (None before the first cycle)."""

    thread: Thread
    head: ObservationRecord | None

    @property
    def cursor(self) -> int:
        return self.head.cursor(self.thread.id) if self.head else 0


async def _memory_of(store: Store, thread: Thread) -> ThreadMemory:
    """Thread scope keeps a lineage per thread; resource scope one per resource, with a cursor per
    thread in it. A thread's own lineage wins; otherwise its resource's, if it tracks the thread."""
    head = await store.get_head(lineage_key("thread", thread.id, thread.resource_id))
    if head is None:
        shared = await store.get_head(lineage_key("resource", None, thread.resource_id))
        if shared is not None and thread.id in shared.threads:
            head = shared
    return ThreadMemory(thread, head)


async def _all_generations(store: Store, lineage: str) -> list[ObservationRecord]:
    """Every generation, newest first, however many: ``list_generations`` pages by ``PAGE``."""
    found: list[ObservationRecord] = []
    while True:
        page = await store.list_generations(lineage, limit=PAGE, offset=len(found))
        found += page
        if len(page) < PAGE:
            return found


async def _all_threads(store: Store, resource_id: str | None) -> list[Thread]:
    """A resource's threads, or with ``resource_id`` None every thread in the store; oldest first."""
    return await all_threads(store, resource_id, page=PAGE)


@dataclass(frozen=True, slots=True)
class ThreadRow:
    memory: ThreadMemory
    messages: int
    generations: int
    updated: datetime
    pending: int


class _Windows:
    """The unobserved window of each thread in tokens, as ``Memory.status`` counts it
    (``window_tokens``: each observable message after the thread's cursor, with the default
    counter), in the scope of the record that holds the thread; one reading ``Memory`` per scope,
    made when first needed. Not the record's ``pending_message_tokens``, which only an
    observation's commit writes (a thread below its threshold, or one whose observation never
    finished, would show 0)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.readers: dict[str, Memory] = {}

    async def tokens(self, memory: ThreadMemory) -> int:
        scope = memory.head.scope if memory.head is not None else "thread"
        if scope not in self.readers:  # reads only; the store stays the caller's
            self.readers[scope] = Memory(self.store, config=MemoryConfig(scope=scope))
        return (await self.readers[scope].status(memory.thread.id)).window_tokens

    async def aclose(self) -> None:
        for reader in self.readers.values():
            await reader.aclose()


async def _thread_rows(store: Store, resource_id: str | None) -> list[ThreadRow]:
    rows: list[ThreadRow] = []
    windows = _Windows(store)
    try:
        for thread in await _all_threads(store, resource_id):
            memory = await _memory_of(store, thread)
            newest = await store.list_messages(thread.id, limit=1, newest_first=True)
            stamps = [thread.updated_at, *(m.created_at for m in newest)]
            if memory.head is not None:
                stamps.append(memory.head.updated_at)
            generations = len(await _all_generations(store, memory.head.lineage)) if memory.head else 0
            pending = await windows.tokens(memory)
            rows.append(ThreadRow(memory, await store.count_messages(thread.id), generations, max(stamps), pending))
    finally:
        await windows.aclose()
    return rows


@dataclass(frozen=True, slots=True)
class ThreadView:
    memory: ThreadMemory
    messages: list[Message]
    generations: list[ObservationRecord]
    pending: int

    @property
    def tail(self) -> list[Message]:
        """The raw messages after the cursor: what the actor still sees verbatim."""
        return [m for m in self.messages if (m.seq or 0) > self.memory.cursor]


async def _thread_view(store: Store, thread_id: str) -> ThreadView | None:
    thread = await store.get_thread(thread_id)
    if thread is None:
        return None
    memory = await _memory_of(store, thread)
    generations = await _all_generations(store, memory.head.lineage) if memory.head else []
    windows = _Windows(store)
    try:
        pending = await windows.tokens(memory)
    finally:
        await windows.aclose()
    return ThreadView(memory, await store.list_messages(thread.id), generations, pending)


# -- drawing -------------------------------------------------------------------------------------


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def _tokens(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def threads(
    store: StoreOption,
    resource: Annotated[
        str | None,
        typer.Option(help="Only this resource's (user's) threads, e.g. demo-user for `obsmem demo`. "
                          "Without it, every thread in the store."),  # fmt: skip
    ] = None,
) -> None:
    """List the threads (all, or one resource's): messages, observed and pending tokens, generations,
    last update."""
    rows = _read(open_for_reading(store), lambda opened: _thread_rows(opened, resource))
    console = _console()
    if not rows:
        whose = f"for resource '{escape_id(resource)}'" if resource is not None else "in this store"
        console.print(f"no threads {whose}", highlight=False)
        return
    title = "All threads" if resource is None else f"Threads of {escape_id(resource)}"
    # No vertical rules: the ids stay whole, on one line, in an 80-column terminal.
    table = Table(title=title, caption="observed, pending (not yet observed): message tokens",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fmt: skip
    for column in ("thread", "resource", "messages", "observed", "pending", "generations", "updated"):
        numeric = column not in ("thread", "resource", "updated")
        table.add_column(column, justify="right" if numeric else "left", overflow="fold",
                         no_wrap=column != "updated")  # fmt: skip
    for row in rows:
        head = row.memory.head
        table.add_row(
            escape_id(row.memory.thread.id), escape_id(row.memory.thread.resource_id), f"{row.messages:,}",
            _tokens(head.total_tokens_observed if head else None),
            _tokens(row.pending), str(row.generations), _when(row.updated),
        )  # fmt: skip
    console.print(table)


def show(
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The thread id.")],
    store: StoreOption,
    tail: Annotated[int, typer.Option(min=0, help="Show at most this many unobserved messages.")] = 20,
    markers: Annotated[int, typer.Option(min=0, help="Show at most this many markers, newest.")] = 30,
) -> None:
    """Draw one thread: its observations, the raw unobserved tail, every generation and the markers."""
    opened = open_for_reading(store)
    view = _read(opened, lambda reading: _thread_view(reading, thread_id))
    if view is None:
        raise fail(f"no thread '{one_line(thread_id)}' in {describe_store(opened)}")
    console = _console()
    for table in (_state_table(view), _observations_table(view.memory.head), _tail_table(view, tail),
                  _generations_table(view.generations), _markers_table(view.messages, markers)):  # fmt: skip
        console.print(table)


def _state_table(view: ThreadView) -> Table:
    thread, head = view.memory.thread, view.memory.head
    table = Table(title=f"Thread {escape_id(thread.id)}", show_header=False)
    table.add_column("field")
    table.add_column("value")
    table.add_row("resource", escape_id(thread.resource_id))
    if thread.title:
        table.add_row("title", escape(thread.title))
    table.add_row("created", _when(thread.created_at))
    table.add_row("messages", f"{len(view.messages):,} (observed up to seq {view.memory.cursor})")
    if head is None:
        table.add_row("memory", "nothing observed yet")
    else:
        table.add_row("lineage", f"{escape_id(head.lineage)} ({head.scope} scope), generation {head.generation}")
        table.add_row("head record", escape_id(head.id))
        table.add_row("observation tokens", f"{head.observation_tokens:,}")
        table.add_row("observed tokens", f"{head.total_tokens_observed:,}")
        table.add_row("pending tokens", f"{view.pending:,}")
        if head.buffered_chunks:
            covered = sum(len(chunk.message_ids) for chunk in head.buffered_chunks)
            table.add_row("buffered", f"{counted(len(head.buffered_chunks), 'chunk')} over "
                                      f"{counted(covered, 'message')}, not yet active")  # fmt: skip
        state = head.threads.get(thread.id)
        if state is not None and state.current_task:
            table.add_row("current task", escape(state.current_task))
        if state is not None and state.suggested_response:
            table.add_row("suggested response", escape(state.suggested_response))
    return table


def _observations_table(head: ObservationRecord | None) -> Table:
    if head is None or not head.active_observations.strip():
        return Table(title="Observations (none yet)")
    lines = [line for line in head.active_observations.splitlines() if line.strip()]
    table = Table(title=f"Observations (generation {head.generation}, {head.observation_tokens:,} tokens, "
                        f"{counted(len(lines), 'line')})")  # fmt: skip
    table.add_column("#", justify="right")
    table.add_column("observation", overflow="fold")
    for number, line in enumerate(lines, 1):
        table.add_row(str(number), escape(line))
    return table


def _tail_table(view: ThreadView, limit: int) -> Table:
    tail = view.tail
    shown = tail[-limit:] if limit else []
    title = f"Unobserved tail ({counted(len(tail), 'message')} after seq {view.memory.cursor}"
    if len(shown) < len(tail):
        title += f"; showing the newest {len(shown)}; {len(tail) - len(shown)} older"
    table = Table(title=title + ")")
    for column in ("seq", "role", "time", "content"):
        table.add_column(column, justify="right" if column == "seq" else "left",
                         overflow="fold" if column == "content" else "ellipsis")  # fmt: skip
    for message in shown:
        content = escape(render_message(message))
        table.add_row(str(message.seq), message.role, _when(message.created_at), content)
    return table


def _generations_table(generations: list[ObservationRecord]) -> Table:
    table = Table(title=f"Generations ({len(generations)})",
                  caption="observations: tokens of the text; observed: message tokens observed so far")
    for column in ("generation", "origin", "created", "observations", "observed", "status"):
        numeric = column in ("generation", "observations", "observed")
        table.add_column(column, justify="right" if numeric else "left", no_wrap=column != "created")
    for record in generations:
        table.add_row(
            str(record.generation), record.origin, _when(record.created_at), f"{record.observation_tokens:,}",
            f"{record.total_tokens_observed:,}", "live" if record.is_live else "superseded",
        )  # fmt: skip
    return table


#: Marker fields the table leaves out: ids, and texts the state and observation tables already show.
_MARKER_HIDDEN = {
    "cycle_id", "record_id", "thread_id", "thread_ids", "config", "observations", "current_task",
    "suggested_response",
}  # fmt: skip


def _marker_time(data: dict[str, Any]) -> str:
    for key, value in data.items():
        if key.endswith("_at") and isinstance(value, str):
            try:
                return datetime.fromisoformat(value).strftime("%H:%M:%S")
            except ValueError:
                return value
    return ""


def _marker_details(data: dict[str, Any]) -> str:
    shown = [
        f"{key}={value}" for key, value in data.items()
        if key not in _MARKER_HIDDEN and not key.endswith("_at")
        and isinstance(value, (str, int, float, bool))
    ]  # fmt: skip
    return clip(", ".join(shown), 200)


def _markers_table(messages: list[Message], limit: int) -> Table:
    found = [
        (message, part) for message in messages for part in message.parts
        if isinstance(part, DataPart) and part.name.startswith("om-")
    ]  # fmt: skip
    shown = found[-limit:] if limit else []
    title = f"Markers ({len(found)}"
    if len(shown) < len(found):
        title += f"; showing the newest {len(shown)}"
    table = Table(title=title + ")")
    for column in ("seq", "marker", "cycle", "time", "details"):
        table.add_column(column, justify="right" if column == "seq" else "left", no_wrap=column != "details",
                         overflow="fold" if column == "details" else "ellipsis")  # fmt: skip
    for message, part in shown:
        cycle = str(part.data.get("cycle_id", ""))
        table.add_row(str(message.seq), escape_id(part.name.removeprefix("om-")), escape_id(cycle[:12]),
                      _marker_time(part.data), escape(_marker_details(part.data)))  # fmt: skip
    return table

"""``obsmem threads`` and ``obsmem show``: what a store holds, read through the public Store contract.

``threads`` lists the store's threads (or one resource's) with their message count, what memory
observed and still has pending, and how many generations the observations went through. ``show``
draws one thread: its state, the active observations, the raw messages not yet observed, every
generation, and the lifecycle markers the cycles left on the messages. Nothing here writes to the store.

``show`` reads a bounded number of messages whatever the thread's length: the newest ``--tail``
unobserved ones (or, with ``--before SEQ``, the ``--tail`` messages before that seq: paging back),
the unobserved window up to :data:`WINDOW_READ` messages to count its tokens, and markers in the
newest :data:`MARKER_SCAN` messages. A thread of 100,000 messages is never read whole.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table

from obsmem import DataPart, InvalidInputError, Memory, MemoryConfig, Message, ObsmemError, Thread
from obsmem.cli.render import clip, counted, escape, escape_id, one_line, render_message
from obsmem.cli.stores import describe_store, fail, open_for_reading
from obsmem.storage import ObservationRecord, Store, lineage_key
from obsmem.storage.contract import newest_threads
from obsmem.storage.paging import all_threads

__all__ = ["register", "show", "threads"]

T = TypeVar("T")

#: Rows fetched per call when paging through threads and generations (the contract's default page).
PAGE = 100

#: At most this many unobserved messages are read to count the window's tokens (what ``pending``
#: shows): a longer window (a thread saved without memory running) is shown as "more than".
WINDOW_READ = 2000

#: ``show`` looks for markers in at most this many messages, newest first (from ``--before``).
MARKER_SCAN = 1000

#: The largest count ``show`` takes (``--tail``, ``--markers``, ``--generations``) and the largest
#: seq (``--before``): a store's integers are 64-bit, so a larger one is refused as a bad option
#: value, not met deep inside as an overflow.
MOST = 10**9
LAST_SEQ = 2**63 - 1

StoreOption = Annotated[
    str,
    typer.Option(help="The store: a SQLite file (path.db, sqlite:///rel.db, sqlite:////abs.db) or "
                      "postgresql://user@host/db."),  # fmt: skip
]


def _console() -> Console:
    """A console made per command, so it measures the terminal (or ``COLUMNS``) of this run; it
    draws no emoji codes (``:white_check_mark:`` in a message prints as written)."""
    return Console(emoji=False)


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
    pending: int | None


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

    async def window(self, memory: ThreadMemory) -> tuple[int | None, int | None]:
        """The window's tokens and messages; both None when it holds more than :data:`WINDOW_READ`
        messages (not counted: that would read the whole of a thread memory never observed)."""
        window = await self.store.list_messages(memory.thread.id, after_seq=memory.cursor, limit=WINDOW_READ + 1)
        if len(window) > WINDOW_READ:
            return None, None
        return await self._tokens(memory), len(window)

    async def _tokens(self, memory: ThreadMemory) -> int:
        scope = memory.head.scope if memory.head is not None else "thread"
        if scope not in self.readers:  # reads only; the store stays the caller's
            self.readers[scope] = Memory(self.store, config=MemoryConfig(scope=scope))
        return (await self.readers[scope].status(memory.thread.id)).window_tokens

    async def aclose(self) -> None:
        for reader in self.readers.values():
            await reader.aclose()


async def _newest_rows(
    store: Store, resource_id: str, *, limit: int, before: str | None
) -> tuple[list[ThreadRow], str | None]:
    """One page of a resource's threads most recently active first (``limit`` below ``before``,
    a previous page's mark) and the mark the next page starts below (None: none follows): one row
    more is read to tell."""
    try:
        page = await newest_threads(store, resource_id, limit=limit + 1, before=before)
    except InvalidInputError:
        raise fail("--before: not a mark this listing printed (copy it from its 'more threads follow' line).") from None
    rows = await _rows_of(store, page[:limit])
    return rows, page.marks[limit - 1] if len(page) > limit else None


async def _thread_rows(
    store: Store, resource_id: str | None, *, limit: int, after: str | None
) -> tuple[list[ThreadRow], bool]:
    """One page of threads (``limit`` after the thread ``after``, oldest first) and whether more
    follow: one row more is read to tell. A thread's generations are counted from its head (they
    are numbered from 0 and only ever deleted all together), none read."""
    def refused() -> typer.Exit:
        return fail(f"--after: no thread '{one_line(after or '')}' to continue after in this listing "
                    "(deleted since, or of another resource).")  # fmt: skip

    if resource_id is not None and after is not None:
        # the store pages from where ``after`` stands among all threads, whoever's it is: another
        # resource's thread would skip this one's threads before it
        named = await store.get_thread(after)
        if named is None or named.resource_id != resource_id:
            raise refused()
    try:
        if resource_id is None:
            page = await store.list_all_threads(limit=limit + 1, after=after)
        else:
            page = await store.list_threads(resource_id, limit=limit + 1, after=after)
    except ObsmemError:
        if after is None:
            raise
        raise refused() from None
    return await _rows_of(store, page[:limit]), len(page) > limit


async def _rows_of(store: Store, threads: list[Thread]) -> list[ThreadRow]:
    """Each thread's row: its memory, message count, generations, last update and pending tokens."""
    rows: list[ThreadRow] = []
    windows = _Windows(store)
    try:
        for thread in threads:
            memory = await _memory_of(store, thread)
            newest = await store.list_messages(thread.id, limit=1, newest_first=True)
            stamps = [thread.updated_at, *(m.created_at for m in newest)]
            if memory.head is not None:
                stamps.append(memory.head.updated_at)
            generations = memory.head.generation + 1 if memory.head else 0
            pending, _ = await windows.window(memory)
            rows.append(ThreadRow(memory, await store.count_messages(thread.id), generations, max(stamps), pending))
    finally:
        await windows.aclose()
    return rows


@dataclass(frozen=True, slots=True)
class ThreadView:
    memory: ThreadMemory
    count: int
    generations: list[ObservationRecord]
    pending: int | None
    #: The messages the tail table shows, oldest first: the newest unobserved ones, or with
    #: ``before`` the newest before that seq.
    shown: list[Message]
    #: The unobserved messages in all (None: more than :data:`WINDOW_READ`).
    unobserved: int | None
    #: Whether messages older than the first shown are left out.
    older: bool
    before: int | None
    markers: list[tuple[Message, DataPart]]
    #: How many messages the markers were looked for in; the seq of the oldest read when older
    #: ones were left unread (:data:`MARKER_SCAN`), else None.
    scanned: int
    scan_edge: int | None


async def _newest(store: Store, thread_id: str, *, after: int, before: int | None, limit: int) -> tuple[list[Message], bool]:
    """The newest ``limit`` messages with ``after < seq < before``, oldest first, and whether
    older ones are left out (one row more is read to tell)."""
    if limit <= 0:
        return [], bool(await store.list_messages(thread_id, after_seq=after, before_seq=before, limit=1))
    found = await store.list_messages(thread_id, after_seq=after, before_seq=before, limit=limit + 1, newest_first=True)
    return list(reversed(found[:limit])), len(found) > limit


async def _markers(
    store: Store, thread_id: str, *, before: int | None, limit: int
) -> tuple[list[tuple[Message, DataPart]], int, int | None]:
    """The newest ``limit`` markers (oldest first) in at most :data:`MARKER_SCAN` messages before
    ``before``, read newest first; how many messages were read, and the seq of the oldest read
    when :data:`MARKER_SCAN` left older ones unread (None when the thread's start was reached or
    ``limit`` markers were found)."""
    found: list[tuple[Message, DataPart]] = []
    scanned, edge = 0, before
    while limit and len(found) < limit:
        if scanned >= MARKER_SCAN:
            return list(reversed(found)), scanned, edge
        want = min(PAGE, MARKER_SCAN - scanned)
        page = await store.list_messages(thread_id, before_seq=edge, limit=want, newest_first=True)
        for message in page:
            found += [(message, part) for part in reversed(message.parts)
                      if isinstance(part, DataPart) and part.name.startswith("om-")]  # fmt: skip
        scanned += len(page)
        if len(page) < want or page[-1].seq is None:  # the thread's first message was read
            break
        edge = page[-1].seq
    return list(reversed(found[:limit])), scanned, None


async def _thread_view(
    store: Store, thread_id: str, *, tail: int, markers: int, before: int | None, newest: int
) -> ThreadView | None:
    """What ``show`` draws; ``newest``: how many generations (one more is read, to tell whether
    older ones are left out)."""
    thread = await store.get_thread(thread_id)
    if thread is None:
        return None
    memory = await _memory_of(store, thread)
    generations = await store.list_generations(memory.head.lineage, limit=newest + 1) if memory.head else []
    windows = _Windows(store)
    try:
        pending, unobserved = await windows.window(memory)
    finally:
        await windows.aclose()
    if before is None:
        shown, older = await _newest(store, thread.id, after=memory.cursor, before=None, limit=tail)
    else:
        shown, older = await _newest(store, thread.id, after=0, before=before, limit=tail)
    found, scanned, cut = await _markers(store, thread.id, before=before, limit=markers)
    return ThreadView(memory, await store.count_messages(thread.id), generations, pending, shown, unobserved,
                      older, before, found, scanned, cut)  # fmt: skip


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
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Show at most this many threads, oldest first.")] = 50,
    after: Annotated[str | None, typer.Option(metavar="THREAD", help="Show the threads after this one (the "
                                              "listing names it when more follow).")] = None,  # fmt: skip
    newest: Annotated[bool, typer.Option("--newest", help="Most recently active first (a new message moves a "
                                         "thread to the top); needs --resource.")] = False,  # fmt: skip
    before: Annotated[str | None, typer.Option(metavar="MARK", help="With --newest: show the threads below this "
                                               "mark (the listing names it when more follow).")] = None,  # fmt: skip
) -> None:
    """List the threads (all, or one resource's), a page at a time: messages, observed and pending
    tokens, generations, last update. Oldest first, or with --newest most recently active first."""
    mark: str | None = None
    if newest or before is not None:
        if resource is None:
            raise fail("--newest lists one resource's threads: name it with --resource.")
        if not newest or after is not None:
            raise fail("--before goes with --newest (and --after without it).")
        named = resource
        rows, mark = _read(open_for_reading(store), lambda opened: _newest_rows(opened, named, limit=limit, before=before))
        more = mark is not None
    else:
        rows, more = _read(open_for_reading(store), lambda opened: _thread_rows(opened, resource, limit=limit, after=after))
    console = _console()
    if not rows:
        whose = f"for resource '{escape_id(resource)}'" if resource is not None else "in this store"
        paged = after is not None or before is not None
        console.print(f"no {'more ' if paged else ''}threads {whose}", highlight=False)
        return
    title = "All threads" if resource is None else f"Threads of {escape_id(resource)}"
    if newest:
        title += ", most recently active first"
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
            _tokens(row.pending) if row.pending is not None else f"over {WINDOW_READ:,} msgs",
            str(row.generations), _when(row.updated),
        )  # fmt: skip
    console.print(table)
    if more:
        cursor = ["--newest", "--before", _shell_word(mark)] if mark is not None else [
            "--after", _shell_word(rows[-1].memory.thread.id)]
        again = ["obsmem threads", *(["--resource", _shell_word(resource)] if resource is not None else []),
                 "--limit", str(limit), *cursor]  # fmt: skip
        console.print(f"more threads follow: {escape_markup(' '.join(again))} (with your --store)",
                      soft_wrap=True, highlight=False)  # one line: a command to paste


def _shell_word(text: str) -> str:
    """``text`` as one word a POSIX shell (bash, zsh) reads back as ``text``, for a command the
    user pastes: quoted (``'a one'``, ``'f$(id)'``), and where it holds a control or invisible
    character, ANSI-C quoted with that character as ``\\xNN`` (ASCII), ``\\uNNNN`` or
    ``\\UNNNNNNNN``, never raw (bash reads ``\\xa0`` as one byte, ``\\u00a0`` as the character)."""
    if all(one_line(ch) == ch for ch in text):
        return shlex.quote(text)
    spelled = "".join(
        "\\\\" if ch == "\\" else "\\'" if ch == "'" else ch if one_line(ch) == ch
        else f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}" if ord(ch) < 0x10000
        else f"\\U{ord(ch):08x}"
        for ch in text
    )  # fmt: skip
    return f"$'{spelled}'"


def show(
    thread_id: Annotated[str, typer.Argument(metavar="THREAD", help="The thread id.")],
    store: StoreOption,
    tail: Annotated[int, typer.Option(min=0, max=MOST, help="Show at most this many messages: the newest unobserved ones "
                                                  "(with --before, the newest before that seq).")] = 20,
    markers: Annotated[int, typer.Option(min=0, max=MOST, help=f"Show at most this many markers, the newest (looked for in "
                                                     f"the newest {MARKER_SCAN:,} messages).")] = 30,
    before: Annotated[int | None, typer.Option(min=1, max=LAST_SEQ, metavar="SEQ", help="Page back: the --tail messages (observed "
                                               "or not) and the markers before this seq; each page's title names "
                                               "the seq to pass for the one before it.")] = None,
    generations: Annotated[int, typer.Option(min=0, max=MOST, help="Show at most this many generations, the newest.")] = 50,
    chars: Annotated[int, typer.Option(min=0, help="Cut each message shown after this many characters, saying how "
                                                   "many are left out (0: whole).")] = 2000,
) -> None:
    """Draw one thread: its observations, the raw unobserved tail, every generation and the markers.

    However long the thread, it reads a bounded number of messages: the newest --tail unobserved
    ones, and markers in the newest 1,000 messages. Older messages are shown a page at a time
    with --before SEQ (the table's title names the SEQ of the next older page)."""
    opened = open_for_reading(store)
    view = _read(opened, lambda reading: _thread_view(reading, thread_id, tail=tail, markers=markers, before=before,
                                                      newest=generations))  # fmt: skip
    if view is None:
        raise fail(f"no thread '{one_line(thread_id)}' in {describe_store(opened)}")
    console = _console()
    for table in (_state_table(view), _observations_table(view.memory.head), _tail_table(view, chars),
                  _generations_table(view.generations, generations), _markers_table(view, markers)):  # fmt: skip
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
    table.add_row("messages", f"{view.count:,} (observed up to seq {view.memory.cursor})")
    if head is None:
        table.add_row("memory", "nothing observed yet")
    else:
        table.add_row("lineage", f"{escape_id(head.lineage)} ({head.scope} scope), generation {head.generation}")
        table.add_row("head record", escape_id(head.id))
        table.add_row("observation tokens", f"{head.observation_tokens:,}")
        table.add_row("observed tokens", f"{head.total_tokens_observed:,}")
        table.add_row("pending tokens", _pending(view.pending))
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


def _pending(tokens: int | None) -> str:
    return f"{tokens:,}" if tokens is not None else f"not counted (over {WINDOW_READ:,} unobserved messages)"


def _older(view: ThreadView) -> str:
    """The hint naming the page of messages before those shown."""
    first = view.shown[0].seq if view.shown else view.before
    return f"--before {first}" if first is not None else "not shown"


def _cut(text: str, chars: int) -> str:
    """``text`` cut after ``chars`` characters (0: whole), saying how many it leaves out."""
    if not chars or len(text) <= chars:
        return text
    return f"{text[:chars]}… [{len(text) - chars:,} more characters: --chars 0 shows all]"


def _tail_table(view: ThreadView, chars: int) -> Table:
    shown = view.shown
    if view.before is not None:
        title = f"Messages before seq {view.before} (the newest {counted(len(shown), 'message')}"
        if view.older:
            title += f"; older: {_older(view)}"
    else:
        many = counted(view.unobserved, "message") if view.unobserved is not None else f"over {WINDOW_READ:,} messages"
        title = f"Unobserved tail ({many} after seq {view.memory.cursor}"
        if view.older:
            left = f"{view.unobserved - len(shown)} older" if view.unobserved is not None else "older"
            title += f"; showing the newest {len(shown)}; {left}: {_older(view)}"
    table = Table(title=title + ")")
    for column in ("seq", "role", "time", "content"):
        table.add_column(column, justify="right" if column == "seq" else "left",
                         overflow="fold" if column == "content" else "ellipsis")  # fmt: skip
    for message in shown:
        content = escape(_cut(render_message(message), chars))
        table.add_row(str(message.seq), message.role, _when(message.created_at), content)
    return table


def _generations_table(generations: list[ObservationRecord], limit: int) -> Table:
    title = f"Generations ({len(generations)})"
    if len(generations) > limit:
        generations = generations[:limit]
        title = f"Generations (the newest {limit}; older ones not shown: --generations N)"
    table = Table(title=title,
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
                return escape_id(clip(value, 20))  # no time: data, shown as such
    return ""


def _marker_details(data: dict[str, Any]) -> str:
    shown = [
        f"{key}={value}" for key, value in data.items()
        if key not in _MARKER_HIDDEN and not key.endswith("_at")
        and isinstance(value, (str, int, float, bool))
    ]  # fmt: skip
    return clip(", ".join(shown), 200)


def _markers_table(view: ThreadView, limit: int) -> Table:
    found = view.markers
    if not limit:
        title = "Markers (none asked for: --markers 0"
    elif view.scan_edge is not None:
        where = f" before seq {view.before}" if view.before is not None else ""
        title = (f"Markers ({len(found)} in the newest {counted(view.scanned, 'message')}{where}; "
                 f"older: --before {view.scan_edge}")
    else:
        title = f"Markers ({len(found)}"
        if len(found) == limit:
            title += ", the newest"
    table = Table(title=title + ")")
    for column in ("seq", "marker", "cycle", "time", "details"):
        table.add_column(column, justify="right" if column == "seq" else "left", no_wrap=column != "details",
                         overflow="fold" if column == "details" else "ellipsis")  # fmt: skip
    for message, part in found:
        cycle = str(part.data.get("cycle_id", ""))
        table.add_row(str(message.seq), escape_id(part.name.removeprefix("om-")), escape_id(cycle[:12]),
                      _marker_time(part.data), escape(_marker_details(part.data)))  # fmt: skip
    return table

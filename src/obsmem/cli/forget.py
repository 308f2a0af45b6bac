"""``obsmem forget`` and ``obsmem delete-resource``: remove data everywhere the store keeps it.

Both print the resolved store (like every command), say what they are about to remove and ask
for confirmation unless ``--yes``; the summary (counts per kind) goes to stdout. See
:meth:`obsmem.Memory.forget` and :meth:`obsmem.Memory.delete_resource` for what is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

import typer
from rich.console import Console

from obsmem import Memory, ObsmemError
from obsmem.knowledge import Knowledge
from obsmem.cli.render import counted, escape, escape_id, one_line
from obsmem.cli.stores import KnowledgeOption, describe_store, err_console, fail, open_for_reading, open_knowledge
from obsmem.storage import Lease, Store, default_store_path, leasing

__all__ = ["delete_resource", "forget", "register"]

console = Console(emoji=False)

StoreOption = Annotated[
    str | None,
    typer.Option(help="The store: a SQLite file (path.db, sqlite:///rel.db, sqlite:////abs.db) or "
                      "postgresql://user@host/db. Default: the default SQLite file."),  # fmt: skip
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def register(app: typer.Typer) -> None:
    """Add ``forget`` and ``delete-resource`` to ``app``."""
    app.command("forget")(forget)
    app.command("delete-resource")(delete_resource)


def _open(store: str | None) -> Store:
    """The store to erase in; a SQLite file that does not exist is refused (opening it would
    create an empty one, and a typo in the path would report an erase that never happened)."""
    return open_for_reading(store if store is not None else str(default_store_path()))


@contextlib.asynccontextmanager
async def _knowledge(url: str | None) -> AsyncIterator[Knowledge | None]:
    if url is None:
        yield None
        return
    async with open_knowledge(url, actor="obsmem-cli", existing=True) as graph:
        yield graph


#: How long an erase from the command line keeps trying to truncate the SQLite write-ahead log
#: while another connection's read holds it (a one-shot command has no later write to retry at).
WAL_RETRY_S = 10.0


async def _log_truncated(store: Store) -> bool:
    """After an erase: whether the SQLite store's ``-wal`` file no longer holds the erased pages
    (True for other stores), retrying for up to :data:`WAL_RETRY_S` while a reader keeps it."""
    truncate = getattr(store, "truncate_wal", None)
    if truncate is None:
        return True
    deadline = asyncio.get_running_loop().time() + WAL_RETRY_S
    while not await truncate():
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.5)
    return True


def _warn_log_kept(store: Store, truncated: bool) -> None:
    if not truncated:
        err_console.print(
            f"[yellow]warning:[/yellow] another connection is reading {escape(describe_store(store))}: its "
            "write-ahead log (the -wal file) still holds the erased text until that read ends and a process "
            "writes to the file, or every connection closes. Run the command again then to clear it now.",
            soft_wrap=True, highlight=False,
        )


def _confirm(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question, default=False, err=True):
        raise fail("nothing was changed")


def _summary(what: str, counts: dict[str, int]) -> None:
    console.print(f"{escape_id(what)}: " + ", ".join(counted(n, kind) for kind, n in counts.items()),
                  soft_wrap=True, highlight=False)  # fmt: skip


def forget(
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The text to forget (case-sensitive; a message text part holding it is removed whole).")],
    thread: Annotated[str | None, typer.Option("--thread", "-t", help="Only in this thread.")] = None,
    resource: Annotated[str | None, typer.Option("--resource", "-r", help="Only in this resource.")] = None,
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    yes: YesOption = False,
) -> None:
    """Forget every occurrence of VALUE: messages, tool results (replaced by "\\[forgotten]"),
    observation lines of the live record and every older generation, markers, working memory;
    with --knowledge, every knowledge record, node and audit event holding it (the value is then
    refused if captured again)."""
    if not value.strip():
        raise fail("VALUE must not be empty or blank: name the text to forget")
    opened = _open(store)
    where = f"thread '{thread}'" if thread else f"resource '{resource}'" if resource else "every thread"
    _confirm(f"Forget every occurrence of {value!r} in {one_line(where)} of {one_line(describe_store(opened))}?", yes)

    async def run() -> tuple[dict[str, int], bool, bool]:
        async with opened, _knowledge(knowledge) as graph:
            memory = Memory(opened, knowledge=graph)
            try:
                counts = await memory.forget(value, thread_id=thread, resource_id=resource)
                # a resource id with no thread is most likely a typo ('alice ' for 'alice'): said below
                unknown = resource is not None and thread is None and not await opened.list_threads(resource, limit=1)
                return counts, await _log_truncated(opened), unknown
            finally:
                await memory.aclose()

    try:
        counts, truncated, unknown = asyncio.run(run())
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    _summary(f"forgot {value!r} in {where}", counts)
    _warn_log_kept(opened, truncated)
    if unknown and not any(counts.values()):  # (with --knowledge, its knowledge may have held the value)
        console.print(f"[yellow]note:[/yellow] the store holds no thread of resource '{escape_id(resource or '')}' "
                      "(check the id)", soft_wrap=True, highlight=False)  # fmt: skip


#: How often a delete that was first re-reads whether the later ones it saw have ended, and how
#: long it waits for them at most before it refuses as if they were first (one stuck must not
#: hold the command for ever).
LATER_POLL_S = 0.2
LATER_WAIT_S = 60.0


async def _first_or_earlier(store: Store, resource: str, memory: Memory, mine: str) -> list[Lease]:
    """Whether this run's delete (its erasing lease ``mine``, just taken) goes ahead: the other
    deletes of ``resource`` under way that were marked before it (an empty list: it goes).

    Marks are ordered by their fencing tokens (store-wide, rising in the order they are taken,
    whatever the processes' clocks): the first of the deletes marked at the same instant goes
    ahead and the others refuse, instead of each refusing for the others'. One marked later that
    is still under way (another command, about to refuse; an application's delete, which does
    not look) is waited for first, so two deletes never run side by side; still there after
    :data:`LATER_WAIT_S`, it is reported as under way."""
    own = [lease for lease in await store.list_leases(mine) if lease.key == mine]
    token = own[0].token if own else None
    told = False
    deadline = asyncio.get_running_loop().time() + LATER_WAIT_S
    while True:
        others = await leasing.erasing_elsewhere(store, resource, clock=memory.clock, own=mine)
        if token is None or asyncio.get_running_loop().time() >= deadline:
            return others  # (our mark gone, expired while the store stalled; or waited long enough)
        earlier = [lease for lease in others if lease.token < token]
        if earlier or not others:
            return earlier
        if not told:
            told = True
            holders = ", ".join(sorted({one_line(lease.owner) for lease in others}))
            err_console.print(f"waiting for another delete of resource '{escape_id(resource)}', begun just after "
                              f"this one ({escape_id(holders)}), to end", soft_wrap=True, highlight=False)  # fmt: skip
        await asyncio.sleep(LATER_POLL_S)


def delete_resource(
    resource: Annotated[str, typer.Argument(metavar="RESOURCE", help="The resource (user) id to delete.")],
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    yes: YesOption = False,
) -> None:
    """Delete a resource: its threads and messages, every observation generation, working memory,
    queued work and leases; with --knowledge, its knowledge scope too. Nothing is deleted while
    another delete of the resource (from this command or the REST API) is under way."""
    opened = _open(store)
    _confirm(f"Delete resource '{one_line(resource)}' and everything stored for it in "
             f"{one_line(describe_store(opened))}?", yes)

    async def run() -> tuple[dict[str, int], bool, int] | list[Lease]:
        async with opened, _knowledge(knowledge) as graph:
            memory = Memory(opened, knowledge=graph)
            try:
                # marked under way while it runs: another run then tells it from a cut-off one
                async with leasing.erasing(opened, resource, clock=memory.clock) as mine:
                    earlier = await _first_or_earlier(opened, resource, memory, mine)
                    if earlier:
                        return earlier
                    # threads whose rows a delete cut off midway (its process died) had taken already
                    unfinished = len(await memory.unfinished_deletes(resource))
                    counts = await memory.delete_resource(resource)
                return counts, await _log_truncated(opened), unfinished  # (its lease's row gone first)
            finally:
                await memory.aclose()

    try:
        done = asyncio.run(run())
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    if isinstance(done, list):
        holders = ", ".join(sorted({one_line(lease.owner) for lease in done}))
        raise fail(
            f"another delete of resource '{one_line(resource)}' is under way ({holders}); this run "
            "deleted nothing. Run it again once that one is done (a delete whose process was killed "
            f"stops counting as under way within {leasing.ERASING_TTL_S:.0f} s; the next run finishes it)."
        )
    counts, truncated, unfinished = done
    _summary(f"deleted resource '{resource}'", counts)
    _warn_log_kept(opened, truncated)
    if unfinished:
        console.print(f"[yellow]note:[/yellow] finished the delete of {counted(unfinished, 'thread')} cut off earlier "
                      "(its process stopped midway)", soft_wrap=True, highlight=False)  # fmt: skip
    elif not counts.get("threads"):
        console.print(f"[yellow]note:[/yellow] the store holds no thread of resource '{escape_id(resource)}' "
                      "(check the id)", soft_wrap=True, highlight=False)  # fmt: skip

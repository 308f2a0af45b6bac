"""``obsmem queue``: what the workers have to do, and the work that kept failing.

``obsmem queue --store URL`` prints the queue's depth by kind (waiting, due now, claimed,
expired claims, the oldest item's age), the dead-letter table (each buried item with its
attempts and last error) and the leases (buffers in flight, and expired ones a dead process
left); ``--json`` prints the same as one JSON document. ``obsmem queue retry ID`` queues a
dead-lettered item again with fresh attempts.

The listing is bounded: at most ``--limit`` (default :data:`DEFAULT_LIMIT`) dead-lettered
items, the newest, and as many leases (by key), each list followed by a line saying how many
more there are; the totals count them all (``--json``: ``dead_total``, ``leases_total``,
``leases_expired``). Only what is listed is read: the depth by kind and the totals are counted
by the store (:func:`~obsmem.storage.contract.count_work`, ``count_dead_work``,
``count_leases``: SQL ``COUNT``/``MIN``), the lists are pages of ``--limit`` rows
(``dead_work_page``, ``lease_page``). A store without those methods is read whole, as before.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from obsmem import InvalidInputError, ObsmemError
from obsmem.cli.groups import HELP_OPTIONS
from obsmem.cli.render import one_line
from obsmem.cli.stores import JsonGroup, fail, json_errors, open_for_reading
from obsmem.redact import redact_secrets
from obsmem.storage import Store
from obsmem.storage.contract import count_dead_work, count_leases, count_work, dead_work_page, lease_page

__all__ = ["DEFAULT_LIMIT", "queue_app", "queue_snapshot", "register"]

#: How many dead-lettered items (the newest) and leases ``obsmem queue`` lists by default.
DEFAULT_LIMIT = 50
#: The largest ``--limit`` (as ``show``'s counts).
MOST = 10**9

queue_app = typer.Typer(
    help="The work queue: depth by kind and age, claims, dead-lettered work, leases.",
    context_settings=HELP_OPTIONS, invoke_without_command=True, add_completion=False, cls=JsonGroup,
)  # fmt: skip

StoreOption = Annotated[str | None, typer.Option(help="The shared store (a SQLite file or a postgresql:// URL).")]


def register(app: typer.Typer) -> None:
    """Add ``queue`` (and ``queue retry``) to ``app``."""
    app.add_typer(queue_app, name="queue")


async def queue_snapshot(
    store: Store, now: datetime | None = None, *, limit: int | None = DEFAULT_LIMIT
) -> dict[str, Any]:
    """The queue as a document: ``kinds`` (per kind: waiting, due, claimed, expired_claims,
    oldest_age_s), ``dead`` (the newest ``limit`` buried items, by id; ``dead_total`` of them in
    all), ``leases`` (the first ``limit`` by key: key, owner, expires_in_s; ``leases_total`` and
    ``leases_expired`` count them all). ``limit=None``: every one."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"queue_snapshot: limit must be a whole number of at least 1, got {limit!r}.")
    now = now or datetime.now(UTC)
    kinds = {
        counted.kind: {"waiting": counted.waiting, "due": counted.due, "claimed": counted.claimed,
                       "expired_claims": counted.expired_claims,
                       "oldest_age_s": max(0.0, round((now - counted.oldest_enqueued_at).total_seconds(), 1))}
        for counted in await count_work(store, now=now)
    }  # fmt: skip
    if limit is None:
        buried = await store.list_dead_work()
        held = await store.list_leases()
        dead_total, leases_total = len(buried), len(held)
        leases_expired = sum(1 for lease in held if lease.is_expired(now))
    else:
        buried = list(reversed(await dead_work_page(store, limit=limit)))  # the newest, by id
        held = await lease_page(store, limit=limit)
        dead_total = await count_dead_work(store)
        leases_total, leases_expired = await count_leases(store, now=now)
    dead = [
        {"id": d.id, "kind": d.kind, "target": d.target, "attempts": d.attempts,
         "failed_at": d.failed_at.isoformat(), "last_error": redact_secrets(d.last_error or "")}
        for d in buried
    ]  # fmt: skip
    leases = [
        {"key": lease.key, "owner": lease.owner, "expires_in_s": round((lease.expires_at - now).total_seconds(), 1)}
        for lease in held
    ]
    return {
        "kinds": kinds, "dead": dead, "dead_total": dead_total, "leases": leases, "leases_total": leases_total,
        "leases_expired": leases_expired,
    }  # fmt: skip


def _more(total: int, shown: int, which: str) -> None:
    if total > shown:
        typer.echo(f"  … and {total - shown} more ({which}--limit N lists more)")


def _show(snapshot: dict[str, Any]) -> None:
    kinds: dict[str, dict[str, Any]] = snapshot["kinds"]
    waiting = sum(row["waiting"] for row in kinds.values())
    claimed = sum(row["claimed"] for row in kinds.values())
    typer.echo(f"queue: {waiting} waiting, {claimed} claimed")
    if kinds:
        typer.echo(f"  {'kind':<10} {'waiting':>7} {'due':>5} {'claimed':>7} {'expired':>7} {'oldest':>9}")
        for kind, row in sorted(kinds.items()):
            typer.echo(f"  {one_line(kind):<10} {row['waiting']:>7} {row['due']:>5} {row['claimed']:>7} "
                       f"{row['expired_claims']:>7} {row['oldest_age_s']:>8.1f}s")  # fmt: skip
    typer.echo(f"dead-letter: {snapshot['dead_total']}")
    _more(snapshot["dead_total"], len(snapshot["dead"]), "older, not shown; ")
    for dead in snapshot["dead"]:
        typer.echo(f"  {dead['id']:>6} {one_line(dead['kind']):<10} {one_line(dead['target'])}  "
                   f"attempts={dead['attempts']}  failed_at={dead['failed_at']}  "
                   f"last error: {one_line(dead['last_error']) or '-'}")  # fmt: skip
    leases = snapshot["leases"]
    typer.echo(f"leases: {snapshot['leases_total']} ({snapshot['leases_expired']} expired)")
    for lease in leases:
        state = "expired" if lease["expires_in_s"] <= 0 else f"expires in {lease['expires_in_s']:.1f}s"
        typer.echo(f"  {one_line(lease['key'])}  {one_line(lease['owner'])}  {state}")
    _more(snapshot["leases_total"], len(leases), "not shown; ")


def _run_on(url: str, work: Any) -> Any:
    store = open_for_reading(url)

    async def run() -> Any:
        async with store:
            return await work(store)

    try:
        return asyncio.run(run())
    except ObsmemError as exc:
        raise fail(str(exc), error=exc) from exc


@queue_app.callback()
def queue(
    ctx: typer.Context,
    store: StoreOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
    limit: Annotated[int, typer.Option(min=1, max=MOST, help="List at most this many dead-lettered items "
                                       "(the newest) and leases; the totals count them all.")] = DEFAULT_LIMIT,
) -> None:
    """Show the work queue: depth by kind and age, claims, dead-lettered work and leases. With
    ``--json``, a failure is a JSON document too (``{"error": …}``, exit status 1)."""
    if ctx.invoked_subcommand is not None:
        return
    with json_errors(as_json):
        if store is None:
            raise fail("pass --store URL (the store the workers share)", argument="--store")
        snapshot = _run_on(store, lambda opened: queue_snapshot(opened, limit=limit))
    if as_json:
        typer.echo(json.dumps(snapshot, indent=2))
    else:
        _show(snapshot)


@queue_app.command()
def retry(
    dead_id: Annotated[int, typer.Argument(metavar="ID", min=1, max=2**63 - 1,  # (a store's ids are 64-bit)
                                           help="The dead-lettered item's id (obsmem queue).")],
    store: StoreOption = None,
) -> None:
    """Queue a dead-lettered item again, due now, with fresh attempts."""
    if store is None:
        raise fail("pass --store URL (the store the workers share)")

    async def work(opened: Store) -> Any:
        return await opened.retry_dead_work(dead_id, now=datetime.now(UTC))

    item = _run_on(store, work)
    if item is None:
        raise fail(f"no dead-lettered item {dead_id} (obsmem queue lists them)")
    typer.echo(f"queued again: {one_line(item.kind)} work on {one_line(item.target)} (item {item.id})")

"""``obsmem usage``: what memory's model calls cost, from the store's cost ledger.

``obsmem usage --store URL`` prints one line per (UTC day, role, model) with calls, failures,
input / cached / cache-write / output tokens, mean latency and the estimated cost, then the total;
``--thread ID`` or ``--resource ID`` narrows it, ``--since`` / ``--until`` bound the days (a date
``2025-03-01`` or an ISO datetime; ``until`` is exclusive), ``--by role|model|day`` sums over the
other keys, ``--json`` prints one JSON document. A thin shell over :meth:`obsmem.Memory.usage`;
``--config`` (a ``MemoryConfig.snapshot()`` JSON) adds its ``prices``. Costs are estimates from
the price table as of :data:`obsmem.profiles.PRICES_AS_OF`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from obsmem import Memory, MemoryConfig, ObsmemError, UsageReport, UsageRow
from obsmem.cli.render import escape_id, one_line
from obsmem.cli.stores import JsonCommand, err_console, fail, json_errors, open_for_reading
from obsmem.profiles import PRICES_AS_OF

__all__ = ["register", "usage_document"]


def register(app: typer.Typer) -> None:
    """Add ``usage`` to ``app``."""
    app.command(name="usage", cls=JsonCommand)(usage)


def _when(text: str | None, option: str) -> datetime | date | None:
    if text is None:
        return None
    try:
        if len(text.strip()) == 10:
            return date.fromisoformat(text.strip())
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise fail(f"{option} {text!r} is not a date (2025-03-01) or an ISO datetime (2025-03-01T12:00:00Z)",
                   argument=option) from None  # fmt: skip
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _utc(value: datetime | date) -> datetime:
    """A ``--since`` / ``--until`` bound as an instant (a day: its UTC midnight)."""
    return value if isinstance(value, datetime) else datetime(value.year, value.month, value.day, tzinfo=UTC)


def _rows(report: UsageReport, by: str | None) -> tuple[UsageRow, ...]:
    return report.rows if by is None else report.by(by)  # type: ignore[arg-type]


def usage_document(report: UsageReport, by: str | None = None, **filters: Any) -> dict[str, Any]:
    """The report as ``obsmem usage --json`` prints it: the filter, the rows, the total."""
    return {
        "filter": {k: v for k, v in filters.items() if v is not None},
        "prices_as_of": PRICES_AS_OF,
        "by": by or "day,role,model",
        "rows": [dataclasses.asdict(row) for row in _rows(report, by)],
        "total": dataclasses.asdict(report.total()),
    }


def _line(row: UsageRow, label: str) -> str:
    mean = row.latency_s / row.calls if row.calls else 0.0
    cost = f"${row.cost_usd:,.4f}" + (f" (+{row.unpriced_calls} unpriced)" if row.unpriced_calls else "")
    return (f"{label:<48} {row.calls:>6} {row.failed:>6} {row.input_tokens:>11,} {row.cached_input_tokens:>11,} "
            f"{row.cache_write_tokens:>9,} {row.output_tokens:>10,} {mean:>8.2f}s  {cost}")  # fmt: skip


def usage(
    store: Annotated[str | None, typer.Option(help="The store (a SQLite file or a postgresql:// URL).")] = None,
    thread: Annotated[str | None, typer.Option("--thread", metavar="ID", help="Only this thread's calls.")] = None,
    resource: Annotated[str | None, typer.Option("--resource", metavar="ID", help="Only this resource's calls.")] = None,
    since: Annotated[str | None, typer.Option(metavar="DATE", help="From this UTC day or instant (inclusive).")] = None,
    until: Annotated[str | None, typer.Option(metavar="DATE", help="Before this UTC day or instant.")] = None,
    by: Annotated[
        Literal["role", "model", "day"] | None, typer.Option(help="Sum over the other keys: role, model or day.")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="JSON of MemoryConfig.snapshot(), for its prices.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Show what memory's model calls cost (the cost ledger), per day, role and model. With
    --json, a failure is a JSON document too ({"error": …}, exit status 1)."""
    with json_errors(as_json):
        _usage(store, thread, resource, since, until, by, config, as_json)


def _usage(
    store: str | None, thread: str | None, resource: str | None, since: str | None, until: str | None,
    by: str | None, config: Path | None, as_json: bool,
) -> None:  # fmt: skip
    if store is None:
        raise fail("pass --store URL (the store memory writes to)", argument="--store")
    memory_config = None
    if config is not None:
        try:
            memory_config = MemoryConfig.from_snapshot(json.loads(config.read_text()))
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
            raise fail(f"cannot read the memory config {config}: {exc}", argument="--config") from None
    start, end = _when(since, "--since"), _when(until, "--until")
    if start is not None and end is not None and _utc(start) >= _utc(end):
        raise fail(f"--since {since} is not before --until {until}: no call falls in that window (--until is exclusive)",
                   argument="--since")  # fmt: skip
    opened = open_for_reading(store)

    async def read() -> tuple[UsageReport, str | None]:
        async with opened:
            memory = Memory(opened, config=memory_config)
            try:
                report = await memory.usage(thread_id=thread, resource_id=resource, since=start, until=end)
                # an empty report for an id the store does not hold is most likely a typo: said below
                unknown = None
                if not report.rows and thread is not None and await opened.get_thread(thread) is None:
                    unknown = f"thread '{escape_id(thread)}'"
                elif not report.rows and resource is not None and not await opened.list_threads(resource, limit=1):
                    unknown = f"thread of resource '{escape_id(resource)}'"
                return report, unknown
            finally:
                await memory.aclose()

    try:
        report, unknown = asyncio.run(read())
    except ObsmemError as exc:
        raise fail(str(exc), error=exc) from exc
    if unknown is not None:  # on stderr: stdout stays the report
        err_console.print(f"[yellow]note:[/yellow] the store holds no {unknown} (check the id)",
                          soft_wrap=True, highlight=False)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(usage_document(report, by, thread_id=thread, resource_id=resource, since=since,
                                             until=until), indent=2))  # fmt: skip
        return
    header = f"{'day / role / model':<48} {'calls':>6} {'failed':>6} {'input':>11} {'cached':>11} {'written':>9} " \
             f"{'output':>10} {'latency':>9}  cost"  # fmt: skip
    typer.echo(header)
    for row in _rows(report, by):
        label = one_line(" / ".join(part for part in (row.day, row.role, row.model) if part is not None))
        typer.echo(_line(row, label))
    typer.echo(_line(report.total(), "total"))
    typer.echo(f"costs are estimates from the price table as of {PRICES_AS_OF} (and --config prices)")

"""The cost ledger: one row per memory model call, written off the turn's path.

The rows (``model_calls`` in SQLite and PostgreSQL) are :class:`~obsmem.calls.ModelCall`
records: role, model, kind, operation, thread and resource ids, token counts, latency, outcome.
No text of any message is ever stored, so a row is bounded (a few hundred bytes) and forgetting
a value never has to look into the ledger; deleting a thread or a resource deletes its rows
(:meth:`Store.delete_model_calls <obsmem.storage.contract.Store.delete_model_calls>`).

:class:`LedgerWriter` is the sink a :class:`~obsmem.models.metered.MeteredModel` reports to. It
only appends to a buffer in the model call's path; one owned background task (started with the
owner's ``spawn``, so ``Memory.settled()`` waits for it) writes the buffer to the store in
batches. :meth:`LedgerWriter.flush` writes what is left (``Memory.aclose()`` calls it before the
store closes). A failed write is logged and its rows dropped: the ledger never fails memory work.
"""

from __future__ import annotations

import asyncio
import logging
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from obsmem.calls import ModelCall, UsageReport, UsageRow
from obsmem.clock import Clock
from obsmem.config import BudgetConfig
from obsmem.errors import InvalidInputError
from obsmem.profiles import ModelPrice, estimate_cost

__all__ = [
    "LedgerBudget",
    "LedgerWriter",
    "call_day",
    "check_window",
    "insert_sql",
    "micros",
    "sum_calls",
    "usage_report",
    "usage_sql",
]

log = logging.getLogger("obsmem.ledger")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: At most this many rows per store write.
BATCH = 500
#: A refused batch written call by call gives up after this many refusals in a row with none
#: written (the store is down, not one call unstorable): a few store calls, not one per call.
_DOWN_AFTER = 3
#: Calls buffered beyond this many while the store is slow are dropped (and logged), so a store
#: that stopped answering cannot make the buffer grow without bound.
MAX_BUFFERED = 50_000


def micros(value: datetime) -> int:
    """``value`` as integer microseconds since the epoch (rows are filtered by this column)."""
    return (value - _EPOCH) // timedelta(microseconds=1)


def call_day(call: ModelCall) -> str:
    """The UTC day (``YYYY-MM-DD``) a call started on: the ledger's grouping key."""
    return call.started_at.astimezone(UTC).strftime("%Y-%m-%d")


def check_window(since: datetime | None, until: datetime | None) -> None:
    for name, value in (("since", since), ("until", until)):
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidInputError(f"Invalid {name}: expected a timezone-aware datetime, got {value!r}",
                                    argument=name)


def check_target(thread_id: str | None, resource_id: str | None) -> None:
    if (thread_id is None) == (resource_id is None):
        raise InvalidInputError("Deleting ledger rows needs exactly one of thread_id and resource_id",
                                argument="thread_id")


def matches(
    call: ModelCall, thread_id: str | None, resource_id: str | None, since: datetime | None, until: datetime | None
) -> bool:
    """Whether ``call`` passes a :meth:`usage_rows` filter (for stores without SQL)."""
    return (
        (thread_id is None or call.thread_id == thread_id)
        and (resource_id is None or call.resource_id == resource_id)
        and (since is None or call.started_at >= since)
        and (until is None or call.started_at < until)
    )


def sum_calls(calls: Iterable[ModelCall]) -> list[UsageRow]:
    """Calls summed per (day, role, model), ordered by them: what the SQL stores' GROUP BY returns."""
    groups: dict[tuple[str, str, str], UsageRow] = {}
    for call in calls:
        key = (call_day(call), call.role, call.model)
        row = UsageRow(
            day=key[0], role=key[1], model=key[2], calls=1, failed=int(call.outcome != "ok"),
            input_tokens=call.input_tokens, cached_input_tokens=call.cached_input_tokens,
            cache_write_tokens=call.cache_write_tokens, output_tokens=call.output_tokens, latency_s=call.latency_s,
        )
        groups[key] = groups[key] + row if key in groups else row
    return [groups[key] for key in sorted(groups)]


# -- SQL shared by the SQLite and PostgreSQL adapters (``ph`` is the placeholder: ? or %s) ----------

_COLUMNS = (
    "started_at", "started_us", "day", "role", "model", "kind", "operation", "thread_id", "resource_id",
    "input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "latency_s", "outcome",
    "error_type", "finish_reason",
)


def insert_sql(ph: str) -> str:
    return f"INSERT INTO model_calls ({', '.join(_COLUMNS)}) VALUES ({', '.join([ph] * len(_COLUMNS))})"


def insert_params(call: ModelCall) -> tuple[Any, ...]:
    return (
        call.started_at.isoformat(), micros(call.started_at), call_day(call), call.role, call.model, call.kind,
        call.operation, call.thread_id, call.resource_id, int(call.input_tokens), int(call.cached_input_tokens),
        int(call.cache_write_tokens), int(call.output_tokens), float(call.latency_s), call.outcome,
        call.error_type, call.finish_reason,
    )


def usage_sql(
    ph: str, thread_id: str | None, resource_id: str | None, since: datetime | None, until: datetime | None
) -> tuple[str, list[Any]]:
    """The GROUP BY query for ``usage_rows`` and its parameters."""
    where: list[str] = []
    params: list[Any] = []
    for clause, value in (
        (f"thread_id = {ph}", thread_id),
        (f"resource_id = {ph}", resource_id),
        (f"started_us >= {ph}", None if since is None else micros(since)),
        (f"started_us < {ph}", None if until is None else micros(until)),
    ):
        if value is not None:
            where.append(clause)
            params.append(value)
    sql = (
        "SELECT day, role, model, COUNT(*), SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END), SUM(input_tokens), "
        "SUM(cached_input_tokens), SUM(cache_write_tokens), SUM(output_tokens), SUM(latency_s) FROM model_calls"
        + (f" WHERE {' AND '.join(where)}" if where else "")
        + " GROUP BY day, role, model ORDER BY day, role, model"
    )
    return sql, params


def usage_row(row: Sequence[Any]) -> UsageRow:
    day, role, model, calls, failed, inp, cached, written, out, latency = row
    return UsageRow(
        day=str(day), role=str(role), model=str(model), calls=int(calls), failed=int(failed),
        input_tokens=int(inp), cached_input_tokens=int(cached), cache_write_tokens=int(written),
        output_tokens=int(out), latency_s=float(latency),
    )


def delete_sql(ph: str, thread_id: str | None, resource_id: str | None) -> tuple[str, tuple[str]]:
    check_target(thread_id, resource_id)
    if thread_id is not None:
        return f"DELETE FROM model_calls WHERE thread_id = {ph}", (thread_id,)
    assert resource_id is not None
    return f"DELETE FROM model_calls WHERE resource_id = {ph}", (resource_id,)


def calls_of_deleted_threads_dropped(
    get_thread: Callable[[str], Awaitable[object | None]], delete: Callable[..., Awaitable[int]],
) -> Callable[[Sequence[ModelCall]], Awaitable[None]]:
    """A :class:`LedgerWriter` ``after_write`` check: the rows just written for a thread that is
    gone now are deleted (``delete(thread_id=...)``). A call that ended after its thread (or user)
    was deleted, by another process or while it ran, would otherwise leave a row naming them. It
    runs after the write, and an eraser deletes the thread before its ledger rows, so whichever
    comes last removes the row."""

    async def check(calls: Sequence[ModelCall]) -> None:
        for thread_id in dict.fromkeys(c.thread_id for c in calls if c.thread_id is not None):
            if await get_thread(thread_id) is None:
                await delete(thread_id=thread_id)

    return check


class LedgerWriter:
    """Buffers :class:`ModelCall` records and writes them to a store in the background.

    ``spawn(coroutine, name)`` starts an owned task (``BackgroundWork.spawn``); it may return
    None once its owner is closed, and the calls then wait for :meth:`flush`. ``write`` is the
    store's ``record_model_calls``. Calls the ledger does not keep: an ``offline`` model's (it
    makes no model call) never reach here, since only metered models report.
    """

    def __init__(
        self,
        write: Callable[[Sequence[ModelCall]], Coroutine[Any, Any, int]],
        spawn: Callable[[Coroutine[Any, Any, None], str], object] | None = None,
        *,
        after_write: Callable[[Sequence[ModelCall]], Awaitable[object]] | None = None,
    ) -> None:
        self._write = write
        self._spawn = spawn
        self._after_write = after_write
        self._buffer: list[ModelCall] = []
        self._in_flight: list[ModelCall] = []
        self._writing = False
        self.written = 0
        self.dropped = 0
        self._listeners: list[Callable[[ModelCall], None]] = []

    def listen(self, listener: Callable[[ModelCall], None]) -> None:
        """Also hear every call as it is recorded (the budget's running sums)."""
        self._listeners.append(listener)

    def __call__(self, call: ModelCall) -> None:
        """The sink: buffer ``call`` and make sure a writer task is on its way (never raises)."""
        for listener in self._listeners:
            try:
                listener(call)
            except Exception:
                log.exception("a ledger listener failed")
        if len(self._buffer) >= MAX_BUFFERED:
            self.dropped += 1
            log.warning("obsmem ledger: buffer full (%d calls), a call was not recorded", MAX_BUFFERED)
            return
        self._buffer.append(call)
        if self._writing or self._spawn is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): flush() writes it later
            return
        self._writing = True
        if self._spawn(self._drain(), "ledger-write") is None:
            self._writing = False

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def unwritten(self) -> list[ModelCall]:
        """The calls recorded but not yet known written (buffered, or in a write under way)."""
        return [*self._in_flight, *self._buffer]

    async def _drain(self) -> None:
        try:
            await self.flush()
        finally:
            self._writing = False

    async def flush(self) -> None:
        """Write every buffered call now (failures are logged and the rows dropped)."""
        while self._buffer:
            batch, self._buffer = self._buffer[:BATCH], self._buffer[BATCH:]
            self._in_flight.extend(batch)
            try:
                self.written += await self._write(batch)
            except asyncio.CancelledError:
                self._buffer[:0] = batch  # left for the next flush
                raise
            except Exception as exc:  # the ledger never fails memory work
                await self._write_each(batch, exc)
            finally:
                for call in batch:
                    self._in_flight.remove(call)
            if self._after_write is not None:
                try:
                    await self._after_write(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the ledger never fails memory work
                    log.warning("obsmem ledger: the check after a write failed: %s", exc)

    async def _write_each(self, batch: list[ModelCall], error: Exception) -> None:
        """A batch that failed, written a call at a time: a call the store refuses costs its own
        row, not the rows written beside it (a store that is down refuses each; logged once)."""
        failed = 0
        written = False
        for index, call in enumerate(batch if len(batch) > 1 else ()):
            if failed >= _DOWN_AFTER and not written:  # the store refuses every call, not one: down
                failed = len(batch) - index + failed
                break
            try:
                self.written += await self._write([call])
                written = True
            except asyncio.CancelledError:
                self._buffer[:0] = batch[index:]  # left for the next flush
                raise
            except Exception as exc:  # noqa: BLE001 - counted and logged below
                failed, error = failed + 1, exc
        if len(batch) == 1:
            failed = 1
        if failed:
            self.dropped += failed
            log.warning("obsmem ledger: %d model call(s) could not be recorded: %s", failed, error)


# -- prices and the report ------------------------------------------------------------------------


def priced(row: UsageRow, overrides: Mapping[str, ModelPrice] | None = None) -> UsageRow:
    """``row`` with its cost estimated (``unpriced_calls`` = its calls when the model has no price)."""
    cost = estimate_cost(
        row.model or "", row.input_tokens, row.cached_input_tokens, row.cache_write_tokens, row.output_tokens,
        overrides,
    )
    if cost is None:
        return dataclasses.replace(row, cost_usd=0.0, unpriced_calls=row.calls)
    return dataclasses.replace(row, cost_usd=cost, unpriced_calls=0)


def usage_report(rows: Iterable[UsageRow], overrides: Mapping[str, ModelPrice] | None = None) -> UsageReport:
    """The store's rows, priced, as the report ``Memory.usage`` and ``obsmem usage`` give."""
    return UsageReport(tuple(priced(row, overrides) for row in rows))


# -- the budget -----------------------------------------------------------------------------------

UsageRows = Callable[[str, datetime | None], Awaitable[list[UsageRow]]]


def period_start(period: str, now: datetime) -> datetime | None:
    """Where the budget period holding ``now`` began (UTC): the day, the month; None for ``total``."""
    utc = now.astimezone(UTC)
    if period == "day":
        return utc.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "month":
        return utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return None


#: Resources whose spend one budget keeps between ledger reads: those read last. A resource left
#: out is read again at its next check (as after ``check_interval_s``), so a process that serves
#: many users keeps a bounded table, not one entry per user it ever saw.
SPENT_KEPT = 4096


@dataclasses.dataclass(slots=True)
class _Spent:
    period: datetime | None
    read_at: float
    tokens: int
    cost: float


class LedgerBudget:
    """Whether a resource has spent its :class:`~obsmem.config.BudgetConfig` in the current period.

    The period's sum is read from the ledger (``rows(resource_id, since)``) at most once per
    ``config.check_interval_s`` seconds per resource (monotonic time of ``clock``); in between, the
    calls this process records (:meth:`record`, a :class:`LedgerWriter` listener) are added to it.
    A read adds the calls the writer holds but has not written yet (``unwritten``), so a call is
    never missed; one whose write commits during the read may count twice (a little early, never late).
    ``on_exceeded(resource_id, details)`` is called once per resource and period when a limit is
    first found reached (the resources told are kept for the current period only). At most
    :data:`SPENT_KEPT` resources' sums are kept. A failing ledger read counts as not exceeded
    (logged): the budget never fails memory work.
    """

    def __init__(
        self,
        config: BudgetConfig,
        rows: UsageRows,
        clock: Clock,
        *,
        prices: Mapping[str, ModelPrice] | None = None,
        on_exceeded: Callable[[str, dict[str, Any]], None] | None = None,
        unwritten: Callable[[], Iterable[ModelCall]] | None = None,
    ) -> None:
        self.config = config
        self._unwritten = unwritten
        self._rows = rows
        self._clock = clock
        self._prices = prices
        self._on_exceeded = on_exceeded
        self._spent: dict[str, _Spent] = {}  # insertion-ordered: the first read longest ago
        self._told: set[str] = set()  # resources told in the period ``_told_period``
        self._told_period: datetime | None = None
        self.reads = 0

    def record(self, call: ModelCall) -> None:
        spent = self._spent.get(call.resource_id or "")
        if call.resource_id is None or spent is None:
            return
        spent.tokens += call.input_tokens + call.output_tokens
        spent.cost += estimate_cost(
            call.model, call.input_tokens, call.cached_input_tokens, call.cache_write_tokens, call.output_tokens,
            self._prices,
        ) or 0.0

    async def spent(self, resource_id: str) -> tuple[int, float]:
        """Tokens and estimated USD the resource spent in the current period (cached, see above)."""
        since = period_start(self.config.period, self._clock.now())
        cached = self._spent.get(resource_id)
        now = self._clock.monotonic()
        if cached is None or cached.period != since or now - cached.read_at >= self.config.check_interval_s:
            self.reads += 1
            pending = [
                c for c in (self._unwritten() if self._unwritten is not None else ())
                if c.resource_id == resource_id and (since is None or c.started_at >= since)
            ]
            rows = usage_report(await self._rows(resource_id, since), self._prices).total()
            cached = _Spent(since, now, rows.input_tokens + rows.output_tokens, rows.cost_usd)
            self._spent.pop(resource_id, None)
            self._spent[resource_id] = cached
            while len(self._spent) > SPENT_KEPT:
                del self._spent[next(iter(self._spent))]
            for call in pending:
                self.record(call)
        return cached.tokens, cached.cost

    async def exceeded(self, resource_id: str | None) -> bool:
        if not resource_id:
            return False
        try:
            tokens, cost = await self.spent(resource_id)
        except Exception as exc:
            log.warning("obsmem budget: the ledger could not be read for %r: %s", resource_id, exc)
            return False
        limits = self.config
        over = (limits.max_tokens is not None and tokens >= limits.max_tokens) or (
            limits.max_cost_usd is not None and cost >= limits.max_cost_usd
        )
        if over:
            period = period_start(limits.period, self._clock.now())
            if period != self._told_period:  # a new period: nobody told in it yet
                self._told.clear()
                self._told_period = period
            if resource_id not in self._told:
                self._told.add(resource_id)
                if self._on_exceeded is not None:
                    self._on_exceeded(resource_id, {
                        "resource_id": resource_id, "period": limits.period,
                        "since": period.isoformat() if period is not None else None,
                        "tokens": tokens, "cost_usd": round(cost, 6), "max_tokens": limits.max_tokens,
                        "max_cost_usd": limits.max_cost_usd, "to": "offline",
                    })
        return over

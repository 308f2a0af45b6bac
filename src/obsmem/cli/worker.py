"""``obsmem worker`` and ``obsmem migrate``: thin shells over :class:`obsmem.worker.Worker`,
:meth:`obsmem.storage.Store.migrate` and :func:`obsmem.knowledge.migrate_knowledge`.
``register(app)`` adds them to the main ``obsmem`` command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import typer

from obsmem import ChatModel, MemoryConfig, ObsmemError
from obsmem.cli.render import counted, one_line
from obsmem.cli.stores import fail, open_knowledge, open_reported
from obsmem.embeddings import Embedder, LexicalHashEmbedder, MiniLMEmbedder, default_embedder
from obsmem.knowledge import Knowledge, migrate_knowledge
from obsmem.models import infer_model
from obsmem.redact import redact_secrets
from obsmem.storage import Store, postgres_url
from obsmem.vectors import SQLiteVectorIndex, VectorIndex
from obsmem.worker import STORE_PATIENCE_S, WORK_KINDS, Worker, WorkerStats

__all__ = ["configure_logging", "guard_log_lines", "migrate", "register", "worker"]

#: ``--embedder`` names; each makes the embedder the worker indexes retrieval groups with.
EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "default": default_embedder, "minilm": MiniLMEmbedder, "lexical": LexicalHashEmbedder,
}
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+")
LOG_LEVELS = ("debug", "info", "warning", "error")


def register(app: typer.Typer) -> None:
    """Add ``worker`` and ``migrate`` to ``app``."""
    app.command()(worker)
    app.command()(migrate)


def _one_of(option: str, values: list[str] | None, allowed: tuple[str, ...]) -> list[str] | None:
    """Refuse, while parsing, a value that is not in ``allowed`` (a usage error naming the option)."""
    for value in values or ():
        if value not in allowed:
            choices = ", ".join(repr(name) for name in allowed)
            raise typer.BadParameter(f"{value!r} is not one of {choices}.", param_hint=f"'{option}'")
    return values


class _RedactingFilter(logging.Filter):
    """Hide secrets in every record the handler writes (what obsmem says and what libraries say),
    and write it as one line of what it says: a thread id or an error holds what its writer chose,
    and an ESC sequence, a bidi override or a newline in it (a forged second record) is spelled
    (``\\x1b``, ``\\u202e``, ``\\x0a``: :func:`~obsmem.cli.render.one_line`), not obeyed. A
    traceback (``exc_info``) is written after it by the formatter, as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = one_line(redact_secrets(record.getMessage())), None
        return True


def configure_logging(level: str = "info") -> None:
    """Log obsmem's own lines at ``level`` to stderr, secrets hidden; every other library
    (httpx, httpcore, psycopg) stays at WARNING: its request lines carry URLs obsmem does not
    control. Leaves the root logger alone when the host program configured it already."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    guard_log_lines()
    logging.getLogger("obsmem").setLevel(getattr(logging, level.upper()))


def guard_log_lines() -> None:
    """Put :class:`_RedactingFilter` on every handler of the root logger, and on the handler
    Python writes to when there is none (``logging.lastResort``): each line written then hides
    secrets and spells what a terminal would obey. For a command that keeps the handlers it finds
    (``obsmem serve``: uvicorn's and the MCP library's) as well as for :func:`configure_logging`."""
    handlers = [*logging.getLogger().handlers, *([logging.lastResort] if logging.lastResort is not None else [])]
    for each in handlers:
        if not any(isinstance(f, _RedactingFilter) for f in each.filters):
            each.addFilter(_RedactingFilter())


def _load_config(path: Path | None) -> MemoryConfig:
    if path is None:
        return MemoryConfig()
    try:
        return MemoryConfig.from_snapshot(json.loads(path.read_text()))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
        raise fail(
            f"cannot read the memory config {path}: {exc}. Write it with json.dumps(config.snapshot())."
        ) from exc


def worker(
    store: Annotated[str, typer.Option(help="The shared store, e.g. postgresql://user@host/obsmem.")],
    config: Annotated[
        Path | None, typer.Option(help="JSON of MemoryConfig.snapshot(): the applications' thresholds.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(metavar="SPEC", help="Observe and reflect with this model (default: offline)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Items this process works on at once.")] = 1,
    claim_ttl: Annotated[
        float, typer.Option(min=1.0, help="Seconds a claim lasts without a heartbeat.")
    ] = 60.0,
    lease_ttl: Annotated[
        float, typer.Option(min=1.0, help="Seconds a buffer lease lasts without a heartbeat (a dead worker's "
                                          "buffer is taken over after this).")
    ] = 60.0,
    poll: Annotated[float, typer.Option(min=0.01, help="Seconds between polls of an empty queue.")] = 1.0,
    max_items: Annotated[
        int | None, typer.Option(min=1, help="Stop after claiming this many items.")
    ] = None,
    exit_when_idle: Annotated[bool, typer.Option(help="Stop as soon as nothing is due.")] = False,
    drain: Annotated[
        bool,
        typer.Option(help="Stop only when the queue is empty and no buffer lease is held: wait out delayed "
                          "work and live leases, take over the expired claims of dead workers."),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(min=0.01, metavar="S", help="Stop after S seconds; with --drain, exit 1 if work is left."),
    ] = None,
    store_patience: Annotated[
        float,
        typer.Option(min=0.01, metavar="S", help="With --exit-when-idle or --drain: exit 1 (the store's error) once "
                                                  "the store has kept failing for S seconds. Without them the "
                                                  "worker retries the store for as long as it runs."),
    ] = STORE_PATIENCE_S,
    kind: Annotated[
        list[str] | None,
        typer.Option(callback=lambda kinds: _one_of("--kind", kinds, WORK_KINDS), metavar="KIND",
                     help=f"Only these kinds of work: {' or '.join(WORK_KINDS)} (repeat for both)."),
    ] = None,
    vectors: Annotated[
        str | None,
        typer.Option(help="Where retrieval groups are indexed (config retrieval.vector): a SQLite file "
                          "path or a postgresql:// URL."),  # fmt: skip
    ] = None,
    embedder: Annotated[
        str,
        typer.Option(callback=lambda name: _one_of("--embedder", [name], tuple(EMBEDDERS))[0],
                     help=f"Embedder for --vectors: {', '.join(EMBEDDERS)}."),
    ] = "default",
    knowledge: Annotated[
        str | None,
        typer.Option(metavar="PATH|URL",
                     help="The knowledge store (a SQLite file or a postgresql:// URL): capture what the "
                          "worker observes, and curate idle resources on a timer (config knowledge.*)."),
    ] = None,
    pool_size: Annotated[
        int | None,
        typer.Option(min=1, help="PostgreSQL: most pooled connections (default 10; the URL's pool_max_size)."),
    ] = None,
    statement_timeout: Annotated[
        float | None,
        typer.Option(min=0.001, metavar="S", help="PostgreSQL: statement_timeout in seconds (default 30)."),
    ] = None,
    lock_timeout: Annotated[
        float | None, typer.Option(min=0.001, metavar="S", help="PostgreSQL: lock_timeout in seconds (default 10).")
    ] = None,
    health: Annotated[
        str | None,
        typer.Option(metavar="[HOST:]PORT",
                     help="Serve liveness (GET /livez) and readiness (GET /readyz: the store answers) over HTTP "
                          "on PORT (127.0.0.1 unless HOST is given, e.g. 0.0.0.0:8080)."),
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(callback=lambda name: _one_of("--log-level", [name], LOG_LEVELS)[0],
                     help=f"obsmem's log level: {', '.join(LOG_LEVELS)} (debug: one line per job)."),
    ] = "info",
) -> None:
    """Run buffering, reflection and group-indexing work for any thread of a shared store.

    With --knowledge, also run the knowledge agents: capture after the worker's observations,
    curate and learn after its reflections, and, while idle, curate every lane whose count or
    age trigger fired (every knowledge.curate_interval_s seconds).

    Runs until stopped (Ctrl-C) or, with --exit-when-idle, until nothing is due."""
    if store.strip() == "memory://":
        raise fail("memory:// lives inside one process: no application can write work into this worker's. "
                   "Point --store at the store the applications use (a SQLite file or a postgresql:// URL).")  # fmt: skip
    memory_config = _load_config(config)
    chat_model: ChatModel | None = None
    if model is not None and model != "offline":
        try:
            chat_model = infer_model(model)
        except ObsmemError as exc:
            raise fail(str(exc)) from None
    configure_logging(log_level)
    group_embedder, group_index = _group_vectors(memory_config, vectors, embedder)
    opened = open_reported(store, pool_max_size=pool_size, statement_timeout_s=statement_timeout,
                           lock_timeout_s=lock_timeout)  # fmt: skip
    try:
        stats = asyncio.run(_run_worker(
            opened, memory_config, chat_model, concurrency=concurrency, claim_ttl_s=claim_ttl, lease_ttl_s=lease_ttl, poll_s=poll,
            max_items=max_items, exit_when_idle=exit_when_idle, kinds=tuple(kind or WORK_KINDS),
            embedder=group_embedder, vector_index=group_index, knowledge=knowledge, drain=drain,
            timeout_s=timeout, health=_health_address(health), store_patience_s=store_patience,
        ))
    except ObsmemError as exc:
        raise fail(str(exc)) from exc
    typer.echo(
        f"worker done: {stats.claimed} claimed, {stats.completed} completed, {stats.released} given back, "
        f"{stats.abandoned} dead-lettered, {stats.lost_claims} lost claims"
        + (f", {stats.curations} curations" if knowledge is not None else "")
        + (", drained" if stats.drained else "")
    )
    if drain and not stats.drained:
        raise fail(f"the queue was not drained{f' within {timeout:g} s' if stats.timed_out else ''}: "
                   "see obsmem queue --store URL")


async def _usable(probe: Coroutine[Any, Any, object], what: str, close: Callable[[], Awaitable[None]]) -> None:
    """Stop the command (one line, exit 1) when ``probe`` fails: a ``--knowledge`` or ``--vectors``
    store that cannot be reached or read. Unchecked, a misconfigured worker ran on and exited 0
    while every capture and every group's vector failed (in the log only, if at all)."""
    try:
        await probe
    except Exception as exc:  # noqa: BLE001 - reported in one line, secrets hidden
        with contextlib.suppress(Exception):
            await close()
        raise fail(f"{what} cannot be used: {type(exc).__name__}: {exc}") from None


class _Health:
    """What ``--health`` answers: alive while the event loop ticks, ready while the store answers."""

    STALL_S = 30.0  # the event loop did not tick for this long: the process is stuck

    def __init__(self, runner: Worker) -> None:
        self.runner = runner
        self.tick = time.monotonic()

    async def tick_forever(self) -> None:
        while True:
            self.tick = time.monotonic()
            await asyncio.sleep(1.0)

    def answer(self, path: str) -> tuple[int, dict[str, object]]:
        stats = self.runner.stats
        alive = time.monotonic() - self.tick < self.STALL_S
        ready = alive and self.runner.store_ok is True
        body: dict[str, object] = {
            "owner": self.runner.owner, "alive": alive, "ready": ready,
            "last_store_error": self.runner.last_store_error,
            "claimed": stats.claimed, "completed": stats.completed, "released": stats.released,
            "dead_lettered": stats.abandoned, "lost_claims": stats.lost_claims,
        }  # fmt: skip
        if path in ("/livez", "/healthz"):
            return (200 if alive else 503), body
        if path == "/readyz":
            return (200 if ready else 503), body
        return 404, {"error": "GET /livez or /readyz"}


def _health_address(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise fail(f"--health expects [HOST:]PORT (e.g. 8080 or 0.0.0.0:8080), got {value!r}")
    return host or "127.0.0.1", int(port)


#: A health connection that sends no complete request within this many seconds is closed.
HEALTH_IDLE_S = 5.0
#: Health connections answered at once; one past them is closed at once, without a thread.
HEALTH_CONNECTIONS = 16


class _HealthServer(ThreadingHTTPServer):
    """A thread per connection, as ThreadingHTTPServer, but at most ``HEALTH_CONNECTIONS`` of
    them: idle connections (a port scanner, a client that never sends its request) each held
    a thread for as long as they stayed open, so enough of them used up the process's threads,
    which the worker's own store and model calls need."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(HEALTH_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def _serve_health(address: tuple[str, int], probe: _Health) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        timeout = HEALTH_IDLE_S  # the socket's: a request not sent by then ends the connection

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            status, body = probe.answer(self.path.split("?", 1)[0])
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - probes are not logged
            pass

    try:
        server = _HealthServer(address, Handler)
    except OSError as exc:
        raise fail(f"cannot serve --health on {address[0]}:{address[1]}: {exc}") from exc
    threading.Thread(target=server.serve_forever, name="obsmem-worker-health", daemon=True).start()
    host, port = server.server_address[:2]
    typer.echo(f"health: http://{host!s}:{port}/livez and /readyz", err=True)
    return server


def _group_vectors(
    config: MemoryConfig, location: str | None, embedder_name: str
) -> tuple[Embedder | None, VectorIndex | None]:
    """The embedder and vector index the worker indexes retrieval groups with, or neither."""
    if location is None:
        if config.retrieval.enabled and config.retrieval.vector:
            raise fail("the config asks for vector retrieval (retrieval.vector): pass --vectors PATH|URL")
        return None, None
    if embedder_name not in EMBEDDERS:
        raise fail(f"unknown embedder '{embedder_name}'; use one of {', '.join(EMBEDDERS)}")
    chosen: Embedder = EMBEDDERS[embedder_name]()
    index: VectorIndex
    if location.startswith(POSTGRES_SCHEMES):
        from obsmem.vectors import PostgresVectorIndex  # imports psycopg, an optional dependency

        index = PostgresVectorIndex(postgres_url(location)[0], dimensions=chosen.dimensions, space=chosen.name)
    else:
        index = SQLiteVectorIndex(location.removeprefix("sqlite:///"), dimensions=chosen.dimensions,
                                  space=chosen.name)  # fmt: skip
    return chosen, index


async def _run_worker(
    opened: Store, config: MemoryConfig, model: ChatModel | None, *, concurrency: int, claim_ttl_s: float,
    poll_s: float, lease_ttl_s: float = 60.0, max_items: int | None, exit_when_idle: bool, kinds: tuple[str, ...],
    embedder: Embedder | None = None, vector_index: VectorIndex | None = None, knowledge: str | None = None,
    drain: bool = False, timeout_s: float | None = None, health: tuple[str, int] | None = None,
    store_patience_s: float = STORE_PATIENCE_S,
) -> WorkerStats:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    running: list[asyncio.Task[WorkerStats]] = []

    def on_signal() -> None:
        # The first Ctrl-C / SIGTERM: claim nothing more, finish the items in progress, then exit.
        # The next one: stop now (a model call can hang for minutes), giving the items in
        # progress back to the queue and releasing their leases (Worker.process).
        if not stop.is_set():
            stop.set()
            typer.echo("stopping: finishing the items in progress (Ctrl-C or SIGTERM again gives them back "
                       "to the queue now)", err=True)  # fmt: skip
        elif running and not running[0].done():
            typer.echo("stopping now: giving the items in progress back to the queue", err=True)
            running[0].cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
    graph: Knowledge | None = None
    if knowledge is not None:
        graph = open_knowledge(knowledge, actor="worker")
        await _usable(graph.store.migrate(dry_run=True), "the knowledge store (--knowledge)", graph.close)
    if vector_index is not None:
        await _usable(vector_index.count(), "the vector index (--vectors)", vector_index.close)
    async with opened as store:
        runner = Worker(store, config=config, model=model, concurrency=concurrency, claim_ttl_s=claim_ttl_s,
                        lease_ttl_s=lease_ttl_s, poll_interval_s=poll_s, kinds=kinds, embedder=embedder, vector_index=vector_index,
                        knowledge=graph)
        typer.echo(f"obsmem worker {runner.owner} started", err=True)
        probe = _Health(runner)
        server = _serve_health(health, probe) if health is not None else None
        ticking = asyncio.create_task(probe.tick_forever(), name="obsmem:worker-health-tick")
        running.append(asyncio.create_task(runner.run(
            stop=stop, max_items=max_items, exit_when_idle=exit_when_idle, drain=drain, timeout_s=timeout_s,
            store_patience_s=store_patience_s,
        ), name="obsmem:worker-run"))  # fmt: skip
        try:
            return await running[0]
        except asyncio.CancelledError:
            if not running[0].cancelled() or (task := asyncio.current_task()) is None or task.cancelling():
                raise  # cancelled from outside, not by a second signal
            return runner.stats  # stopped by a second signal: its items were given back
        finally:
            ticking.cancel()
            if server is not None:
                server.shutdown()
                server.server_close()
            if vector_index is not None:
                await vector_index.close()
            if graph is not None:
                await graph.close()


def migrate(
    store: Annotated[
        str, typer.Option(help="The store to bring up to date (sqlite:///… or postgresql://…).")
    ],
    dry_run: Annotated[bool, typer.Option(help="Only list the migrations that would run.")] = False,
) -> None:
    """Apply pending schema migrations, the knowledge store's included.

    Safe to run from several machines at once."""
    if store.strip() == "memory://":
        raise fail(f"'{store}' has no schema to migrate (only SQLite and PostgreSQL stores have one).")
    target = open_reported(store)
    try:
        names = asyncio.run(_migrate(target, dry_run=dry_run))
    except ObsmemError as exc:
        raise fail(str(exc)) from exc
    verb = "pending" if dry_run else "applied"
    typer.echo(f"{counted(len(names), 'migration')} {verb}" + (": " + ", ".join(names) if names else ""))


async def _migrate(store: Store, *, dry_run: bool) -> list[str]:
    """The store's own steps, then the knowledge tables' in the same database."""
    async with store:
        names = await store.migrate(dry_run=dry_run)
    return names + await migrate_knowledge(store.url, dry_run=dry_run)

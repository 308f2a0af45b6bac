"""``obsmem serve`` (REST + gateway + MCP over HTTP) and ``obsmem mcp`` (MCP over stdio): thin
shells over :mod:`obsmem.server`, which needs the ``server`` extra (``pip install 'obsmem[server]'``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from obsmem import MemoryConfig, ObsmemError
from obsmem.cli.keys import _store_errors
from obsmem.cli.render import escape, escape_id
from obsmem.cli.stores import describe_store, err_console, fail
from obsmem.cli.worker import guard_log_lines

__all__ = ["mcp", "register", "serve"]

UPSTREAM_KEY_ENV = "OBSMEM_UPSTREAM_API_KEY"
API_KEY_ENV = "OBSMEM_API_KEY"

StoreOption = Annotated[
    str | None,
    typer.Option(help="The store: a SQLite file (sqlite:////abs.db) or postgresql://… (default: the default SQLite file)."),
]
KnowledgeOption = Annotated[
    str | None, typer.Option(help="A knowledge store (SQLite file or postgresql://…) for search_knowledge/remember.")
]
ConfigOption = Annotated[Path | None, typer.Option(help="JSON of MemoryConfig.snapshot() (thresholds, retrieval…).")]


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``mcp`` to ``app``."""
    app.command()(serve)
    app.command("mcp")(mcp)


def _server() -> Any:
    try:
        import obsmem.server as server
    except ImportError as exc:
        raise fail(f"obsmem serve needs the server extra ({exc.name}): pip install 'obsmem[server]'") from None
    return server


def _service(store: str | None, knowledge: str | None, config: Path | None, model: str | None,
             background: str, settings: Any) -> Any:  # fmt: skip
    server = _server()
    options: dict[str, Any] = {"background": background}
    if config is not None:
        try:
            options["config"] = MemoryConfig.from_snapshot(json.loads(config.read_text()))
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
            raise fail(f"cannot read the memory config {config}: {exc}") from None
    if model is not None:
        options["model"] = model
    knowledge_store = None
    if knowledge is not None:
        from obsmem.cli.stores import open_knowledge

        knowledge_store = open_knowledge(knowledge)
    try:
        service = server.Service.open(store, settings=settings, knowledge=knowledge_store, **options)
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    err_console.print(f"store: {escape(describe_store(service.memory.store))}", soft_wrap=True, highlight=False)
    return service


def _http_url(text: str) -> bool:
    """Whether ``text`` is an http(s) URL with a host (what the gateway can forward to)."""
    import httpx

    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    return url.scheme in ("http", "https") and bool(url.host)


def serve(
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8080,
    upstream: Annotated[
        str | None, typer.Option(help=f"OpenAI-compatible base URL the gateway forwards to (…/v1); its key: ${UPSTREAM_KEY_ENV}.")
    ] = None,
    upstream_kind: Annotated[
        str, typer.Option(help="'openai' (any OpenAI-compatible server) or 'anthropic' (Messages API, chat only).")
    ] = "openai",
    upstream_timeout_s: Annotated[
        float, typer.Option(help="Seconds the gateway waits for one read from the upstream (connect, each piece).")
    ] = 120.0,
    upstream_total_timeout_s: Annotated[
        float, typer.Option(help="Seconds one upstream answer may take in all; past it a stream ends with an error "
                                 "event and a whole answer gets 504.")
    ] = 600.0,
    config: ConfigOption = None,
    model: Annotated[str | None, typer.Option(metavar="SPEC", help="Observer/reflector model (default: offline).")] = None,
    background: Annotated[str, typer.Option(help="'local', or 'queue' to leave memory work to obsmem workers.")] = "local",
    dev: Annotated[bool, typer.Option(help="No API keys (development): listens on 127.0.0.1 only.")] = False,
    mcp_http: Annotated[bool, typer.Option("--mcp/--no-mcp", help="Serve MCP (streamable HTTP) at /mcp.")] = True,
    max_body_bytes: Annotated[
        int, typer.Option(min=1, help="Largest request body in bytes; a larger one gets 413 before "
                                      "it is read or its key checked.")
    ] = 32 * 1024 * 1024,
    max_import_bytes: Annotated[
        int, typer.Option(min=1, help="Largest body of POST /api/resources/import (an export), in bytes.")
    ] = 64 * 1024 * 1024,
    body_timeout_s: Annotated[
        float, typer.Option(help="Seconds a request body may take to arrive after its headers; past it: 408.")
    ] = 60.0,
    header_timeout_s: Annotated[
        float, typer.Option(help="Seconds a request's headers may take to arrive (from its first byte, or from "
                                 "when the connection opened); past it the connection is closed.")
    ] = 30.0,
    timeout_keep_alive_s: Annotated[
        int, typer.Option(min=1, help="Seconds an idle connection is kept open between requests.")
    ] = 5,
    limit_concurrency: Annotated[
        int | None, typer.Option(min=1, help="Most connections at once; past it a request gets 503 "
                                             "(default: no limit; keep it under the open-file limit).")
    ] = None,
) -> None:
    """Serve memory over HTTP: REST (/api), the OpenAI-compatible gateway (/v1) and MCP (/mcp)."""
    if upstream_kind not in ("openai", "anthropic"):
        raise typer.BadParameter("expected 'openai' or 'anthropic'", param_hint="'--upstream-kind'")
    if background not in ("local", "queue"):
        raise typer.BadParameter("expected 'local' or 'queue'", param_hint="'--background'")
    if upstream is not None and not _http_url(upstream):
        raise typer.BadParameter(
            "expected an http:// or https:// base URL with a host, e.g. https://api.openai.com/v1",
            param_hint="'--upstream'",
        )
    for value, hint in ((upstream_timeout_s, "'--upstream-timeout-s'"),
                        (upstream_total_timeout_s, "'--upstream-total-timeout-s'"),
                        (body_timeout_s, "'--body-timeout-s'"),
                        (header_timeout_s, "'--header-timeout-s'")):  # fmt: skip
        if not value > 0:
            raise typer.BadParameter("expected a number of seconds above 0", param_hint=hint)
    server = _server()
    if dev and host != "127.0.0.1":
        err_console.print(f"[yellow]--dev[/yellow]: ignoring --host {escape_id(host)}", highlight=False)
    if dev:
        host = "127.0.0.1"
        err_console.print("[yellow]dev mode:[/yellow] no API key needed; listening on 127.0.0.1 only.", highlight=False)
    settings = server.ServerSettings(upstream_url=upstream, upstream_key=os.environ.get(UPSTREAM_KEY_ENV), dev=dev,
                                     mcp=mcp_http, upstream_kind=upstream_kind, upstream_timeout_s=upstream_timeout_s,
                                     upstream_total_timeout_s=upstream_total_timeout_s,
                                     max_body_bytes=max_body_bytes, max_import_bytes=max_import_bytes,
                                     body_timeout_s=body_timeout_s)  # fmt: skip
    service = _service(store, knowledge, config, model, background, settings)
    if not _any_keys(service) and not dev:
        err_console.print("no API keys yet: create one with obsmem keys create --org … --admin", highlight=False)
    import uvicorn

    from obsmem.server.limits import header_bounded_h11

    err_console.print(f"listening on http://{escape_id(host)}:{port} (OpenAPI: /openapi.json)", highlight=False)
    app = server.create_app(service, host=host)
    # Log lines name threads whose ids a client chose (bidi controls and tag characters pass the
    # API's id check): on every handler by now (the MCP library's), secrets hidden, those spelled.
    guard_log_lines()
    # uvicorn bounds idle connections (timeout_keep_alive) and, when asked, how many are open;
    # the headers' time by its h11 protocol with a bound (obsmem.server.limits.header_bounded_h11),
    # the request body's size and time by the app (obsmem.server.limits).
    uvicorn.run(app, host=host, port=port, log_level="info",
                timeout_keep_alive=timeout_keep_alive_s, limit_concurrency=limit_concurrency,
                http=header_bounded_h11(header_timeout_s))  # fmt: skip


def _store_failures() -> tuple[type[Exception], ...]:
    """What a store the command cannot use raises: obsmem's errors and the database drivers' own."""
    return (ObsmemError, *_store_errors())


def _any_keys(service: Any) -> bool:
    """Whether the store holds API keys (one key row read, however many there are); a store the
    key store cannot use (a file that is no database, a server that does not answer) ends the
    command in one line before it listens."""

    async def check() -> bool:
        await service.keys.setup()
        return bool(await service.keys.page(limit=1))

    try:
        return asyncio.run(check())
    except _store_failures() as exc:
        raise fail(str(exc) if isinstance(exc, ObsmemError) else f"the store failed: {exc}") from None
    except Exception:  # anything else: the server reports it when it starts
        return True


def mcp(
    store: StoreOption = None,
    knowledge: KnowledgeOption = None,
    config: ConfigOption = None,
    model: Annotated[str | None, typer.Option(metavar="SPEC", help="Observer/reflector model (default: offline).")] = None,
    dev: Annotated[bool, typer.Option(help=f"Without ${API_KEY_ENV}: every org (development only).")] = False,
) -> None:
    """Serve the MCP tools over stdio, scoped by the API key in $OBSMEM_API_KEY."""
    server = _server()
    from obsmem.server.access import Principal, authenticate
    from obsmem.server.errors import ServiceError
    from obsmem.server.mcp_server import build_mcp

    service = _service(store, knowledge, config, model, "local", server.ServerSettings(dev=dev))

    async def run() -> None:
        try:
            await service.start()
        except _store_failures() as exc:  # a store it cannot use: one line, as every command
            with contextlib.suppress(Exception):
                await service.stop()
            raise fail(str(exc) if isinstance(exc, ObsmemError) else f"the store failed: {exc}") from None
        try:
            token = os.environ.get(API_KEY_ENV) or None
            principal: Principal = await authenticate(service.keys, token, dev=dev)
        except (ObsmemError, ServiceError) as exc:
            await service.stop()
            raise fail(f"{exc} (set ${API_KEY_ENV}, or --dev)") from None
        try:
            await build_mcp(service, principal).run_stdio_async()
        finally:
            await service.stop()

    asyncio.run(run())

"""The FastAPI app of ``obsmem serve``: REST (``/api``), the gateway (``/v1``), MCP (``/mcp``),
the OpenAPI document (``/openapi.json``) and ``/health``."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from obsmem import __version__
from obsmem.server import gateway, knowledge_api, rest
from obsmem.server.access import Principal, authenticate, bearer_token
from obsmem.server.errors import install_handlers
from obsmem.server.limits import BodyLimits, KeyFirst
from obsmem.server.mcp_server import build_mcp, guarded
from obsmem.server.service import Service
from obsmem.server.ui import install as install_ui

__all__ = ["create_app"]


def create_app(service: Service, *, host: str = "127.0.0.1") -> FastAPI:
    """The app over ``service``; starting it sets up the key table and the upstream client."""
    mcp = build_mcp(service) if service.settings.mcp else None
    mcp_app: Any = None
    if mcp is not None:
        from mcp.server.transport_security import TransportSecuritySettings

        mcp_app = mcp.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )  # fmt: skip

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            await service.start()
            stack.push_async_callback(service.stop)
            if mcp is not None:
                await stack.enter_async_context(mcp.session_manager.run())
            yield

    app = FastAPI(
        title="obsmem", version=__version__, lifespan=lifespan,
        description="Observational memory as a service: REST, an OpenAI-compatible gateway and MCP. "
        "Every endpoint but /health needs an API key (Authorization: Bearer om_…).",
    )  # fmt: skip
    app.state.service = service
    install_handlers(app)
    app.include_router(rest.router)
    app.include_router(knowledge_api.router)
    app.include_router(gateway.router)
    install_ui(app)

    # HEAD too: many load balancers' health checks ask with it (a 405 took the replica out)
    @app.head("/health", include_in_schema=False)
    @app.get("/health", tags=["service"])
    async def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    if mcp_app is not None:
        endpoint = next(r for r in mcp_app.routes if getattr(r, "path", None) == "/mcp")
        app.router.routes.append(
            Route("/mcp", endpoint=guarded(endpoint.app, service), methods=["GET", "POST", "DELETE"],
                  include_in_schema=False)  # fmt: skip
        )
    # The key of a request with a body is checked before the body is read (inside the body
    # limits: a body declared over the limit is refused first, without a key lookup).
    settings = service.settings
    app.add_middleware(KeyFirst, authenticate=None if settings.dev else functools.partial(_principal, service))
    # Added last, so it is the outermost of the app's middleware (only Starlette's catch-all for
    # exceptions, which runs nothing before the app, is outside it): a body over the limit is
    # refused before any route, key check or body parsing runs.
    app.add_middleware(
        BodyLimits, max_body_bytes=settings.max_body_bytes, max_import_bytes=settings.max_import_bytes,
        body_timeout_s=settings.body_timeout_s,
    )  # fmt: skip
    return app


async def _principal(service: Service, authorization: str | None, api_key: str | None) -> Principal:
    """The principal of a request's key headers (as the routes' own check finds it), for :class:`KeyFirst`."""
    return await authenticate(service.keys, bearer_token(authorization, api_key), dev=False)

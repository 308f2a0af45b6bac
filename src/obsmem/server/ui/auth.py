"""Signing in to the inspector: an API key typed into a form, kept in an HttpOnly cookie.

The cookie holds the key itself and is checked on every request exactly as the REST API checks
``Authorization: Bearer``, so the inspector sees what the key sees and nothing more. The cookie
is ``SameSite=Strict`` (no other site can make the browser send it, so the forms need no token)
and ``HttpOnly`` (no script can read it; the pages have no script anyway).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request

from obsmem.server.access import Principal, authenticate
from obsmem.server.errors import AuthenticationError
from obsmem.server.service import Service

__all__ = ["COOKIE", "SignInNeeded", "actor", "form", "principal_of", "service_of", "who"]

COOKIE = "obsmem_ui_key"
_MAX_FORM = 64 * 1024


class SignInNeeded(Exception):
    """No key, or a key that no longer works: the page sends the browser to the login form."""


def service_of(request: Request) -> Service:
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


async def principal_of(request: Request) -> Principal:
    """The key in the cookie (or the dev principal under ``--dev``); SignInNeeded otherwise."""
    service = service_of(request)
    token = request.cookies.get(COOKIE) or None
    try:
        return await authenticate(service.keys, token, dev=service.settings.dev)
    except AuthenticationError:
        raise SignInNeeded() from None


def actor(principal: Principal) -> str:
    """The identity written to the knowledge audit log for what this key does in the inspector."""
    return f"key:{principal.key_id}" if principal.key_id else "dev"


def who(principal: Principal) -> str:
    scope = principal.org_id or "every org"
    if principal.resource_id:
        scope += f"/{principal.resource_id}"
    flags = " (read-only)" if principal.read_only else ""
    return f"{actor(principal)} · {scope}{flags}"


async def form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body as one value per field."""
    body = await request.body()
    if len(body) > _MAX_FORM:
        return {}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[-1] for key, values in parsed.items()}

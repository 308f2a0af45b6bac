"""Signing in to the inspector: an API key typed into a form, kept in an HttpOnly cookie.

The cookie holds the key itself and is checked on every request exactly as the REST API checks
``Authorization: Bearer``, so the inspector sees what the key sees and nothing more. The cookie
is ``SameSite=Strict`` (no other site can make the browser send it) and ``HttpOnly`` (no script
can read it; the pages have no script anyway).

Every state-changing form also carries a CSRF token, checked before anything changes (403
otherwise), so a browser that ignores ``SameSite`` is covered too:

* signed in: the token is an HMAC of a fixed label keyed by the session cookie (the key), so it
  is bound to that session, needs no server-side state (any worker process checks it) and cannot
  be made by anyone who does not hold the cookie;
* the login form (no session yet): a random nonce in its own ``HttpOnly``, ``SameSite=Strict``
  cookie, repeated in the form (double submit), so no other site can sign a browser in.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import Response

from obsmem.server.access import Principal, authenticate, check_dev_host
from obsmem.server.errors import AuthenticationError, BodyTooLargeError, PermissionDeniedError
from obsmem.server.service import Service
from obsmem.server.ui.html import Session

__all__ = [
    "COOKIE",
    "CSRF_FIELD",
    "LOGIN_COOKIE",
    "CsrfError",
    "SignInNeeded",
    "actor",
    "checked_form",
    "csrf_token",
    "form",
    "login_nonce",
    "login_token_matches",
    "principal_of",
    "remember_login_nonce",
    "service_of",
    "session",
    "who",
]

COOKIE = "obsmem_ui_key"
LOGIN_COOKIE = "obsmem_ui_login"
CSRF_FIELD = "csrf_token"
_CSRF_LABEL = b"obsmem inspector csrf v1"
#: A form's body at most: a 10,000-character corrected text (the review queue's limit) URL-encoded
#: at up to 12 bytes a character (a 4-byte UTF-8 character as %XX%XX%XX%XX), and the other fields.
_MAX_FORM = 128 * 1024


class SignInNeeded(Exception):
    """No key, or a key that no longer works: the page sends the browser to the login form."""


class CsrfError(PermissionDeniedError):
    """A state-changing form posted without its CSRF token, or with a wrong one (403)."""

    def __init__(self) -> None:
        super().__init__("The form's CSRF token is missing or wrong: reload the page and submit the form again.")


def service_of(request: Request) -> Service:
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


async def principal_of(request: Request) -> Principal:
    """The key in the cookie (or the dev principal under ``--dev``, for a request naming a
    loopback host only); SignInNeeded otherwise."""
    service = service_of(request)
    check_dev_host(request.headers.get("host"), dev=service.settings.dev)  # a rebound host: 403
    token = request.cookies.get(COOKIE) or None
    try:
        return await authenticate(service.keys, token, dev=service.settings.dev)
    except AuthenticationError:
        raise SignInNeeded() from None


def actor(principal: Principal) -> str:
    """The identity written to the knowledge audit log for what this key does in the inspector."""
    return principal.actor


def who(principal: Principal) -> str:
    scope = principal.org_id or "every org"
    if principal.resource_id:
        scope += f"/{principal.resource_id}"
    flags = " (read-only)" if principal.read_only else ""
    return f"{actor(principal)} · {scope}{flags}"


async def form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body as one value per field; BodyTooLargeError
    (413) for one over 128 KiB, before more than that is read (every form here is small, and the
    login form is posted without a key)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > _MAX_FORM:
        raise _too_large()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM:
            raise _too_large()
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {key: values[-1] for key, values in parsed.items()}


def _too_large() -> BodyTooLargeError:
    return BodyTooLargeError(f"The form is too large: an inspector form takes {_MAX_FORM // 1024} KiB at most.")


def csrf_token(request: Request) -> str:
    """The CSRF token of the session ``request`` belongs to: an HMAC keyed by the session cookie
    (under ``--dev`` without a cookie, by a random secret of this app made at start)."""
    key = request.cookies.get(COOKIE) or ""
    secret = key.encode() if key else _dev_secret(request)
    return hmac.new(secret, _CSRF_LABEL, hashlib.sha256).hexdigest()


def _dev_secret(request: Request) -> bytes:
    secret = getattr(request.app.state, "ui_csrf_secret", None)
    if not isinstance(secret, bytes):
        secret = secrets.token_bytes(32)
        request.app.state.ui_csrf_secret = secret
    return secret


async def checked_form(request: Request) -> dict[str, str]:
    """:func:`form`, after checking its CSRF token against the session's; CsrfError otherwise."""
    fields = await form(request)
    if not hmac.compare_digest(fields.get(CSRF_FIELD, "").encode(), csrf_token(request).encode()):
        raise CsrfError()
    return fields


def login_nonce() -> str:
    """A fresh nonce for one login form (see :func:`remember_login_nonce`)."""
    return secrets.token_urlsafe(32)


def remember_login_nonce(response: Response, request: Request, nonce: str) -> None:
    """Set the login form's nonce in its own cookie on ``response``."""
    secure = request.url.scheme == "https"
    response.set_cookie(LOGIN_COOKIE, nonce, httponly=True, samesite="strict", secure=secure, path="/ui")


def login_token_matches(request: Request, fields: dict[str, str]) -> bool:
    """Whether the login form's token is the nonce in the browser's login cookie."""
    cookie = request.cookies.get(LOGIN_COOKIE) or ""
    sent = fields.get(CSRF_FIELD, "")
    return bool(cookie) and hmac.compare_digest(sent.encode(), cookie.encode())


def session(request: Request, principal: Principal) -> Session:
    """Who is signed in, and the CSRF token the page's forms carry."""
    return Session(who(principal), csrf_token(request))

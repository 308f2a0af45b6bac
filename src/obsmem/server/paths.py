"""Routes whose path parameters may hold an encoded '/' (``%2F``).

Starlette matches a route against the request's *decoded* path, where ``%2F`` is a '/' like any
other: ``/api/resources/tenant%2F42/usage`` reads ``/api/resources/tenant/42/usage`` and a
``{resource_id}`` (one segment) never matches it. The gateway takes any thread or resource id a
client names ('user/1/chat', a ``user`` of 'tenant/42'), so such ids must be nameable in every
route that takes one. :class:`SegmentRoute` matches a path segment by segment as the client
wrote it: a segment's ``%2F`` stays inside its parameter, a '/' the client wrote still separates
segments (so a trailing '/' still goes on to Starlette's redirect without it). Each segment is
decoded once, as the server decodes the path: ``%252F`` is the three characters ``%2F``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

__all__ = ["SegmentRoute"]

#: Stands for an encoded '/' while the route's pattern is matched (a '/' ends a ``{param}``).
_SLASH = "\x00"


#: A path whose raw form holds '%2F' but is not the path being matched: no route of this class
#: matches it (see :func:`_segmented`).
_ELSEWHERE = ""


def _segmented(scope: Scope) -> str | None:
    """The request's path with each encoded '/' as :data:`_SLASH`; None when it holds none (the
    path is matched as is), :data:`_ELSEWHERE` when its raw path is not the path matched.
    That is Starlette trying the path with its trailing '/' dropped, for a redirect it would
    build from the *decoded* path: '/api/threads/b%2Fmessages/' went to thread 'b''s messages."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes) or b"%2f" not in raw.lower():
        return None
    path = scope.get("path")
    if not isinstance(path, str):
        return None
    if _SLASH in path:  # a client's own %00 would read as a '/': such a path names no id here
        return _ELSEWHERE
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    segmented = "/".join(unquote(segment).replace("/", _SLASH) for segment in text.split("/"))
    if segmented.replace(_SLASH, "/") != path:
        return _ELSEWHERE
    return segmented


def _restored(value: Any) -> Any:
    return value.replace(_SLASH, "/") if isinstance(value, str) else value


class SegmentRoute(APIRoute):
    """An API route whose ``{param}`` takes one path segment as the client wrote it: ``%2F``
    inside a segment is part of the parameter (see the module's docstring)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        segmented = _segmented(scope) if scope.get("type") == "http" else None
        if segmented is None:
            return super().matches(scope)
        if segmented == _ELSEWHERE:
            return Match.NONE, {}
        match, child = super().matches({**scope, "path": segmented})
        if "path_params" in child:
            child = {**child, "path_params": {k: _restored(v) for k, v in child["path_params"].items()}}
        return match, child

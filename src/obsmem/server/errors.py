"""One JSON error shape for every failure the service reports.

Every error body is ``{"error": {"type": <obsmem error class>, "message": ..., "argument": ...}}``
(``argument`` only when the error names one). The status follows the class: 401 no or bad key,
403 a key that may not do this, 404 anything not found *or not visible to the key* (the two
are indistinguishable by design), 409 conflicts, 400/422 bad input, 408 a request body that did
not arrive in time, 413 one over the size limit, 502 the model or upstream
failed, 503 storage trouble, 500 anything else (reported as ``InternalError``, never with its
traceback).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from obsmem.errors import (
    ConfigError,
    ImportConflictError,
    InvalidInputError,
    LeaseLostError,
    ModelError,
    NameConflictError,
    NotFoundError,
    ObservationError,
    ObsmemError,
    PrivacyError,
    ReflectionError,
    StorageError,
    ThreadChangedError,
    ThreadNotFoundError,
    TombstonedValueError,
)

__all__ = [
    "AuthenticationError",
    "BodyTimeoutError",
    "BodyTooLargeError",
    "ERROR_RESPONSES",
    "PermissionDeniedError",
    "ResourceNotFoundError",
    "ResourceTakenError",
    "ServiceError",
    "ThreadIdTakenError",
    "TurnNotFoundError",
    "UpstreamError",
    "error_body",
    "install_handlers",
    "status_for",
]

logger = logging.getLogger("obsmem.server")


class ServiceError(Exception):
    """An error of the service itself (never raised by the library, so not an ObsmemError):
    reported in the same shape, with its class name as ``type``."""


class AuthenticationError(ServiceError):
    """No API key, or one that is malformed, unknown or revoked."""


class PermissionDeniedError(ServiceError):
    """The key is valid but may not do this (read-only, not an admin, another resource)."""


class ResourceNotFoundError(ServiceError):
    """A resource this key cannot see (it may not exist, or belong to another tenant)."""

    def __init__(self, resource_id: str) -> None:
        self.resource_id = resource_id
        super().__init__(f"Resource '{resource_id}' does not exist.")


class TurnNotFoundError(ServiceError):
    """A turn id this server does not hold open for the key (ended, expired or never begun)."""

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"Turn '{turn_id}' is not open on this server (it ended, expired or never began).")


class ThreadIdTakenError(ServiceError):
    """A new thread's id is in use (thread ids are unique in a store); nothing of that thread is shown."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"Thread id '{thread_id}' is already in use; choose another (unguessable) id.")


class ResourceTakenError(ServiceError):
    """A key of one org bound to a resource another org holds (its threads, or a live key bound to
    it): resource ids are unique in a store, across orgs, like thread ids."""

    argument = "resource_id"

    def __init__(self, resource_id: str) -> None:
        super().__init__(f"Resource id '{resource_id}' is already in use by another org; choose another id.")


class BodyTooLargeError(ServiceError):
    """The request body is over the server's limit (``max_body_bytes``, or ``max_import_bytes`` for
    an import); answered before the body is read and before the key is checked."""


class BodyTimeoutError(ServiceError):
    """The request body did not all arrive within the server's ``body_timeout_s``."""


class UpstreamError(ServiceError):
    """The upstream model server could not be reached."""


_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (NotFoundError, 404),
    (ResourceNotFoundError, 404),
    (TurnNotFoundError, 404),
    (ImportConflictError, 409),
    (ThreadIdTakenError, 409),
    (ResourceTakenError, 409),
    (NameConflictError, 409),
    (LeaseLostError, 409),
    (ThreadChangedError, 409),
    (TombstonedValueError, 409),  # a forgotten value written again: not the store failing
    (BodyTooLargeError, 413),
    (BodyTimeoutError, 408),
    (InvalidInputError, 400),
    (ConfigError, 400),
    (PrivacyError, 400),
    (ModelError, 502),
    (ObservationError, 502),
    (ReflectionError, 502),
    (UpstreamError, 502),
    (StorageError, 503),
)


def status_for(error: Exception) -> int:
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return status
    return 500


def error_body(kind: str, message: str, argument: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if argument is not None:
        error["argument"] = argument
    return {"error": error}


_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {"type": "string", "description": "The obsmem error class"},
                "message": {"type": "string"},
                "argument": {"type": "string"},
            },
        }
    },
}
#: Documented on every route, so a client (and schemathesis) knows the shape of each failure.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"description": description, "content": {"application/json": {"schema": _ERROR_SCHEMA}}}
    for status, description in (
        (400, "Invalid input"), (401, "No valid API key"), (403, "Not allowed for this key"),
        (404, "Not found, or not visible to this key"), (408, "The request body did not arrive in time"),
        (409, "Conflict"), (413, "The request body is over the size limit"),
        (422, "Request validation failed"),
        (502, "The model or the upstream failed"), (503, "Storage unavailable"),
    )
}  # fmt: skip


def _respond(error: Exception) -> JSONResponse:
    status = status_for(error)
    if status == 500:
        logger.exception("unhandled error", exc_info=error)
        return JSONResponse(error_body("InternalError", "The server failed; see its log."), status_code=500)
    argument = getattr(error, "argument", None)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    message = str(error)
    if isinstance(error, ThreadNotFoundError):  # the library's advice names Python calls
        message = (f"Thread '{error.thread_id}' does not exist (or is not visible to this key). Create it with "
                   "POST /api/threads {\"id\": ..., \"resource_id\": ...}.")  # fmt: skip
    return JSONResponse(
        error_body(type(error).__name__, message, argument if isinstance(argument, str) else None),
        status_code=status, headers=headers,
    )  # fmt: skip


async def _obsmem_error(_request: Request, error: Exception) -> JSONResponse:
    return _respond(error)


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(p) for p in item.get("loc", ()))
        problems.append(f"{where}: {item.get('msg', 'invalid')}")
    first = error.errors()[0].get("loc", ()) if error.errors() else ()
    argument = str(first[-1]) if first else None
    return JSONResponse(
        error_body("RequestValidationError", "Invalid request: " + "; ".join(problems), argument), status_code=422
    )


async def _http_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    kind = {404: "NotFoundError", 405: "MethodNotAllowedError", 401: "AuthenticationError"}.get(
        error.status_code, "HTTPError"
    )
    return JSONResponse(error_body(kind, str(error.detail)), status_code=error.status_code, headers=error.headers)


async def _unhandled(_request: Request, error: Exception) -> JSONResponse:
    return _respond(error)


def install_handlers(app: Any) -> None:
    """Route every failure of ``app`` (a FastAPI app) through the one shape."""
    app.add_exception_handler(ObsmemError, _obsmem_error)
    app.add_exception_handler(ServiceError, _obsmem_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unhandled)

"""Who is asking, and what they may see: every request is confined to its key's org/resource.

A thread is visible to a key when its ``org_id`` is the key's org and, for a key bound to a
resource, its ``resource_id`` is that resource. A thread that is not visible is reported exactly
like one that does not exist (404, the same message), so ids cannot be probed. A resource id
belongs to one org: the org of its threads; before it has any, the org of the live keys bound
to it (a key bound to a resource claims it, so another org cannot take it over by creating the
first thread and lock that key out). Resource-wide operations (list, delete, export, import,
forget) and new threads check that, so the store's resource-wide calls never reach another
tenant's threads; and a key of one org is never bound to a resource another org holds (409, like
a thread id in use).

Those checks read what the request needs, not every thread of the resource: the org holding a
resource is its first (oldest) thread's, one row (the server never puts a thread of one org in a
resource another org's thread holds, so they agree; a resource holding two orgs' threads, which a
race of their first threads, ``--dev`` or a library caller can leave, is the first one's to a new
thread or key, and its pages and resource-wide operations that would show the other's thread are
refused as before). A page of threads (``GET /api/threads``, the inspector's threads page)
reads that page and refuses it when it holds a thread of another org; a new thread, a key
bound to a resource and an import read the first row. What shows or reaches the whole resource
(the inspector's usage page and its model-call ledger, REST usage, export, delete, forget)
refuses a resource holding any thread of another org, from the distinct orgs of its threads that
the store answers (:func:`~obsmem.storage.contract.resource_orgs`), before any thread is listed;
those that reach every thread then read them a page at a time.

Thread and message ids are unique in a store, across orgs: an id in use is refused (a new
thread: 409; a message: 400) showing nothing of what holds it, though the refusal tells the id
exists; unguessable ids (obsmem's own are random) keep that from telling anyone anything.

Key management reaches no further than the admin key doing it: an org admin key lists, creates
and revokes every key of its org; an admin key bound to a resource, only keys bound to that same
resource, so it can never mint a key broader than itself. A key it may not manage is reported
exactly like one that does not exist.

``--dev`` serves without keys: its principal (``Principal.dev()``) sees every org, and only
requests naming a loopback host are served (:func:`check_dev_host`, against DNS rebinding).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from obsmem import InvalidInputError, Memory, NotFoundError, Thread, ThreadNotFoundError
from obsmem.server.errors import (
    AuthenticationError,
    PermissionDeniedError,
    ResourceNotFoundError,
    ResourceTakenError,
    ThreadIdTakenError,
)
from obsmem.server.keys import ApiKey, KeyStore
from obsmem.storage.contract import ThreadPage, newest_threads, resource_orgs
from obsmem.storage.paging import all_threads

__all__ = ["Principal", "addressable", "scopable", "authenticate", "bearer_token", "check_dev_host", "loopback_host",
           "MALFORMED_RECEIPT", "unreadable_receipt"]

_PAGE = 1000

#: An id the service makes (a thread's, a resource's): what a knowledge scope segment accepts
#: (obsmem.knowledge.store.scopes), so every route can name it in its path (no '/') and its
#: knowledge has a scope (no whitespace or control characters).
_ADDRESSABLE = re.compile(r"^[^\s/\x00-\x1f]+$")


def scopable(value: str) -> bool:
    """Whether ``value`` (a resource id) can be one segment of a knowledge scope. The gateway
    takes any id ('tenant/42'); one that cannot has no knowledge, and must never be read as a
    scope ('a/thread:t1' would name thread t1 of resource a)."""
    return bool(_ADDRESSABLE.match(value))


def addressable(value: str, argument: str) -> str:
    """``value``, when the service can address it later; InvalidInputError (400) otherwise."""
    if not _ADDRESSABLE.match(value):
        raise InvalidInputError(
            f"Invalid {argument} {value!r}: an id is non-empty and holds no '/', whitespace or control "
            "characters (the API names it in its paths and in knowledge scopes).",
            argument=argument,
        )
    return value


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller. ``org_id`` None: every org (``--dev`` only); ``resource_id`` None: every resource."""

    key_id: str | None
    org_id: str | None
    resource_id: str | None = None
    read_only: bool = False
    admin: bool = False
    #: The key store (for the resources other orgs' keys claim); None: claims are not checked.
    keys: KeyStore | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, key: ApiKey, keys: KeyStore | None = None) -> Principal:
        return cls(key.key_id, key.org_id, key.resource_id, key.read_only, key.admin, keys)

    @classmethod
    def dev(cls) -> Principal:
        return cls(None, None, None, False, True)

    @property
    def actor(self) -> str:
        """Who this key is in the knowledge audit log: ``key:<key id>`` (``dev`` under ``--dev``)."""
        return f"key:{self.key_id}" if self.key_id else "dev"

    def may_write(self) -> None:
        if self.read_only:
            raise PermissionDeniedError("This API key is read-only.")

    def may_manage_keys(self) -> None:
        if not self.admin:
            raise PermissionDeniedError("Managing API keys needs an admin key (obsmem keys create --admin).")

    def manages(self, key: ApiKey) -> bool:
        """Whether this admin key may list or revoke ``key``: a key of its org and, when this key
        is bound to a resource, one bound to that same resource (never a broader one)."""
        if self.org_id is None:
            return True
        if key.org_id != self.org_id:
            return False
        return self.resource_id is None or key.resource_id == self.resource_id

    def may_create_key(self, org_id: str | None, resource_id: str | None) -> str:
        """The org of a new key for ``org_id`` (None: this key's own) and ``resource_id`` (None:
        the whole org), when this admin key reaches that far; PermissionDeniedError otherwise."""
        self.may_manage_keys()
        org = org_id if self.org_id is None else self.org_id
        if org is None or (org_id is not None and org_id != org):
            raise PermissionDeniedError("An admin key creates keys for its own org only.")
        addressable(org, "org_id")  # one segment of a knowledge scope ('org:<org>'), as a resource id
        if resource_id is not None:
            addressable(resource_id, "resource_id")
        if self.resource_id is not None and resource_id != self.resource_id:
            raise PermissionDeniedError(
                f"This admin key is bound to resource '{self.resource_id}': it creates keys for that "
                f"resource only (send resource_id '{self.resource_id}'); an org admin key creates others."
            )
        return org

    def sees(self, thread: Thread) -> bool:
        if self.org_id is None:
            return True
        if thread.org_id != self.org_id:
            return False
        return self.resource_id is None or thread.resource_id == self.resource_id

    def resource(self, resource_id: str | None) -> str:
        """The resource a request names (default: the key's own); another one is not found."""
        if resource_id is None:
            if self.resource_id is None:
                raise InvalidInputError("This key serves a whole org: name the resource_id", argument="resource_id")
            return self.resource_id
        if self.resource_id is not None and resource_id != self.resource_id:
            raise ResourceNotFoundError(resource_id)
        return resource_id

    async def thread(self, memory: Memory, thread_id: str) -> Thread:
        """The thread, if this key may see it; else ThreadNotFoundError, as for a missing one."""
        thread = await memory.get_thread(thread_id)
        if not self.sees(thread):
            raise ThreadNotFoundError(thread_id)
        return thread

    async def create_thread(
        self, memory: Memory, thread_id: str, resource_id: str | None, *, title: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[Thread, bool]:
        """A new thread of this key's org (``True``), or this key's own existing thread of that id
        and resource (``False``). An id used by anything else is refused without showing it."""
        resource = await self.resource_owned(memory, resource_id)
        before = await _existing(memory, thread_id)
        made = False
        if before is None:  # (one made by a request racing this one comes back too: not made here)
            thread, made = await memory.create_thread_made(
                thread_id, resource, title=title, metadata=metadata, org_id=self.org_id
            )
        else:
            thread = before
        if not self.sees(thread) or thread.resource_id != resource or (
            before is None and self.org_id is not None and thread.org_id != self.org_id
        ):
            raise ThreadIdTakenError(thread_id)
        return thread, made

    async def resource_owned(self, memory: Memory, resource_id: str | None) -> str:
        """The resource (checked), reading one thread row: one another org holds is not found.
        For what touches no thread of the resource but a new one (a new thread, an import into
        it); what reaches every thread reads them all (:meth:`resource_threads`)."""
        resource = self.resource(resource_id)
        await self._owner(memory, resource, await _first_thread(memory, resource))
        return resource

    async def thread_page(
        self, memory: Memory, resource_id: str | None, *, limit: int, offset: int
    ) -> tuple[str, list[Thread]]:
        """The resource (checked) and its threads ``offset`` to ``offset + limit``, oldest first,
        reading that page and the resource's first thread: one another org holds is not found,
        and so is a page holding a thread of another org (never shown)."""
        resource = self.resource(resource_id)
        page = await memory.store.list_threads(resource, limit=limit, offset=offset)
        first = (page[0] if page else None) if offset == 0 else await _first_thread(memory, resource)
        await self._owner(memory, resource, first)
        if self.org_id is not None and any(t.org_id != self.org_id for t in page):
            raise ResourceNotFoundError(resource)
        return resource, page

    async def thread_batch(
        self, memory: Memory, resource_id: str | None, *, limit: int, after: str | None = None,
        since: datetime | None = None,
    ) -> tuple[str, list[Thread], bool]:
        """The resource (checked), at most ``limit`` of its threads in the listing's order (oldest
        first) after the thread ``after``, and whether the resource has any thread. Reads that
        page from the listing's index, the cursor's row and the resource's first thread, never
        the threads before or after the page: one resource another org holds is not found, and
        so is a page holding a thread of another org (never shown). A cursor that names no thread
        of this resource this key sees (deleted since, or another's) pages from ``since`` (the
        created_at of the previous page's last thread) instead: threads made in that instant
        may show again, none is skipped, and nothing tells another's id from a missing one."""
        resource = self.resource(resource_id)
        cursor = None
        if after is not None:
            named = await memory.store.get_thread(after)
            cursor = after if named is not None and named.resource_id == resource and self.sees(named) else None
        try:
            page = await memory.store.list_threads(resource, limit=limit, after=cursor, since=None if cursor else since)
        except ThreadNotFoundError:  # deleted since it was read just now
            page = await memory.store.list_threads(resource, limit=limit, since=since)
        from_start = cursor is None and since is None
        first = (page[0] if page else None) if from_start else await _first_thread(memory, resource)
        await self._owner(memory, resource, first)
        if self.org_id is not None and any(t.org_id != self.org_id for t in page):
            raise ResourceNotFoundError(resource)
        return resource, page, first is not None

    async def newest_batch(
        self, memory: Memory, resource_id: str | None, *, limit: int, before: str | None = None
    ) -> tuple[str, ThreadPage]:
        """The resource (checked) and at most ``limit`` of its threads most recently active
        first, below ``before`` (a previous page's ``next_before``; None: from the newest). Reads
        that page from the store's activity index and the resource's first thread (whose org
        holds it): one resource another org holds is not found, and so is a page holding a thread
        of another org (never shown). A thread that got a message between pages moved to the top:
        not shown again in this pass."""
        resource = self.resource(resource_id)
        page = await newest_threads(memory.store, resource, limit=limit, before=before)
        if self.org_id is not None:
            await self._owner(memory, resource, await _first_thread(memory, resource))
        if self.org_id is not None and any(t.org_id != self.org_id for t in page):
            raise ResourceNotFoundError(resource)
        return resource, page

    async def resource_whole(self, memory: Memory, resource_id: str | None) -> str:
        """The resource (checked) when every thread of it is this key's org's: what shows or
        reaches the whole resource (its usage and model-call ledger, an export, a delete) asks
        this. One another org holds, or that holds any thread of another org, is not found. Reads
        its first thread's row and the distinct orgs of its threads, which the store answers
        (:func:`~obsmem.storage.contract.resource_orgs`), no other thread row."""
        resource = await self.resource_owned(memory, resource_id)
        if self.org_id is not None and any(org != self.org_id for org in await resource_orgs(memory.store, resource)):
            raise ResourceNotFoundError(resource)
        return resource

    async def resource_threads(self, memory: Memory, resource_id: str | None) -> tuple[str, list[Thread]]:
        """The resource (checked, :meth:`resource_whole`: one holding a thread of another org is
        not found before any thread is listed) and all its threads, read a page at a time (a
        thread of another org made meanwhile is refused too, once every thread is read)."""
        resource = await self.resource_whole(memory, resource_id)
        threads = await all_threads(memory.store, resource, page=_PAGE)
        if self.org_id is not None and any(t.org_id != self.org_id for t in threads):
            raise ResourceNotFoundError(resource)
        return resource, threads

    async def _owner(self, memory: Memory, resource: str, first: Thread | None) -> None:
        """ResourceNotFoundError unless ``resource``, whose first thread is ``first``, may be
        this key's org's: that thread's org; with none yet, no other org's live key claims it."""
        if self.org_id is None:
            return
        if first is not None:
            if first.org_id != self.org_id:
                raise ResourceNotFoundError(resource)
            return
        # No thread yet: the resource is the org's whose live keys are bound to it, if any
        # (once it has threads, theirs: keys made before this rule cannot lock its owner out).
        if self.keys is not None and await self.keys.claimed_by_another(resource, self.org_id):
            raise ResourceNotFoundError(resource)

    async def may_bind(self, memory: Memory, keys: KeyStore, org_id: str, resource_id: str | None) -> None:
        """A new key of ``org_id`` bound to ``resource_id``: refused (:class:`ResourceTakenError`)
        when another org holds that resource, by its first thread or a live key bound to it."""
        if resource_id is None:
            return
        if await keys.claimed_by_another(resource_id, org_id):
            raise ResourceTakenError(resource_id)
        first = await _first_thread(memory, resource_id)
        if first is not None and first.org_id != org_id:
            raise ResourceTakenError(resource_id)


async def _first_thread(memory: Memory, resource_id: str) -> Thread | None:
    """The resource's first (oldest) thread, the one whose org holds it: one row read."""
    found = await memory.store.list_threads(resource_id, limit=1)
    return found[0] if found else None


async def _existing(memory: Memory, thread_id: str) -> Thread | None:
    try:
        return await memory.get_thread(thread_id)
    except ThreadNotFoundError:
        return None


#: What reading a receipt obsmem did not write raises: a receipt is a message's metadata
#: (``obsmem_receipt``), which any client may store with its messages, in any shape.
MALFORMED_RECEIPT: tuple[type[Exception], ...] = (LookupError, TypeError, ValueError, OverflowError, AttributeError)


def unreadable_receipt(message_id: str) -> NotFoundError:
    """The not-found error for a message whose stored receipt cannot be read (see
    :data:`MALFORMED_RECEIPT`; obsmem's own errors are raised as they are, before it)."""
    return NotFoundError(
        f"Message '{message_id}' has no receipt obsmem can read: its metadata's 'obsmem_receipt' "
        "was not written by a turn."
    )


def bearer_token(authorization: str | None, api_key_header: str | None = None) -> str | None:
    """The key from ``Authorization: Bearer …`` (what the openai client sends) or ``X-API-Key``."""
    if authorization:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    if api_key_header and api_key_header.strip():
        return api_key_header.strip()
    return None


#: The names a request to ``--dev`` (listening on 127.0.0.1 only) may give in its ``Host`` header.
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names this machine by a loopback name (any port); no header
    (HTTP/1.0, which no browser sends) counts as one."""
    if host is None:
        return True
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8080
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


def check_dev_host(host: str | None, *, dev: bool) -> None:
    """Under ``--dev`` (no keys), PermissionDeniedError for a request whose ``Host`` is not a
    loopback name: a web page whose own host name was re-pointed at 127.0.0.1 (DNS rebinding)
    reaches the dev server from the user's browser, same-origin for that page, so it could read
    every answer; its requests name that page's host."""
    if dev and not loopback_host(host):
        raise PermissionDeniedError(
            "obsmem serve --dev answers requests to 127.0.0.1 or localhost only (this one names "
            f"host {host!r}): without keys, a page re-pointing its own host name here (DNS rebinding) "
            "would read everything. Use 127.0.0.1 or localhost, or serve with API keys."
        )


async def authenticate(keys: KeyStore, token: str | None, *, dev: bool) -> Principal:
    """The principal for ``token``; in dev mode a request without a key is the dev principal."""
    if token is None:
        if dev:
            return Principal.dev()
        raise AuthenticationError("This endpoint needs an API key: send 'Authorization: Bearer om_…'.")
    key = await keys.verify(token)
    if key is None:
        raise AuthenticationError("The API key is malformed, unknown or revoked.")
    return Principal.of(key, keys)

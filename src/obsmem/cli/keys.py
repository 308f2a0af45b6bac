"""``obsmem keys create|list|revoke``: the API keys of ``obsmem serve``, in the store's database.

``create`` prints the key once (only its sha256 is stored); ``list`` never shows secrets.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Coroutine
from typing import Annotated, Any, TypeVar

import typer

from obsmem import ObsmemError
from obsmem.cli.groups import HELP_OPTIONS, print_help_when_bare
from obsmem.cli.render import escape, escape_id, one_line
from obsmem.cli.stores import describe_store, err_console, fail, missing_file, sqlite_path
from obsmem.storage import Store, open_store

__all__ = ["keys_app", "register"]

keys_app = typer.Typer(help="API keys for obsmem serve.", context_settings=HELP_OPTIONS,
                       invoke_without_command=True, add_completion=False)  # fmt: skip

StoreOption = Annotated[
    str | None, typer.Option(help="The store whose database holds the keys (default: the default SQLite file).")
]


T = TypeVar("T")

#: An org or resource id a key may name (as :func:`obsmem.server.access.addressable` checks it).
_ID = re.compile(r"^[^\s/\x00-\x1f]+$")


def register(app: typer.Typer) -> None:
    """Add ``keys`` to ``app``."""
    app.add_typer(keys_app, name="keys")


def _store_errors() -> tuple[type[Exception], ...]:
    """What the key store raises when its database fails: it speaks to SQLite and PostgreSQL
    directly, so their drivers' errors (a damaged file, a server that does not answer) as they are."""
    errors: tuple[type[Exception], ...] = (OSError, sqlite3.Error)
    try:
        import psycopg  # an optional dependency, there only for PostgreSQL stores
    except ImportError:
        return errors
    return (*errors, psycopg.Error)


def _run(work: Coroutine[Any, Any, T]) -> T:
    """Run one key store call; a store that fails ends the command in one line (secrets hidden)."""
    try:
        return asyncio.run(work)
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    except _store_errors() as exc:
        raise fail(f"the key store failed: {exc}") from None


@keys_app.callback()
def _keys(ctx: typer.Context) -> None:
    """API keys for obsmem serve."""
    print_help_when_bare(ctx)


def _key_store(store: str | None, *, existing: bool = True) -> Any:
    """The key store in ``store``; with ``existing`` (reading or revoking keys) a SQLite file that
    does not exist is refused, not created."""
    try:
        from obsmem.server.keys import key_store_for
    except ImportError as exc:
        raise fail(f"keys need the server extra ({exc.name}): pip install 'obsmem[server]'") from None
    try:
        opened = open_store(store)
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    if opened.url == "memory://":
        raise fail("memory:// lives inside one process: keys made here would vanish. Use a SQLite file or PostgreSQL.")
    path = sqlite_path(opened)
    if existing and path is not None and not path.is_file():
        raise missing_file(path)
    err_console.print(f"store: {escape(describe_store(opened))}", soft_wrap=True, highlight=False)
    return key_store_for(opened.url)


def _thread_store(store: str | None) -> Store | None:
    """The memory store in ``store``, to read which org holds a resource; None for a SQLite file
    that does not exist yet (no thread there)."""
    try:
        opened = open_store(store)
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    path = sqlite_path(opened)
    return None if path is not None and not path.is_file() else opened


@keys_app.command()
def create(
    org: Annotated[str, typer.Option(help="The org the key belongs to.")],
    resource: Annotated[str | None, typer.Option(help="Confine the key to this resource (default: the whole org).")] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Reads only: no writes, turns or deletes.")] = False,
    admin: Annotated[bool, typer.Option("--admin", help=(
        "May also create, list and revoke the org's keys (with --resource: that resource's keys only)."
    ))] = False,
    label: Annotated[str | None, typer.Option(help="A note shown by keys list.")] = None,
    store: StoreOption = None,
) -> None:
    """Create a key and print it once; only its hash is stored."""
    # refused here, before the store is opened: a refused key leaves no database file behind
    if not org.strip():
        raise fail("--org must not be empty: name the org the key belongs to")
    if resource is not None and not resource.strip():
        raise fail("--resource must not be empty: name the resource, or leave it out for the whole org")
    # Each is one segment of a knowledge scope (org:<org>/resource:<resource>) and of the API's
    # paths: a key of org 'acme/resource:alice' would read and write alice's knowledge in acme.
    for option, value in (("--org", org), ("--resource", resource)):
        if value is not None and not _ID.match(value):
            raise fail(f"{option} {one_line(value)} holds '/', whitespace or a control character: an id "
                       "is one segment of the API's paths and of knowledge scopes")  # fmt: skip
    keys = _key_store(store, existing=False)
    # read before the key table's setup creates a new SQLite file (a new file holds no thread)
    memory_store = _thread_store(store) if resource is not None else None

    async def run() -> tuple[Any, str]:
        if resource is not None and memory_store is not None:
            # A resource is its first thread's org's (as POST /api/keys checks it): a key of
            # another org would see nothing there, and its claim would lock the owner out.
            async with memory_store:
                first = await memory_store.list_threads(resource, limit=1)
            if first and first[0].org_id is not None and first[0].org_id != org:
                raise fail(f"resource {resource!r} holds threads of another org: resource ids are unique "
                           "across orgs; choose another id")  # fmt: skip
        await keys.setup()
        if resource is not None and await keys.claimed_by_another(resource, org):
            # Two orgs' keys on one resource would lock each other out of it (see obsmem.server.access).
            raise fail(f"resource {resource!r} is already bound to a key of another org: resource ids are "
                       "unique across orgs; choose another id")  # fmt: skip
        made: tuple[Any, str] = await keys.create(org, resource_id=resource, read_only=read_only, admin=admin,
                                                  label=label)  # fmt: skip
        return made

    key, secret = _run(run())
    # the key is stored now: an org or resource that reads as markup ("[/]") must not stop its secret
    err_console.print(f"created key {key.key_id} for org {escape_id(key.org_id)}"
                      + (f", resource {escape_id(key.resource_id)}" if key.resource_id else "")
                      + (" (read-only)" if key.read_only else "") + (" (admin)" if key.admin else "")
                      + "; it is shown only now:", highlight=False)  # fmt: skip
    typer.echo(secret)


@keys_app.command("list")
def list_(
    org: Annotated[str | None, typer.Option(help="Only this org's keys.")] = None,
    store: StoreOption = None,
) -> None:
    """List keys as JSON lines (never their secrets)."""
    keys = _key_store(store)

    async def run() -> list[Any]:
        await keys.setup()
        found: list[Any] = await keys.list(org)
        return found

    for key in _run(run()):
        typer.echo(json.dumps(key.public()))


@keys_app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (the part after om_, as keys list shows it).")],
    store: StoreOption = None,
) -> None:
    """Revoke a key: it stops working at once."""
    keys = _key_store(store)

    async def run() -> bool:
        await keys.setup()
        done: bool = await keys.revoke(key_id)
        return done

    if not _run(run()):
        raise fail(f"no live key {key_id!r}")
    err_console.print(f"revoked {escape_id(key_id)}", highlight=False)

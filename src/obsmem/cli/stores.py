"""Which store a command opened, said the same way by every command.

``open_store`` (the public face) builds the store; this module only describes it: a SQLite store
by its absolute path, PostgreSQL by its URL without the password, ``memory://`` as what it is.
A ``sqlite:///tmp/x.db`` URL keeps the SQLAlchemy meaning (three slashes: a path relative to the
current folder; four: absolute) but is shown resolved, and questioned when its first segment is
a folder at the filesystem root, the sign of a missing fourth slash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup
from rich.console import Console

from obsmem import ObsmemError
from obsmem.cli.render import escape
from obsmem.knowledge import Knowledge
from obsmem.redact import redact_secrets
from obsmem.storage import Store, open_store, postgres_url

__all__ = [
    "SQLITE_PREFIX",
    "JsonCommand",
    "database_file",
    "JsonGroup",
    "describe_store",
    "err_console",
    "fail",
    "json_errors",
    "mask_password",
    "missing_file",
    "open_for_reading",
    "open_reported",
    "relative_url_hint",
    "sqlite_path",
]

SQLITE_PREFIX = "sqlite:///"

#: Status lines ("store: …", hints, errors) go to stderr, so stdout stays the command's result.
#: No emoji codes: an error quoting stored text prints it as written.
err_console = Console(stderr=True, emoji=False)


#: Whether the running command was asked for ``--json`` (see :func:`json_errors`).
_json_errors: ContextVar[bool] = ContextVar("obsmem_cli_json_errors", default=False)


@contextmanager
def json_errors(enabled: bool) -> Iterator[None]:
    """Within it (a command run with ``--json`` when ``enabled``), :func:`fail` also prints the
    error as the command's one JSON document on stdout: ``{"error": {"type", "message"[,
    "argument"]}}``, the REST API's error shape, so a script piping the output into jq reads an
    error, not empty input. ``type`` is the obsmem error's class; the command's own refusals (an
    option, a path) are ``InvalidInputError``, as bad input is over REST."""
    token = _json_errors.set(enabled)
    try:
        yield
    finally:
        _json_errors.reset(token)


def _json_error(kind: str, message: str, argument: str | None) -> None:
    """Print the command's one JSON document for an error (see :func:`json_errors`)."""
    body: dict[str, str] = {"type": kind, "message": message}
    if argument is not None:
        body["argument"] = argument
    typer.echo(json.dumps({"error": body}, indent=2, ensure_ascii=False))


class _JsonUsageErrors:
    """A command with ``--json`` whose command line is refused (an unknown option, a bad value)
    prints that refusal as its JSON document too when ``--json`` is among its arguments: the
    command never ran, so :func:`json_errors` never saw it. Click's usual message still goes to
    stderr, with exit status 2."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        wants_json = "--json" in args
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc, no-any-return]
        except Exception as exc:
            if wants_json:
                _usage_error_as_json(exc)
            raise


def _usage_error_as_json(exc: Exception) -> None:
    """Print click's UsageError (exit status 2) as the JSON document; from whichever click typer
    runs on (typer 0.29 carries its own copy): known by its shape, not its class."""
    if getattr(exc, "exit_code", None) == 2 and hasattr(exc, "format_message"):
        _json_error("InvalidInputError", redact_secrets(exc.format_message()), _option_of(exc))


def _option_of(error: Exception) -> str | None:
    """The option or argument a refused command line is about, when click names one: an unknown
    option's name, or a bad value's parameter (its first flag)."""
    named = getattr(error, "option_name", None)
    if isinstance(named, str):
        return named
    param = getattr(error, "param", None)
    if param is not None:
        opts = [o for o in getattr(param, "opts", None) or [] if isinstance(o, str)]
        name = getattr(param, "name", None)
        return opts[0] if opts else name if isinstance(name, str) else None
    return None


class JsonCommand(_JsonUsageErrors, TyperCommand):
    """A ``--json`` command (``app.command(cls=JsonCommand)``): see :class:`_JsonUsageErrors`."""


class JsonGroup(_JsonUsageErrors, TyperGroup):
    """A ``--json`` group (``typer.Typer(cls=JsonGroup)``): see :class:`_JsonUsageErrors`. A
    command name it does not have is refused after its options are parsed (when it looks the
    command up): that refusal is the JSON document too when the group's ``--json`` was given."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except Exception as exc:
            if ctx.params.get("as_json"):
                _usage_error_as_json(exc)
            raise


#: A line break with the blanks around it: what an error read from a driver (PostgreSQL's
#: '... Connection refused' then an indented 'Is the server running ...?') holds between its lines.
_LINE_BREAK = re.compile(r"[ \t]*[\r\n]\s*")


def fail(message: str, *, error: ObsmemError | None = None, argument: str | None = None) -> typer.Exit:
    """Print ``error: message`` (its secrets hidden) on stderr, on one line (a line break and
    the blanks around it read as one space); the caller raises the returned exit (status 1).
    ``error``: the obsmem error it reports; ``argument``: the option at fault (both for the JSON
    document :func:`json_errors` prints)."""
    text = _LINE_BREAK.sub(" ", redact_secrets(message).strip())
    err_console.print(f"[red]error:[/red] {escape(text)}", soft_wrap=True)
    if _json_errors.get():
        kind = type(error).__name__ if error is not None else "InvalidInputError"
        named = argument if argument is not None else getattr(error, "argument", None)
        _json_error(kind, text, named if isinstance(named, str) else None)
    return typer.Exit(1)


def mask_password(url: str) -> str:
    """``url`` with its secrets hidden (``user:secret@host`` → ``user@host``, ``password=***``):
    :func:`obsmem.redact.redact_secrets`, kept here under its old name."""
    return redact_secrets(url)


def sqlite_path(store: Store) -> Path | None:
    """The absolute file of a SQLite store (its ``url`` is always absolute), else None."""
    if store.url.startswith(SQLITE_PREFIX):
        return Path(store.url[len(SQLITE_PREFIX) :])
    return None


def describe_store(store: Store) -> str:
    """One line naming the store: ``sqlite /abs/path.db``, ``postgresql://user@host/db``, ``memory://``."""
    path = sqlite_path(store)
    if path is not None:
        return f"sqlite {path}"
    if store.url == "memory://":
        return "memory:// (this process only)"
    return mask_password(store.url)


def relative_url_hint(url: str, *, root: Path = Path("/")) -> str | None:
    """A question for ``sqlite:///tmp/x.db``: relative by convention, but ``/tmp`` exists.

    None for absolute URLs (``sqlite:////tmp/x.db``), plain paths, explicitly relative URLs
    (``sqlite:///./tmp/x.db``), and relative URLs whose first segment is not a folder at ``root``.
    """
    text = url.strip()
    if not text.startswith(SQLITE_PREFIX):
        return None
    relative = text[len(SQLITE_PREFIX) :]
    if not relative or relative.startswith(("/", "~", "./", "../")):  # absolute, or explicitly relative
        return None
    first = Path(relative).parts[0]
    if not (root / first).is_dir() or Path.cwd() == root:
        return None
    return (
        f"'{text}' is relative to the current folder (three slashes); "
        f"did you mean sqlite:////{relative}?"
    )


def open_reported(url: str, **options: object) -> Store:
    """``open_store(url, **options)``, then ``store: …`` on stderr (and the hint for a doubtful
    relative URL). An unusable URL ends the command with a one-line error.
    """
    try:
        store = open_store(url, **options)
    except ObsmemError as exc:
        raise fail(str(exc), error=exc) from None
    err_console.print(f"store: {escape(describe_store(store))}", soft_wrap=True, highlight=False)
    hint = relative_url_hint(url)
    if hint is not None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(hint)}", soft_wrap=True, highlight=False)
    return store


def open_for_reading(url: str) -> Store:
    """A store to inspect: refuses ``memory://`` (empty in a new process) and a SQLite file that
    does not exist (opening it would create an empty one), each in one line."""
    if url.strip() == "memory://":
        raise fail("memory:// lives inside one process and is empty in a new process: nothing to show. "
                   "Point --store at a SQLite file or a postgresql:// URL.")  # fmt: skip
    store = open_reported(url)
    path = sqlite_path(store)
    if path is not None and not path.is_file():
        raise missing_file(path)
    return store


#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def _is_database(path: Path) -> bool:
    try:
        if not path.is_file():  # a pipe, a FIFO, /dev/fd/N: reading its head would block (and eat it)
            return False
        with path.open("rb") as file:
            return file.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:  # missing, a folder, unreadable: the command's own write says so
        return False


def database_file(path: Path) -> str | None:
    """What makes ``path`` no file for a command to write its output to (``export -o``, ``bench
    --json``): "is a SQLite database" (a store, every resource in it, would be replaced), or
    "belongs to the SQLite database beside it" (its -wal, -shm or -journal); None for any other."""
    for suffix in ("-wal", "-shm", "-journal"):
        if path.name.endswith(suffix) and _is_database(path.with_name(path.name.removesuffix(suffix))):
            return "belongs to the SQLite database beside it"
    return "is a SQLite database" if _is_database(path) else None


def missing_file(path: Path, what: str = "database") -> typer.Exit:
    """The refusal of a SQLite file that does not exist, where a command reads or erases (opening
    it would create an empty one, and a typo would report work that never happened). A folder
    there is named as one: "no database at" a path that exists would puzzle."""
    if path.is_dir():
        return fail(f"{path.absolute()} is a folder, not a {what}; pass the {what} file in it (e.g. "
                    f"{path.absolute() / 'obsmem.db'}).")  # fmt: skip
    return fail(f"no {what} at {path.absolute()}; check the path (sqlite:///rel/path.db is relative to the "
                "current folder, sqlite:////abs/path.db is absolute).")  # fmt: skip


KnowledgeOption = Annotated[
    str | None,
    typer.Option("--knowledge", help="The knowledge store (a SQLite file or a postgresql:// URL; it may be the "
                                     "same database as --store)."),  # fmt: skip
]


def open_knowledge(url: str, *, actor: str = "obsmem-cli", existing: bool = False) -> Knowledge:
    """The knowledge store named by ``--knowledge`` (a PostgreSQL URL, or a SQLite file as a path
    or ``sqlite:///`` URL), acting as ``actor`` in its audit log; then ``knowledge: …`` on stderr
    (password masked). An unusable URL ends the command with a one-line error, and so does, with
    ``existing`` (a command that reads or erases), a SQLite file that does not exist: opening it
    would create an empty one, and a typo in the path would report an erase that never happened."""
    text = url.strip()
    try:
        if text.startswith(("postgres://", "postgresql://", "postgresql+")):
            knowledge = Knowledge.postgres(postgres_url(text)[0], actor=actor)
        else:
            path = Path(text.removeprefix("sqlite:///")).expanduser()
            if existing and not path.is_file():
                raise missing_file(path, "knowledge store")
            knowledge = Knowledge.sqlite(path, actor=actor)
    except ObsmemError as exc:
        raise fail(str(exc)) from None
    err_console.print(f"knowledge: {escape(mask_password(text))}", soft_wrap=True, highlight=False)
    return knowledge


"""Private SQLite files: how obsmem creates the database files it owns (store, knowledge, vectors).

A memory holds what users and tools said, so its files are the user's alone, whatever the
umask: a folder obsmem creates is 0700, a database file it creates is 0600, and SQLite gives
the ``-wal`` and ``-shm`` files the database's mode. Folders and files that already exist keep
their modes (a project folder or ``/tmp`` is not obsmem's to change). An existing *empty*
file is refused, because obsmem never leaves one: it is a database lost to a crash or a bad
copy, and opening it would silently start a new, empty memory in its place.

This module sits in the foundation (it imports only :mod:`obsmem.errors`), so every layer that
keeps a SQLite file (storage, knowledge, vectors) shares one rule.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from pathlib import Path

from obsmem.errors import StorageError

__all__ = ["empty_file_error", "make_private_dirs", "prepare_database_file", "untouched_reader"]


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and any missing parents as 0700, whatever the umask; folders that
    already exist are left as they are (a user's ``/tmp`` or project folder is not ours)."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:  # another process made it first: theirs, as it is
            continue
        os.chmod(path, 0o700)  # mkdir's mode is masked by the umask; this is not


def empty_file_error(path: Path) -> StorageError:
    """The refusal of an existing 0-byte database file, naming it and what to do."""
    return StorageError(
        f"The SQLite store {path} is an empty file (0 bytes), not an obsmem database: a crash, a "
        "failed copy or a failed restore can leave one. obsmem will not silently turn it into a new, "
        "empty store. Restore the database from a backup, or delete the file to start a new store."
    )


def prepare_database_file(path: Path, *, allow_empty: bool = False, page_size: int | None = None) -> None:
    """Get ``path`` ready to be opened by SQLite.

    - a missing folder is created private (0700; existing folders keep their modes);
    - a missing database is created private (0600, whatever the umask; SQLite gives its
      ``-wal`` and ``-shm`` files the database's mode), already a valid, non-empty SQLite file
      in WAL mode (with ``page_size`` when given: a page size can only be chosen before the
      first page is written): it is initialised under a temporary name and linked into place,
      so no other process ever sees it empty (two that create it at once: the first link wins,
      both use it);
    - an existing database keeps its mode (obsmem never changes the permissions of a file it
      did not create);
    - an existing *empty* file is refused with :class:`~obsmem.errors.StorageError` naming it:
      obsmem never leaves one behind, so it is a database lost to a crash or a bad copy, and
      opening it would silently start a new, empty memory in its place. ``allow_empty`` lets
      an explicit ``migrate`` (``obsmem migrate``) initialise one on purpose.
    """
    make_private_dirs(path.parent)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        _create_database_file(path, page_size)
        return
    if size == 0 and not allow_empty:
        raise empty_file_error(path)


def _create_database_file(path: Path, page_size: int | None) -> None:
    staging = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    fd = os.open(staging, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        os.chmod(staging, 0o600)  # the open mode is masked by the umask; this is not
        conn = sqlite3.connect(staging, isolation_level=None)
        try:
            if page_size is not None:
                conn.execute(f"PRAGMA page_size = {int(page_size)}")
            conn.execute("PRAGMA journal_mode = WAL")  # writes the header: the file is never empty
        finally:
            conn.close()
        try:
            os.link(staging, path)
        except FileExistsError:
            pass  # another process created it meanwhile: use theirs
        except OSError:  # a filesystem without hard links
            if not path.exists():
                os.replace(staging, path)
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            staging.with_name(staging.name + suffix).unlink(missing_ok=True)
    if path.stat().st_size == 0:  # pragma: no cover - someone else put an empty file there
        raise empty_file_error(path)


def untouched_reader(path: Path, timeout: float) -> sqlite3.Connection | None:
    """A connection that reads ``path`` and writes nothing (no folder, no file, no WAL files), for a
    migration's dry run; None when the file does not exist. It is opened read-only, and read as
    immutable when no other connection has it open (no ``-wal`` file beside it), since even a
    read-only connection to a WAL database would leave ``-wal`` and ``-shm`` behind."""
    if not path.exists():
        return None
    in_use = path.with_name(path.name + "-wal").exists()
    uri = f"{path.as_uri()}?{'mode=ro' if in_use else 'immutable=1'}"
    return sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)

"""Keys of the notes obsmem keeps in a store's working-memory rows while a write of several
steps is under way, so that a process killed midway (SIGKILL, the OOM killer) leaves a note the
next call finishes from. Named here, below their writers, so that every delete of what a note is
about can take the note too; :func:`key_id` is also how a lease key names a thread."""

from __future__ import annotations

import hashlib
import urllib.parse
from typing import Literal

__all__ = [
    "ERASE_UNFINISHED", "ERASING", "IMPORTING", "LANE_AGENTS", "LANE_PREFIX", "erasing_note", "import_note", "key_id",
]

#: An import under way (:func:`obsmem.transfer.import_resource`): the threads, lineages and
#: working-memory keys it writes, kept until it is done.
IMPORTING = "obsmem:importing:"
#: An erase under way (``Memory.delete_thread`` / ``delete_resource``), until it is done:
#: ``thread:<id>`` -> its resource and org; ``resource:<id>`` -> the threads (id -> org) a delete
#: of it, or of one of its threads, has begun to delete. Only ids.
ERASING = "obsmem:erasing:"

#: The SQLite store's row that says an erase began and its files are not cleaned yet (rebuilt,
#: log truncated): ``SQLiteStore.note_erase``; the next open does a noted clean-up first.
ERASE_UNFINISHED = "obsmem:erase-unfinished"

#: The knowledge agents' lanes (:mod:`obsmem.knowledge.agents.lanes`): one row per agent and
#: thread, ``<LANE_PREFIX><agent>:<thread id>``, and the index of them, ``<LANE_PREFIX>index``.
#: Named here so that a thread's delete finds its lane rows without loading the knowledge package.
LANE_PREFIX = "obsmem:knowledge:lane:"
LANE_AGENTS = ("capture", "curate", "learn")

#: The longest quoted id a key holds as it is (a long id quoted can triple in length).
KEY_ID_MAX = 512


def key_id(ident: str) -> str:
    """``ident`` as a part of a key: percent-quoted (no ':' left in it, so a key's last ':' ends
    what comes before it), or when that is over :data:`KEY_ID_MAX` characters ``#sha256=<hex>``
    of it (``#`` and ``=`` are in no quoted id, so no two ids share one). Every key then stays
    one PostgreSQL's index takes (about 2,700 bytes a row) for every id it stores: a note it could
    not write would make a thread undeletable, a lease it could not take would fail the turn."""
    quoted = urllib.parse.quote(ident, safe="")
    if len(quoted) > KEY_ID_MAX:
        quoted = "#sha256=" + hashlib.sha256(ident.encode()).hexdigest()
    return quoted


def import_note(resource_id: str) -> str:
    """The key of the note of an import of ``resource_id`` under way."""
    return IMPORTING + key_id(resource_id)


def erasing_note(kind: Literal["thread", "resource"], ident: str) -> str:
    """The key of the note of an erase of thread or resource ``ident`` under way."""
    return f"{ERASING}{kind}:{key_id(ident)}"


#: The working-memory key of the store's erase token: a random value every erase (a delete, a
#: forget) writes when it is done, so another process that keeps text in its own caches (an
#: ``obsmem worker``) sees that something was erased and drops what it keeps (it cannot know what).
ERASED = "obsmem:erased"

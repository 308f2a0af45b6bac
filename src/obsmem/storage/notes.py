"""Keys of the notes obsmem keeps in a store's working-memory rows while a write of several
steps is under way, so that a process killed midway (SIGKILL, the OOM killer) leaves a note the
next call finishes from. Named here, below their writers, so that every delete of what a note is
about can take the note too."""

from __future__ import annotations

import hashlib
import urllib.parse

__all__ = ["IMPORTING", "import_note"]

#: An import under way (:func:`obsmem.transfer.import_resource`): the threads, lineages and
#: working-memory keys it writes, kept until it is done.
IMPORTING = "obsmem:importing:"


def import_note(resource_id: str) -> str:
    """The key of the note of an import of ``resource_id`` under way: the id percent-quoted, or
    when that is over 512 characters ``sha256:<hex>`` of it (no quoted id holds ':'), so the key
    stays one PostgreSQL's index takes (about 2,700 bytes a row) for every id it stores."""
    quoted = urllib.parse.quote(resource_id, safe="")
    if len(quoted) > 512:
        quoted = "sha256:" + hashlib.sha256(resource_id.encode()).hexdigest()
    return IMPORTING + quoted

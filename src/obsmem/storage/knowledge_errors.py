"""Errors of the knowledge store, as subclasses of the one tree in :mod:`obsmem.errors`.

They live here until the lead folds them into ``obsmem.errors``; callers that catch
``InvalidInputError``, ``NotFoundError`` or ``StorageError`` already catch them.

::

    InvalidInputError
    ├── InvalidScopeError          a scope string or id is malformed
    ├── CeilingExceededError       a record would sit above its ceiling
    ├── CeilingLoweredError        a ceiling change would narrow it
    ├── InvalidWhenError           an unparseable or backwards fact time
    ├── DescriptionTooLongError    a node description over 400 characters
    └── InvalidMergeError          self-merge, cycle, or a target narrower than the source
    NotFoundError
    └── KnowledgeNotFoundError     no visible node/record with that id
        └── UnresolvedMentionError a wikilink target vanished before the write
    StorageError
    ├── NameConflictError          a rename onto an existing name in the same scope
    ├── TombstonedValueError       the value was deleted with a tombstone; capture refused
    └── StaleSemanticIndexError    the vector index could not be brought up to date
"""

from __future__ import annotations

from obsmem.errors import InvalidInputError, NotFoundError, StorageError

__all__ = [
    "CeilingExceededError",
    "CeilingLoweredError",
    "DescriptionTooLongError",
    "InvalidMergeError",
    "InvalidScopeError",
    "InvalidWhenError",
    "KnowledgeNotFoundError",
    "NameConflictError",
    "StaleSemanticIndexError",
    "TombstonedValueError",
    "UnresolvedMentionError",
]


class InvalidScopeError(InvalidInputError):
    """A scope string or id is malformed."""


class CeilingExceededError(InvalidInputError):
    """A record's scope is broader than its ceiling allows."""


class CeilingLoweredError(InvalidInputError):
    """A ceiling change would narrow it; ceilings can only be raised (broadened)."""


class InvalidWhenError(InvalidInputError):
    """A ``when`` value could not be parsed or is an empty/backwards interval."""


class DescriptionTooLongError(InvalidInputError):
    def __init__(self, length: int, limit: int) -> None:
        super().__init__(
            f"A node description is {length} characters; the limit is {limit}. Shorten it and put "
            "the long form in the node's content."
        )


class InvalidMergeError(InvalidInputError):
    """A merge that would be a self-merge, a cycle, or move knowledge to a narrower scope."""


class KnowledgeNotFoundError(NotFoundError):
    """No node or record with that id is visible from the scope asked."""


class UnresolvedMentionError(KnowledgeNotFoundError):
    """A wikilink target could not be resolved or disappeared before the write committed."""


class NameConflictError(StorageError):
    """Another node already has that name in that scope."""


class TombstonedValueError(StorageError):
    """The value was deleted with a tombstone for this node and scope, so it cannot come back."""

    def __init__(self, node_id: str, scope: str, value: str) -> None:
        self.node_id = node_id
        self.scope = scope
        self.value = value
        super().__init__(
            f"The value {value!r} of node '{node_id}' was tombstoned in scope '{scope}', so it is not "
            "captured again. Remove the tombstone (or capture a corrected value) if it is true now."
        )


class StaleSemanticIndexError(StorageError):
    """The semantic index could not be brought up to date; search results may be stale."""

"""Every error obsmem raises, in one tree.

Callers catch :class:`ObsmemError` for everything, or a precise subclass. Errors that are
also a Python builtin category inherit from it too (``ConfigError`` is a ``ValueError``), so
generic handlers keep working. Every message says what was wrong and what to do about it.

::

    ObsmemError
    ├── ConfigError(ValueError)              an option has a value outside its allowed range
    ├── InvalidInputError(ValueError)        a message, part or argument is malformed
    │   ├── ExportFormatError                a line of an export file is malformed (its number)
    │   ├── KnowledgeReachError              an imported knowledge row beyond the importer's scope
│   │   └── ExportVersionError           an export format version this release cannot read
│   ├── InvalidScopeError                a knowledge scope string or id is malformed
    │   ├── CeilingExceededError             a record would sit above its ceiling
    │   ├── CeilingLoweredError              a ceiling change would narrow it
    │   ├── InvalidWhenError                 an unparseable or backwards fact time
    │   ├── DescriptionTooLongError          a node description over 400 characters
    │   └── InvalidMergeError                self-merge, cycle, or a narrower target
    ├── NotFoundError(LookupError)
    │   ├── ThreadNotFoundError
    │   ├── MessageNotFoundError
    │   ├── RecallNotFoundError              not within reach of this recall (or nowhere)
    │   └── KnowledgeNotFoundError           no visible knowledge node/record with that id
    │       └── UnresolvedMentionError       a wikilink target vanished before the write
    ├── StorageError                         the store failed or refused an operation
    │   ├── MigrationError
    │   ├── StoreClosedError
    │   ├── LeaseLostError
    │   ├── ThreadChangedError               a save guarded by ``after_seq`` found a newer tool message
    │   ├── NameConflictError                a node rename onto an existing name in its scope
    │   ├── ImportConflictError              the target store already holds the imported resource
│   ├── ImportUnsupportedError           an export item this import cannot write exactly
│   ├── TombstonedValueError             a deleted value may not be captured again
    │   └── StaleSemanticIndexError          the knowledge vector index could not catch up
    ├── ModelError                           a chat model call failed
    │   ├── MissingCredentialsError
    │   ├── ModelUnavailableError            transient: retrying may help
    │   │   └── IncompleteResponseError      finish reason other than stop/length
    │   ├── ModelOutputError                 malformed, empty or degenerate output
    │   │   └── DegenerateOutputError
    │   └── ModelRequestError                permanent: the request itself was refused
    ├── ObservationError                     an observation cycle failed (messages stay pending)
    ├── ReflectionError                      a reflection failed (observations are kept)
    ├── PrivacyError                         a scope's text may not go to the configured model
    └── OperationAbortedError                the caller aborted the operation

A stale compare-and-set is *not* an error: storage reports it as a result. The one exception is
``save_messages(after_seq=...)`` (whose result is the messages saved): ``ThreadChangedError``.
"""

from __future__ import annotations

__all__ = [
    "CeilingExceededError",
    "CeilingLoweredError",
    "ConfigError",
    "DegenerateOutputError",
    "DescriptionTooLongError",
    "ExportFormatError",
    "ExportVersionError",
    "ImportConflictError",
    "ImportUnsupportedError",
    "IncompleteResponseError",
    "InvalidInputError",
    "InvalidMergeError",
    "InvalidScopeError",
    "InvalidWhenError",
    "KnowledgeNotFoundError",
    "KnowledgeReachError",
    "LeaseLostError",
    "MessageNotFoundError",
    "MigrationError",
    "MissingCredentialsError",
    "ModelError",
    "ModelOutputError",
    "ModelRequestError",
    "ModelUnavailableError",
    "NameConflictError",
    "NotFoundError",
    "ObservationError",
    "ObsmemError",
    "OperationAbortedError",
    "PrivacyError",
    "RecallNotFoundError",
    "ReflectionError",
    "StaleSemanticIndexError",
    "StorageError",
    "StoreClosedError",
    "ThreadChangedError",
    "ThreadNotFoundError",
    "TombstonedValueError",
    "UnresolvedMentionError",
]


class ObsmemError(Exception):
    """Root of every error raised by obsmem.

    ``input_saved`` is set on an error raised by a turn boundary (``begin_turn``, ``step``,
    ``end``): whether that call's input was stored before the failure (a retry with the same
    Message objects is safe either way); None on every other error.
    """

    input_saved: bool | None = None


class ConfigError(ObsmemError, ValueError):
    """An option was given a value outside its allowed range.

    ``option`` is the dotted option name (``observation.message_tokens``) so the message can
    point at exactly what to change.
    """

    def __init__(self, option: str, problem: str, *, allowed: str | None = None) -> None:
        self.option = option
        self.problem = problem
        self.allowed = allowed
        message = f"Invalid value for option '{option}': {problem}"
        if allowed:
            message += f" (allowed: {allowed})"
        super().__init__(message)


class InvalidInputError(ObsmemError, ValueError):
    """Caller-supplied data (a message, a part, an argument) is malformed.

    ``argument`` names the argument at fault (``thread_id``, ``messages[2]``) when one is known;
    the message always says it.
    """

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        self.argument = argument
        super().__init__(message)


class KnowledgeReachError(InvalidInputError):
    """A knowledge row of an imported export lies beyond the ``knowledge_reach`` the import may
    write (:func:`obsmem.transfer.import_resource`); nothing was imported."""

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {problem}. Nothing was imported.", argument="source")


class NotFoundError(ObsmemError, LookupError):
    """Something that was asked for by id does not exist."""


class ThreadNotFoundError(NotFoundError):
    """No thread with that id exists in the store (``thread_id`` names it)."""

    def __init__(self, thread_id: str, message: str | None = None) -> None:
        self.thread_id = thread_id
        super().__init__(
            message
            or f"Thread '{thread_id}' does not exist. Create it with memory.create_thread(...) "
            "or start a turn with a resource_id so obsmem creates it."
        )


class MessageNotFoundError(NotFoundError):
    """No message with that id exists in the store (``message_id`` names it)."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        super().__init__(f"Message '{message_id}' does not exist in this store.")


class RecallNotFoundError(NotFoundError):
    """A recall asked for a group, message or thread outside its scope, or one that does not exist.

    The two cases read the same on purpose: telling them apart would let a recall probe
    which ids exist in other conversations or other users' memory.
    """

    def __init__(self, what: str, ident: str, scope: str) -> None:
        self.what = what
        self.ident = ident
        super().__init__(
            f"No {what} '{ident}' is within reach of this recall ({scope}). Use a group id shown in "
            "your observations, a message id returned by an earlier recall, or mode='threads' to list "
            "the conversations you can read."
        )


class StorageError(ObsmemError):
    """The store failed, or refused an operation that would break its guarantees."""


class MigrationError(StorageError):
    """A schema migration could not be applied or the schema is newer than this obsmem."""


class StoreClosedError(StorageError):
    """The store was used after ``close()``/``async with`` ended; open a new one."""

    def __init__(self) -> None:
        super().__init__("The store has been closed; open a new one with open_store(...).")


class LeaseLostError(StorageError):
    """A lease on a piece of background work expired and another worker took it over."""


class ThreadChangedError(StorageError):
    """``save_messages(..., after_seq=N)`` found a message newer than ``N`` in the thread that calls
    or answers a tool (another turn or process wrote meanwhile): nothing was saved. Read the
    thread again, check the messages' place against it, and save with the new newest seq. A
    turn does this itself."""

    def __init__(self, thread_id: str, after_seq: int, newest: int) -> None:
        super().__init__(
            f"Thread '{thread_id}' changed: message seq {newest}, newer than {after_seq} (the newest the save was "
            "checked against), calls or answers a tool; nothing was saved."
        )
        self.thread_id = thread_id
        self.after_seq = after_seq
        self.newest = newest


class ModelError(ObsmemError):
    """A chat model call failed."""


class MissingCredentialsError(ModelError):
    """A provider needs an API key and its environment variable (``env_var``) is not set."""

    def __init__(self, provider: str, env_var: str) -> None:
        self.provider = provider
        self.env_var = env_var
        super().__init__(f"No API key for {provider}: set the environment variable {env_var}.")


class ModelUnavailableError(ModelError):
    """A transient failure: rate limit, server error, timeout, dropped connection.

    ``status_code`` is the HTTP status when there was one; ``retry_after`` is the delay in
    seconds the provider asked for, when it said.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ) -> None:
        self.status_code = status_code
        self.retry_after = retry_after
        super().__init__(message)


class IncompleteResponseError(ModelUnavailableError):
    """The model stopped for a reason other than ``stop``/``length``; retrying may succeed."""

    def __init__(self, finish_reason: str) -> None:
        self.finish_reason = finish_reason
        super().__init__(
            f"The model returned an incomplete response (finish reason '{finish_reason}'); "
            "it will be retried."
        )


class ModelRequestError(ModelError):
    """A permanent failure: bad request, bad key, unknown model. Retrying will not help."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class ResponseTooLargeError(ModelRequestError):
    """A provider answer passed a size limit (``setting`` = ``limit``); reading stopped there.

    Permanent: a server that floods once floods again, so the call is not retried.
    """

    def __init__(self, message: str, *, setting: str, limit: int) -> None:
        self.setting = setting
        self.limit = limit
        super().__init__(message)


class ModelOutputError(ModelError):
    """The model answered, but its output cannot be used (malformed or empty)."""


class DegenerateOutputError(ModelOutputError):
    """The model's output is a repetition loop; it is never committed to memory."""


class ObservationError(ObsmemError):
    """An observation cycle failed. The messages it covered stay pending and will be retried."""


class ReflectionError(ObsmemError):
    """A reflection failed. The active observations were left untouched."""


class PrivacyError(ObsmemError):
    """The privacy allow-list forbids sending a scope's text to the role's model (``strict``).

    ``provider`` is the model's provider, ``scope`` the thread/resource ids of the request, and
    ``role`` "observation" or "reflection". Without ``privacy.strict`` the offline role is used
    instead and nothing is raised.
    """

    def __init__(self, *, role: str, provider: str, scope: str) -> None:
        self.role = role
        self.provider = provider
        self.scope = scope
        super().__init__(
            f"The {role} model's provider '{provider}' may not see the text of {scope} (privacy.providers). "
            "Allow the provider for this scope, or turn privacy.strict off to use the offline rules instead."
        )


class OperationAbortedError(ObsmemError):
    """The caller aborted the operation (an abort signal or a cancelled task)."""

    def __init__(self, what: str = "operation") -> None:
        super().__init__(f"The {what} was aborted by the caller.")


# -- the knowledge store ------------------------------------------------------------------


class InvalidScopeError(InvalidInputError):
    """A scope string or id is malformed."""


class CeilingExceededError(InvalidInputError):
    """A record's scope is broader than its ceiling allows."""


class CeilingLoweredError(InvalidInputError):
    """A ceiling change would narrow it; ceilings can only be raised (broadened)."""


class InvalidWhenError(InvalidInputError):
    """A ``when`` value could not be parsed or is an empty/backwards interval."""


class DescriptionTooLongError(InvalidInputError):
    """A knowledge node description is longer than the limit (400 characters)."""

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


class ExportFormatError(InvalidInputError):
    """A line of an export file is malformed; ``line`` is its 1-based number (0: the file as a whole)."""

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        where = f"line {line}" if line else "the export file"
        super().__init__(f"{where}: {problem}. Nothing was imported.", argument="source")


class ExportVersionError(ExportFormatError):
    """The file was written by a format version this obsmem cannot read."""

    def __init__(self, version: object) -> None:
        self.version = version
        super().__init__(
            1,
            f"export format version {version!r} is not supported (this obsmem reads version "
            f"1); import it with the obsmem release that wrote it, or a newer one",
        )


class ImportConflictError(StorageError):
    """The target store already holds what the import would write (the resource or a thread id)."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"{problem}; nothing was imported. Import into a store that does not hold it.")


class ImportUnsupportedError(StorageError):
    """The file holds something this import cannot write exactly (kept for callers that catch it;
    knowledge is imported since the knowledge store gained its restoring write)."""

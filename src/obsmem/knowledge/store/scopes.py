"""Scope algebra for the knowledge store: org < resource < thread, as canonical path keys.

A scope is a chain from an organisation down to, at most, one thread::

    org:acme
    org:acme/resource:alice
    org:acme/resource:alice/thread:t1

Why a path and not a set of tags: visibility is containment, and with a path it is a prefix
test on whole segments. An item stored under scope ``S`` is visible from a query scope ``Q``
exactly when ``S`` is ``Q`` or one of its ancestors, so a query can only ever see the (at most
three) keys of its own chain. Two sibling threads share their resource and org ancestors but
never each other's key, so they cannot see each other's thread-private items.

The *ceiling* (``max_scope``) of a record is the broadest level it may be stored at: a record
with ceiling ``thread`` may never be promoted to ``resource`` or ``org``. :func:`clamp_level`
narrows a proposed level to a ceiling (capture uses it instead of refusing the record).

Ids may contain ``:`` (``thread:subconscious:t1:remind`` is the thread
``subconscious:t1:remind``) but not ``/``, whitespace or control characters.

Pure: no I/O, standard library only, so both the storage adapters and the engine can use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from obsmem.errors import CeilingExceededError, CeilingLoweredError, InvalidScopeError

__all__ = [
    "CeilingExceededError",
    "CeilingLoweredError",
    "InvalidScopeError",
    "Level",
    "Scope",
    "check_ceiling_raise",
    "check_within_ceiling",
    "clamp_level",
    "parse_level",
]

_ID = re.compile(r"^[^\s/\x00-\x1f]+$")


class Level(IntEnum):
    """Scope levels ordered broad → narrow, so ``a < b`` means ``a`` is broader than ``b``."""

    ORG = 0
    RESOURCE = 1
    THREAD = 2

    @property
    def label(self) -> str:
        return self.name.lower()


def parse_level(value: str | Level) -> Level:
    """``"org"``/``"resource"``/``"thread"`` (any case) or a :class:`Level` → a :class:`Level`."""
    if isinstance(value, Level):
        return value
    try:
        return Level[value.strip().upper()]
    except KeyError:
        raise InvalidScopeError(
            f"Unknown scope level '{value}'; use one of 'org', 'resource', 'thread'."
        ) from None


def _check_id(level: str, value: str) -> str:
    if not _ID.match(value):
        raise InvalidScopeError(
            f"Invalid {level} id {value!r}: ids must be non-empty and contain no whitespace, "
            "'/' or control characters."
        )
    return value


@dataclass(frozen=True, slots=True, order=False)
class Scope:
    """One scope chain; construct with ``Scope("acme", "alice", "t1")`` or :meth:`parse`."""

    org: str
    resource: str | None = None
    thread: str | None = None

    def __post_init__(self) -> None:
        _check_id("org", self.org)
        if self.resource is not None:
            _check_id("resource", self.resource)
        if self.thread is not None:
            if self.resource is None:
                raise InvalidScopeError(
                    f"Thread scope '{self.thread}' needs a resource: a thread always belongs "
                    "to a resource, e.g. Scope(org, resource, thread)."
                )
            _check_id("thread", self.thread)

    @classmethod
    def parse(cls, key: str | Scope) -> Scope:
        """Parse a canonical key (``org:a/resource:b/thread:c``); a :class:`Scope` passes through."""
        if isinstance(key, Scope):
            return key
        segments = key.split("/") if key else []
        expected = ("org", "resource", "thread")
        if not 1 <= len(segments) <= 3:
            raise InvalidScopeError(
                f"Invalid scope {key!r}: write 'org:<id>', 'org:<id>/resource:<id>' or "
                "'org:<id>/resource:<id>/thread:<id>'."
            )
        ids: list[str] = []
        for segment, level in zip(segments, expected[: len(segments)], strict=True):
            prefix = f"{level}:"
            if not segment.startswith(prefix):
                raise InvalidScopeError(
                    f"Invalid scope {key!r}: segment {segment!r} should start with '{prefix}' "
                    "(levels go org, then resource, then thread)."
                )
            ids.append(segment[len(prefix) :])
        return cls(*ids)

    @property
    def key(self) -> str:
        """The canonical string form, used as the storage key."""
        parts = [f"org:{self.org}"]
        if self.resource is not None:
            parts.append(f"resource:{self.resource}")
        if self.thread is not None:
            parts.append(f"thread:{self.thread}")
        return "/".join(parts)

    def __str__(self) -> str:
        return self.key

    @property
    def level(self) -> Level:
        """The narrowest level of the chain."""
        if self.thread is not None:
            return Level.THREAD
        if self.resource is not None:
            return Level.RESOURCE
        return Level.ORG

    def at(self, level: Level | str) -> Scope:
        """This chain cut to ``level`` (an ancestor or itself); error if the chain is broader."""
        wanted = parse_level(level)
        if wanted > self.level:
            raise InvalidScopeError(
                f"Scope '{self.key}' has no {wanted.label} level; pass a scope that names one."
            )
        return Scope(
            self.org,
            self.resource if wanted >= Level.RESOURCE else None,
            self.thread if wanted >= Level.THREAD else None,
        )

    def chain(self) -> list[Scope]:
        """Itself and its ancestors, narrow → broad (the order names are resolved in)."""
        return [self.at(Level(level)) for level in range(self.level, -1, -1)]

    def visible_keys(self) -> list[str]:
        """Keys of every scope whose items this scope may read, narrow → broad."""
        return [scope.key for scope in self.chain()]

    def sees(self, item_scope: Scope | str) -> bool:
        """Whether an item stored under ``item_scope`` is visible from this scope."""
        other = Scope.parse(item_scope)
        return other.level <= self.level and self.at(other.level) == other

    def contains(self, other: Scope | str) -> bool:
        """Whether ``other`` is this scope or lies below it (the reverse of :meth:`sees`)."""
        return Scope.parse(other).sees(self)


def check_within_ceiling(scope: Scope | str, ceiling: Level) -> None:
    """Refuse a scope broader than ``ceiling`` (e.g. ``org:a`` under a ``resource`` ceiling)."""
    parsed = Scope.parse(scope)
    if parsed.level < ceiling:
        raise CeilingExceededError(
            f"Scope '{parsed.key}' exceeds the record's {ceiling.label} ceiling: it may be stored "
            f"at {ceiling.label} level or narrower. Raise the ceiling first (raise_ceiling) if the "
            "broader scope is intended."
        )


def check_ceiling_raise(current: Level, proposed: Level) -> None:
    """Refuse a ceiling change that would narrow it; equal is allowed (a no-op)."""
    if proposed > current:
        raise CeilingLoweredError(
            f"A ceiling cannot be lowered (from {current.label} to {proposed.label}); "
            "ceilings only move to broader levels."
        )


def clamp_level(proposed: Level, ceiling: Level) -> Level:
    """Narrow ``proposed`` to ``ceiling`` when it is broader; otherwise keep it."""
    return max(proposed, ceiling)

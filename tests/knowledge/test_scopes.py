"""Scope algebra: canonical keys, containment, siblings, ceilings (pure, table-driven)."""

from __future__ import annotations

import pytest

from obsmem.errors import CeilingExceededError, CeilingLoweredError, InvalidInputError, InvalidScopeError
from obsmem.knowledge.store.scopes import (
    Level,
    Scope,
    check_ceiling_raise,
    check_within_ceiling,
    clamp_level,
    parse_level,
)

ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"
BOB = "org:acme/resource:bob"
OTHER_ORG = "org:zeta"


@pytest.mark.parametrize(
    ("scope", "key", "level"),
    [
        (Scope("acme"), ORG, Level.ORG),
        (Scope("acme", "alice"), RES, Level.RESOURCE),
        (Scope("acme", "alice", "t1"), T1, Level.THREAD),
    ],
)
def test_canonical_key_round_trips(scope: Scope, key: str, level: Level) -> None:
    assert scope.key == key
    assert Scope.parse(key) == scope
    assert scope.level is level


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "acme",
        "resource:alice",
        "org:",
        "org:acme/thread:t1",
        "org:acme/resource:alice/thread:t1/thread:t2",
        "org:a b",
        "org:acme/resource:al/ice",
        "org:acme\x1f",
        "org:acme/resource:alice/thread:",
    ],
)
def test_malformed_scopes_are_refused(bad: str) -> None:
    with pytest.raises(InvalidScopeError):
        Scope.parse(bad)


def test_ids_may_contain_colons() -> None:
    scope = Scope.parse("org:acme/resource:alice/thread:subconscious:t1:remind")
    assert scope.thread == "subconscious:t1:remind"
    assert scope.key == "org:acme/resource:alice/thread:subconscious:t1:remind"


def test_a_thread_needs_a_resource() -> None:
    with pytest.raises(InvalidScopeError, match="needs a resource"):
        Scope("acme", None, "t1")


@pytest.mark.parametrize(
    ("query", "item", "visible"),
    [
        (T1, T1, True),
        (T1, RES, True),
        (T1, ORG, True),
        (T1, T2, False),  # sibling threads never see each other
        (T2, T1, False),
        (RES, T1, False),  # a resource does not see its threads' private items
        (ORG, RES, False),
        (T1, BOB, False),
        (RES, BOB, False),  # sibling resources
        (T1, OTHER_ORG, False),
        (OTHER_ORG, ORG, False),
        ("org:acme/resource:alice2/thread:t1", T1, False),  # a prefix of an id is not an ancestor
    ],
)
def test_visibility_is_containment(query: str, item: str, visible: bool) -> None:
    assert Scope.parse(query).sees(item) is visible
    assert Scope.parse(item).contains(query) is visible


def test_visible_keys_are_the_chain_narrow_to_broad() -> None:
    assert Scope.parse(T1).visible_keys() == [T1, RES, ORG]
    assert Scope.parse(ORG).visible_keys() == [ORG]


def test_at_cuts_to_an_ancestor_and_refuses_a_missing_level() -> None:
    assert Scope.parse(T1).at("resource").key == RES
    assert Scope.parse(T1).at(Level.ORG).key == ORG
    with pytest.raises(InvalidScopeError, match="no thread level"):
        Scope.parse(RES).at("thread")


@pytest.mark.parametrize(
    ("scope", "ceiling", "allowed"),
    [
        (ORG, Level.ORG, True),
        (ORG, Level.RESOURCE, False),  # the promotion a ceiling exists to prevent
        (RES, Level.RESOURCE, True),
        (T1, Level.RESOURCE, True),
        (RES, Level.THREAD, False),
        (T1, Level.THREAD, True),
    ],
)
def test_ceiling(scope: str, ceiling: Level, allowed: bool) -> None:
    if allowed:
        check_within_ceiling(scope, ceiling)
    else:
        with pytest.raises(CeilingExceededError, match=f"exceeds the record's {ceiling.label} ceiling"):
            check_within_ceiling(scope, ceiling)


@pytest.mark.parametrize(
    ("current", "proposed", "allowed"),
    [
        (Level.THREAD, Level.RESOURCE, True),
        (Level.THREAD, Level.ORG, True),
        (Level.RESOURCE, Level.RESOURCE, True),
        (Level.RESOURCE, Level.THREAD, False),
        (Level.ORG, Level.THREAD, False),
    ],
)
def test_a_ceiling_can_be_raised_never_lowered(current: Level, proposed: Level, allowed: bool) -> None:
    if allowed:
        check_ceiling_raise(current, proposed)
    else:
        with pytest.raises(CeilingLoweredError, match="cannot be lowered"):
            check_ceiling_raise(current, proposed)


@pytest.mark.parametrize(
    ("proposed", "ceiling", "clamped"),
    [
        (Level.ORG, Level.THREAD, Level.THREAD),
        (Level.ORG, Level.RESOURCE, Level.RESOURCE),
        (Level.RESOURCE, Level.THREAD, Level.THREAD),
        (Level.THREAD, Level.ORG, Level.THREAD),
        (Level.RESOURCE, Level.ORG, Level.RESOURCE),
    ],
)
def test_clamp_narrows_to_the_ceiling(proposed: Level, ceiling: Level, clamped: Level) -> None:
    assert clamp_level(proposed, ceiling) is clamped


def test_parse_level_accepts_names_and_refuses_others() -> None:
    assert parse_level(" Thread ") is Level.THREAD
    with pytest.raises(InvalidInputError, match="Unknown scope level"):
        parse_level("team")

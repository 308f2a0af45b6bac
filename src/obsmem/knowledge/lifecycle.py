"""Deleting a resource's knowledge and forgetting a value in it: what ``Memory`` calls.

Memory deletes and forgets in the message store; these two calls carry the same request into
the knowledge store, where both are hard deletes (see :mod:`obsmem.knowledge.store.erasure`)::

    counts = await purge_resource(knowledge, "acme", "alice")           # org:acme/resource:alice/...
    counts = await forget_value(knowledge, "4111 1111 1111 1111", "org:acme/resource:alice")

A forgotten value is kept only as a digest, and a later capture holding it is refused as
tombstoned (:class:`~obsmem.knowledge.capture.CaptureOutcome` ``refused-tombstoned``), with a
``write-refused`` audit event that does not show it. :func:`knowledge_scopes` maps Memory's
arguments (threads, a resource, a thread) onto knowledge scopes, and
:func:`delete_resource_knowledge` / :func:`forget_in_knowledge` are the one-call forms ``Memory``
uses, with counts keyed ``knowledge_<kind>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.scopes import Scope
from obsmem.types import Thread

__all__ = [
    "DEFAULT_ORG",
    "delete_resource_knowledge",
    "forget_in_knowledge",
    "forget_value",
    "knowledge_scopes",
    "purge_resource",
    "summed",
]

DEFAULT_ORG = "default"
"""The org of a thread without ``org_id`` (as the knowledge agents scope it)."""


def _store(knowledge: Knowledge | KnowledgeStore) -> KnowledgeStore:
    return knowledge.store if isinstance(knowledge, Knowledge) else knowledge


def _actor(knowledge: Knowledge | KnowledgeStore, actor: str | None) -> str:
    if actor is not None:
        return actor
    return knowledge.actor if isinstance(knowledge, Knowledge) else "obsmem"


async def purge_resource(
    knowledge: Knowledge | KnowledgeStore,
    org: str,
    resource_id: str,
    *,
    actor: str | None = None,
    reason: str = "resource deleted",
) -> dict[str, int]:
    """Hard-delete everything stored under ``org:<org>/resource:<resource_id>`` (its threads'
    scopes included): nodes, records, tombstones, forgotten values, audit events, outbox entries
    and vectors. Returns counts per kind; one ``scope-purged`` event is left at the org."""
    scope = Scope(org, resource_id).key
    return await _store(knowledge).purge_scope(scope, actor=_actor(knowledge, actor), reason=reason)


async def forget_value(
    knowledge: Knowledge | KnowledgeStore,
    value: str,
    scope: str,
    *,
    actor: str | None = None,
    reason: str = "value forgotten",
    within: str | None = None,
) -> dict[str, int]:
    """Hard-delete every node, record, tombstone and audit event holding ``value`` on ``scope``'s
    chain (at or below ``within``, when given) and below it, and refuse its return in ``scope``
    and below. Returns counts per kind."""
    return await _store(knowledge).forget_value(
        value, scope, actor=_actor(knowledge, actor), reason=reason, within=within
    )


def knowledge_scopes(
    threads: Iterable[Thread],
    *,
    thread_id: str | None = None,
    resource_id: str | None = None,
    default_org: str | None = DEFAULT_ORG,
) -> list[str]:
    """The knowledge scopes a forget reaches, from the threads it covers.

    ``thread_id``: that thread's scope; ``resource_id``: the resource's scope in each org its
    threads name; neither: each org's scope (the whole store). A thread without ``org_id`` is in
    ``default_org``, and skipped when there is none (its knowledge scope is unknown).
    """
    scopes: set[str] = set()
    for thread in threads:
        org = thread.org_id or default_org
        if org is None:
            continue
        if thread_id is not None:
            if thread.id == thread_id:
                scopes.add(Scope(org, thread.resource_id, thread.id).key)
        elif resource_id is not None:
            if thread.resource_id == resource_id:
                scopes.add(Scope(org, resource_id).key)
        else:
            scopes.add(Scope(org).key)
    if not scopes and resource_id is not None and thread_id is None and default_org is not None:
        scopes.add(Scope(default_org, resource_id).key)
    return sorted(scopes)


def summed(counts: Iterable[Mapping[str, int]], prefix: str = "knowledge_") -> dict[str, int]:
    """Counts of several calls added per kind, keys prefixed (to merge into Memory's counts)."""
    total: dict[str, int] = {}
    for one in counts:
        for key, value in one.items():
            total[prefix + key] = total.get(prefix + key, 0) + value
    return total


async def delete_resource_knowledge(
    knowledge: Knowledge | KnowledgeStore,
    resource_id: str,
    threads: Iterable[Thread],
    *,
    default_org: str | None = DEFAULT_ORG,
    actor: str | None = None,
    reason: str = "resource deleted",
) -> dict[str, int]:
    """Purge the resource's scope in every org its ``threads`` name (``default_org`` for threads
    without one, or when there are none); counts keyed ``knowledge_<kind>``."""
    results = []
    for scope in knowledge_scopes(threads, resource_id=resource_id, default_org=default_org):
        parsed = Scope.parse(scope)
        results.append(await purge_resource(knowledge, parsed.org, resource_id, actor=actor, reason=reason))
    return summed(results)


async def forget_in_knowledge(
    knowledge: Knowledge | KnowledgeStore,
    value: str,
    threads: Iterable[Thread],
    *,
    thread_id: str | None = None,
    resource_id: str | None = None,
    default_org: str | None = DEFAULT_ORG,
    actor: str | None = None,
    reason: str = "value forgotten",
    within: str | None = None,
) -> dict[str, int]:
    """Forget ``value`` in the knowledge scopes of a forget over ``threads`` (see
    :func:`knowledge_scopes`), up to ``within`` (see :func:`forget_value`); counts keyed
    ``knowledge_<kind>``."""
    scopes = knowledge_scopes(threads, thread_id=thread_id, resource_id=resource_id, default_org=default_org)
    return summed(
        [await forget_value(knowledge, value, scope, actor=actor, reason=reason, within=within) for scope in scopes]
    )

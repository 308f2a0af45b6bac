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

**What an erasure reaches.** The threads alone do not name every scope: a user whose threads were
all deleted (or whose knowledge came through ``remember``) still has knowledge. So a resource's
erasure also reaches that resource's scope in every org the knowledge store holds rows for, and a
whole-store forget every org's scope (:func:`stored_scopes`, :func:`erasure_scopes`). A caller
confined by ``within`` (an API key's org or resource) reaches only the stored scopes inside it:
another org's knowledge under the same resource id is neither erased nor revealed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from obsmem.errors import InvalidInputError
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.store.contract import KnowledgeStore
from obsmem.knowledge.store.erasure import check_forget_act, holds_value
from obsmem.knowledge.store.scopes import InvalidScopeError, Scope
from obsmem.types import Thread

__all__ = [
    "DEFAULT_ORG",
    "FORGET_REASON",
    "NEUTRAL_WORD",
    "check_forget",
    "check_reachable",
    "delete_resource_knowledge",
    "erasure_scopes",
    "forget_in_knowledge",
    "forget_value",
    "forget_words",
    "knowledge_scopes",
    "prune_capture_guidance",
    "purge_resource",
    "stored_scopes",
    "summed",
]

DEFAULT_ORG = "default"
"""The org of a thread without ``org_id`` (as the knowledge agents scope it)."""


FORGET_REASON = "value forgotten"
"""The reason a forget's audit events give (see :func:`forget_value`)."""


def _store(knowledge: Knowledge | KnowledgeStore) -> KnowledgeStore:
    return knowledge.store if isinstance(knowledge, Knowledge) else knowledge


def _actor(knowledge: Knowledge | KnowledgeStore, actor: str | None) -> str:
    if actor is not None:
        return actor
    return knowledge.actor if isinstance(knowledge, Knowledge) else "obsmem"


#: The actor or reason a forget's audit event carries in place of a default one that holds the
#: value by chance: no letter or digit, so it holds none.
NEUTRAL_WORD = "\u2014"


def forget_words(
    knowledge: Knowledge | KnowledgeStore, value: str, actor: str | None, reason: str | None
) -> tuple[str, str]:
    """The actor and reason of a forget's audit event. Given ones are kept (and refused by the
    forget when they hold the value: the audit log would keep it). A default one (the knowledge
    object's actor, :data:`FORGET_REASON`) that holds the value by chance, letters of obsmem's
    words ("Val" in "value forgotten", "Em" in "obsmem", "Li" in "obsmem-cli"), becomes
    :data:`NEUTRAL_WORD`: it says nothing of the value, and refusing it refused the forget of
    a user named Val."""
    said_actor = _actor(knowledge, actor)
    if actor is None and holds_value(said_actor, value):
        said_actor = NEUTRAL_WORD
    said_reason = FORGET_REASON if reason is None else reason
    if reason is None and holds_value(said_reason, value):
        said_reason = NEUTRAL_WORD
    return said_actor, said_reason


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
    reason: str | None = None,
    within: str | None = None,
) -> dict[str, int]:
    """Hard-delete every node, record, tombstone and audit event holding ``value`` on ``scope``'s
    chain (at or below ``within``, when given) and below it, and refuse its return in ``scope``
    and below. Returns counts per kind. ``actor`` and ``reason``: see :func:`forget_words`."""
    actor, reason = forget_words(knowledge, value, actor, reason)
    return await _store(knowledge).forget_value(value, scope, actor=actor, reason=reason, within=within)


def check_forget(
    knowledge: Knowledge | KnowledgeStore, value: str, *, actor: str | None = None, reason: str | None = None
) -> None:
    """Raise the InvalidInputError :func:`forget_value` would raise for ``actor`` or ``reason``
    (blank, or given and holding ``value``: the audit log would keep it) before anything is erased."""
    actor, reason = forget_words(knowledge, value, actor, reason)
    check_forget_act(value, actor=actor, reason=reason)


async def check_reachable(knowledge: Knowledge | KnowledgeStore) -> None:
    """Raise what the knowledge store raises when it cannot be read (an empty file, a database
    down): one point read, for a caller that erases elsewhere first (``Memory.forget``)."""
    await _store(knowledge).load_record("obsmem-reachable")


def knowledge_scopes(
    threads: Iterable[Thread],
    *,
    thread_id: str | None = None,
    resource_id: str | None = None,
    default_org: str | None = DEFAULT_ORG,
    fallback: bool = True,
) -> list[str]:
    """The knowledge scopes a forget reaches, from the threads it covers.

    ``thread_id``: that thread's scope; ``resource_id``: the resource's scope in each org its
    threads name; neither: each org's scope (the whole store). A thread without ``org_id`` is in
    ``default_org``, and skipped when there is none (its knowledge scope is unknown). With
    ``fallback``, a resource none of whose threads is given gets its scope in ``default_org``.
    The threads only: :func:`erasure_scopes` adds what the knowledge store holds.
    """
    scopes: set[str | None] = set()
    for thread in threads:
        org = thread.org_id or default_org
        if org is None:
            continue
        if thread_id is not None:
            if thread.id == thread_id:
                scopes.add(scope_key(org, thread.resource_id, thread.id))
        elif resource_id is not None:
            if thread.resource_id == resource_id:
                scopes.add(scope_key(org, resource_id))
        else:
            scopes.add(scope_key(org))
    if fallback and not scopes and resource_id is not None and thread_id is None and default_org is not None:
        scopes.add(scope_key(default_org, resource_id))
    return sorted(key for key in scopes if key is not None)


def scope_key(org: str, resource_id: str | None = None, thread_id: str | None = None) -> str | None:
    """The knowledge scope's key; None for ids no knowledge scope can hold (a thread id with a '/'
    or a space, which ``Memory`` takes): nothing was ever stored under them, so an erase has
    nothing there to reach (capture refuses such a scope, and says so in the log)."""
    try:
        return Scope(org, resource_id, thread_id).key
    except InvalidScopeError:
        return None


async def stored_scopes(
    knowledge: Knowledge | KnowledgeStore, *, resource_id: str | None = None, within: str | None = None
) -> list[str]:
    """The scopes the knowledge store holds rows for, whatever threads are left: with
    ``resource_id``, that resource's scope (``org:<org>/resource:<id>``) in each org holding a row
    at it or below it; without, each such org's scope (``org:<org>``). ``within``: only those
    inside that scope (a caller confined to an org or a resource sees no other org's)."""
    ceiling = Scope.parse(within) if within is not None else None
    if resource_id is not None and scope_key(DEFAULT_ORG, resource_id) is None:
        return []  # an id no scope can hold ('tenant/42', which Memory takes): nothing is stored under it
    found: set[str] = set()
    for key in await _store(knowledge).list_scopes(resource=resource_id):
        stored = Scope.parse(key)
        found.add(Scope(stored.org, resource_id).key if resource_id is not None else Scope(stored.org).key)
    return sorted(scope for scope in found if ceiling is None or ceiling.contains(scope))


async def erasure_scopes(
    knowledge: Knowledge | KnowledgeStore,
    threads: Iterable[Thread],
    *,
    thread_id: str | None = None,
    resource_id: str | None = None,
    within: str | None = None,
    default_org: str | None = DEFAULT_ORG,
    fallback: bool = True,
    operation: str = "forget",
) -> list[str]:
    """The knowledge scopes an erasure (a forget, a resource delete) reaches: those its
    ``threads`` name (:func:`knowledge_scopes`) and, unless it is one thread's, those the knowledge
    store holds (:func:`stored_scopes`, inside ``within`` when given). With ``fallback`` and none
    found, a resource's scope in ``default_org``. InvalidInputError (naming ``knowledge_within``)
    when a scope its threads name is not inside ``within``: call it before erasing anything."""
    threads = list(threads)
    found = set(knowledge_scopes(threads, thread_id=thread_id, resource_id=resource_id, default_org=default_org,
                                 fallback=False))  # fmt: skip
    if thread_id is None:
        found.update(await stored_scopes(knowledge, resource_id=resource_id, within=within))
    if not found and fallback:
        found.update(knowledge_scopes(threads, thread_id=thread_id, resource_id=resource_id, default_org=default_org))
    if within is not None:
        ceiling = Scope.parse(within)
        outside = sorted(scope for scope in found if not ceiling.contains(scope))
        if outside:
            raise InvalidInputError(f"Invalid knowledge_within: the {operation} covers '{outside[0]}', which is not "
                                    f"within '{within}'", argument="knowledge_within")  # fmt: skip
    return sorted(found)


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
    within: str | None = None,
) -> dict[str, int]:
    """Purge the resource's scope in every org its ``threads`` name (``default_org`` for threads
    without one) and in every org the knowledge store holds it in (inside ``within`` when given;
    with neither and no ``within``, in ``default_org``); counts keyed ``knowledge_<kind>``."""
    results = []
    scopes = await erasure_scopes(knowledge, threads, resource_id=resource_id, within=within, default_org=default_org,
                                  fallback=within is None, operation="delete")  # fmt: skip
    for scope in scopes:
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
    reason: str | None = None,
    within: str | None = None,
) -> dict[str, int]:
    """Forget ``value`` in the knowledge scopes of a forget over ``threads`` and of what the
    knowledge store holds (see :func:`erasure_scopes`), up to ``within`` (see
    :func:`forget_value`); counts keyed ``knowledge_<kind>``."""
    scopes = await erasure_scopes(knowledge, threads, thread_id=thread_id, resource_id=resource_id, within=within,
                                  default_org=default_org)  # fmt: skip
    return summed(
        [await forget_value(knowledge, value, scope, actor=actor, reason=reason, within=within) for scope in scopes]
    )


_GUIDANCE_LIST_END = ". Give a changed value"
"""Where the attribute list of the curate agent's ``capture-guidance`` content ends."""


async def prune_capture_guidance(
    knowledge: Knowledge | KnowledgeStore,
    scope: str,
    *,
    user_node: str = "User",
    actor: str | None = None,
    reason: str = "thread deleted: capture guidance pruned",
) -> bool:
    """After a thread's scope was purged: drop from the ``capture-guidance`` node stored at
    ``scope`` (its resource's) every attribute that no record about the user node left on the
    scope's chain or below it carries, so nothing the deleted thread alone taught stays listed
    there. Content it cannot read as the curate agent writes it is cleared (the guidance is
    advisory; the next curation writes it again). Returns whether the node changed."""
    from obsmem.knowledge.agents.curate import CAPTURE_GUIDANCE

    store = _store(knowledge)
    for _ in range(5):
        guidance = await store.resolve_node(CAPTURE_GUIDANCE, scope)
        if guidance is None or guidance.scope != scope or not guidance.content:
            return False
        user = await store.resolve_node(user_node, scope)
        in_use: set[str] = set()
        if user is not None:
            dump = await store.dump_scope(scope)
            in_use = {r.attribute for r in dump.records if r.attribute and r.node_id == user.id}
        content = ""
        head = f"Attributes in use for {user.name}: " if user is not None else None
        end = guidance.content.find(_GUIDANCE_LIST_END)
        if head is not None and guidance.content.startswith(head) and end >= len(head):
            kept = [name for name in guidance.content[len(head):end].split(", ") if name in in_use]
            content = head + ", ".join(kept) + guidance.content[end:] if kept else ""
        if content == guidance.content:
            return False
        written = await store.update_node(guidance.id, guidance.version, scope=scope, actor=_actor(knowledge, actor),
                                          reason=reason, content=content)  # fmt: skip
        if written is not None:
            return True
    return False

"""Knowledge review over REST: the review queue (pending candidates; approve, reject, edit) and
the audit log, read and changed from the key's knowledge scope only.

A key acts from its scope (``org:<org>`` or ``org:<org>/resource:<resource>``; an org key may
name a resource of its org). The knowledge store lets a scope see its ancestors' records, so a
review decision is also refused on a record above the key's own scope: a resource key decides
only on its resource's (and its threads') records, never on the org's shared ones. Capture
writes at thread scope, so a resource key's queue, decisions and audit log cover its threads'
scopes too (never a sibling resource's); an org key's cover the org's own scope (or the resource
it names, with that resource's threads). Every change is written to the audit log with the key
as actor (``key:<key id>``), as the inspector writes it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import Field

from obsmem import KnowledgeNotFoundError
from obsmem.knowledge import Knowledge, Level, Record, RecordView, ReviewQueue, Scope
from obsmem.knowledge.store.tables import under
from obsmem.server.errors import ERROR_RESPONSES
from obsmem.server.rest import Caller, Id, ServiceDep, _Body, knowledge_scope
from obsmem.server.service import Service

__all__ = ["own_record", "router"]

router = APIRouter(prefix="/api/knowledge", tags=["knowledge"], responses=ERROR_RESPONSES)

ResourceQuery = Annotated[str | None, Query(min_length=1, max_length=200)]
Reason = Annotated[str, Field(min_length=1, max_length=1000)]


class Decision(_Body):
    reason: Reason = "reviewed through the service"
    resource_id: Id | None = None


class Rejection(Decision):
    tombstone: bool = False


class Edit(Decision):
    text: Annotated[str, Field(min_length=1, max_length=10_000)]


def _knowledge(service: Service) -> Knowledge:
    if service.knowledge is None:
        raise KnowledgeNotFoundError("This server has no knowledge store (obsmem serve --knowledge …)")
    return service.knowledge


def record_json(record: Record) -> dict[str, Any]:
    return record.model_dump(mode="json")


async def own_record(knowledge: Knowledge, record_id: str, scope: str) -> Record:
    """The record a key acting at ``scope`` decides on: one stored at ``scope`` itself or, for a
    resource scope, at one of its threads (read as that thread sees it); otherwise not found.
    Decide at the returned record's own scope: a resource scope does not see its threads."""
    view = RecordView(include_candidates=True, include_superseded=True)
    record = await knowledge.store.get_record(record_id, scope, view)
    if record is None and Scope.parse(scope).level is Level.RESOURCE:
        stored = await knowledge.store.load_record(record_id)
        if stored is not None and stored.scope.startswith(scope + "/"):
            record = await knowledge.store.get_record(record_id, stored.scope, view)
    if record is None or not under(record.scope, scope):
        raise KnowledgeNotFoundError(f"Knowledge record '{record_id}' is not visible from this key.")
    return record


@router.get("/review")
async def pending(
    principal: Caller, service: ServiceDep, resource_id: ResourceQuery = None,
    after: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:  # fmt: skip
    """Candidates waiting for review at the key's scope and, for a resource, its threads' (the ones
    it decides on), newest first."""
    scope = knowledge_scope(principal, resource_id)
    store = _knowledge(service).store
    page = await store.list_candidates(scope, after=after, limit=limit, within=True, threads=True)
    return {"scope": scope, "records": [record_json(r) for r in page.items], "next_cursor": page.next_cursor}


@router.post("/review/{record_id}/approve")
async def approve(record_id: str, body: Decision, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    knowledge, scope = _knowledge(service), knowledge_scope(principal, body.resource_id)
    own = (await own_record(knowledge, record_id, scope)).scope
    queue = ReviewQueue(knowledge.store, principal.actor)  # audited as the key, as in the inspector
    return record_json(await queue.approve(record_id, own, reason=body.reason))


@router.post("/review/{record_id}/reject")
async def reject(record_id: str, body: Rejection, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    knowledge, scope = _knowledge(service), knowledge_scope(principal, body.resource_id)
    own = (await own_record(knowledge, record_id, scope)).scope
    queue = ReviewQueue(knowledge.store, principal.actor)
    return record_json(await queue.reject(record_id, own, reason=body.reason, tombstone=body.tombstone))


@router.post("/review/{record_id}/edit")
async def edit(record_id: str, body: Edit, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    principal.may_write()
    knowledge, scope = _knowledge(service), knowledge_scope(principal, body.resource_id)
    own = (await own_record(knowledge, record_id, scope)).scope
    queue = ReviewQueue(knowledge.store, principal.actor)
    # The privacy boundary holds for a corrected text as for a fact a client asks to remember.
    return record_json(await queue.edit(record_id, own, service.memory.redacted(body.text), reason=body.reason))


@router.get("/audit")
async def audit(
    principal: Caller, service: ServiceDep, resource_id: ResourceQuery = None,
    after: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:  # fmt: skip
    """The audit log of the key's scope (its ancestors' and, for a resource, its threads' too):
    every change, by whom and why."""
    scope = knowledge_scope(principal, resource_id)
    page = await _knowledge(service).store.list_activity(scope, after=after, limit=limit, threads=True)
    return {"scope": scope, "events": [e.model_dump(mode="json") for e in page.items], "next_cursor": page.next_cursor}

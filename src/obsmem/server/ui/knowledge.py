"""The inspector's knowledge pages: nodes and records by scope (with the bitemporal view and the
wikilink neighbourhood of a node), the audit log, and the review queue with its decisions.

Reads and decisions act from the key's knowledge scope (``org:<org>`` or
``org:<org>/resource:<resource>``), as the REST API's ``/api/knowledge`` does; a decision is taken
only on a record at that scope or (a resource's) one of its threads', and is written to the audit
log with the key as actor. The queue and the audit log cover a resource's threads too.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from obsmem import InvalidInputError, KnowledgeNotFoundError
from obsmem.knowledge import Knowledge, Record, RecordView, ReviewQueue
from obsmem.knowledge.store.tables import under
from obsmem.server.access import Principal
from obsmem.server.knowledge_api import own_record
from obsmem.server.paths import SegmentRoute
from obsmem.server.rest import knowledge_scope
from obsmem.server.ui.auth import actor, checked_form, csrf_token, principal_of, service_of, session
from obsmem.server.ui.common import guarded
from obsmem.server.ui.graph import graph_svg, neighbourhood
from obsmem.server.ui.html import counted, csrf_input, h, page, q, table, url, when

__all__ = ["router"]

router = APIRouter(prefix="/ui/knowledge", include_in_schema=False, route_class=SegmentRoute)

_PAGE = 100
_REASON = "reviewed in the inspector"
_MAX_TEXT = 10_000


def _knowledge(request: Request) -> Knowledge:
    knowledge = service_of(request).knowledge
    if knowledge is None:
        raise KnowledgeNotFoundError("This server has no knowledge store (obsmem serve --knowledge …)")
    return knowledge


def _scope(principal: Principal, request: Request, fields: dict[str, str] | None = None) -> str:
    named = (fields or {}).get("resource_id") or request.query_params.get("resource_id") or None
    return knowledge_scope(principal, named)


def _scope_form(action: str, scope: str, principal: Principal, extra: str = "") -> str:
    if principal.resource_id is not None and not extra:
        return f"<p>Scope: <code>{h(scope)}</code></p>"
    resource = scope.partition("/resource:")[2]
    readonly = " readonly" if principal.resource_id is not None else ""
    return (
        f'<form method="get" action="{h(action)}"><label for="resource_id">Resource (empty: the whole org)</label> '
        f'<input id="resource_id" name="resource_id" value="{h(resource)}"{readonly}> {extra}'
        f'<button type="submit">Show</button></form><p>Scope: <code>{h(scope)}</code></p>'
    )


# -- nodes and records ----------------------------------------------------------------------
@router.get("")
@guarded
async def nodes(request: Request) -> Response:
    principal = await principal_of(request)
    knowledge = _knowledge(request)
    scope = _scope(principal, request)
    prefix = request.query_params.get("name") or None
    found = await knowledge.store.list_nodes(scope, name_prefix=prefix, after=request.query_params.get("after") or None,
                                             limit=_PAGE)  # fmt: skip
    name_input = f'<label for="name">Name starts with</label> <input id="name" name="name" value="{h(prefix or "")}"> '
    rows = [
        [f'<a href="{h(url(f"/ui/knowledge/nodes/{q(n.id)}", resource_id=request.query_params.get("resource_id")))}">'
         f"{h(n.name)}</a>", h(n.kind), f"<code>{h(n.scope)}</code>", h(n.description), h(when(n.updated_at))]
        for n in found.items
    ]  # fmt: skip
    body = _scope_form("/ui/knowledge", scope, principal, name_input) + table(
        ["Node", "Kind", "Scope", "Description", "Updated"], rows, caption=counted(len(rows), "node")
    )
    if found.next_cursor:
        more = url("/ui/knowledge", resource_id=request.query_params.get("resource_id"), name=prefix,
                   after=found.next_cursor)  # fmt: skip
        body += f'<nav class="pager" aria-label="Pages"><a href="{h(more)}">More nodes</a></nav>'
    return page("Knowledge", body, who=session(request, principal))


def _date(value: str | None, argument: str) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"{argument} is not a date (YYYY-MM-DD or an ISO time)", argument=argument) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _record_rows(records: list[Record]) -> list[list[str]]:
    return [
        [h(r.text), h(r.trust.value if hasattr(r.trust, "value") else r.trust), f"<code>{h(r.scope)}</code>",
         h(when(r.captured_at)), h(when(r.valid_until)), h(when(r.deleted_at)), h(r.source_thread_id),
         f"<code>{h(r.id)}</code>"]
        for r in records
    ]  # fmt: skip


@router.get("/nodes/{node_id}")
@guarded
async def node_page(request: Request, node_id: str) -> Response:
    principal = await principal_of(request)
    knowledge = _knowledge(request)
    scope = _scope(principal, request)
    node = await knowledge.store.get_node(node_id, scope)
    if node is None:
        raise KnowledgeNotFoundError(f"Knowledge node '{node_id}' is not visible from this key.")
    params = request.query_params
    as_of, known = _date(params.get("as_of"), "as_of"), _date(params.get("as_known_at"), "as_known_at")
    everything = params.get("all") == "1"
    view = RecordView(as_of=as_of, as_known_at=known, include_candidates=True, include_deleted=everything,
                      include_superseded=everything)  # fmt: skip
    about = await knowledge.store.list_about(node.id, scope, view=view, limit=_PAGE)
    related = await knowledge.store.list_related(node.id, scope, view=view, limit=_PAGE)
    mentioning = await knowledge.store.list_mentioning(node.id, scope, view=view, limit=_PAGE)
    graph = await neighbourhood(knowledge, scope, node, view)
    resource = params.get("resource_id")
    view_form = (
        f'<form method="get" action="/ui/knowledge/nodes/{h(q(node.id))}">'
        + (f'<input type="hidden" name="resource_id" value="{h(resource)}">' if resource else "")
        + f'<label for="as_of">As of</label> <input id="as_of" name="as_of" type="date" value="{h(params.get("as_of") or "")}"> '
        f'<label for="as_known_at">As known at</label> <input id="as_known_at" name="as_known_at" type="date" '
        f'value="{h(params.get("as_known_at") or "")}"> <input id="all" name="all" type="checkbox" value="1"'
        f'{" checked" if everything else ""}> <label for="all">include removed and superseded</label> '
        '<button type="submit">Apply</button></form>'
    )  # fmt: skip

    def link(node_id: str) -> str:
        return url(f"/ui/knowledge/nodes/{q(node_id)}", resource_id=resource, as_of=params.get("as_of"),
                   as_known_at=params.get("as_known_at"), all="1" if everything else None)  # fmt: skip

    names = {n.id: n.name for n in graph.nodes}
    links = "".join(
        f'<li data-node="{h(n.id)}"><a href="{h(link(n.id))}">{h(n.name)}</a> ({h(n.kind)}, '
        + ("linked to this node" if n.hop == 1 else f"two hops, via {h(names.get(n.parent or '', ''))}") + ")</li>"
        for n in graph.nodes[1:]
    ) + (f"<li>+{counted(graph.more, 'more linked node')} not shown</li>" if graph.more else "")
    headers = ["Text", "Trust", "Scope", "Captured", "Valid until", "Removed", "Source thread", "Record"]
    body = (
        f"<p>{h(node.kind)} <strong>{h(node.name)}</strong> · scope <code>{h(node.scope)}</code> · "
        f"{h(node.description)}</p>" + view_form
        + table(headers, _record_rows(about.items), caption="Records about this node")
        + '<h2 id="graph-heading">Wikilinks around this node</h2>'
        + (f'<figure aria-labelledby="graph-heading">{graph_svg(graph, link)}</figure>' if graph.edges else "")
        + f'<ul aria-label="Linked nodes">{links or "<li>none</li>"}</ul>'
        + table(headers, _record_rows(related.items + mentioning.items), caption="Records linking this node")
    )  # fmt: skip
    return page(f"Node {node.name}", body, who=session(request, principal))


# -- the audit log --------------------------------------------------------------------------
@router.get("/audit")
@guarded
async def audit(request: Request) -> Response:
    principal = await principal_of(request)
    knowledge = _knowledge(request)
    scope = _scope(principal, request)
    found = await knowledge.store.list_activity(
        scope, after=request.query_params.get("after") or None, limit=_PAGE, threads=True
    )
    rows = [
        [h(when(e.created_at)), h(e.actor), h(e.action), f"{h(e.subject_type)} <code>{h(e.subject_id)}</code>",
         f"<code>{h(e.scope)}</code>", h(e.reason)]
        for e in found.items
    ]  # fmt: skip
    body = _scope_form("/ui/knowledge/audit", scope, principal) + table(
        ["When", "Actor", "Action", "Subject", "Scope", "Reason"], rows, caption="Audit log, newest first"
    )
    if found.next_cursor:
        more = url("/ui/knowledge/audit", resource_id=request.query_params.get("resource_id"), after=found.next_cursor)
        body += f'<nav class="pager" aria-label="Pages"><a href="{h(more)}">Older events</a></nav>'
    return page("Audit log", body, who=session(request, principal))


# -- the review queue -----------------------------------------------------------------------
@router.get("/review")
@guarded
async def review(request: Request) -> Response:
    principal = await principal_of(request)
    knowledge = _knowledge(request)
    scope = _scope(principal, request)
    # The candidates stored at the key's scope and its threads', the ones it decides on (its
    # ancestors' never fill the page).
    found = await knowledge.store.list_candidates(
        scope, after=request.query_params.get("after") or None, limit=_PAGE, within=True, threads=True
    )
    mine = found.items  # all at the key's scope or its threads' (within=True, threads=True)
    resource = request.query_params.get("resource_id") or ""
    notice = await _notice(knowledge, scope, request.query_params.get("done"), request.query_params.get("record"))
    items = "".join(_candidate(r, resource, principal.read_only, csrf_token(request)) for r in mine)
    where = " on this page" if found.next_cursor or request.query_params.get("after") else ""
    body = (
        notice + _scope_form("/ui/knowledge/review", scope, principal)
        + f"<p>{counted(len(mine), 'candidate')} waiting{where}. Each decision is written to the audit log as "
        f"<code>{h(actor(principal))}</code>.</p>"
        + f'<ul class="queue" aria-label="Candidates">{items or "<li>Nothing to review.</li>"}</ul>'
    )  # fmt: skip
    if found.next_cursor:
        more = url("/ui/knowledge/review", resource_id=request.query_params.get("resource_id"), after=found.next_cursor)
        body += f'<nav class="pager" aria-label="Pages"><a href="{h(more)}">Next candidates</a></nav>'
    return page("Review queue", body, who=session(request, principal))


#: What the page says after a decision (``?done=<decision>&record=<id>``, the redirect after it).
_DONE = {"approve": "Approved", "reject": "Rejected", "edit": "Edited"}


async def _notice(knowledge: Knowledge, scope: str, done: str | None, record_id: str | None) -> str:
    """The notice of a decision just taken: its verb and the record's text, read from the store
    (a record this key sees; otherwise nothing), never text the address carries: a link of anyone's
    making shows nothing of its own, and the text stays out of the address bar, history and logs."""
    verb = _DONE.get(done or "")
    if verb is None or not record_id:
        return ""
    # whatever its state now (a rejected record no read returns), if stored where the key decides
    record = await knowledge.store.load_record(record_id)
    if record is None or not under(record.scope, scope):
        return ""
    return f'<p class="ok" role="status">{h(verb)}: {h(record.text)}</p>'


def _candidate(record: Record, resource: str, read_only: bool, csrf: str) -> str:
    rid = h(record.id)
    base = f"/ui/knowledge/review/{h(q(record.id))}"
    hidden = f'<input type="hidden" name="resource_id" value="{h(resource)}">' + csrf_input(csrf)
    button = (" disabled" if read_only else "") + f' aria-describedby="text-of-{rid}"'
    return (
        f'<li data-record="{rid}"><p><strong id="text-of-{rid}">{h(record.text)}</strong><br><small>scope <code>{h(record.scope)}</code> · '
        f"captured {h(when(record.captured_at))} · from thread {h(record.source_thread_id or '–')} · "
        f"record <code>{rid}</code></small></p>"
        f'<form class="inline" method="post" action="{base}/approve">{hidden}'
        f'<button type="submit" name="decision" value="approve"{button}>Approve</button></form> '
        f'<form class="inline" method="post" action="{base}/reject">{hidden}'
        f'<label for="reason-{rid}">Reason</label> <input id="reason-{rid}" name="reason" value="not true" aria-describedby="text-of-{rid}"> '
        f'<input id="tombstone-{rid}" name="tombstone" type="checkbox" value="1" checked '
        f'aria-describedby="text-of-{rid}"> '
        f'<label for="tombstone-{rid}">tombstone (never capture it again)</label> '
        f'<button type="submit" name="decision" value="reject"{button}>Reject</button></form>'
        f'<form method="post" action="{base}/edit">{hidden}'
        f'<label for="text-{rid}">Corrected text</label><br><textarea id="text-{rid}" name="text" rows="2" cols="80" '
        f'aria-describedby="text-of-{rid}">'
        f'{h(record.text)}</textarea><br><button type="submit" name="decision" value="edit"{button}>Save edit</button>'
        "</form></li>"
    )


@router.post("/review/{record_id}/{decision}")
@guarded
async def decide(request: Request, record_id: str, decision: str) -> Response:
    principal = await principal_of(request)
    principal.may_write()
    knowledge = _knowledge(request)
    fields = await checked_form(request)  # 403 before anything is read or changed
    scope = _scope(principal, request, fields)
    record = await own_record(knowledge, record_id, scope)  # not found unless at the scope or its threads
    scope = record.scope  # decided where it is stored: a resource scope does not see its threads
    queue = ReviewQueue(knowledge.store, actor(principal))
    reason = (fields.get("reason") or "").strip() or _REASON
    if decision == "approve":
        decided = await queue.approve(record_id, scope, reason=reason)
    elif decision == "reject":
        decided = await queue.reject(record_id, scope, reason=reason, tombstone=fields.get("tombstone") == "1")
    elif decision == "edit":
        text = (fields.get("text") or "").strip()
        if not text:
            raise InvalidInputError("The corrected text is empty", argument="text")
        if len(text) > _MAX_TEXT:  # what REST's edit takes
            raise InvalidInputError(f"The corrected text is over {_MAX_TEXT:,} characters", argument="text")
        # the privacy boundary, as for a fact remembered over REST or MCP: a secret typed or
        # pasted into the form is stored as its placeholder
        text = service_of(request).memory.redacted(text)
        decided = await queue.edit(record_id, scope, text, reason=reason)  # the corrected record
    else:
        raise KnowledgeNotFoundError(f"No review decision '{decision}'.")
    # The decision and the record's id, never its text (see _notice)
    back = url("/ui/knowledge/review", resource_id=fields.get("resource_id"), done=decision, record=decided.id)
    return RedirectResponse(back, status_code=303)

"""The inspector's status panel (on a thread's timeline) and receipt pages (issue 21).

The panel shows ``Memory.status``: the phase, the message window against its threshold (and
``block_after``) as a bar, observations against the reflection threshold, buffered chunks with the
seq span each covers (marked on the timeline too), memory work in flight and backoff.

A reply saved through a turn keeps the receipt of the context it was made from; its timeline entry
links ("made from") to the receipt page: the generation, each observation group with the messages
it covers (``Memory.receipt_sources``; links into the timeline), the raw messages, the knowledge
records and pins shown (linked to their knowledge pages where the key sees them) and the tokens of
each section. Read-only pages, under the same key checks as the REST API
(:func:`obsmem.server.rest.visible_receipt`: another tenant's message reads as a missing one).
"""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Request
from fastapi.responses import Response

from obsmem import Memory, Message, ObsmemError
from obsmem.om.receipts import Receipt, ReceiptGroup, is_conversation
from obsmem.om.status import ThreadStatus
from obsmem.server.access import MALFORMED_RECEIPT, Principal, unreadable_receipt
from obsmem.server.errors import ResourceNotFoundError, ServiceError
from obsmem.server.paths import SegmentRoute
from obsmem.server.rest import knowledge_scope, visible_receipt
from obsmem.server.ui.auth import principal_of, service_of, session
from obsmem.server.ui.common import guarded, int_param, message_plain
from obsmem.server.ui.html import counted, h, page, q, table, thread_url, url, when

__all__ = ["buffered_spans", "router", "status_panel", "timeline_link"]

router = APIRouter(prefix="/ui", include_in_schema=False, route_class=SegmentRoute)

#: Messages listed per page on a receipt group's page; on the receipt page, per group.
GROUP_MESSAGES = 100
#: How many groups, raw messages, knowledge records and pins the receipt page lists.
LISTED = 100
_EXCERPT = 160



# -- links ------------------------------------------------------------------------------------
def timeline_link(thread_id: str, seq: int | None) -> str:
    """The timeline page that shows message ``seq`` of the thread, scrolled to it."""
    if seq is None:
        return thread_url(thread_id)
    return thread_url(thread_id, after_seq=max(0, seq - 1)) + f"#seq-{seq}"


def receipt_link(message_id: str) -> str:
    return f"/ui/messages/{q(message_id)}/receipt"


def _group_page_link(message_id: str, index: int) -> str:
    return f"/ui/messages/{q(message_id)}/receipt/groups/{index}"


# -- the status panel -------------------------------------------------------------------------
def _bar(value: int, limit: int, label: str, tick: int | None = None) -> str:
    """A bar of ``value`` against ``limit`` (full at the limit; past it, orange up to ``tick``)."""
    scale = max(limit, tick or 0, value, 1)
    fill = min(100.0, 100.0 * value / scale)
    over = " over" if limit and value >= limit else ""
    ticks = f'<span class="tick" style="left:{100.0 * limit / scale:.1f}%" title="threshold"></span>' if limit else ""
    if tick:
        ticks += f'<span class="tick" style="left:{min(100.0, 100.0 * tick / scale):.1f}%" title="block_after"></span>'
    return (
        f'<span class="bar" role="img" aria-label="{h(label)}"><span class="fill{over}" style="width:{fill:.1f}%">'
        f"</span>{ticks}</span>"
    )


def buffered_spans(status: ThreadStatus) -> list[tuple[str, int, int]]:
    """(chunk id, first seq, last seq) of each buffered chunk waiting for activation."""
    return [(b.id, b.first_seq, b.last_seq) for b in status.buffered]


def status_panel(status: ThreadStatus) -> str:
    """The panel of ``Memory.status`` for the timeline (data attributes carry the raw numbers)."""
    thread = status.thread_id
    window = status.window_tokens
    threshold = status.message_threshold
    block = f", blocks at {status.block_after}" if status.block_after is not None else ""
    # a window longer than status reads (WINDOW_READ messages) is counted as far as it was read
    window_label = f"{'at least ' if status.window_partial else ''}{window} of {threshold} tokens"
    if status.window_estimate is not None:  # the phase is decided on the whole window's estimate
        window_label += f" (about {status.window_estimate} in all)"
    unobserved = counted(status.unobserved_messages, "unobserved message")
    if status.window_partial:
        unobserved = f"at least {unobserved}"
    chunks = "".join(
        f'<li data-chunk="{h(b.id)}" data-first="{b.first_seq}" data-last="{b.last_seq}">'
        f'<a href="{h(timeline_link(thread, b.first_seq))}">seq {b.first_seq}–{b.last_seq}</a>: '
        f"{b.message_tokens} message tokens → {b.observation_tokens} observation tokens "
        f"<small>(<code>{h(b.id)}</code>, {h(when(b.created_at))})</small></li>"
        for b in status.buffered
    )
    buffered = (
        f'<ul class="chunks">{chunks}</ul>' if chunks else "none"
    ) + (
        f" · a buffered reflection of {counted(status.buffered_reflection_lines, 'line')} waits"
        if status.buffered_reflection_lines is not None else ""
    )  # fmt: skip
    flight = ", ".join(
        f'<span data-work="{h(kind)}">{h(kind)} (lease until {h(when(until))})</span>'
        for kind, until in status.in_flight.items()
    ) or "nothing"
    backoff = ", ".join(
        f'<span data-backoff="{h(role)}">{h(role)}: {h(counted(entry.get("failures"), "failure"))} '
        f'({h(entry.get("kind"))}), until {h(entry.get("until"))}</span>'
        for role, entry in status.backoff.items()
    ) or "none"
    reflection = (
        f"{status.observation_tokens} of {status.reflection_threshold} tokens"
        + (" · reflection due" if status.reflection_due else "")
    )
    generation = f"generation {status.generation} (<code>{h(status.record_id)}</code>)" if status.record_id else "none yet"
    return (
        f'<section class="status" aria-labelledby="status-heading" data-phase="{h(status.phase)}" '
        f'data-window="{window}" data-threshold="{threshold}" data-unobserved="{status.unobserved_messages}" '
        f'data-partial="{str(status.window_partial).lower()}" '
        f'data-generation="{status.generation}">'
        f'<h2 id="status-heading">Memory status</h2><dl>'
        f'<dt>Phase</dt><dd><span class="phase" id="phase">{h(status.phase)}</span> '
        f"<small>({h(status.scope)} scope; checked {h(when(status.checked_at))})</small></dd>"
        f"<dt>Message window</dt><dd>{_bar(window, threshold, window_label, status.block_after)} "
        f'<span id="window">{window_label}</span> in {unobserved}{h(block)}</dd>'
        f"<dt>Observations</dt><dd>{_bar(status.observation_tokens, status.reflection_threshold, reflection)} "
        f"{h(reflection)} · {generation}</dd>"
        f"<dt>Buffered</dt><dd>{buffered}</dd>"
        f"<dt>In flight</dt><dd>{flight}</dd>"
        f"<dt>Backoff</dt><dd>{backoff}</dd></dl>"
        f'<small>The same data as <code>GET /api/threads/{h(thread)}/status</code> '
        f"(live: <code>…/status/stream</code>).</small></section>"
    )


# -- the receipt page -------------------------------------------------------------------------
def _excerpt(message: Message) -> str:
    text = " ".join(message_plain(message).split())
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"


def _message_item(message: Message) -> str:
    thread = message.thread_id or ""
    return (
        f'<li class="msg {h(message.role)}" data-seq="{message.seq}" data-id="{h(message.id)}">'
        f'<div class="meta"><a href="{h(timeline_link(thread, message.seq))}">#{message.seq}</a> · '
        f"{h(message.role)} · {h(when(message.created_at))}</div>{h(_excerpt(message))}</li>"
    )


async def _visible(principal: Principal, memory: Memory, messages: list[Message], seen: dict[str, bool]) -> list[Message]:
    """The messages of threads this key sees (a context shows only its own resource's threads)."""
    kept = []
    for message in messages:
        thread_id = message.thread_id
        if thread_id is None:
            continue
        if thread_id not in seen:
            thread = await memory.store.get_thread(thread_id)
            seen[thread_id] = thread is not None and principal.sees(thread)
        if seen[thread_id]:
            kept.append(message)
    return kept


async def _knowledge_items(request: Request, principal: Principal, resource_id: str, ids: tuple[str, ...]) -> str:
    """Each knowledge record or pin id, linked to its node's page where the key sees it."""
    if not ids:
        return "<p>None.</p>"
    knowledge = service_of(request).knowledge
    items = []
    for record_id in ids[:LISTED]:
        shown = f"<code>{h(record_id)}</code>"
        if knowledge is not None and principal.org_id is not None:
            from obsmem.knowledge import RecordView

            view = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
            record = await knowledge.store.get_record(record_id, knowledge_scope(principal, resource_id), view)
            if record is not None:
                node = url(f"/ui/knowledge/nodes/{q(record.node_id)}",
                           resource_id=resource_id if principal.resource_id is None else None)  # fmt: skip
                shown = (
                    f'<a href="{h(node)}" data-record="{h(record_id)}">{h(record.text[:_EXCERPT])}</a> '
                    f"<small>(<code>{h(record_id)}</code>{', removed' if record.deleted_at else ''})</small>"
                )
        items.append(f"<li>{shown}</li>")
    more = f"<p>+{len(ids) - LISTED:,} more not listed.</p>" if len(ids) > LISTED else ""
    return f'<ul>{"".join(items)}</ul>{more}'


def _group_summary(group: ReceiptGroup) -> str:
    return f"{group.kind} group <code>{h(group.id)}</code> · thread <code>{h(group.thread_id)}</code> · seq {group.first_seq}–{group.last_seq}"


def _first_raw(receipt: Receipt) -> tuple[Receipt, bool]:
    """``receipt`` without its groups (each has its own page) and with no more of its raw tail
    than the page lists (ids, or a span of that many seqs; a span also holds markers, so twice
    that); and whether anything was cut."""
    span = receipt.raw_span
    if span is not None and span[2] - span[1] >= 2 * LISTED:
        span = (span[0], span[1], span[1] + 2 * LISTED - 1)
    bounded = dataclasses.replace(
        receipt, groups=(), raw_message_ids=receipt.raw_message_ids[:LISTED], raw_outside=receipt.raw_outside[:LISTED],
        raw_span=span,
    )  # fmt: skip
    return bounded, bounded != dataclasses.replace(receipt, groups=())


async def _readable(principal: Principal, memory: Memory, message_id: str) -> tuple[Message, Receipt]:
    """:func:`visible_receipt`; a receipt a client stored itself in a shape obsmem cannot read
    is not found (404), not a server failure."""
    try:
        return await visible_receipt(principal, memory, message_id)
    except (ObsmemError, ServiceError):
        raise
    except MALFORMED_RECEIPT:
        raise unreadable_receipt(message_id) from None


@router.get("/messages/{message_id:path}/receipt")
@guarded
async def receipt_page(request: Request, message_id: str) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    message, receipt = await _readable(principal, memory, message_id)
    thread = await principal.thread(memory, message.thread_id or "")
    # Only the raw tail is read here: a receipt shows dozens of groups and reflection groups may
    # each span most of the thread, so a group's messages are on its own page (paged).
    # A receipt is message metadata a client may also store, naming any number of groups, records
    # and raw messages: the page lists the first LISTED of each (a group's page and the timeline
    # show the rest, a page at a time) and reads no more than it lists.
    bounded, cut = _first_raw(receipt)
    sources = await memory.receipt_sources(bounded)
    seen: dict[str, bool] = {}
    groups = []
    for index, group in enumerate(receipt.groups[:LISTED]):
        span = (
            f'<a href="{h(timeline_link(group.thread_id, group.first_seq))}">#{group.first_seq}</a>–'
            f'<a href="{h(timeline_link(group.thread_id, group.last_seq))}">#{group.last_seq}</a>'
        )
        groups.append(
            f'<div class="rgroup {h(group.kind)}" data-group="{h(group.id)}">'
            f'<a class="group-link" href="{h(_group_page_link(message.id, index))}">{h(group.kind)} {h(group.id)}</a> '
            f"· thread <code>{h(group.thread_id)}</code> · seq {span}</div>"
        )
    if len(receipt.groups) > LISTED:
        groups.append(f"<p>+{len(receipt.groups) - LISTED:,} more groups not listed.</p>")
    raw = (await _visible(principal, memory, sources.get("raw", []), seen))[:LISTED]
    raw_more = (
        f'<p>Only the first {LISTED} are listed: the rest are on <a href="{h(timeline_link(raw[-1].thread_id or "", raw[-1].seq))}">'
        "the timeline</a>.</p>" if raw and (cut or len(raw) >= LISTED) else ""
    )  # fmt: skip
    tokens = [[h(name), str(count)] for name, count in receipt.section_tokens.items()]
    tokens.append(["<strong>Total</strong> (with the conversation's overhead)", f'<strong data-total="{receipt.total_tokens}">{receipt.total_tokens}</strong>'])
    generation = (
        f'<a href="{h(thread_url(thread.id, "/generations"))}">generation {receipt.generation}</a> '
        f"(<code>{h(receipt.record_id)}</code>)" if receipt.record_id else "no observations yet"
    )
    body = (
        f'<nav aria-label="Thread"><a href="{h(timeline_link(thread.id, message.seq))}">Back to the timeline</a> · '
        f"thread <code>{h(thread.id)}</code> · resource <code>{h(thread.resource_id)}</code></nav>"
        f'<section class="status" aria-label="Reply"><p>Reply <a href="{h(timeline_link(thread.id, message.seq))}">#{message.seq}</a> '
        f"<code>{h(message.id)}</code>: {h(_excerpt(message))}</p>"
        f'<dl><dt>Receipt</dt><dd><code id="receipt-id">{h(receipt.id)}</code> · made {h(when(receipt.created_at))}</dd>'
        f'<dt>Generation</dt><dd id="generation" data-generation="{h(receipt.generation)}">{generation}</dd>'
        f"<dt>Context hash</dt><dd><code>{h(receipt.context_hash)}</code></dd></dl></section>"
        f'<section aria-labelledby="groups-heading"><h2 id="groups-heading">Observation groups ({len(receipt.groups)})</h2>'
        + ("".join(groups) or "<p>None: the context showed no observations.</p>") + "</section>"
        f'<section aria-labelledby="raw-heading"><h2 id="raw-heading">Raw messages ({len(raw)})</h2>'
        f'<ol class="raw" style="list-style:none;padding:0">{"".join(_message_item(m) for m in raw)}</ol>{raw_more}</section>'
        f'<section aria-labelledby="knowledge-heading"><h2 id="knowledge-heading">Knowledge records</h2>'
        + await _knowledge_items(request, principal, thread.resource_id, receipt.knowledge_record_ids)
        + '</section><section aria-labelledby="pins-heading"><h2 id="pins-heading">Pins</h2>'
        + await _knowledge_items(request, principal, thread.resource_id, receipt.pin_ids)
        + "</section>"
        + table(["Section", "Tokens"], tokens, caption="Tokens per section", numeric=(1,))
    )  # fmt: skip
    return page(f"Made from · receipt {receipt.id}", body, who=session(request, principal))


@router.get("/messages/{message_id:path}/receipt/groups/{index}")
@guarded
async def receipt_group_page(request: Request, message_id: str, index: str) -> Response:
    """One group of a receipt: exactly the messages it covers (``Memory.receipt_sources``), a page at a time."""
    principal = await principal_of(request)
    memory = service_of(request).memory
    message, receipt = await _readable(principal, memory, message_id)
    number = int_param(index, -1, low=-1, high=10**6)
    if not 0 <= number < len(receipt.groups):
        raise ResourceNotFoundError(f"group {index} of receipt {receipt.id}")
    group = receipt.groups[number]
    # A page at a time, by seq: a reflection group may span most of a long thread.
    after = max(group.first_seq - 1, int_param(request.query_params.get("after_seq"), 0, low=0))
    read = await memory.list_messages(group.thread_id, after_seq=after, limit=GROUP_MESSAGES + 1)
    inside = [m for m in read if (m.seq or 0) <= group.last_seq]
    more = len(inside) > GROUP_MESSAGES
    page_messages = [m for m in inside[:GROUP_MESSAGES] if is_conversation(m)]
    shown = await _visible(principal, memory, page_messages, {})
    base = _group_page_link(message.id, number)
    pager = []
    if after > group.first_seq - 1:
        pager.append(f'<a href="{h(base)}">First messages</a>')
    if more:
        last = inside[GROUP_MESSAGES - 1].seq or 0
        pager.append(f'<a href="{h(url(base, after_seq=last))}" rel="next">Next</a>')
    body = (
        f'<nav aria-label="Receipt"><a href="{h(receipt_link(message.id))}">Back to the receipt</a> · '
        f'<a href="{h(timeline_link(group.thread_id, group.first_seq))}">the span on the timeline</a></nav>'
        f"<p>{_group_summary(group)}: the conversation messages of that span, as <code>Memory.receipt_sources</code> resolves it.</p>"
        f'<ol class="covered" style="list-style:none;padding:0">{"".join(_message_item(m) for m in shown)}</ol>'
        f'<nav class="pager" aria-label="Pages">{"".join(pager)}</nav>'
    )
    return page(f"Receipt {receipt.id} · {group.kind} group {group.id}", body, who=session(request, principal))


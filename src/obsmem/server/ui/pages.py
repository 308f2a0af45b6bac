"""The inspector's memory pages: login, threads, a thread's timeline (with the memory status panel
and each reply's "made from" link, :mod:`.receipts`), one observation group's
messages, the context preview, generations (with a diff) and usage. Read-only; every read goes
through the same checks as the REST API (:class:`~obsmem.server.access.Principal`)."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from obsmem import Memory, Message, ObservationGroup, ObservationRecord, Thread, parse_groups
from obsmem.om.receipts import RECEIPT_KEY
from obsmem.om.sections import observations_shown
from obsmem.server.access import Principal, authenticate
from obsmem.server.errors import AuthenticationError, BodyTooLargeError, ResourceNotFoundError
from obsmem.server.paths import SegmentRoute
from obsmem.server.ui.auth import (
    COOKIE,
    LOGIN_COOKIE,
    checked_form,
    form,
    login_nonce,
    login_token_matches,
    principal_of,
    remember_login_nonce,
    service_of,
    session,
)
from obsmem.server.ui.common import folded_text, guarded, int_param, marker_html, message_text
from obsmem.server.ui.html import counted, csrf_input, h, page, q, table, thread_url, url, when
from obsmem.server.ui.receipts import buffered_spans, receipt_link, status_panel
from obsmem.server.ui.usage import usage_chart_svg, usage_table

__all__ = ["router"]

# SegmentRoute: a thread id holding '/' (the gateway takes any) is linked with '%2F' (html.q)
router = APIRouter(prefix="/ui", include_in_schema=False, route_class=SegmentRoute)

TIMELINE_PAGE = 100
SHOWN_CHARS = 400
#: Threads a page of the threads and usage pages shows unless ``?limit=`` asks (at most THREADS_MOST).
THREADS_PAGE = 50
THREADS_MOST = 200
#: The most threads one search of the threads page reads (then it offers to search on), read
#: _SEARCH_BATCH at a time.
SEARCH_READ = 1000
_SEARCH_BATCH = 200
GROUP_PAGE = 20
_GENERATIONS = 200
GENERATIONS_LISTED = 50
#: The most lines of each generation the diff compares: the line diff is quadratic in the lines a
#: record repeats (4,000 took 4.8 s), and a record holds what a reflection wrote or an import
#: restored. It runs in a thread, on at most this many lines of each.
DIFF_LINES = 2000


# -- login ----------------------------------------------------------------------------------
def _login_form(request: Request, message: str = "", status: int = 200) -> Response:
    alert = f'<p class="error" role="alert">{h(message)}</p>' if message else ""
    nonce = login_nonce()
    body = (
        f"{alert}<form method=\"post\" action=\"/ui/login\">{csrf_input(nonce)}"
        '<p><label for="key">API key</label> <input id="key" name="key" type="password" autocomplete="off" '
        'size="60" required placeholder="om_…"></p><p><button type="submit">Sign in</button></p></form>'
        "<p>The key is kept in an HttpOnly cookie and checked on every page exactly like the REST API's "
        "<code>Authorization: Bearer</code>: the inspector shows what the key may see and nothing else.</p>"
    )
    response = page("Sign in", body, nav=False, status=status)
    remember_login_nonce(response, request, nonce)
    return response


@router.get("")
async def root() -> Response:
    return RedirectResponse("/ui/threads", status_code=303)


@router.get("/login")
async def login_form(request: Request) -> Response:
    return _login_form(request)


@router.post("/login")
async def login(request: Request) -> Response:
    try:
        fields = await form(request)
    except BodyTooLargeError as error:
        return _login_form(request, str(error), 413)
    if not login_token_matches(request, fields):
        return _login_form(request, "The sign-in form expired or did not come from this server: sign in again.", 403)
    key = fields.get("key", "").strip()
    try:
        if not key:
            raise AuthenticationError("Type an API key.")
        await authenticate(service_of(request).keys, key, dev=False)
    except AuthenticationError as error:
        return _login_form(request, str(error), status=401)
    response = RedirectResponse("/ui/threads", status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, key, httponly=True, samesite="strict", secure=secure, path="/ui")
    response.delete_cookie(LOGIN_COOKIE, path="/ui")
    return response


@router.post("/logout")
@guarded
async def logout(request: Request) -> Response:
    await checked_form(request)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


# -- threads --------------------------------------------------------------------------------
def _resource_form(resource: str | None, search: str, principal: Principal) -> str:
    fixed = principal.resource_id is not None
    resource_input = (
        f'<label for="resource_id">Resource</label> <input id="resource_id" name="resource_id" '
        f'value="{h(resource or "")}"{" readonly" if fixed else ""}> '
    )
    return (
        '<form method="get" action="/ui/threads" role="search">' + resource_input
        + f'<label for="q">Search threads</label> <input id="q" name="q" type="search" value="{h(search)}" '
        'placeholder="id or title"> <button type="submit">Search</button></form>'
    )  # fmt: skip


@router.get("/threads")
@guarded
async def threads(request: Request) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    params = request.query_params
    search = (params.get("q") or "").strip()
    named = params.get("resource_id") or None
    if named is None and principal.resource_id is None:
        body = _resource_form(None, search, principal) + (
            "<p>This key serves a whole org: name the resource whose threads to show.</p>"
        )
        return page("Threads", body, who=session(request, principal))
    limit, after, since = _paging(request)
    if search:
        resource, shown, following, read = await _search(
            principal, memory, named, search.lower(), limit=limit, after=after, since=since
        )
        caption = (
            f"{counted(len(shown), 'thread')} of resource {resource} whose id or title holds “{search}”, "
            f"among the {counted(read, 'thread')} searched for this page, oldest first"
        )
    elif params.get("order") == "oldest" or after is not None or since is not None:  # (a cursor of that listing)
        resource, batch, _ = await principal.thread_batch(memory, named, limit=limit + 1, after=after, since=since)
        shown = batch[:limit]
        following = shown[-1] if len(batch) > limit else None
        caption = f"{counted(len(shown), 'thread')} of resource {resource}, oldest first"
    else:  # most recently active first, paged by the listing's next_before
        before = params.get("before") or None
        resource, newest = await principal.newest_batch(memory, named, limit=limit + 1, before=before)
        shown = newest[:limit]
        caption = f"{counted(len(shown), 'thread')} of resource {resource}, most recently active first"
        caption += "" if before is None else " (continued)"
        mark = newest.marks[limit - 1] if len(newest) > limit else None
        body = _thread_table(resource, search, principal, [await _thread_row(memory, t) for t in shown], caption)
        body += _newest_pager(before, mark, limit=limit, resource_id=named)
        body += f'<p><a href="{h(url("/ui/threads", resource_id=named, order="oldest"))}">Oldest first</a></p>'
        return page("Threads", body, who=session(request, principal))
    caption += "" if after is None and since is None else " (continued)"
    rows = [await _thread_row(memory, thread) for thread in shown]
    body = _thread_table(resource, search, principal, rows, caption)
    more = "Search the next threads" if search else f"Next {limit} threads"
    order = None if search else "oldest"
    body += _pager("/ui/threads", after, since, following, more, limit=limit, resource_id=named, q=search, order=order)
    if not search:
        body += f'<p><a href="{h(url("/ui/threads", resource_id=named))}">Most recently active first</a></p>'
    return page("Threads", body, who=session(request, principal))


def _thread_table(resource: str, search: str, principal: Principal, rows: list[list[str]], caption: str) -> str:
    return _resource_form(resource, search, principal) + table(
        ["Thread", "Title", "Resource", "Messages", "Observation tokens", "Tokens observed", "Pending tokens",
         "Generation", "Last activity"],
        rows, caption=caption, numeric=(3, 4, 5, 6, 7),
    )  # fmt: skip


def _newest_pager(before: str | None, mark: str | None, *, limit: int, **params: str | None) -> str:
    """The links to the first page and to the one below ``mark`` (None: this is the last)."""
    shown_limit = None if limit == THREADS_PAGE else limit
    links = []
    if before is not None:
        links.append(f'<a href="{h(url("/ui/threads", **params, limit=shown_limit))}">First threads</a>')
    if mark is not None:
        nxt = url("/ui/threads", **params, limit=shown_limit, before=mark)
        links.append(f'<a href="{h(nxt)}" rel="next">{h(f"Next {limit} threads")}</a>')
    return f'<nav class="pager" aria-label="Pages">{" · ".join(links)}</nav>' if links else ""


def _paging(request: Request) -> tuple[int, str | None, datetime | None]:
    """A page of threads' ``limit`` (:data:`THREADS_PAGE` unless asked, at most
    :data:`THREADS_MOST`) and where it starts: ``after`` (the previous page's last thread) and
    ``since`` (its creation time, where the listing goes on when that thread is gone)."""
    params = request.query_params
    limit = int_param(params.get("limit"), THREADS_PAGE, low=1, high=THREADS_MOST)
    after = params.get("after") or None
    try:
        since = datetime.fromisoformat(params.get("since") or "")
    except ValueError:
        since = None
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return limit, after, since


def _pager(
    path: str, after: str | None, since: datetime | None, following: Thread | None, more: str, *, limit: int,
    **params: str | None,
) -> str:
    """The links to the first page and to the one after ``following`` (None: this is the last)."""
    shown_limit = None if limit == THREADS_PAGE else limit
    links = []
    if after is not None or since is not None:
        links.append(f'<a href="{h(url(path, **params, limit=shown_limit))}">First threads</a>')
    if following is not None:
        nxt = url(path, **params, limit=shown_limit, after=following.id, since=following.created_at.isoformat())
        links.append(f'<a href="{h(nxt)}" rel="next">{h(more)}</a>')
    return f'<nav class="pager" aria-label="Pages">{" · ".join(links)}</nav>' if links else ""


async def _search(
    principal: Principal, memory: Memory, named: str | None, needle: str, *, limit: int, after: str | None,
    since: datetime | None,
) -> tuple[str, list[Thread], Thread | None, int]:
    """The resource, up to ``limit`` of its threads whose id or title holds ``needle`` (lower
    case) from the cursor on, the thread the next page goes on after (None: the listing's end)
    and how many threads were read: a page at a time, at most :data:`SEARCH_READ` a request
    (the next page searches on), so a search of a resource of many threads stays bounded."""
    found: list[Thread] = []
    read = 0
    while True:
        take = min(_SEARCH_BATCH, SEARCH_READ - read)
        resource, batch, _ = await principal.thread_batch(memory, named, limit=take, after=after, since=since)
        for index, thread in enumerate(batch):
            if needle in thread.id.lower() or needle in (thread.title or "").lower():
                found.append(thread)
                if len(found) == limit:
                    rest = index < len(batch) - 1 or len(batch) == take
                    return resource, found, thread if rest else None, read + index + 1
        read += len(batch)
        if len(batch) < take:
            return resource, found, None, read
        if read >= SEARCH_READ:
            return resource, found, batch[-1], read
        after, since = batch[-1].id, batch[-1].created_at


async def _thread_row(memory: Memory, thread: Thread) -> list[str]:
    record = await memory.get_record(thread.id)
    count = await memory.store.count_messages(thread.id)
    return [
        f'<a href="{h(thread_url(thread.id))}">{h(thread.id)}</a>', h(thread.title), h(thread.resource_id),
        str(count), str(record.observation_tokens if record else 0), str(record.total_tokens_observed if record else 0),
        str(record.pending_message_tokens if record else 0), str(record.generation if record else "–"),
        h(when(thread.updated_at)),
    ]  # fmt: skip


def _thread_nav(thread: Thread) -> str:
    timeline, context, generations = (h(thread_url(thread.id, tail)) for tail in ("", "/context", "/generations"))
    return (
        f'<nav aria-label="Thread"><a href="{timeline}">Timeline</a> · <a href="{context}">Context preview</a> · '
        f'<a href="{generations}">Generations</a> · resource <code>{h(thread.resource_id)}</code></nav>'
    )


# -- groups ---------------------------------------------------------------------------------
def _head_groups(record: ObservationRecord | None, thread_id: str) -> list[tuple[ObservationGroup, bool]]:
    """The groups in the head record: active ones, then buffered (not yet activated) ones."""
    if record is None:
        return []
    active = [(g, True) for g in parse_groups(record.active_observations) if g.thread_id == thread_id]
    buffered = [
        (g, False) for chunk in record.buffered_chunks for g in parse_groups(chunk.observations) if g.thread_id == thread_id
    ]
    return active + buffered


def _group_link(thread_id: str, group: ObservationGroup) -> str:
    return thread_url(thread_id, f"/groups/{q(group.id)}")


# -- the timeline ---------------------------------------------------------------------------
@router.get("/threads/{thread_id}")
@router.get("/thread")  # ?thread_id=: '.' and '..' (html.thread_url)
@guarded
async def timeline(request: Request, thread_id: str) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    thread = await principal.thread(memory, thread_id)
    after = int_param(request.query_params.get("after_seq"), 0)
    record = await memory.get_record(thread_id)
    cursor = record.cursor(thread_id) if record else 0
    groups = _head_groups(record, thread_id)
    total = await memory.store.count_messages(thread_id)
    batch = await memory.list_messages(thread_id, after_seq=after, limit=TIMELINE_PAGE + 1)
    more = len(batch) > TIMELINE_PAGE
    batch = batch[:TIMELINE_PAGE]
    status = await memory.status(thread_id)
    spans = buffered_spans(status)
    rows = "".join(_message_row(memory, thread_id, message, groups, cursor, spans) for message in batch)
    pager = []
    if after > 0:
        pager.append(f'<a href="{h(thread_url(thread_id))}">First messages</a>')
    if more and batch:
        nxt = thread_url(thread_id, after_seq=batch[-1].seq)
        pager.append(f'<a href="{h(nxt)}" rel="next">Next {TIMELINE_PAGE} messages</a>')
    side = _groups_column(thread_id, groups)
    summary = (
        f"<p>{counted(total, 'message')}; observed up to seq {cursor}; "
        f"{counted(sum(1 for _, active in groups if active), 'active group')}, {sum(1 for _, a in groups if not a)} buffered. "
        f"Showing messages after seq {after}.</p>"
    )
    body = (
        _thread_nav(thread) + status_panel(status) + summary
        + '<div class="timeline"><section aria-label="Messages"><h2>Messages</h2>'
        + f'<ol class="messages" style="list-style:none;padding:0">{rows}</ol>'
        + f'<nav class="pager" aria-label="Pages">{"".join(pager)}</nav></section>'
        + f'<section aria-label="Observation groups"><h2>Observation groups</h2>{side}</section></div>'
    )  # fmt: skip
    return page(f"Thread {thread.id}", body, who=session(request, principal))


def _message_row(
    memory: Memory, thread_id: str, message: Message, groups: list[tuple[ObservationGroup, bool]], cursor: int,
    buffered: Sequence[tuple[str, int, int]] = (),
) -> str:
    seq = message.seq or 0
    covering = [g for g, _ in groups if g.covers(seq)]
    chunk = next((chunk_id for chunk_id, first, last in buffered if first <= seq <= last), None)
    if covering:
        coverage = "".join(
            f'<a class="cov" href="{h(_group_link(thread_id, g))}" data-group="{h(g.id)}">{h(g.kind)} {h(g.id)}</a>'
            for g in covering
        )
    elif seq <= cursor:
        coverage = '<span class="cov">observed</span>'
    else:
        coverage = '<span class="cov none">not observed yet</span>'
    if chunk is not None:
        coverage += f'<span class="cov buffered" data-chunk="{h(chunk)}">buffered, waiting for activation</span>'
    if isinstance(message.metadata.get(RECEIPT_KEY), dict):
        coverage += f'<a class="receipt-link" href="{h(receipt_link(message.id))}">made from</a>'
    text = folded_text(message, SHOWN_CHARS)
    markers = marker_html(message)
    tokens = memory.counter.count_message(message)
    marked = " buffered" if chunk is not None else ""
    return (
        f'<li class="msg {h(message.role)}{marked}" id="seq-{seq}" data-seq="{seq}" data-id="{h(message.id)}"'
        + (f' data-chunk="{h(chunk)}"' if chunk is not None else "")
        + f'><div class="meta">#{seq} · {h(message.role)} · {h(when(message.created_at))} · {tokens} tokens {coverage}</div>'
        + text + markers + "</li>"
    )  # fmt: skip


def _groups_column(thread_id: str, groups: list[tuple[ObservationGroup, bool]]) -> str:
    if not groups:
        return "<p>No observation groups (retrieval mode keeps them; nothing observed yet, or retrieval is off).</p>"
    items = []
    for group, active in groups:
        state = "active" if active else "buffered"
        jump = thread_url(thread_id, after_seq=max(0, group.first_seq - 1)) + f"#seq-{group.first_seq}"
        lines = [line.strip() for line in group.body.splitlines() if line.strip()]
        first_line = next((line for line in lines if line.startswith("*")), lines[0] if lines else "")
        items.append(
            f'<div class="group {h(group.kind)}" data-group="{h(group.id)}">'
            f'<a href="{h(_group_link(thread_id, group))}" class="group-link">{h(group.kind)} {h(group.id)}</a> '
            f"({state}) seq {group.first_seq}–{group.last_seq} · "
            f'<a href="{h(jump)}">on the timeline</a><br><small>{h(first_line[:160])}</small></div>'
        )
    return "".join(items)


async def _find_group(memory: Memory, thread_id: str, group_id: str) -> tuple[ObservationGroup, str] | None:
    record = await memory.get_record(thread_id)
    for group, active in _head_groups(record, thread_id):
        if group.id == group_id:
            return group, "active" if active else "buffered"
    for generation in await memory.list_generations(thread_id, limit=_GENERATIONS):
        for group in parse_groups(generation.active_observations):
            if group.id == group_id and group.thread_id == thread_id:
                return group, f"generation {generation.generation}"
    return None


@router.get("/threads/{thread_id}/groups/{group_id}")
@router.get("/thread/groups/{group_id}")
@guarded
async def group_page(request: Request, thread_id: str, group_id: str) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    thread = await principal.thread(memory, thread_id)
    found = await _find_group(memory, thread_id, group_id)
    if found is None:
        raise ResourceNotFoundError(f"observation group {group_id}")
    group, where = found
    after = max(group.first_seq - 1, int_param(request.query_params.get("after_seq"), 0))
    covered, next_after = await _covered(memory, thread_id, group, after)
    tail = f"/groups/{q(group_id)}"
    pager = []
    if after > group.first_seq - 1:
        pager.append(f'<a href="{h(thread_url(thread_id, tail))}">First messages</a>')
    if next_after is not None:
        pager.append(f'<a href="{h(thread_url(thread_id, tail, after_seq=next_after))}" rel="next">Next</a>')
    rows = "".join(
        f'<li class="msg {h(m.role)}" data-seq="{m.seq}" data-id="{h(m.id)}"><div class="meta">#{m.seq} · '
        f"{h(m.role)} · {h(when(m.created_at))}</div>{folded_text(m, 2000)}</li>"
        for m in covered
    )
    body = (
        _thread_nav(thread)
        + f"<p>{h(group.kind)} group <code>{h(group.id)}</code> ({h(where)}) covers seq {group.first_seq}–"
        f"{group.last_seq}, first message <code>{h(group.first_message_id)}</code>, last "
        f"<code>{h(group.last_message_id)}</code>.</p>"
        + f'<section class="obs" aria-label="Observations"><h2>Observations</h2><pre>{h(group.body)}</pre></section>'
        + '<section aria-label="Covered messages"><h2>The messages it covers</h2>'
        + f'<ol class="covered" style="list-style:none;padding:0">{rows}</ol>'
        + f'<nav class="pager" aria-label="Pages">{"".join(pager)}</nav></section>'
    )  # fmt: skip
    return page(f"Observation group {group.id}", body, who=session(request, principal))


async def _covered(
    memory: Memory, thread_id: str, group: ObservationGroup, after: int
) -> tuple[list[Message], int | None]:
    """One page of the messages the group covers: the thread's conversation messages (not system
    or marker-only ones) whose ``seq`` lies in the group's span, as ``recall`` answers for it;
    and the ``after_seq`` of the next page (None on the last). Read page by page, so a
    reflection group spanning thousands of messages costs one page per request."""
    batch = await memory.list_messages(thread_id, after_seq=after, limit=GROUP_PAGE)
    inside = [m for m in batch if (m.seq or 0) <= group.last_seq]
    covered = [m for m in inside if m.role != "system" and not m.is_marker_only]
    more = len(batch) == GROUP_PAGE and len(inside) == len(batch) and (inside[-1].seq or 0) < group.last_seq
    return covered, (inside[-1].seq if more else None)


# -- the context preview --------------------------------------------------------------------
@router.get("/threads/{thread_id}/context")
@router.get("/thread/context")
@guarded
async def context_page(request: Request, thread_id: str) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    thread = await principal.thread(memory, thread_id)
    context = await memory.get_context(thread_id)
    instructions = {id(m) for m in context.instructions}
    system = {id(m) for m in context.system_messages}
    raw = {id(m) for m in context.raw_messages}
    sections: list[tuple[str, list[tuple[int, Message]]]] = []
    for index, message in enumerate(context.messages):
        if id(message) in instructions:
            name = "Application instructions"
        elif id(message) in system:
            name = "obsmem: " + str(message.metadata.get("obsmem") or "system")
        elif id(message) in raw:
            name = "Raw messages (not observed yet)"
        else:
            name = "Reminders"
        if sections and sections[-1][0] == name:
            sections[-1][1].append((index, message))
        else:
            sections.append((name, [(index, message)]))
    total = memory.counter.count_messages(context.messages)
    parts = []
    summary_rows = []
    for number, (name, items) in enumerate(sections):
        tokens = sum(memory.counter.count_message(m) for _, m in items)
        summary_rows.append([f'<a href="#section-{number}">{h(name)}</a>', str(len(items)), str(tokens)])
        shown = "".join(
            f'<div class="ctx-message" data-index="{index}" data-id="{h(m.id)}" data-role="{h(m.role)}">'
            f'<div class="meta">[{index}] {h(m.role)} · {memory.counter.count_message(m)} tokens</div>'
            f'<pre class="ctx-text">{h(m.text)}</pre>'
            + (f"<pre>{message_text(m)}</pre>" if any(p.type != "text" for p in m.parts) else "")
            + "</div>"
            for index, m in items
        )
        parts.append(
            f'<section id="section-{number}" data-section="{h(name)}" data-tokens="{tokens}">'
            f"<h2>{h(name)} · {tokens} tokens</h2>{shown}</section>"
        )
    overhead = total - sum(memory.counter.count_message(m) for m in context.messages)
    summary_rows.append(["Conversation overhead", "", f'<span data-overhead="{overhead}">{overhead}</span>'])
    summary_rows.append(["<strong>Total</strong>", str(len(context.messages)), f'<strong data-total="{total}">{total}</strong>'])
    body = (
        _thread_nav(thread)
        + f"<p>Exactly what <code>Memory.get_context</code> returns now: {counted(len(context.messages), 'message')}, "
        f"{total} tokens; observations: {'yes' if context.has_observations else 'no'}; trimmed: {context.trimmed}.</p>"
        + table(["Section", "Messages", "Tokens"], summary_rows, caption="Tokens per section", numeric=(1, 2))
        + f'<div class="ctx">{"".join(parts)}</div>'
    )  # fmt: skip
    return page(f"Context preview · {thread.id}", body, who=session(request, principal))


# -- generations ----------------------------------------------------------------------------
@router.get("/threads/{thread_id}/generations")
@router.get("/thread/generations")
@guarded
async def generations_page(request: Request, thread_id: str) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    thread = await principal.thread(memory, thread_id)
    records = await memory.list_generations(thread_id, limit=_GENERATIONS)
    listed = records[:GENERATIONS_LISTED]
    rows = [
        [str(r.generation), h(r.origin), f"<code>{h(r.id)}</code>", h(when(r.created_at)), str(r.observation_tokens),
         str(r.total_tokens_observed), "live" if r.is_live else f"superseded by <code>{h(r.superseded_by)}</code>"]
        for r in listed
    ]  # fmt: skip
    total = records[0].generation + 1 if records else 0  # numbered from 0: the newest's number counts them
    held = "them all" if len(records) >= total else f"the newest {len(records)}"
    caption = f"The newest {len(listed)} of {counted(total, 'generation')}; the From and To lists below hold {held}"
    body = _thread_nav(thread) + table(
        ["Generation", "Origin", "Record", "Created", "Observation tokens", "Tokens observed", "State"],
        rows, caption=caption, numeric=(0, 4, 5),
    )  # fmt: skip
    if len(records) >= 2:
        by_id = {r.id: r for r in records}
        older = by_id.get(request.query_params.get("a") or "", records[1])
        newer = by_id.get(request.query_params.get("b") or "", records[0])
        diff = await asyncio.to_thread(
            _diff, older, newer, lambda record: observations_shown(record, thread.id, memory.config)
        )
        body += _diff_form(thread_id, records, older, newer) + diff
    return page(f"Generations · {thread.id}", body, who=session(request, principal))


def _diff_form(thread_id: str, records: list[ObservationRecord], older: ObservationRecord, newer: ObservationRecord) -> str:
    def select(name: str, label: str, chosen: ObservationRecord) -> str:
        options = "".join(
            f'<option value="{h(r.id)}"{" selected" if r.id == chosen.id else ""}>generation {r.generation} ({h(r.origin)})</option>'
            for r in records
        )
        return f'<label for="{name}">{label}</label> <select id="{name}" name="{name}">{options}</select> '

    action = thread_url(thread_id, "/generations")
    path, _, query = action.partition("?")  # a GET form sends its fields, not its action's query
    hidden = f'<input type="hidden" name="thread_id" value="{h(thread_id)}">' if query else ""
    return (
        f'<h2>Diff</h2><form method="get" action="{h(path)}">{hidden}'
        + select("a", "From", older) + select("b", "To", newer) + '<button type="submit">Compare</button></form>'
    )


def _diff(
    older: ObservationRecord, newer: ObservationRecord, shown: Callable[[ObservationRecord], str]
) -> str:
    """The line diff of two generations' observations as ``shown`` gives them (what the thread's
    context shows: in resource scope without sharing, never another thread's sections)."""
    before = shown(older).splitlines()
    after = shown(newer).splitlines()
    cut = len(before) > DIFF_LINES or len(after) > DIFF_LINES
    before, after = before[:DIFF_LINES], after[:DIFF_LINES]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    kept = sum(size for _, _, size in matcher.get_matching_blocks())
    lines: list[str] = []
    for line in list(difflib.unified_diff(before, after, lineterm="", n=2))[2:]:  # past the two file headers
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx"
        lines.append(f'<pre class="{cls}">{h(line)}</pre>')
    return (
        f'<p class="diff-summary">generation {older.generation} → {newer.generation}: kept {counted(kept, "line")}, '
        f"dropped {len(before) - kept}, added {len(after) - kept}; {older.observation_tokens} → "
        f"{newer.observation_tokens} tokens"
        + (f" (the first {DIFF_LINES:,} lines of each compared)" if cut else "") + ".</p>"
        f'<div class="diff">{"".join(lines) or "<p>No differences.</p>"}</div>'
    )


# -- usage ----------------------------------------------------------------------------------
@router.get("/usage")
@guarded
async def usage_page(request: Request) -> Response:
    principal = await principal_of(request)
    memory = service_of(request).memory
    named = request.query_params.get("resource_id") or None
    if named is None and principal.resource_id is None:
        body = (
            '<form method="get" action="/ui/usage"><label for="resource_id">Resource</label> '
            '<input id="resource_id" name="resource_id"> <button type="submit">Show</button></form>'
        )
        return page("Usage", body, who=session(request, principal))
    limit, after, since = _paging(request)
    resource, batch, any_threads = await principal.thread_batch(memory, named, limit=limit + 1, after=after, since=since)
    # the page shows the resource's model-call ledger: refused when any thread of the resource
    # (beyond this page too) is another org's, whose calls it counts
    await principal.resource_whole(memory, resource)
    shown = batch[:limit]
    rows: list[list[str]] = []
    for thread in shown:
        record = await memory.get_record(thread.id)
        count = await memory.store.count_messages(thread.id)
        # generations are numbered from 0 and only ever deleted all together: the head's number
        # counts them, with no generation read (a listing read up to 200 whole records a thread)
        generations = record.generation + 1 if record else 0
        observed = record.total_tokens_observed if record else 0
        kept = record.observation_tokens if record else 0
        rows.append([
            f'<a href="{h(thread_url(thread.id))}">{h(thread.id)}</a>', str(count), str(observed), str(kept),
            str(record.pending_message_tokens if record else 0), str(generations),
            _bar(observed, kept),
        ])  # fmt: skip
    continued = "" if after is None and since is None else " (continued)"
    body = table(
        ["Thread", "Messages", "Tokens observed", "Observation tokens", "Pending tokens", "Generations",
         "Compression (observed vs kept)"],
        rows, caption=f"Memory held for resource {resource}: {counted(len(shown), 'thread')}, oldest first{continued}",
        numeric=(1, 2, 3, 4, 5),
    )  # fmt: skip
    days = int_param(request.query_params.get("days"), 30, low=0, high=3660)  # 0: all of it
    following = shown[-1] if len(batch) > limit else None
    body += _pager("/ui/usage", after, since, following, f"Next {limit} threads", limit=limit, resource_id=named,
                   days=None if days == 30 else str(days))  # fmt: skip
    body += await _model_calls(memory, resource, named, days) if any_threads else "<p>This resource has no threads.</p>"
    return page("Usage", body, who=session(request, principal))


USAGE_WINDOWS = (7, 30, 90, 365, 0)


async def _model_calls(memory: Memory, resource: str, named: str | None, days: int) -> str:
    """The chart and table of the resource's model calls from the cost ledger (``Memory.usage``).
    Asked only for a resource with threads every one of which is the key's org's
    (``Principal.resource_whole`` checks), so the ledger's rows for that resource id are the
    org's own."""
    since = datetime.now(UTC).date() - timedelta(days=days - 1) if days else None
    report = await memory.usage(resource_id=resource, since=since)
    options = "".join(
        f'<option value="{d}"{" selected" if d == days else ""}>{f"the last {d} days" if d else "all of it"}</option>'
        for d in sorted({*USAGE_WINDOWS, days}, key=lambda d: d or 10**9)
    )
    window = (
        '<form method="get" action="/ui/usage">'
        + (f'<input type="hidden" name="resource_id" value="{h(named)}">' if named else "")
        + f'<label for="days">Days</label> <select id="days" name="days">{options}</select> '
        '<button type="submit">Show</button></form>'
    )
    return (
        '<section aria-labelledby="calls-heading"><h2 id="calls-heading">Model calls per role</h2>' + window
        + f"<figure>{usage_chart_svg(report)}<figcaption>Calls, tokens and mean latency per UTC day and role "
        "(the table below holds the same numbers).</figcaption></figure>"
        f"{usage_table(report)}</section>"
    )


def _bar(observed: int, kept: int) -> str:
    if observed <= 0:
        return ""
    width = max(1, round(100 * kept / observed)) if kept else 0
    return (
        f'<span role="img" aria-label="{kept} of {observed} tokens kept" style="display:inline-block;width:120px;'
        f'background:#e6f0fb"><span style="display:block;width:{min(100, width)}%;height:.8em;background:#0b5cad">'
        f"</span></span> {round(observed / max(1, kept), 1)}×"
    )

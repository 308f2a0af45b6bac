"""Server-rendered HTML for the inspector: one layout, escaping helpers and a small stylesheet.

Every value that comes from a store is escaped with :func:`h` before it reaches a page; pages are
plain f-strings, with no JavaScript at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from html import escape
from urllib.parse import quote, urlencode

from fastapi.responses import HTMLResponse

__all__ = ["CSS", "HEADERS", "Session", "counted", "csrf_input", "h", "page", "q", "table", "thread_url", "when", "url"]


def counted(n: object, noun: str) -> str:
    """``n`` and ``noun`` in the number ``n`` asks for: ``1 message``, ``3 messages`` (``noun`` is
    singular; a value that is not a whole number keeps the plural). Plain text: escape it where
    ``n`` or ``noun`` comes from a store."""
    return f"{n} {noun}" if isinstance(n, int) and not isinstance(n, bool) and n == 1 else f"{n} {noun}s"


@dataclass(frozen=True, slots=True)
class Session:
    """Who is signed in (shown in the header) and the CSRF token every form of the page carries."""

    who: str
    csrf: str

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1f2d3d;color:#fff;padding:.5rem 1rem;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
header a{color:#cfe3ff}header .who{margin-left:auto;font-size:12px;opacity:.85}
main{padding:1rem;max-width:1200px}
a{color:#0b5cad}a:focus,button:focus,input:focus,select:focus,textarea:focus{outline:3px solid #f0a500;outline-offset:1px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border:1px solid #dde1e6;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#eef1f4}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.timeline{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,1fr);gap:1rem}
.msg{background:#fff;border:1px solid #dde1e6;border-left:4px solid #9aa5b1;margin:.3rem 0;padding:.3rem .5rem;
content-visibility:auto;contain-intrinsic-size:auto 6rem}
.msg details summary{font-size:12px;color:#57606a;cursor:pointer}
.msg.user{border-left-color:#0b5cad}.msg.assistant{border-left-color:#2e8540}.msg.tool{border-left-color:#8a6d3b}
.msg .meta{font-size:12px;color:#57606a}.msg pre,.ctx pre,.obs pre{white-space:pre-wrap;margin:.2rem 0;font:13px/1.4 ui-monospace,monospace}
.cov{display:inline-block;font-size:12px;background:#e6f0fb;border-radius:3px;padding:0 .3rem;margin-left:.3rem}
.cov.none{background:#fdf1dc}
.marker{display:block;font-size:12px;color:#6f42c1;background:#f3eefc;margin:.15rem 0;padding:0 .3rem}
.marker.failed{color:#b31d28;background:#fdecee}
.group{background:#fff;border:1px solid #dde1e6;margin:.3rem 0;padding:.3rem .5rem}
.group.reflection{border-left:4px solid #6f42c1}.group.observation{border-left:4px solid #0b5cad}
.ctx section{background:#fff;border:1px solid #dde1e6;margin:.5rem 0;padding:.3rem .6rem}
.diff .add{background:#e6ffec}.diff .del{background:#ffebe9}.diff pre{margin:0}
.error{background:#ffebe9;border:1px solid #b31d28;padding:.5rem}
.ok{background:#e6ffec;border:1px solid #2e8540;padding:.5rem}
form.inline{display:inline}label{margin-right:.3rem}
.queue li{background:#fff;border:1px solid #dde1e6;margin:.4rem 0;padding:.4rem;list-style:none}
.queue{padding:0}
nav.pager a{margin-right:1rem}
.status{background:#fff;border:1px solid #dde1e6;padding:.4rem .7rem;margin:.5rem 0}.status dl{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:.3rem 0}.status dt{font-weight:600}.status dd{margin:0}.bar{position:relative;display:inline-block;width:260px;height:.9em;background:#e6f0fb;vertical-align:middle;border:1px solid #c5d6ea}.bar .fill{display:block;height:100%;background:#0b5cad}.bar .fill.over{background:#b35900}.bar .tick{position:absolute;top:-2px;bottom:-2px;width:2px;background:#1b1f24}.phase{display:inline-block;padding:0 .4rem;border-radius:3px;background:#eef1f4;font-weight:600}.cov.buffered{background:#fff3c4}.msg.buffered{border-right:4px solid #e0b400}a.receipt-link{font-size:12px;margin-left:.4rem}.rgroup{background:#fff;border:1px solid #dde1e6;margin:.4rem 0;padding:.3rem .6rem}.rgroup.reflection{border-left:4px solid #6f42c1}.rgroup.observation{border-left:4px solid #0b5cad}.rgroup.coverage{border-left:4px solid #57606a}.seqs{display:flex;flex-wrap:wrap}.seqs a{margin-right:.35rem;font-size:12px}
"""


def h(value: object) -> str:
    """``value`` as HTML text (None is empty)."""
    return "" if value is None else escape(str(value), quote=True)


def q(value: str) -> str:
    """``value`` as one URL path segment."""
    return quote(value, safe="")


def url(path: str, **params: object) -> str:
    """``path`` with the non-empty ``params`` as a query string."""
    kept = {k: str(v) for k, v in params.items() if v is not None and v != ""}
    return path + ("?" + urlencode(kept) if kept else "")


#: Path segments a browser resolves away before it sends the URL ('/ui/threads/..' is '/ui/'),
#: however they are encoded ('%2E%2E' too, by the URL standard).
_DOT_SEGMENTS = frozenset({".", ".."})


def thread_url(thread_id: str, tail: str = "", **params: object) -> str:
    """The inspector's page ``tail`` ('', '/context', '/generations', '/groups/<id>') of a thread:
    ``/ui/threads/<id><tail>``, the id one segment (:func:`q`: a '/', '?', '#' or '%' in it is
    encoded); a thread named '.' or '..' (which no browser sends as a segment) as
    ``/ui/thread<tail>?thread_id=..``."""
    if thread_id in _DOT_SEGMENTS:
        return url(f"/ui/thread{tail}", thread_id=thread_id, **params)
    return url(f"/ui/threads/{q(thread_id)}{tail}", **params)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], *, caption: str, numeric: Iterable[int] = ()) -> str:
    """A table of already-escaped cells; ``numeric`` columns align right."""
    nums = set(numeric)
    head = "".join(f'<th scope="col"{" class=num" if i in nums else ""}>{h(t)}</th>' for i, t in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f'<td{" class=num" if i in nums else ""}>{c}</td>' for i, c in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><caption>{h(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def csrf_input(token: str) -> str:
    """The hidden field that carries the CSRF token in a state-changing form."""
    return f'<input type="hidden" name="csrf_token" value="{h(token)}">'


def page(title: str, body: str, *, who: Session | None = None, status: int = 200, nav: bool = True) -> HTMLResponse:
    """One whole page: the header (navigation and who is signed in) and ``body`` (escaped already)."""
    links = ""
    if nav:
        links = (
            '<nav aria-label="Main"><a href="/ui/threads">Threads</a> · <a href="/ui/knowledge">Knowledge</a> · '
            '<a href="/ui/knowledge/review">Review queue</a> · <a href="/ui/knowledge/audit">Audit log</a> · '
            '<a href="/ui/usage">Usage</a></nav>'
        )
    signed = ""
    if who is not None:
        signed = (
            f'<span class="who">signed in as {h(who.who)} '
            f'<form class="inline" method="post" action="/ui/logout">{csrf_input(who.csrf)}'
            '<button type="submit">Sign out</button></form></span>'
        )
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{h(title)} · obsmem inspector</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>'
        f'<body><header><strong>obsmem inspector</strong>{links}{signed}</header>'
        f"<main><h1>{h(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


#: What every page is sent with. No page runs a script or loads anything but itself (styles are
#: inline, charts inline SVG), so the policy allows nothing else: stored text that slipped past
#: :func:`h` still could not run. And no page may be framed: a page of another origin (another
#: app on the same host is the same *site*, so the ``SameSite=Strict`` cookie goes with its
#: frames) could otherwise show the signed-in inspector in an invisible frame and have the user
#: click Approve, Reject or Sign out in it (the forms carry the session's CSRF token).
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

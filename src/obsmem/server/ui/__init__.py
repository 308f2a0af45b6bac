"""The inspector: server-rendered pages at ``/ui`` over the same keys and checks as the REST API.

Threads, a thread's timeline with its observation coverage, lifecycle markers and memory status
panel (``Memory.status``), the messages behind one observation group, a reply's receipt (what
the context it was made from held, :mod:`.receipts`), the context preview, generations and their diff, knowledge (nodes,
records with a date view, the wikilink graph around a node, the audit log and the review queue)
and usage (with the chart of model calls per role). No JavaScript, no build step: the graph and
the chart are SVG drawn on the server (:mod:`.graph`, :mod:`.usage`). Every state-changing form
carries a CSRF token (:mod:`.auth`).
"""

from __future__ import annotations

from fastapi import FastAPI

from obsmem.server.ui import knowledge, pages, receipts

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Serve the inspector's pages from ``app`` under ``/ui``."""
    app.include_router(pages.router)
    app.include_router(knowledge.router)
    app.include_router(receipts.router)

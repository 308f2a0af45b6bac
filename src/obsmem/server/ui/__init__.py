"""The inspector: server-rendered pages at ``/ui`` over the same keys and checks as the REST API.

Threads, a thread's timeline with its observation coverage and lifecycle markers, the messages
behind one observation group, the context preview, generations and their diff, knowledge (nodes,
records, the audit log and the review queue) and usage. No JavaScript, no build step.
"""

from __future__ import annotations

from fastapi import FastAPI

from obsmem.server.ui import knowledge, pages

__all__ = ["install"]


def install(app: FastAPI) -> None:
    """Serve the inspector's pages from ``app`` under ``/ui``."""
    app.include_router(pages.router)
    app.include_router(knowledge.router)

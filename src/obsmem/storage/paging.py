"""Every thread of a store, or of a resource, read a page at a time with the listing's cursor.

``list_all_threads`` and ``list_threads`` take ``after``, the id of the last thread of the
previous page: each page is read from an index at that point, so reading n threads costs about
n rows whatever the page size (``offset`` paging re-read every earlier row for every page), and
a thread created or deleted between pages neither hides nor repeats another.
:func:`all_threads` pages through them all; :func:`thread_page_sql` is the SQL stores' query.
"""

from __future__ import annotations

from typing import Any

from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.storage.contract import Store
from obsmem.types import Thread

__all__ = ["PAGE", "activity_mark", "all_threads", "newest_arguments", "newest_page_sql", "thread_page_sql"]

PAGE = 500


async def all_threads(store: Store, resource_id: str | None = None, *, page: int = PAGE) -> list[Thread]:
    """Every thread of ``resource_id`` (None: of every resource), oldest first, ``page`` at a time.

    When the thread a page would start after has been deleted since it was read, the page starts
    after the latest thread of the previous page still there, or when none is, from the start
    again; a thread already read is never returned twice.
    """
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise InvalidInputError(f"all_threads: page must be a whole number of at least 1, got {page!r}.")
    found: list[Thread] = []
    seen: set[str] = set()
    cursors: list[str] = []  # the previous page's ids; the last one still there starts the next page
    while True:
        after = cursors[-1] if cursors else None
        try:
            if resource_id is None:
                batch = await store.list_all_threads(limit=page, after=after)
            else:
                batch = await store.list_threads(resource_id, limit=page, after=after)
        except ThreadNotFoundError:
            cursors.pop()  # deleted since it was read: start after the one before it
            continue
        found += [thread for thread in batch if thread.id not in seen]
        seen.update(thread.id for thread in batch)
        if len(batch) < page:
            return found
        cursors = [thread.id for thread in batch]


def thread_page_sql(
    param: str, columns: str, resource_id: str | None, after: str | None, limit: int, offset: int,
    since_us: int | None = None,
) -> tuple[str, list[Any]]:
    """The SQL stores' query for a page of threads (``param`` is their placeholder) and its
    parameters: in the listing order, (created_us, pk), which the threads_by_creation index (or,
    for a resource, threads_by_resource) holds, from the key of the thread ``after`` on (and
    from ``since_us``, a ``created_us``, on). When that thread does not exist the page is empty:
    the store then tells the end of the listing from a missing cursor."""
    conditions: list[str] = []
    params: list[Any] = []
    if resource_id is not None:
        conditions.append(f"resource_id = {param}")
        params.append(resource_id)
    if since_us is not None:
        conditions.append(f"created_us >= {param}")
        params.append(since_us)
    if after is not None:
        conditions.append(f"(created_us, pk) > (SELECT created_us, pk FROM threads WHERE id = {param})")
        params.append(after)
    return _threads_sql(param, columns, conditions, params, "created_us, pk", limit, offset)


def _threads_sql(
    param: str, columns: str, conditions: list[str], params: list[Any], order: str, limit: int, offset: int
) -> tuple[str, list[Any]]:
    """``SELECT columns FROM threads`` where every one of ``conditions`` holds, in ``order``, a page."""
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = f"SELECT {columns} FROM threads{where} ORDER BY {order} LIMIT {param} OFFSET {param}"
    return sql, [*params, limit, offset]


def newest_arguments(newest_first: bool, since: object, before: str | None) -> int | None:
    """A SQL store's check of a newest-first listing's arguments: ``before`` only with
    ``newest_first``, ``since`` only without it; the activity ``before`` names."""
    if not newest_first:
        raise InvalidInputError("before goes with newest_first=True", argument="before")
    if since is not None:
        raise InvalidInputError("since goes with the oldest-first listing, not newest_first", argument="since")
    return activity_mark(before)


def activity_mark(before: str | None) -> int | None:
    """The activity a SQL store's ``next_before`` names (its decimal text), else InvalidInputError."""
    if before is None:
        return None
    if not isinstance(before, str) or not before.isascii() or not before.isdigit() or len(before) > 19:
        raise InvalidInputError("before: not a 'next_before' this listing gave", argument="before")
    return int(before)


def newest_page_sql(
    param: str, columns: str, resource_id: str, after: str | None, before: int | None, limit: int, offset: int,
) -> tuple[str, list[Any]]:
    """The SQL stores' query for a page of a resource's threads most recently active first, and
    its parameters: by ``activity`` descending (unique per thread), which threads_by_activity
    (resource_id, activity) holds, below ``before`` (an activity) and below the current activity
    of the thread ``after``. When that thread does not exist the page is empty: the store then
    tells the end of the listing from a missing cursor. ``columns`` must include ``activity``."""
    conditions = [f"resource_id = {param}"]
    params: list[Any] = [resource_id]
    if before is not None:
        conditions.append(f"activity < {param}")
        params.append(before)
    if after is not None:
        conditions.append(f"activity < (SELECT activity FROM threads WHERE id = {param})")
        params.append(after)
    return _threads_sql(param, columns, conditions, params, "activity DESC", limit, offset)

"""Counting the message rows a store hands out: how the tests show a read is bounded (rows, not time)."""

from __future__ import annotations

from typing import Any

from obsmem.storage.contract import Store


class RowsRead:
    """Counts the rows ``store.list_messages`` hands out while active (``with RowsRead(store) as
    read: ...; read.rows``). ``whole_thread_only``: only reads of a thread from its first message
    with no limit (``list_messages(thread)``: the whole history)."""

    def __init__(self, store: Store, *, whole_thread_only: bool = False) -> None:
        self.store = store
        self.whole_thread_only = whole_thread_only
        self.rows = 0

    def __enter__(self) -> RowsRead:
        real = type(self.store).list_messages

        async def counted(*args: Any, **kwargs: Any) -> Any:
            found = await real(self.store, *args, **kwargs)
            if not self.whole_thread_only or (not kwargs.get("after_seq") and kwargs.get("limit") is None):
                self.rows += len(found)
            return found

        self.store.list_messages = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.list_messages

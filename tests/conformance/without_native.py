"""A store wrapped so that it lacks one optional native method (a third-party store written before
the method existed), its thread listings counted: what the contract's fallbacks are tested on."""

from __future__ import annotations

from typing import Any, ClassVar

from obsmem.storage.contract import Store


class WithoutNative:
    """``inner`` without the method named :attr:`HIDDEN`; ``pages``: the sizes of the thread
    listings read through it."""

    HIDDEN: ClassVar[str] = ""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.pages: list[int] = []

    async def list_threads(self, *args: Any, **kwargs: Any) -> Any:
        page = await self._inner.list_threads(*args, **kwargs)
        self.pages.append(len(page))
        return page

    def __getattr__(self, name: str) -> Any:
        if name == self.HIDDEN:
            raise AttributeError(name)
        return getattr(self._inner, name)

"""A model that never answers, for holding a SyncMemory call in flight without timing."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from obsmem.models.base import ModelResponse


class StuckModel:
    """Its ``request`` tells ``entered`` and then waits forever (until cancelled: ``cancelled``
    counts those)."""

    name = "test:stuck"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.cancelled = 0

    async def request(self, messages: list[Any], settings: Any = None) -> ModelResponse:
        self.entered.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")

"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from obsmem import Memory


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A SQLite store holding thread t1 of resource alice, with one user message ('hi')."""
    path = tmp_path / "m.db"

    async def run() -> None:
        memory = Memory(f"sqlite:///{path}")
        try:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}])
        finally:
            await memory.aclose()

    asyncio.run(run())
    return path

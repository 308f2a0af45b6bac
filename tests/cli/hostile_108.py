"""What the hostile review of the command line (helper-108) checks in several test files: a
seeded store, and a refusal in one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import Result

from obsmem import Memory, Message


def seed(db: Path, thread: str = "t1", resource: str = "alice") -> None:
    """A store with one observed thread (two messages) of ``resource``."""

    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread(thread, resource)
            await memory.save_messages(thread, [Message.user("Alice lives in Kathmandu."), Message.assistant("Noted.")])
            await memory.observe(thread)

    asyncio.run(run())


def refused(result: Result, needle: str) -> None:
    """Status 1, one ``error:`` line holding ``needle``, no exception but the exit."""
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], result.stderr
    assert "Traceback" not in result.output

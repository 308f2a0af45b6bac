"""A long-lived process whose background work keeps failing (helper-113's finding): every failure
was kept in ``BackgroundWork.errors`` for the life of the process, with its traceback, whose frames
held what the task worked on (a user's messages, after that user was deleted)."""

from __future__ import annotations

import asyncio

import pytest

from obsmem.background import BackgroundWork

FAILURES = 500

pytestmark = pytest.mark.anyio


async def test_failures_kept_are_the_newest_few_without_their_frames(anyio_backend: str) -> None:
    work = BackgroundWork()

    async def fails(index: int) -> None:
        said = f"the user's words number {index}"  # a local a traceback's frame would keep
        raise ValueError(f"failure {index} ({len(said)})")

    for index in range(FAILURES):
        work.spawn(fails(index), f"job-{index}")
    await work.settled()
    await asyncio.sleep(0)

    assert 0 < len(work.errors) <= FAILURES // 5, len(work.errors)  # a bounded record (ERRORS_KEPT)
    assert str(work.errors[-1]).startswith(f"failure {FAILURES - 1} ")  # of the newest
    assert all(error.__traceback__ is None for error in work.errors)

"""The demo replays on its own simulated clock (issue 15), with the public FakeClock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from obsmem.clock import FakeClock
from obsmem.demo.conversation import demo_conversation
from obsmem.demo.runner import run_demo

pytestmark = pytest.mark.anyio


def test_advance_to_follows_a_recording_and_never_goes_back() -> None:
    start = datetime(2025, 3, 3, 8, 40, tzinfo=UTC)
    clock = FakeClock(start=start)
    clock.advance_to(datetime(2025, 3, 3, 10, 40, tzinfo=timezone(timedelta(hours=1))))  # 09:40 UTC
    assert clock.now() == start + timedelta(hours=1)
    clock.advance_to(start)  # earlier: stays
    assert clock.now() == start + timedelta(hours=1)
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.advance_to(datetime(2025, 3, 4))


async def test_the_demo_context_is_dated_from_the_conversation_not_the_wall_clock(tmp_path: Path) -> None:
    report = await run_demo(tmp_path / "demo.db", turns=60)
    text = "\n".join(m.text for m in report.context.messages)
    last = demo_conversation()[59].responses[-1].created_at
    assert "Date: Mar 3, 2025" in text
    assert "year ago" not in text and "likely already happened" not in text
    # the newest day reads relative to the demo's own last message
    assert f"Date: {last:%b} {last.day}, {last.year} (today)" in text

"""Issue 15: stale lines leave the active observations when a cycle's lines make them stale
(:meth:`OfflineObserver.revise`), incrementally: only what the new lines state is checked."""

from __future__ import annotations

import pytest

import obsmem.om.offline.reflector as reflector
from obsmem.om.offline import OfflineObserver
from obsmem.om.offline import offload as offload_module
from obsmem.om.offline.child import work
from obsmem.om.offline.observer import Revision
from obsmem.om.offline.offload import LENGTH_ESTIMATE, Job
from obsmem.om.offline.reflector import drop_superseded, drop_superseded_by
from obsmem.om.text.format import append_with_boundary
from datetime import UTC, datetime

pytestmark = pytest.mark.anyio

OLDER = (
    "Date: Jun 10, 2025\n"
    "* 🔴 (09:00) User stated their phone number is +44 7700 9123 456.\n"
    "* 🟡 (09:05) Topics: help them put together the Zan packing…; how to pack shoes.\n"
    "* 🟡 (09:07) User asked the assistant to draft the Zan packing list.\n"
    "  * -> outline given\n"
    "* 🔴 (09:09) User stated they go with Brako Hotel for the stay, booked through Aldo, who rang twice.\n"
    "\n"
    "Date: Jun 11, 2025\n"
    "* 🔴 (08:00) User stated their email is ana@old.example.\n"
)
NEW = (
    "Date: Jun 16, 2025\n"
    "* 🔴 (10:00) User stated their phone number is now +44 7700 9555 111 (changing from +44 7700 9123 456).\n"
    "* 🔴 (10:05) User stated their email is ana@new.example.\n"
    "* ✅ (10:09) User finished the Zan packing list.\n"
)
AT = datetime(2025, 6, 16, 10, 10, tzinfo=UTC)


def test_new_lines_drop_the_older_lines_they_make_stale_and_nothing_else() -> None:
    revised = drop_superseded_by(OLDER, NEW)
    assert "9123 456." not in revised  # the old number's own line is gone
    assert "ana@old.example" not in revised  # so is the old email, and its emptied day header
    assert "Jun 11" not in revised
    assert "* 🟡 (09:05) Topics: how to pack shoes." in revised  # the finished task's part goes
    assert "draft the Zan" not in revised and "outline given" not in revised  # with its sub-bullet
    assert "Brako Hotel for the stay, booked through Aldo, who rang twice." in revised  # untouched
    assert revised.startswith("Date: Jun 10, 2025\n")


def test_the_incremental_revision_equals_the_whole_text_revision() -> None:
    """Appending cycle by cycle and revising each time leaves what one revision of the whole
    log leaves: the older lines already went through it when they were new."""
    cycles = [OLDER, NEW, "Date: Jun 17, 2025\n* 🔴 (09:00) User stated their email is ana@third.example.\n"]
    active = ""
    for index, cycle in enumerate(cycles):
        active = append_with_boundary(drop_superseded_by(active, cycle), cycle, AT.replace(day=10 + index))
    whole = ""
    for index, cycle in enumerate(cycles):
        whole = append_with_boundary(whole, cycle, AT.replace(day=10 + index))
    assert _lines(active) == _lines(drop_superseded(whole))  # the same lines (blank lines aside)
    assert "ana@new.example" not in active and "ana@third.example" in active


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_new_lines_that_state_nothing_stale_making_never_read_the_older_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear in the new lines: most cycles state no fact, change or finished task, and then
    the older text comes back as it is without a single line of it parsed."""
    parsed: list[str] = []
    real = reflector.parse_line  # type: ignore[attr-defined]

    def counting(raw: str):  # type: ignore[no-untyped-def]
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(reflector, "parse_line", counting)
    chatter = "Date: Jun 16, 2025\n* 🟡 (10:00) User asked how to fold shirts; Assistant answered: roll them.\n"
    older = OLDER * 200
    assert drop_superseded_by(older, chatter) is older
    assert all(line in chatter.splitlines() for line in parsed)


def test_each_older_line_pays_for_its_fact_patterns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Later cycles ask the older lines' attributes again: they are remembered per line."""
    calls: list[str] = []
    real = reflector.fact_key  # type: ignore[attr-defined]

    def counting(text: str):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(text)

    monkeypatch.setattr(reflector, "fact_key", counting)
    reflector._fact_key.cache_clear()
    older = "".join(f"* 🔴 (09:00) User stated their locker code is {n:04d}-{n}.\n" for n in range(300))
    drop_superseded_by(older, "* 🔴 (10:00) User stated their email is a@b.example.\n")
    first = len(calls)
    drop_superseded_by(older, "* 🔴 (10:01) User stated their email is c@d.example.\n")
    assert first >= 300 and len(calls) - first == 1  # only the new line was new
    reflector._fact_key.cache_clear()


async def test_revise_gives_the_same_text_inline_in_a_thread_and_in_a_child() -> None:
    inline = await OfflineObserver(offload_chars=None).revise(OLDER, NEW)
    threaded = await OfflineObserver(offload_chars=1).revise(OLDER, NEW)
    assert inline == threaded == drop_superseded_by(OLDER, NEW)
    assert work(Job("revise", LENGTH_ESTIMATE, Revision(OLDER, NEW))) == inline


async def test_a_large_record_is_revised_off_the_event_loop() -> None:
    before = offload_module.stats()
    big = OLDER * 2_000  # ~700 KB
    revised = await OfflineObserver().revise(big, NEW)
    after = offload_module.stats()
    assert after["in_child"] + after["in_thread"] == before["in_child"] + before["in_thread"] + 1
    assert "ana@old.example" not in revised
    chatter = "* 🟡 (10:00) User asked how to fold shirts; Assistant answered: roll them.\n"
    assert await OfflineObserver().revise(big, chatter) is big  # nothing to do: not even sent
    assert offload_module.stats()["in_child"] + offload_module.stats()["in_thread"] == (
        after["in_child"] + after["in_thread"]
    )


def test_activation_appends_buffered_chunks_to_the_revised_observations() -> None:
    """An engine revising before activation passes the revised text; the chunks follow it."""
    from obsmem.om.activation import activate_chunks, chunks_to_take
    from obsmem.storage.contract import BufferedChunk, ObservationRecord, ThreadState

    chunk = BufferedChunk(id="c1", cycle_id="y1", thread_id="t1", observations=NEW, observation_tokens=40,
                          message_ids=("m1",), message_tokens=90, first_seq=1, last_seq=3, created_at=AT)  # fmt: skip
    record = ObservationRecord(
        id="r", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1",
        active_observations=OLDER, threads={"t1": ThreadState(cursor=0)}, buffered_chunks=(chunk,),
    )  # fmt: skip
    taken = chunks_to_take(record, "t1", 1)
    assert taken == (chunk,)
    older = drop_superseded_by(OLDER, "\n".join(c.observations for c in taken))
    moved = activate_chunks(record, "t1", 1, now=AT, count_tokens=len, older=older)
    assert moved.record.active_observations == append_with_boundary(older, NEW, AT)
    assert "ana@old.example" not in moved.record.active_observations
    plain = activate_chunks(record, "t1", 1, now=AT, count_tokens=len)
    assert plain.record.active_observations == append_with_boundary(OLDER, NEW, AT)  # as before

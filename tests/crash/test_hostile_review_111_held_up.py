"""Hostile review 111, what held up: an app process SIGKILLed while obsmem works on the SQLite
default (the process is killed at a named point, signalled through a file), then a fresh process
opens the same file and goes on.

Checked after each restart: every message a call that returned had saved is stored once, in
order (the messages of the call that was cut off are stored once or not at all); the next turn's
context holds its input, and the turn did not wait for the dead process's lease (it returned
before that lease expires); the observation or reflection that was running is done again (no
line twice) and leaves nothing pending; ``Memory.status`` names the dead lease as in flight only
until its expiry.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from obsmem import Memory, Message

from .crash_child import LATE_RESULT, SECRET, config, user_message
from .harness import kill_at, read
from .test_crash_erase import erasing_rows, tables_holding

pytestmark = pytest.mark.anyio


async def check_after_restart(memory: Memory, run: Path) -> None:
    stored = [m.id for m in await memory.list_messages("t1")]
    saved = [mid for mid in read(run, "saved.json", []) if mid.startswith("t1-")]
    cut_off = [mid for mid in read(run, "inflight.json", []) if mid.startswith("t1-")]
    assert [mid for mid, n in Counter(stored).items() if n > 1] == []
    assert [mid for mid in stored if mid in saved] == saved  # all of them, in order
    assert set(stored) <= set(saved) | set(cut_off)
    assert all(mid in stored for mid in cut_off) or not any(mid in stored for mid in cut_off)  # a save is whole

    status = await memory.status("t1")
    dead = dict(status.in_flight)
    turn = await memory.begin_turn(thread_id="t1", resource_id="alice",
                                   messages=[Message(id="after-u", role="user", parts=Message.user("Where do I live?").parts)])
    assert "after-u" in [m.id for m in turn.context.messages]
    assert all(datetime.now(UTC) < expiry for expiry in dead.values())  # no wait for a dead lease
    await turn.end([Message.assistant("Berlin.")])

    outcome = await memory.observe("t1")  # what the dead process was doing, done again
    assert outcome.applied or outcome.reason == "nothing to observe", outcome.reason
    observations = await memory.get_observations("t1")
    lines = [line for line in observations.splitlines() if line.startswith("* ")]
    assert [line for line, n in Counter(lines).items() if n > 1] == []
    assert "where do they live" in observations  # the turn after the restart, observed
    status = await memory.status("t1")
    assert status.unobserved_messages == 0


@pytest.mark.parametrize(
    "scenario", ["sync-observe", "buffer-observe", "reflect", "begin-save", "activation:before", "activation:after"]
)
async def test_killed_in_memory_work_the_restarted_app_goes_on(tmp_path: Path, scenario: str) -> None:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    run = tmp_path / "run"
    kill_at(scenario, db, run)

    async with Memory(f"sqlite:///{db}", config=config(buffered=scenario.startswith(("buffer", "activation"))),
                      max_turn_wait=2.0) as memory:
        await check_after_restart(memory, run)


async def test_killed_in_a_resource_scope_observation(tmp_path: Path) -> None:
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    run = tmp_path / "run"
    kill_at("sync-observe@resource", db, run)

    async with Memory(f"sqlite:///{db}", config=config(buffered=False, scope="resource"), max_turn_wait=2.0) as memory:
        await check_after_restart(memory, run)


@pytest.mark.parametrize("scenario", ["forget:lineage", "forget:working-memory", "delete-resource:second-thread",
                                      "delete-resource:release-leases"])
async def test_an_erase_killed_midway_is_finished_by_calling_it_again(tmp_path: Path, scenario: str) -> None:
    """``forget`` changes each row in place and can be run again; ``delete_resource`` deletes a
    thread's data right after its row (and now notes the threads it deletes)."""
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at(scenario, db, tmp_path / "run")

    async with Memory(f"sqlite:///{db}", config=config(buffered=False)) as memory:
        if scenario.startswith("forget"):
            await memory.forget(SECRET, resource_id="alice")
            assert await memory.list_messages("t1")  # only the value went
        else:
            await memory.delete_resource("alice")
            assert tables_holding(db, "alice") == {}
        assert tables_holding(db, SECRET) == {}
        assert erasing_rows(db) == []


async def test_killed_right_after_a_late_tool_result_took_its_place(tmp_path: Path) -> None:
    """The rewrite is one save: after the restart the call is answered once, by the real result,
    and the app sending the result again (its step never returned) stores nothing twice."""
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at("late-result", db, tmp_path / "run")

    async with Memory(f"sqlite:///{db}", config=config(buffered=False), max_turn_wait=2.0) as memory:
        def answers(messages: list[Message]) -> list[object]:
            return [r.result for m in messages for r in m.tool_results if r.tool_call_id == "late-call"]

        assert answers(await memory.list_messages("t1")) == ["Pip has 3 ferret friends"]
        turn = await memory.resume_turn(thread_id="t1")
        await turn.step([LATE_RESULT])  # sent again
        await turn.end([Message.assistant("Pip has three friends.")])
        stored = await memory.list_messages("t1")
        assert answers(stored) == ["Pip has 3 ferret friends"]
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]


async def test_a_worker_killed_in_its_model_call_has_its_work_taken_over(tmp_path: Path) -> None:
    """A worker (``background="queue"``) SIGKILLed inside a buffer's model call: a worker started
    afterwards claims the item once the dead one's claim and lease expire (short here), and the
    buffer is made once; nothing goes to the dead letters."""
    import asyncio
    import time

    from obsmem.storage import open_store
    from obsmem.worker import Worker

    from .crash_child import WORKER_TTL_S

    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    kill_at("worker", db, tmp_path / "run")

    store = open_store(f"sqlite:///{db}")
    try:
        worker = Worker(store, config=config(buffered=True), claim_ttl_s=WORKER_TTL_S, lease_ttl_s=WORKER_TTL_S)
        deadline = time.monotonic() + 120  # a bound on the wait for the dead claim to expire, not a timing claim
        while not await worker.drained():
            assert time.monotonic() < deadline, "the dead worker's item was never taken over"
            if not await worker.run_once():
                await asyncio.sleep(0.05)
        assert worker.stats.completed == 1
        assert await store.list_dead_work() == []
    finally:
        await store.close()
    async with Memory(f"sqlite:///{db}", config=config(buffered=True)) as memory:
        status = await memory.status("t1")
        assert len(status.buffered) == 1
        assert (status.buffered[0].first_seq, status.buffered[0].last_seq) == (1, 6)


async def test_killed_after_the_input_committed_the_retried_turn_stores_it_once(tmp_path: Path) -> None:
    """begin_turn's save committed and the process died before it returned: the app, retrying
    the same input (the same message id), gets a turn whose context holds it, stored once."""
    db = tmp_path / "db" / "m.db"
    db.parent.mkdir()
    run = tmp_path / "run"
    kill_at("begin-committed", db, run)

    async with Memory(f"sqlite:///{db}", config=config(buffered=False), max_turn_wait=2.0) as memory:
        assert [m.id for m in await memory.list_messages("t1")].count("t1-u100") == 1
        retried = user_message("t1", 100)  # sent again as it was
        turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[retried])
        assert "t1-u100" in [m.id for m in turn.context.messages]
        await turn.end([Message.assistant("Noted.")])
        assert [m.id for m in await memory.list_messages("t1")].count("t1-u100") == 1

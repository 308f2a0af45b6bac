"""SyncMemory.close(): idempotent, and what the other threads of a web app get afterwards.

The async Memory refuses use after ``aclose()`` with StoreClosedError and accepts a second
``aclose()``; the blocking facade must behave the same (its module promises that sync and async
users never see different behaviour), and closing must answer every thread still waiting on a
call instead of leaving it blocked forever.
"""

from __future__ import annotations

import gc
import threading
import warnings
from pathlib import Path

import pytest

from obsmem import Message, SyncMemory
from obsmem.errors import StoreClosedError

from .helpers_118 import StuckModel

#: A hang guard only (a thread that never returns fails the test instead of the run hanging);
#: nothing here measures how long anything took.
HANG_GUARD_S = 60


def test_close_twice_and_use_after_close_behave_like_the_async_memory(tmp_path: Path) -> None:
    memory = SyncMemory(f"sqlite:///{tmp_path}/m.db")
    turn = memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        memory.close()
        memory.close()  # before: RuntimeError('Event loop is closed')
        with pytest.raises(StoreClosedError):
            memory.list_messages("t")  # before: RuntimeError, not an ObsmemError
        with pytest.raises(StoreClosedError):
            turn.step([Message.assistant("hi")])  # a turn outliving its memory
        with pytest.raises(StoreClosedError):
            with memory:  # a with block re-entered after it closed the memory
                pass
        gc.collect()
    never_awaited = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert never_awaited == []


def test_close_answers_every_thread_still_waiting_on_a_call(tmp_path: Path) -> None:
    model = StuckModel()
    memory = SyncMemory(f"sqlite:///{tmp_path}/m.db", observer=model, close_timeout=0, model_timeout_s=None)
    memory.create_thread("t", "u")
    memory.save_messages("t", [Message.user("I moved to Lisbon last spring. " * 20)])
    watching = memory.watch("t")
    next(watching)
    outcomes: dict[str, str] = {}
    started = threading.Barrier(2)

    def observe() -> None:  # held in flight by the model that never answers
        try:
            memory.observe("t")
            outcomes["observe"] = "returned"
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcomes["observe"] = type(exc).__name__

    def watch() -> None:  # waits for a change that never comes
        started.wait()
        try:
            next(watching)
            outcomes["watch"] = "returned"
        except BaseException as exc:  # noqa: BLE001
            outcomes["watch"] = type(exc).__name__

    threads = [threading.Thread(target=observe, daemon=True), threading.Thread(target=watch, daemon=True)]
    for thread in threads:
        thread.start()
    assert model.entered.wait(HANG_GUARD_S)
    started.wait()
    memory.close()
    for thread in threads:
        thread.join(HANG_GUARD_S)
    assert [t.is_alive() for t in threads] == [False, False], f"still blocked after close(): {outcomes}"
    assert outcomes == {"observe": "StoreClosedError", "watch": "StoreClosedError"}
    assert model.cancelled == 1


def test_a_sync_memory_dropped_without_close_stops_its_thread_and_frees_its_file(tmp_path: Path) -> None:
    """Guard (held before too): the garbage-collection finalizer closes it like close() would."""

    def loop_threads() -> int:
        return sum(thread.name == "obsmem-sync" for thread in threading.enumerate())

    before = loop_threads()
    memory = SyncMemory(f"sqlite:///{tmp_path}/m.db")
    memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")]).end()
    assert loop_threads() == before + 1
    del memory
    gc.collect()
    assert loop_threads() <= before
    with SyncMemory(f"sqlite:///{tmp_path}/m.db") as again:  # the file was left consistent
        assert [m.text for m in again.list_messages("t")] == ["hello"]

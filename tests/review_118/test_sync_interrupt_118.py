"""Ctrl-C (KeyboardInterrupt) in the thread waiting on a SyncMemory call.

asyncio.run stops the work Ctrl-C interrupts; so must the blocking facade: the interrupted
call's work is cancelled before KeyboardInterrupt reaches the caller (it does not go on behind
the caller's back), and an interrupted ``watch`` raises KeyboardInterrupt, not the
RuntimeError('aclose(): asynchronous generator is already running') it raised before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HANG_GUARD_S = 120  # a hang guard (the script runs in its own interpreter), not a speed limit

SCRIPT = textwrap.dedent(
    """
    import signal, threading, sys
    sys.path.insert(0, sys.argv[1])
    from helpers_118 import StuckModel
    from obsmem import Message, SyncMemory

    def interrupt_main_when(event):
        def send():
            event.wait()
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        threading.Thread(target=send, daemon=True).start()

    model = StuckModel()
    memory = SyncMemory("memory://", observer=model, model_timeout_s=None)
    memory.create_thread("t", "u")
    memory.save_messages("t", [Message.user("I moved to Lisbon last spring. " * 20)])

    interrupt_main_when(model.entered)
    try:
        memory.observe("t")
        print("observe returned")
    except KeyboardInterrupt:
        print("observe: KeyboardInterrupt, model call cancelled:", model.cancelled, flush=True)

    watching = memory.watch("t", interval_s=3600)
    next(watching)
    in_call = threading.Event()
    interrupt_main_when(in_call)
    try:
        in_call.set()  # the signal is handled once the main thread waits on the call below
        next(watching)
        print("watch returned")
    except BaseException as exc:
        print("watch:", type(exc).__name__, flush=True)
    watching.close()
    memory.close()
    print("closed", flush=True)
    """
)


def test_ctrl_c_cancels_the_interrupted_call_and_reaches_the_caller_as_itself() -> None:
    from pathlib import Path

    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(Path(__file__).parent)],
            capture_output=True, text=True, timeout=HANG_GUARD_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung; output so far: {exc.stdout!r}")
    assert result.stdout.splitlines() == [
        "observe: KeyboardInterrupt, model call cancelled: 1",
        "watch: KeyboardInterrupt",
        "closed",
    ], result.stderr[-3000:]
    assert "Task was destroyed but it is pending" not in result.stderr

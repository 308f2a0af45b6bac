"""A SyncMemory whose event-loop thread died must refuse calls, never leave them waiting.

A BaseException that is not an Exception (SystemExit from a callback that calls sys.exit(), a
KeyboardInterrupt raised in one) raised in memory work on the facade's loop stops that loop
for good. Before, every call from then on (and the one in flight) waited forever.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HANG_GUARD_S = 120  # a hang guard (the script runs in its own interpreter), not a speed limit

SCRIPT = textwrap.dedent(
    """
    from obsmem import Message, MemoryConfig, ObservationConfig, ReflectionConfig, SyncMemory
    from obsmem.errors import ObsmemError

    def on_event(event):
        raise SystemExit("an event handler called sys.exit()")

    config = MemoryConfig(observation=ObservationConfig(message_tokens=400, buffer_tokens=False),
                          reflection=ReflectionConfig(observation_tokens=1500))
    memory = SyncMemory("memory://", config=config, on_event=on_event)
    outcomes = []
    for round in range(20):  # until the memory work's first event has stopped the loop
        try:
            turn = memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi " * 100)])
            turn.end([Message.assistant("ok " * 50)])
        except BaseException as exc:
            outcomes.append(type(exc).__name__)
            break
    try:
        memory.list_messages("t")
        outcomes.append("list: returned")
    except ObsmemError as exc:
        named = " names the cause" if "sys.exit" in str(exc) else ""
        outcomes.append("list: " + type(exc).__name__ + named)
    memory.close()
    memory.close()
    outcomes.append("closed")
    print(outcomes, flush=True)
    """
)


def test_calls_after_the_loop_thread_died_raise_instead_of_hanging() -> None:
    try:
        result = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=HANG_GUARD_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"hung; output so far: {exc.stdout!r}")
    assert result.stdout.strip() == (
        "['StoreClosedError', 'list: StoreClosedError names the cause', 'closed']"
    ), result.stderr[-2000:]

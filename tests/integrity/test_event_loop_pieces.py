"""A message observed in pieces keeps the event loop free too (a hostile review's find).

A megabyte on one line of random letters tokenizes densely: its pieces (``max_tokens_per_batch``
tokens each) are smaller than a megabyte of prose's, and each piece's request shows the cycle's
earlier output as previous observations. The loop's thread parsed and truncated that output for
every piece (the request's size counted only the messages): a heartbeat beside it missed
~150 ms. Checked as tests/integrity/test_event_loop.py checks the mechanism: no routine works
``OFFLOAD_CHARS`` characters or more (what the observer itself keeps inline) on the loop's thread.
"""

from __future__ import annotations

import random
import string
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import obsmem.om.buffering as buffering_module
import obsmem.om.step as step_module
from obsmem.om.offline import OfflineObserver
from obsmem.om.offline.observer import OFFLOAD_CHARS
from obsmem.om.protocols import ObservationRequest

from tests.integrity.test_event_loop import converse, loop_watcher

pytestmark = pytest.mark.anyio


def _work_chars(request: ObservationRequest) -> int:
    """What the observer's rules read: the messages' text (this test's are text only) and the
    previous observations they parse."""
    return len(request.previous_observations or "") + sum(len(m.text) for m in request.messages)


@contextmanager
def work_on(loop_thread: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    found: list[tuple[str, int]] = []
    watch = loop_watcher(loop_thread, found, OFFLOAD_CHARS)
    monkeypatch.setattr(OfflineObserver, "_observe", watch(
        "the observer's rules", OfflineObserver._observe, lambda _self, request: _work_chars(request)))
    for module in (step_module, buffering_module):
        monkeypatch.setattr(module, "truncate_previous_observations", watch(
            "the previous observations' truncation", module.truncate_previous_observations,
            lambda text, *_args: len(text or "")))
    yield found


def dense_line(chars: int = 1_000_000) -> str:
    rng = random.Random(2)
    return "".join(rng.choice(string.ascii_letters + " ,.") for _ in range(chars))


async def test_a_dense_megabyte_in_pieces_runs_no_heavy_work_on_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with work_on(threading.get_ident(), monkeypatch) as on_loop:
        observed, moved = await converse(dense_line())
    assert observed, "the message was observed"
    assert moved["in_child"] + moved["in_thread"] >= 2, moved  # in pieces, each off the loop
    assert on_loop == [], f"heavy work ran on the event loop's thread: {on_loop[:5]} ({len(on_loop)} in all)"


FIRST_LOAD = """
import asyncio, threading
import obsmem.tokens as tokens
built = []
original = tokens._build_o200k_encoding
def watched():
    built.append(threading.get_ident())
    return original()
tokens._build_o200k_encoding = watched
from obsmem import Memory, Message

async def main():
    loop_thread = threading.get_ident()
    async with Memory("memory://") as memory:
        {call}
    assert len(built) == 1, built
    print("ON-LOOP" if built[0] == loop_thread else "OFF-LOOP")

asyncio.run(main())
"""


@pytest.mark.parametrize("call", [
    'turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hello")]); await turn.end()',
    'await memory.create_thread("t", resource_id="u"); await memory.get_context("t")',
])
def test_the_tokenizer_table_is_first_loaded_off_the_event_loop(call: str) -> None:
    """Building the o200k table takes about 0.3 s: a process's first turn (or context) loads it
    in a thread, so a server's other requests are not held up by it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FIRST_LOAD.replace("{call}", call)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OFF-LOOP", done.stdout


FORK_WHILE_BUILDING = """
import os, sys
import obsmem.tokens as tokens
tokens._encoding_lock.acquire()  # as if the preload thread were building the table at the fork
pid = os.fork()
if pid == 0:
    encoding = tokens.o200k_encoding()  # the child builds its own: no lock copied held
    os._exit(0 if encoding.encode_ordinary("hello world") else 1)
_, status = os.waitpid(pid, 0)
print("CHILD", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
def test_a_fork_while_the_table_is_built_does_not_deadlock_the_child() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORK_WHILE_BUILDING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "CHILD 0", done.stdout

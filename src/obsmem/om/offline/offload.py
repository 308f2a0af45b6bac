"""The offline roles' CPU work, off the event loop: in a thread, or in a child interpreter.

The rules cost about 5 µs per character. From ``offload_chars`` characters up they leave the
loop for a thread, which keeps the loop free of their *time*. A thread still shares the
interpreter lock, though: on a busy machine the loop waits for the lock behind the rules, and
a heartbeat beside a one-megabyte observation measured gaps of 100-700 ms. From
``PROCESS_CHARS`` characters up (about 0.15 s of work) the rules therefore run in a child
interpreter, where they share nothing with the loop.

The children are plain ``python -c`` interpreters that import only obsmem and answer
length-prefixed pickled jobs on their stdin/stdout; they start on first use (about 0.7 s,
once), are reused, number at most ``MAX_CHILDREN`` (a job finding them all busy runs in a
thread), and exit when the parent does (their
stdin closes). A thread of the default executor does the blocking pipe I/O, so no child is
tied to one event loop. Why not :mod:`multiprocessing`: its ``spawn`` and ``forkserver``
children import the application's ``__main__`` again (a script without an ``if __name__ ==
"__main__"`` guard would run twice), and ``fork`` copies a process that has threads.

A cancelled caller kills its child (the work stops). Where a child cannot start, fails or
reports an error, the job runs in a thread instead: the same rules with the same token
estimator, so the same answer byte for byte, or the same exception. A job goes to a child
only when its token counter can be rebuilt there (obsmem's own ``TokenCounter.count_text`` or
the length estimate); hooks (extractors, ``on_attempt_failed``) are never sent: they run on
the loop, afterwards. ``OBSMEM_OFFLINE_PROCESS=0`` keeps every job in a thread.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

from obsmem.om.offline.rules import estimate_tokens
from obsmem.tokens import TokenCounter

__all__ = [
    "LENGTH_ESTIMATE", "MAX_CHILDREN", "PROCESS_CHARS", "Job", "end_idle_children", "offload", "read_frame",
    "stats", "write_frame",
]

PROCESS_CHARS = 32_768
MAX_CHILDREN = 2
# Set to "0" to keep every job in a thread (a sandbox that forbids child processes, say).
PROCESS_ENV = "OBSMEM_OFFLINE_PROCESS"

Role = Literal["observe", "reflect", "revise"]
T = TypeVar("T")

LENGTH_ESTIMATE = "length/4"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_CHILD = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from obsmem.om.offline.child import main; main()"
)


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    role: Role
    estimator: str
    request: Any


def _estimator(count_tokens: Callable[[str], int]) -> str | None:
    """How the child rebuilds ``count_tokens``, or None where it cannot."""
    if count_tokens is estimate_tokens:
        return LENGTH_ESTIMATE
    owner = getattr(count_tokens, "__self__", None)
    if isinstance(owner, TokenCounter) and getattr(count_tokens, "__func__", None) is TokenCounter.count_text:
        return owner.estimator_id
    return None


def read_frame(source: IO[bytes]) -> bytes | None:
    header = source.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack(">Q", header)
    body = source.read(size)
    return body if len(body) == size else None


def write_frame(sink: IO[bytes], body: bytes) -> None:
    sink.write(struct.pack(">Q", len(body)) + body)
    sink.flush()


class _ChildFailed(Exception):
    pass


class _Child:
    """One child interpreter; used by one job at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and code
            [sys.executable, "-c", _CHILD.format(root=_PACKAGE_ROOT)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )

    def run(self, payload: bytes) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            write_frame(self.process.stdin, payload)
            body = read_frame(self.process.stdout)
        except (OSError, ValueError) as exc:
            raise _ChildFailed(str(exc)) from exc
        if body is None:
            raise _ChildFailed(f"the child exited ({self.process.poll()})")
        ok, value = pickle.loads(body)  # noqa: S301 - written by our own child
        if not ok:
            raise _ChildFailed(f"the job raised {value}")
        return value

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


class _Children:
    """The idle children of this process, and how many exist."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[_Child] = []
        self.count = 0
        self.pid = os.getpid()
        # How many times the children were ended (close): a child busy then, taken before the
        # latest, is ended when its job is done instead of waiting for the next (an erase's
        # text may be in its caches).
        self.closes = 0
        self._taken: dict[int, int] = {}  # id(child) -> self.closes when it was taken

    def take(self) -> _Child | None:
        """An idle child, a new one, or None when ``MAX_CHILDREN`` are busy."""
        with self.lock:
            self._forked()
            if self.idle:
                child = self.idle.pop()
                self._taken[id(child)] = self.closes
                return child
            if self.count >= MAX_CHILDREN:
                return None
            self.count += 1
            closes = self.closes
        try:
            child = _Child()
        except BaseException:
            self.drop()
            raise
        with self.lock:
            self._taken[id(child)] = closes
        return child

    def give_back(self, child: _Child) -> None:
        with self.lock:
            taken = self._taken.pop(id(child), self.closes)
            keep = child.process.poll() is None and self.pid == os.getpid() and taken == self.closes
            if keep:
                self.idle.append(child)
            else:
                self.count -= 1
        if not keep:
            child.kill()  # (ended by a close while it was busy, or dead already)

    def drop(self, child: _Child | None = None) -> None:
        with self.lock:
            self.count -= 1
            if child is not None:
                self._taken.pop(id(child), None)

    def _forked(self) -> None:
        if self.pid != os.getpid():  # a forked copy of this process does not own the children
            self.idle, self.count, self.pid, self._taken = [], 0, os.getpid(), {}

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            self.count -= len(idle)
            self.closes += 1
        for child in idle:
            child.kill()


_CHILDREN = _Children()
atexit.register(_CHILDREN.close)


def _after_fork_in_child() -> None:
    """A forked process owns none of the children and gets a lock of its own: the copied one
    may have been held by another thread at the fork (that thread does not exist here), and
    the process's first large job would wait for it for ever."""
    _CHILDREN.lock = threading.Lock()
    _CHILDREN.idle, _CHILDREN.count, _CHILDREN.pid, _CHILDREN._taken = [], 0, os.getpid(), {}


if hasattr(os, "register_at_fork"):  # POSIX only (no fork elsewhere)
    os.register_at_fork(after_in_child=_after_fork_in_child)
_DONE = {"in_child": 0, "in_thread": 0}


def end_idle_children() -> None:
    """End the children waiting for a job: each keeps what its jobs left in its caches (the
    lines it reflected, the patterns it compiled), so after a delete or a forget none of what
    went stays in them. A job running in a child finishes; the next job starts a new one.
    Blocking (each is waited for): call it from a thread."""
    _CHILDREN.close()


def stats() -> dict[str, int]:
    """Jobs answered by a child and by a thread so far, and the children alive now."""
    with _CHILDREN.lock:
        return {**_DONE, "children": _CHILDREN.count}


async def _in_child(payload: bytes) -> Any:
    child = _CHILDREN.take()  # starting one is a fork and exec: milliseconds
    if child is None:
        raise _ChildFailed("every child is busy")
    try:
        result = await asyncio.to_thread(child.run, payload)
    except BaseException:
        # cancelled (the work must stop) or failed: this child is not used again
        await asyncio.shield(asyncio.to_thread(child.kill))
        _CHILDREN.drop(child)
        raise
    _CHILDREN.give_back(child)
    return result


def _children_allowed() -> bool:
    # An embedding host (uwsgi, a frozen app) has an executable that is not a Python to run.
    executable = Path(sys.executable or "").name.lower()
    frozen = bool(getattr(sys, "frozen", False))
    return executable.startswith("python") and not frozen and os.environ.get(PROCESS_ENV) != "0"


def _sendable(request: Any) -> Any:
    """The request without its hooks (callables run on the loop, and need not pickle)."""
    hooks: dict[str, Any] = {name: None for name in ("on_attempt_failed",) if hasattr(request, name)}
    if hasattr(request, "extractors"):
        hooks["extractors"] = ()
    return dataclasses.replace(request, **hooks) if hooks else request


async def offload(
    work: Callable[[Any], T], request: Any, *, role: Role, chars: int, count_tokens: Callable[[str], int]
) -> T:
    """``work(request)`` off the loop: a child interpreter from ``PROCESS_CHARS`` characters up
    (where ``count_tokens`` can be rebuilt there), a thread otherwise or if the child fails."""
    estimator = _estimator(count_tokens)
    if chars >= PROCESS_CHARS and estimator is not None and _children_allowed():
        try:
            # pickled in a thread: a multi-megabyte request is copied whole
            job = Job(role, estimator, _sendable(request))
            payload = await asyncio.to_thread(pickle.dumps, job, pickle.HIGHEST_PROTOCOL)
            result: T = await _in_child(payload)
            _DONE["in_child"] += 1
            return result
        except (OSError, _ChildFailed, pickle.PickleError, EOFError, TypeError, AttributeError):
            pass  # the same rules in a thread give the same answer
    _DONE["in_thread"] += 1
    return await asyncio.to_thread(work, request)

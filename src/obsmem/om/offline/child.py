"""The child interpreter's side of :mod:`obsmem.om.offline.offload`: answer framed jobs.

Run as ``python -c "from obsmem.om.offline.child import main; main()"``; it reads one
length-prefixed pickled :class:`~obsmem.om.offline.offload.Job` after another on stdin and
writes each answer on stdout until stdin closes. A module of its own because it needs the
observer and the reflector, which themselves import :mod:`~obsmem.om.offline.offload`.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable
from typing import Any

from obsmem.om.offline.observer import OfflineObserver, revise
from obsmem.om.offline.offload import LENGTH_ESTIMATE, Job, read_frame, write_frame
from obsmem.om.offline.reflector import OfflineReflector
from obsmem.om.offline.rules import estimate_tokens
from obsmem.tokens import EXACT_ESTIMATOR_ID, TokenCounter

__all__ = ["main", "work"]


def _counter(estimator: str) -> Callable[[str], int]:
    if estimator == LENGTH_ESTIMATE:
        return estimate_tokens
    return TokenCounter(exact=estimator == EXACT_ESTIMATOR_ID).count_text


def work(job: Job) -> Any:
    """What a thread in the parent would have returned for ``job``."""
    count = _counter(job.estimator)
    if job.role == "observe":
        return OfflineObserver(count_tokens=count, offload_chars=None)._observe(job.request)
    if job.role == "revise":
        return revise(job.request)
    return OfflineReflector(count_tokens=count, offload_chars=None)._climb(job.request)


def main() -> None:
    """Answer framed jobs until stdin closes."""
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the rules might print goes to stderr, never into a frame
    source = sys.stdin.buffer
    while (job := read_frame(source)) is not None:
        try:
            answer: tuple[bool, Any] = (True, work(pickle.loads(job)))  # noqa: S301 - our parent
        except Exception as exc:  # the parent reruns the job in a thread to raise it there
            answer = (False, type(exc).__name__)
        write_frame(frames_out, pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))

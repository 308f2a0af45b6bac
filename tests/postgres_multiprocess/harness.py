"""What the hostile-review-109 tests share: running worker processes, and checking a thread as a user.

Every process gets a hard timeout (a hang is reported as a failure naming the process, never
waited out by an assertion on time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from obsmem.types import Message

WORKER = Path(__file__).with_name("hostile_109_worker.py")
PROCESS_TIMEOUT_S = 180


def env() -> dict[str, str]:
    src = str(Path(__file__).parents[2] / "src")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


def start(scenario: str, url: str, number: int, folder: Path, *extra: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), scenario, url, str(number), str(folder), *map(str, extra)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
    )


def finish(procs: Sequence[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Each process's JSON report; a process that hangs or fails fails the test with its stderr."""
    reports: list[dict[str, Any]] = []
    failures: list[str] = []
    for n, proc in enumerate(procs):
        try:
            out, err = proc.communicate(timeout=PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            out, err = proc.communicate()
            failures.append(f"process {n} hung (killed after {PROCESS_TIMEOUT_S}s)\n{err[-3000:]}")
            continue
        if proc.returncode != 0:
            failures.append(f"process {n} exited {proc.returncode}\n{err[-3000:]}")
            continue
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert not failures, "\n\n".join(failures)
    return reports


def sequence_problems(messages: Sequence[Message]) -> list[str]:
    """What a provider would refuse in a stored thread: an id twice, a call without its result
    right after it (results of one assistant message follow it, together), a result without
    its call, a call answered twice."""
    problems: list[str] = []
    twice = [mid for mid, n in Counter(m.id for m in messages).items() if n > 1]
    if twice:
        problems.append(f"stored twice: {twice}")
    waiting: list[str] = []
    answered: Counter[str] = Counter()
    for m in messages:
        if m.role == "tool":
            for r in m.tool_results:
                answered[r.tool_call_id] += 1
                if r.tool_call_id in waiting:
                    waiting.remove(r.tool_call_id)
                else:
                    problems.append(f"{m.id}: result of {r.tool_call_id}, not waiting")
            continue
        if waiting and m.role != "system" and not m.is_marker_only:
            problems.append(f"{m.id} ({m.role}) comes between calls {waiting} and their results")
            waiting = []
        waiting.extend(c.tool_call_id for c in m.tool_calls)
    return problems + [f"{cid} answered {n} times" for cid, n in answered.items() if n > 1]

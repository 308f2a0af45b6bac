"""The offline roles' child interpreters (``obsmem.om.offline.offload``) and ``os.fork()``: an
app forked after it used them (gunicorn ``--preload``, a job runner forking workers).

A fork taken while another thread held the children table's lock left the forked process a lock
held by nobody, so its first large offline job waited forever. Also checked (it held before): a
forked process ending normally runs the module's exit handler on its copy of the table, which
must not end the parent's idle children. Each case runs in a script of its own (forking pytest
itself would fork its threads' state too), guarded by a timeout."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys, threading, time
    from obsmem import Memory, MemoryConfig, Message, ObservationConfig
    from obsmem.om.offline import offload

    CONFIG = MemoryConfig(observation=ObservationConfig(message_tokens=30_000, max_tokens_per_batch=50_000))

    def large(name):
        return " ".join(f"On day {i} I fed {name} number {i} at the harbour." for i in range(700))

    async def observe_large(path, name):
        async with Memory(f"sqlite:///{path}", config=CONFIG) as memory:
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(large(name))])
            await turn.end([Message.assistant("ok")])
            await memory.observe("t")
            await memory.settled()
        return offload.stats()["in_child"]

    folder = sys.argv[1]
    assert asyncio.run(observe_large(os.path.join(folder, "parent.db"), "Rex")) >= 1, "observed in a child"
    idle = list(offload._CHILDREN.idle)
    assert idle and all(c.process.poll() is None for c in idle)

    if sys.argv[2] == "exit":
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # a forked worker ending normally: exit handlers run
        os.waitpid(pid, 0)
        time.sleep(0.2)
        print("parent's idle children alive:", all(c.process.poll() is None for c in idle))
    else:
        held, release = threading.Event(), threading.Event()
        def hold():
            with offload._CHILDREN.lock:  # another thread inside the table at the moment of the fork
                held.set()
                release.wait(30)
        threading.Thread(target=hold, daemon=True).start()
        held.wait(10)
        pid = os.fork()
        if pid == 0:
            done = asyncio.run(observe_large(os.path.join(folder, "child.db"), "Fido"))
            os._exit(0 if done >= 1 else 3)
        release.set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                print("child finished:", os.waitstatus_to_exitcode(status))
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("child finished: never (its large job waited on a lock nobody holds)")
    offload.end_idle_children()
    """
)


def _run(tmp_path: Path, case: str) -> str:
    script = tmp_path / "fork_case.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), case], capture_output=True, text=True, timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OBSMEM_HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_a_forked_process_exiting_leaves_the_parents_offline_children_alone(tmp_path: Path) -> None:
    assert "parent's idle children alive: True" in _run(tmp_path, "exit")


def test_a_process_forked_while_another_thread_used_the_children_runs_its_large_jobs(tmp_path: Path) -> None:
    assert "child finished: 0" in _run(tmp_path, "lock")

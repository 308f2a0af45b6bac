"""One app process of the crash tests (run as a script, not collected).

    python crash_child.py <scenario> <sqlite file> <coordination folder>

It runs a real agent loop on the SQLite file with small thresholds, so observation and
reflection happen, and at the scenario's point writes ``<folder>/at`` and stops there (a hook
that never returns), to be SIGKILLed by the test. Before that, ``<folder>/saved.json`` lists the
ids of every message a call that returned has saved, in order, and ``<folder>/inflight.json`` the
ids passed to the call running when it stopped (saved or not, depending on where it stopped).
Nothing is coordinated by timing.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest, ReflectionResult
from obsmem.types import ToolCallPart, ToolResultPart

SECRET = "CRASH-SECRET-7731"
FOLDER = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(".")


def write(name: str, data: Any) -> None:
    """``name`` in the folder, whole or not at all (written aside, then renamed)."""
    aside = FOLDER / f".{name}.tmp"
    aside.write_text(json.dumps(data))
    os.replace(aside, FOLDER / name)


async def stop_here(point: str) -> None:
    """Say where we are, then never return (the test kills the process)."""
    write("at", point)
    while True:
        await asyncio.sleep(3600)


def stop_here_blocking(point: str) -> None:
    """:func:`stop_here` for code running on a store's worker thread."""
    write("at", point)
    import time

    while True:
        time.sleep(3600)


class HangingObserver(OfflineObserver):
    """The offline observer, stopping inside its ``hang_on``-th call (a model call in flight)."""

    def __init__(self, hang_on: int | None) -> None:
        super().__init__()
        self.hang_on = hang_on
        self.calls = 0

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.calls += 1
        if self.calls == self.hang_on:
            await stop_here("observer")
        return await super().observe(request)


class HangingReflector(OfflineReflector):
    def __init__(self, hang_on: int | None) -> None:
        super().__init__()
        self.hang_on = hang_on
        self.calls = 0

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.calls += 1
        if self.calls == self.hang_on:
            await stop_here("reflector")
        return await super().reflect(request)


def config(*, buffered: bool, scope: str = "thread") -> MemoryConfig:
    return MemoryConfig(
        scope=scope,  # type: ignore[arg-type]
        observation=ObservationConfig(message_tokens=300, buffer_tokens=0.25 if buffered else False),
        reflection=ReflectionConfig(observation_tokens=200),
    )


saved: list[str] = []


def user_message(thread_id: str, i: int, *, secret: bool = False) -> Message:
    note = f" My card is {SECRET}." if secret else ""
    return Message(id=f"{thread_id}-u{i}", role="user", parts=Message.user(
        f"Turn {i} of {thread_id}: I moved to Berlin in {2000 + i}, my sister Ada lives in Oslo and "
        f"I keep {i} ferrets named Pip{i}.{note}").parts)


async def turn(memory: Memory, thread_id: str, i: int, *, secret: bool = False, tools: bool = False) -> None:
    """One user turn: the input, an assistant reply (with a tool call and its result)."""
    note = f" My card is {SECRET}." if secret else ""
    user = user_message(thread_id, i, secret=secret)
    write("inflight.json", [user.id])
    t = await memory.begin_turn(thread_id=thread_id, resource_id="alice", messages=[user])
    saved.append(user.id)
    write("saved.json", saved)
    if user.id not in [m.id for m in t.context.messages]:
        raise AssertionError(f"{user.id} is not in its own turn's context")
    replies = [Message(id=f"{thread_id}-a{i}", role="assistant", parts=Message.assistant(
        f"Noted turn {i}: Berlin since {2000 + i}, Ada in Oslo, {i} ferrets.{note}").parts)]
    if tools:
        replies = [
            Message(id=f"{thread_id}-c{i}", role="assistant", parts=(
                ToolCallPart(tool_call_id=f"{thread_id}-call{i}", tool_name="lookup", args={"q": f"ferret {i}{note}"}),)),
            Message(id=f"{thread_id}-r{i}", role="tool", parts=(
                ToolResultPart(tool_call_id=f"{thread_id}-call{i}", tool_name="lookup",
                               result=f"ferret {i} is healthy{note}"),)),
            *replies,
        ]
    write("inflight.json", [m.id for m in replies])
    await t.step(replies)
    await t.end()
    saved.extend(m.id for m in replies)
    write("saved.json", saved)
    write("inflight.json", [])


async def seed(memory: Memory, turns: int = 8) -> None:
    """Two threads of one user, the secret in t1 (messages, tool data, observations, reflections,
    working memory), then every piece of memory work settled."""
    for i in range(turns):
        await turn(memory, "t1", i, secret=True, tools=True)
        await turn(memory, "t2", i)
    await memory.settled()
    await memory.store.set_working_memory("thread:t1", f"card: {SECRET}\nsister: Ada")
    await memory.store.set_working_memory("resource:alice", f"card: {SECRET}\nteam: core")
    write("seeded", True)


def hang_method(obj: Any, name: str, point: str, *, before: bool = True, on_call: int = 1) -> None:
    """Replace the async method ``name`` of ``obj`` (on the instance) by one that stops at its
    ``on_call``-th call, before (or after) running it."""
    original = getattr(obj, name)
    calls = 0

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == on_call and before:
            await stop_here(point)
        result = await original(*args, **kwargs)
        if calls == on_call and not before:
            await stop_here(point)
        return result

    setattr(obj, name, wrapped)


async def main(scenario: str, db: str) -> None:
    url = f"sqlite:///{db}"
    scope = "resource" if scenario.endswith("@resource") else "thread"
    scenario = scenario.removesuffix("@resource")
    if scenario.startswith("activation"):
        # Inside a buffer activation: before its write, or right after it committed.
        from obsmem.om.step import ActivateStep

        original = ActivateStep._activate

        async def activate(self: Any, *args: Any, **kwargs: Any) -> Any:
            if scenario == "activation:before":
                await stop_here("activation")
            outcome = await original(self, *args, **kwargs)
            if outcome.applied:
                await stop_here("activation")
            return outcome

        ActivateStep._activate = activate  # type: ignore[method-assign]
        scenario = "buffer-observe-free"
    if scenario in ("sync-observe", "buffer-observe", "reflect", "buffer-observe-free"):
        observer = HangingObserver(1 if scenario in ("sync-observe", "buffer-observe") else None)
        reflector = HangingReflector(1 if scenario == "reflect" else None)
        memory = Memory(url, config=config(buffered=scenario.startswith("buffer-observe"), scope=scope),
                        observer=observer, reflector=reflector, max_turn_wait=None)
        async with memory:
            for i in range(40):
                await turn(memory, "t1", i, tools=i % 3 == 0)
                if (FOLDER / "at").exists():  # the point is in a background task: stop the loop too
                    await stop_here("observer")
        raise AssertionError(f"{scenario}: never reached its point")
    if scenario == "import":
        await import_cut_off(db)
    if scenario == "late-result":
        await late_result_cut_off(url)
    if scenario == "worker":
        await worker_cut_off(url)
    memory = Memory(url, config=config(buffered=False, scope=scope), max_turn_wait=None)
    async with memory:
        await seed(memory)
        if scenario == "begin-save":
            # Inside the transaction of the input's save: its rows written, COMMIT not yet.
            store = memory.store
            original = store._save  # type: ignore[attr-defined]

            def save(conn: Any, *args: Any, **kwargs: Any) -> Any:
                result = original(conn, *args, **kwargs)
                stop_here_blocking("begin-save")
                return result

            store._save = save  # type: ignore[attr-defined]
            store._save_here = lambda *a, **k: None  # type: ignore[attr-defined]  # always via the worker
            await turn(memory, "t1", 100)
        elif scenario == "begin-committed":
            # The input's save committed, begin_turn not returned yet (the app never saw it).
            from obsmem.turn import Turn

            original_committed = Turn._committed
            armed = True

            async def committed(self: Any) -> None:
                await original_committed(self)
                if armed:
                    await stop_here("begin-committed")

            Turn._committed = committed  # type: ignore[method-assign]
            await turn(memory, "t1", 100)
        elif scenario.startswith("delete-thread:"):
            point = scenario.split(":", 1)[1]
            hang_method(*_target(memory, point), point)
            await memory.delete_thread("t1")
        elif scenario.startswith("delete-resource:"):
            point = scenario.split(":", 1)[1]
            if point == "second-thread":
                hang_method(memory.store, "delete_thread", point, on_call=2)
            elif point == "last-drop-data":  # both thread rows gone, the second's data not yet
                hang_method(memory, "_drop_thread_data", point, on_call=2)
            else:
                hang_method(*_target(memory, point), point)
            await memory.delete_resource("alice")
        elif scenario.startswith("forget:"):
            point = scenario.split(":", 1)[1]
            hang_method(*_target(memory, point), point)
            await memory.forget(SECRET, resource_id="alice")
        raise AssertionError(f"{scenario}: never reached its point")


LATE_RESULT = Message(id="late-r", role="tool", parts=(
    ToolResultPart(tool_call_id="late-call", tool_name="lookup", result="Pip has 3 ferret friends"),))


async def late_result_cut_off(url: str) -> None:
    """A tool call left waiting, closed as unanswered by the next turn, whose real result then
    comes: stopped right after the rewrite that puts it in the closing answer's place committed
    (its lease still held)."""
    async with Memory(url, config=config(buffered=False), max_turn_wait=None) as memory:
        t = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user("Look up Pip.")])
        await t.step([Message(id="late-c", role="assistant", parts=(
            ToolCallPart(tool_call_id="late-call", tool_name="lookup", args={"q": "Pip"}),))])
        await t.end()
        t = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user("Never mind.")])
        hang_method(memory.store, "save_messages", "late-result", before=False)
        await t.step([LATE_RESULT])
    raise AssertionError("late-result: never reached its point")


#: The worker's claim and buffer lease in the worker scenario: short, so that the test's
#: restarted worker takes the dead one's work over within its bounded wait.
WORKER_TTL_S = 2.0


async def worker_cut_off(url: str) -> None:
    """Turns hand their buffers to the queue (``background="queue"``); a worker claims one and is
    stopped inside its observer's model call."""
    from obsmem.storage import open_store
    from obsmem.worker import Worker

    memory = Memory(url, config=config(buffered=True), max_turn_wait=None, background="queue")
    async with memory:
        for i in range(3):
            await turn(memory, "t1", i)
    store = open_store(url)
    worker = Worker(store, config=config(buffered=True), observer=HangingObserver(1),
                    claim_ttl_s=WORKER_TTL_S, lease_ttl_s=WORKER_TTL_S)
    while await worker.run_once():
        pass
    raise AssertionError("worker: never reached its point")


async def import_cut_off(db: str) -> None:
    """Seed ``<folder>/source.db``, export the user to ``<folder>/alice.jsonl`` and import it into
    ``db``, stopping after the import's second message save (threads and some messages written)."""
    from obsmem.storage import SQLiteStore
    from obsmem.transfer import export_resource, import_resource

    async with Memory(f"sqlite:///{FOLDER / 'source.db'}", config=config(buffered=False), max_turn_wait=None) as memory:
        await seed(memory)
        await export_resource(memory.store, "alice", FOLDER / "alice.jsonl")
    target = SQLiteStore(db)
    hang_method(target, "save_messages", "import", before=False, on_call=2)
    await import_resource(target, FOLDER / "alice.jsonl")
    raise AssertionError("import: never reached its point")


def _target(memory: Memory, point: str) -> tuple[Any, str]:
    """Where each named point is: (object, async method) stopped before it runs."""
    return {
        "sections": (memory, "_forget_thread_sections"),  # the thread row and messages are gone
        "engine": (memory.engine, "forget_thread"),
        "drop-data": (memory, "_drop_thread_data"),
        "truncate": (memory, "_truncate_log"),  # every table erased, the files not yet
        "lineage": (memory, "_forget_in_lineage"),  # messages forgotten, records not yet
        "working-memory": (memory.store, "get_working_memory"),
        "release-leases": (memory, "_release_leases"),
    }[point]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

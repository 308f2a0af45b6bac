"""Two turns running tool loops on the same thread at once keep the thread a valid sequence.

Two browser tabs of one chat, a double-submitted request, two server replicas: two turns of one
thread, each running a tool loop. Every provider refuses a history where a message comes
between a tool call and its result, so the stored thread must stay a valid sequence whatever
the interleaving, and no turn may be refused for a result its own model asked for.

On main (c81f0cc) each turn checked its input against its own view of the thread, not inside
the store's save. ``test_two_tool_loops_interleaved_step_by_step`` stored turn B's call between
turn A's call and its result, then refused A's result ("no call with that id is waiting");
``test_two_tool_loops_racing`` left 10-17 sequence violations and 2-3 refused results in 40
turns on SQLite (the README said "one turn at a time per thread" instead).

Now a turn's save is a compare-and-set on the thread's newest message: when another turn wrote
since the turn's view, nothing is saved, the turn reads the thread again and checks again.
Calls another turn left waiting are closed as unanswered (as ``begin_turn`` always did), and
their real results, when they come, take that answer's place, right after their call.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.errors import InvalidInputError
from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

STORES = ["memory", "sqlite", "postgres"]  # (also the conftest's: this module runs as a script in child processes)



def call(call_id: str) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(tool_call_id=call_id, tool_name="lookup", args={}),))


def result(call_id: str, text: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="lookup", result=text),))


def violations(messages: list[Message]) -> list[str]:
    """What a provider would refuse: a result whose call is not waiting, a message between a
    call and its result, a call never answered."""
    bad: list[str] = []
    waiting: set[str] = set()
    for message in messages:
        if message.role == "tool":
            for part in message.tool_results:
                if part.tool_call_id not in waiting:
                    bad.append(f"seq {message.seq}: result for {part.tool_call_id}, which is not waiting")
                waiting.discard(part.tool_call_id)
            continue
        if waiting:
            bad.append(f"seq {message.seq} ({message.role}) while {sorted(waiting)} wait")
            waiting.clear()
        waiting |= {c.tool_call_id for c in message.tool_calls}
    if waiting:
        bad.append(f"never answered: {sorted(waiting)}")
    return bad


def answers(messages: list[Message]) -> dict[str, object]:
    """Each call's stored answer (the real result, or obsmem's "no result")."""
    return {part.tool_call_id: part.result for m in messages for part in m.tool_results}


async def test_two_tool_loops_interleaved_step_by_step(memory: Memory) -> None:
    a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("weather in Oslo?")])
    b = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("and in Rome?")])
    await a.step([call("oslo")])
    await b.step([call("rome")])  # A's call still waits: B's call may not land before its result
    await a.step([result("oslo", "4 C, rain")])
    await b.step([result("rome", "19 C, sun")])
    await a.end([Message.assistant("Oslo: 4 C and rain.")])
    await b.end([Message.assistant("Rome: 19 C and sunny.")])

    stored = await memory.list_messages("chat")
    assert violations(stored) == []
    # Each turn's real result is stored, right after its own call (none refused, none lost).
    assert answers(stored) == {"oslo": "4 C, rain", "rome": "19 C, sun"}
    assert [m.text for m in stored if m.role in ("user", "assistant") and m.text] == [
        "weather in Oslo?", "and in Rome?", "Oslo: 4 C and rain.", "Rome: 19 C and sunny.",
    ]
    # The context each turn hands its model is a valid sequence too.
    for turn in (a, b):
        assert violations([m for m in turn.context.raw_messages if m.role != "system"]) == []


async def test_a_turn_still_refuses_its_own_model_skipping_a_result(memory: Memory) -> None:
    """The guard closes *other* turns' waiting calls, never this turn's: its own model talking
    past its own call is the app's bug, refused as before, with nothing stored."""
    turn = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("weather?")])
    await turn.step([call("mine")])
    with pytest.raises(InvalidInputError, match="still wait for their results") as caught:
        await turn.step([Message.assistant("never mind the tool")])
    assert getattr(caught.value, "input_saved", None) is False
    assert [m.text for m in await memory.list_messages("chat")] == ["weather?", ""]


async def writer(memory: Memory, who: str, turns: int, errors: list[str], *, latency_s: float = 0.0) -> None:
    """``turns`` turns of one tool call each; ``latency_s``: the most a model or tool call takes
    (random), 0 for none at all."""
    rng = random.Random(who)

    async def model() -> None:
        await asyncio.sleep(rng.uniform(0, latency_s))

    for i in range(turns):
        tag = f"{who}{i}"
        try:
            turn = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user(f"q {tag}")])
            await model()
            await turn.step([call(tag)])
            await model()
            await turn.step([result(tag, f"r {tag}")])
            await model()
            await turn.end([Message.assistant(f"a {tag}")])
        except Exception as exc:  # noqa: BLE001 - every refusal is a finding here
            errors.append(f"{tag}: {type(exc).__name__}: {exc}")


async def test_two_tool_loops_racing(memory: Memory) -> None:
    errors: list[str] = []
    await asyncio.gather(writer(memory, "p", 20, errors), writer(memory, "q", 20, errors))
    stored = await memory.list_messages("chat")
    assert errors == []
    assert violations(stored) == []
    assert answers(stored) == {f"{w}{i}": f"r {w}{i}" for w in "pq" for i in range(20)}


SCRIPT = textwrap.dedent(
    """
    import asyncio, sys, time
    sys.path.insert(0, sys.argv[3])
    from test_concurrent_turns_one_thread import writer
    from obsmem import Memory

    async def main() -> None:
        errors = []
        async with Memory(sys.argv[1]) as memory:
            await memory.get_context("chat")  # connected and warm before the start
            await asyncio.sleep(max(0.0, float(sys.argv[4]) - time.time()))  # both start together
            await writer(memory, sys.argv[2], 30, errors, latency_s=0.005)
        print("\\n".join(errors))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("adapter", ["sqlite", "postgres"])
async def test_two_processes_running_tool_loops_on_one_thread(
    adapter: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Each model and tool call takes up to 5 ms here: with none at all, two processes saving
    without a pause can keep one of them losing the guard's race past its tries (it then raises
    ``ThreadChangedError``, nothing saved, safe to retry); real model calls leave gaps."""
    url = f"sqlite:///{tmp_path / 'om.db'}" if adapter == "sqlite" else request.getfixturevalue("postgres_url")
    async with Memory(url) as memory:  # the thread exists before both start (and the schema)
        first = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("hello")])
        await first.end([Message.assistant("hi")])
    script = tmp_path / "writer.py"
    script.write_text(SCRIPT)
    here = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    start = time.time() + 8  # both processes imported and connected by then
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, who, here, str(start)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            text=True,
        )
        for who in "pq"
    ]
    outs = [proc.communicate(timeout=120) for proc in procs]
    async with Memory(url) as memory:
        stored = await memory.list_messages("chat")
    assert violations(stored) == []
    for proc, (out, err) in zip(procs, outs, strict=True):
        assert proc.returncode == 0, err[-2000:]
        assert out.strip() == "", out
    assert answers(stored) == {f"{w}{i}": f"r {w}{i}" for w in "pq" for i in range(30)}


def racing_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """A store of ``kind`` on which another turn's message lands once, just before the next
    guarded save (between a turn's first read of the thread and its save)."""
    base: type
    if kind == "memory":
        base, args = MemoryStore, ()
    elif kind == "sqlite":
        base, args = SQLiteStore, (tmp_path / "race.db",)
    else:
        base, args = PostgresStore, (request.getfixturevalue("postgres_url"),)

    class Racing(base):  # type: ignore[misc, valid-type]
        other: list[Message] | None = None

        async def save_messages(
            self, thread_id: str, messages: list[Message], *, after_seq: int | None = None
        ) -> list[Message]:
            if after_seq is not None and self.other is not None:
                other, self.other = self.other, None
                await base.save_messages(self, thread_id, other)
            return await base.save_messages(self, thread_id, messages, after_seq=after_seq)  # type: ignore[no-any-return]

    return Racing(*args)


@pytest.mark.parametrize("kind", STORES)
async def test_a_call_landing_while_a_turn_begins_is_never_half_shown(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Hostile review (helper-101): tab B's model called a tool between tab A's first read and
    its save. A's save was refused and retried (closing B's call), but A's context was built from
    the first read plus what it saved: B's "no result" answer without B's call, which a provider
    refuses (memory and PostgreSQL stores, and SQLite subclasses: no window marks)."""
    store = racing_store(kind, tmp_path, request)
    async with Memory(store) as memory:
        b = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab B: weather?")])
        store.other = [call("b1")]
        a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab A: hello")])
        assert violations([m for m in a.context.messages if m.role != "system"]) == []
        assert a.context.messages[-1].text == "tab A: hello"
        await b.step([result("b1", "sunny")])  # takes its unanswered place
        assert violations(await memory.list_messages("chat")) == []


async def test_a_resumed_turn_leaves_out_calls_another_turn_made_since(tmp_path: Path) -> None:
    """Hostile review (helper-101): a turn resumed on another replica showed its model another
    turn's call still waiting (no result: refused by every provider)."""
    url = f"sqlite:///{tmp_path / 'om.db'}"
    async with Memory(url) as one, Memory(url) as two:
        await one.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab A")])
        a = await two.resume_turn(thread_id="chat")
        await a.step([call("a1")])
        b = await one.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab B")])  # closes a1
        await b.step([call("b1")])  # B's tool runs
        context = await a.step([result("a1", "done")])  # takes a1's unanswered place
        assert violations([m for m in context.raw_messages if m.role != "system"]) == []
        assert "b1" not in {c.tool_call_id for m in context.messages for c in m.tool_calls}
        assert answers(await one.list_messages("chat")) == {"a1": "done"}


async def test_a_store_written_before_the_guard_still_works() -> None:
    """Hostile review (helper-101): a store whose ``save_messages`` has the old signature (a
    subclass, a delegating wrapper) failed every turn with "unexpected keyword argument
    'after_seq'". It now gets the guard as a read just before its save."""

    class Auditing(MemoryStore):
        async def save_messages(self, thread_id: str, messages: list[Message]) -> list[Message]:  # type: ignore[override]
            return await super().save_messages(thread_id, messages)

    class Wrapper:
        def __init__(self, inner: MemoryStore) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def save_messages(self, thread_id: str, messages: list[Message]) -> list[Message]:
            return await self._inner.save_messages(thread_id, messages)

    for store in (Auditing(), Wrapper(MemoryStore())):
        async with Memory(store) as memory:  # type: ignore[arg-type]
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("hi")])
            await turn.step([call("c1")])
            await turn.step([result("c1", "r")])
            await turn.end([Message.assistant("done")])
            assert [m.role for m in await memory.list_messages("t")] == ["user", "assistant", "tool", "assistant"]


async def test_a_call_landing_before_a_turn_reads_the_tail_is_never_half_shown() -> None:
    """Final read: a thread whose unobserved messages hold nothing that says something (here only
    the app's system prompt) makes ``begin_turn`` read the store's tail for its check. Another
    turn's call landing between the turn's first read and that one was closed by the check, but
    the context was built from the first read: the "no result" answer without its call."""

    class Landing(MemoryStore):
        other: list[Message] | None = None

        async def list_messages(self, thread_id: str, **options: Any) -> list[Message]:
            if self.other is not None and options.get("newest_first"):
                other, self.other = self.other, None
                await MemoryStore.save_messages(self, thread_id, other)
            return await super().list_messages(thread_id, **options)

    store = Landing()
    async with Memory(store) as memory:
        await memory.create_thread("chat", "u1")
        await memory.save_messages("chat", [Message.system("You are terse.")])
        store.other = [call("b1")]
        a = await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab A: hello")])
        assert violations([m for m in a.context.messages if m.role != "system"]) == []
        assert violations(await memory.list_messages("chat")) == []


async def test_a_turn_resumed_where_it_began_keeps_its_own_calls_apart(tmp_path: Path) -> None:
    """Two tabs, and tab A's turn continued on another replica after tab B's call: with the
    seq it began at (``turn.began_seq``) the resumed turn knows B's call is not its own, so its
    context leaves it out and its answer is not refused while B's tool runs. Failed before
    ``since_seq`` (the resumed turn took B's call for its own: 'still wait for their results')."""
    url = f"sqlite:///{tmp_path / 'om.db'}"
    async with Memory(url) as one, Memory(url) as two:
        a = await one.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab A")])
        assert a.began_seq == 1
        await a.step([call("a1")])
        b = await one.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("tab B")])  # closes a1
        await b.step([call("b1")])  # B's tool runs
        resumed = await two.resume_turn(thread_id="chat", since_seq=a.began_seq)
        assert resumed.began_seq == a.began_seq
        assert "b1" not in {c.tool_call_id for m in resumed.context.messages for c in m.tool_calls}
        context = await resumed.step([result("a1", "done")])  # takes a1's unanswered place
        assert "b1" not in {c.tool_call_id for m in context.messages for c in m.tool_calls}
        await resumed.end([Message.assistant("A's answer")])  # closes B's running call, as any turn going on does
        await b.step([result("b1", "B's result")])  # which takes its place when it comes
        stored = await one.list_messages("chat")
        assert violations(stored) == []
        assert answers(stored) == {"a1": "done", "b1": "B's result"}
        assert "A's answer" in [m.text for m in stored]


async def test_resume_turn_checks_since_seq(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}") as memory:
        await memory.begin_turn(thread_id="chat", resource_id="u1", messages=[Message.user("hi")])
        for bad in (0, -1, True, "1", 1.0):
            with pytest.raises(InvalidInputError, match="since_seq"):
                await memory.resume_turn(thread_id="chat", since_seq=bad)  # type: ignore[arg-type]
        # a seq past the thread's end (a forged id): nothing is the turn's own, nothing breaks
        resumed = await memory.resume_turn(thread_id="chat", since_seq=10_000)
        await resumed.end([Message.assistant("ok")])
        assert [m.text for m in await memory.list_messages("chat")] == ["hi", "ok"]

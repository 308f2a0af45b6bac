"""One process of the hostile-review-109 multiprocess tests (run as a script, not collected).

    python hostile_109_worker.py <scenario> <store URL> <process number> <coordination folder> [<arg>]

Each scenario opens its own ``Memory`` on the shared PostgreSQL URL and drives turns as an app
worker would. Processes are coordinated through files in the folder (``wait_for`` / ``mark``),
never by timing. Prints one JSON line with what it did; what went wrong is in the JSON too
(``errors``), so the test can say what a user would have seen.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from obsmem import Memory, Message, ObsmemError
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

THREAD = "shared"
RESOURCE = "u1"
WAIT_S = 120.0  # a folder event that never comes: the process gives up (the test then fails)


def mark(folder: Path, name: str) -> None:
    (folder / name).write_text("1")


def wait_for(folder: Path, name: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (folder / name).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {name} in {folder}")
        time.sleep(0.01)


async def await_for(folder: Path, name: str) -> None:
    await asyncio.to_thread(wait_for, folder, name)


def call(call_id: str, mid: str) -> Message:
    return Message(id=mid, role="assistant", parts=(ToolCallPart(tool_call_id=call_id, tool_name="lookup",
                                                                 args={"q": call_id}),))


def result(call_id: str, mid: str) -> Message:
    return Message(id=mid, role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="lookup",
                                                              result=f"answer for {call_id}"),))


async def lockstep_tools(url: str, n: int, folder: Path, turns: int) -> dict[str, Any]:
    """Turn after turn on the shared thread, each phase (begin, call, result+answer, end) in
    lockstep with the other processes, so their saves interleave at every boundary."""
    peers = int((folder / "peers").read_text())
    errors: list[str] = []
    done: list[str] = []

    async def phase(name: str) -> None:
        mark(folder, f"p{n}-{name}")
        for other in range(peers):
            await await_for(folder, f"p{other}-{name}")

    from obsmem import MemoryConfig, ObservationConfig

    thread = f"t{n}" if (folder / "per-thread").exists() else THREAD
    scope = "resource" if (folder / "resource-scope").exists() else "thread"
    config = MemoryConfig(scope=scope, observation=ObservationConfig(message_tokens=200, buffer_tokens=0.25))
    async with Memory(url, config=config) as memory:
        for i in range(turns):
            user = Message(id=f"p{n}-u{i}", role="user", parts=(TextPart(
                text=f"Process {n} asks {i}: I keep {i} ferrets named Pip{i} and my flat is on floor {i + n}."),))
            turn = await memory.begin_turn(thread_id=thread, resource_id=RESOURCE, messages=[user])
            done.append(user.id)
            if user.id not in [m.id for m in turn.context.messages]:
                errors.append(f"{user.id} is not in its own turn's context")
            await phase(f"{i}-begun")
            cid = f"c{n}-{i}"
            await turn.step([call(cid, f"p{n}-call{i}")])
            done.append(f"p{n}-call{i}")
            await phase(f"{i}-called")
            answer = Message(id=f"p{n}-a{i}", role="assistant", parts=(TextPart(
                text=f"Done {i} for {n}: {i} ferrets named Pip{i} live with you on floor {i + n}."),))
            try:
                await turn.step([result(cid, f"p{n}-res{i}"), answer])
                done.extend([f"p{n}-res{i}", answer.id])
            except ObsmemError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            await phase(f"{i}-answered")
            await turn.end()
        await memory.settled()
        context = [m.id for m in (await memory.get_context(thread)).messages]
        background = [repr(e) for e in memory.background.errors]
    return {"done": done, "errors": errors, "context": context, "background_errors": background}


SECRET = "Zanzibar-7731"


def blocking_observer(n: int, folder: Path) -> Any:
    """An observer that echoes :data:`SECRET` when its prompt holds it, after marking
    ``observing-<n>`` and waiting for ``release-<n>`` (a test holds it mid-observation there)."""
    from obsmem.models.testing import FunctionModel

    def answer(messages: list[Message], settings: object) -> str:
        prompt = "\n".join(m.text for m in messages)
        mark(folder, f"observing-{n}")
        wait_for(folder, f"release-{n}")
        fact = f"User said the code word is {SECRET}." if SECRET in prompt else "User chatted about the weather."
        return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) {fact}\n</observations>"

    return FunctionModel(answer)


def sync_memory(url: str, n: int, folder: Path, **kwargs: Any) -> Memory:
    from obsmem import MemoryConfig, ObservationConfig

    scope = "resource" if (folder / "resource-scope").exists() else "thread"
    config = MemoryConfig(scope=scope, observation=ObservationConfig(message_tokens=300, buffer_tokens=False))
    return Memory(url, config=config, observer=blocking_observer(n, folder), reflector="offline", **kwargs)


async def observing_turn(url: str, n: int, folder: Path, extra: int) -> dict[str, Any]:
    """A turn whose input pushes the thread past the threshold: it observes (and blocks in the
    observer until released), then steps and ends."""
    errors: list[str] = []
    wait: dict[str, Any] = {} if (folder / f"bounded-{n}").exists() else {"max_turn_wait": None}
    context: list[str] = []
    async with sync_memory(url, n, folder, failure_policy="warn", **wait) as memory:
        user = Message(id=f"p{n}-u", role="user", parts=(TextPart(text=f"Process {n} asks again."),))
        thread = (folder / "thread").read_text() if (folder / "thread").exists() else THREAD
        try:
            turn = await memory.begin_turn(thread_id=thread, resource_id=RESOURCE, messages=[user])
            context = [m.id for m in turn.context.messages]
            await turn.step([Message(id=f"p{n}-a", role="assistant", parts=(TextPart(text=f"Answer {n}."),))])
            await turn.end()
            await memory.settled()
        except ObsmemError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"errors": errors, "context": context}


def two_calls(mid: str) -> Message:
    return Message(id=mid, role="assistant", parts=tuple(
        ToolCallPart(tool_call_id=c, tool_name="lookup", args={"q": c}) for c in ("c1", "c2")
    ))


async def late_first(url: str, n: int, folder: Path, extra: int) -> dict[str, Any]:
    """A replica whose turn on ``chat:2`` calls two tools at once; another turn then closes both
    calls as unanswered; this replica's result for ``c1`` arrives late. It pauses (``rewriting``
    … ``go``) inside the late-result lease, after reading the closing message, before writing it."""
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id="chat:2", resource_id=RESOURCE,
                                       messages=[Message(id="a-u", role="user", parts=(TextPart(text="Look both up."),))])
        await turn.step([two_calls("a-calls")])
        (folder / "began_seq").write_text(str(turn.began_seq))
        mark(folder, "called")
        await await_for(folder, "closed")
        store = memory.store
        save = store.save_messages

        async def paused_save(thread_id: str, messages: list[Message], **kwargs: Any) -> list[Message]:
            if any("obsmem_answered_late" in m.metadata for m in messages):
                mark(folder, "rewriting")
                await await_for(folder, "go")
            return await save(thread_id, messages, **kwargs)

        rewrite = store.rewrite_message  # the closing message is rewritten compare-and-set

        async def paused_rewrite(message: Message, **kwargs: Any) -> bool:
            if "obsmem_answered_late" in message.metadata:
                mark(folder, "rewriting")
                await await_for(folder, "go")
            return bool(await rewrite(message, **kwargs))

        store.save_messages = paused_save  # type: ignore[method-assign]
        store.rewrite_message = paused_rewrite  # type: ignore[method-assign]
        await turn.step([result("c1", "a-res1")])
    return {}


async def late_second(url: str, n: int, folder: Path, extra: int) -> dict[str, Any]:
    """Another replica continuing the same turn (``resume_turn``): its result for ``c2`` arrives
    late too. It marks whether it got the late-result lease at its first try (``lease-got`` /
    ``lease-busy``)."""
    async with Memory(url) as memory:
        store = memory.store
        acquire = store.acquire_lease
        tried: list[bool] = []

        async def watched(key: str, owner: str, **kwargs: Any) -> Any:
            lease = await acquire(key, owner, **kwargs)
            if key.startswith("late-results:") and not tried:
                tried.append(True)
                mark(folder, "lease-got" if lease is not None else "lease-busy")
            return lease

        store.acquire_lease = watched  # type: ignore[method-assign]
        turn = await memory.resume_turn(thread_id="chat:2", since_seq=int((folder / "began_seq").read_text()))
        await turn.step([result("c2", "b-res2")])
    return {}


SCENARIOS = {"late_first": late_first, "late_second": late_second, "lockstep_tools": lockstep_tools, "observing_turn": observing_turn}

if __name__ == "__main__":
    scenario, url, number, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    extra = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    print(json.dumps(asyncio.run(SCENARIOS[scenario](url, number, folder, extra))))

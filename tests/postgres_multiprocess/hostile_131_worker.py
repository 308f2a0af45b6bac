"""One process of the hostile-review-131 multiprocess tests (run as a script, not collected).

    python hostile_131_worker.py <scenario> <store URL> <process number> <coordination folder>

Coordinated through files in the folder (``mark`` / ``wait_for`` of hostile_109_worker), never by
timing. Prints one JSON line with what it did and what went wrong (``errors``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ObsmemError
from obsmem.models.testing import FunctionModel
from obsmem.storage.postgres.store import PostgresStore
from obsmem.types import TextPart

sys.path.insert(0, str(Path(__file__).parent))
from hostile_109_worker import RESOURCE, SECRET, THREAD, mark, wait_for  # noqa: E402


async def frozen_turn(url: str, n: int, folder: Path) -> dict[str, Any]:
    """A replica whose process stops (a blocked event loop, as under SIGSTOP, a debugger or a VM
    pause) inside its turn's save transaction, after the thread's row is locked (with
    ``after-write`` in the folder: after its rows are written, before its COMMIT): it marks
    ``in-tx`` and stays stopped until ``thaw``, then goes on."""
    write = PostgresStore._write_messages
    seen: dict[str, Any] = {}

    after_write = (folder / "after-write").exists()  # else before: stopped just before the rows or the COMMIT

    async def frozen(conn: Any, thread: Any, messages: list[Message], *args: Any) -> list[Message]:
        stop = any(m.id == "frozen-u" for m in messages) and not seen
        written = await write(conn, thread, messages, *args) if after_write else None
        if stop:
            seen["in_transaction"] = conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            mark(folder, "in-tx")
            while not (folder / "thaw").exists():
                time.sleep(0.05)  # the whole process stands still, its transaction open
        return written if written is not None else await write(conn, thread, messages, *args)

    PostgresStore._write_messages = staticmethod(frozen)  # type: ignore[method-assign]
    errors: list[str] = []
    async with Memory(url) as memory:
        try:
            turn = await memory.begin_turn(thread_id=THREAD, resource_id=RESOURCE,
                                           messages=[Message(id="frozen-u", role="user", parts=(TextPart(text="Still there?"),))])
            await turn.end()
        except ObsmemError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"errors": errors, **seen}


def wm_observer(folder: Path) -> FunctionModel:
    """An observer that writes the secret into its observations and its working memory."""

    def answer(messages: list[Message], settings: object) -> str:
        return (f"<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) User said the code word is {SECRET}.\n"
                f"</observations>\n<working-memory>\n- code word: {SECRET}\n</working-memory>")

    return FunctionModel(answer)


async def working_memory_turn(url: str, n: int, folder: Path) -> dict[str, Any]:
    """A turn that observes (working memory on) and pauses after the observation committed, just
    before its working memory is written (``wm-writing`` ... ``wm-go``)."""
    scope = "resource" if (folder / "resource-scope").exists() else "thread"
    config = MemoryConfig(scope=scope, observation=ObservationConfig(
        message_tokens=300, buffer_tokens=False, manage_working_memory=True))
    errors: list[str] = []
    async with Memory(url, config=config, observer=wm_observer(folder), reflector="offline",
                      failure_policy="warn", max_turn_wait=None) as memory:
        store = memory.store
        write = store.set_working_memory

        async def paused(key: str, text: str) -> None:
            if SECRET in text:
                mark(folder, "wm-writing")
                await asyncio.to_thread(wait_for, folder, "wm-go")
            await write(key, text)

        store.set_working_memory = paused  # type: ignore[method-assign]
        user = Message(id=f"p{n}-u", role="user", parts=(TextPart(text=f"Process {n} asks again."),))
        try:
            turn = await memory.begin_turn(thread_id=THREAD, resource_id=RESOURCE, messages=[user])
            await turn.end()
            await memory.settled()
        except ObsmemError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    return {"errors": errors}


MARKERS = ("Albatross", "Zeppelin")  # process 0's user says the first, process 1's the second


async def resource_chat(url: str, n: int, folder: Path) -> dict[str, Any]:
    """Resource ``r<n>``: two threads, turns alternating between them (resource scope, sharing and
    retrieval on), while the other process does the same with its own resource. Then everything
    the user's side can read, by every read path, as text."""
    from obsmem import RetrievalConfig

    config = MemoryConfig(scope="resource", share_threads_in_resource=True, retrieval=RetrievalConfig(enabled=True),
                          observation=ObservationConfig(message_tokens=200, buffer_tokens=False))
    word, seen, errors = MARKERS[n], [], []
    async with Memory(url, config=config) as memory:
        for i in range(10):
            thread = f"r{n}-t{i % 2}"
            try:
                turn = await memory.begin_turn(thread_id=thread, resource_id=f"r{n}", messages=[Message.user(
                    f"Turn {i}: my {word} collection has {i} items and I store them in box {i}.", id=f"r{n}-u{i}")])
                seen.append(" ".join(m.text for m in turn.context.messages))
                await turn.step([Message.assistant(f"Noted: {i} items of the {word} kind in box {i}.",
                                                   id=f"r{n}-a{i}")])
                await turn.end()
            except Exception as exc:  # noqa: BLE001 - reported (the other process must not wait in vain)
                errors.append(f"turn {i}: {type(exc).__name__}: {exc}")
            mark(folder, f"p{n}-turn{i}")
            await asyncio.to_thread(wait_for, folder, f"p{1 - n}-turn{i}")  # lockstep with the other resource
        await memory.settled()
        for t in (f"r{n}-t0", f"r{n}-t1"):
            seen.append(" ".join(m.text for m in (await memory.get_context(t)).messages))
            seen.append(await memory.get_observations(t))
            seen.append(str(await memory.get_working_memory(t)))
            seen.append(repr(await memory.status(t)))
            seen.append(json.dumps(await memory.call_recall_tool(t, {"mode": "threads"}), default=str))
            seen.append(json.dumps(await memory.call_recall_tool(t, {"mode": "search", "query": "collection box items"}),
                                   default=str))
            seen.append(repr([m.text for m in (await memory.recall(t, anchor="end")).messages]))
        seen.append(repr(await memory.list_threads(f"r{n}")))
    return {"seen": seen, "errors": errors}


async def paused_delete(url: str, n: int, folder: Path) -> dict[str, Any]:
    """``delete_thread("t1")`` in resource scope, paused at its first rewrite of an older
    generation (``rewriting`` ... ``go``), after it read the generation it rewrites."""
    async with Memory(url, config=MemoryConfig(scope="resource")) as memory:
        store = memory.store
        rewrite = store.rewrite_generation
        paused: list[bool] = []

        async def pausing(record: Any, **kwargs: Any) -> bool:
            if not paused:
                paused.append(True)
                mark(folder, "rewriting")
                await asyncio.to_thread(wait_for, folder, "go")
            return await rewrite(record, **kwargs)

        store.rewrite_generation = pausing  # type: ignore[method-assign]
        deleted = await memory.delete_thread("t1")
    return {"deleted": deleted, "paused": bool(paused)}


async def killed_mid_tool(url: str, n: int, folder: Path) -> dict[str, Any]:
    """A replica's turn saves a tool call, marks ``called`` and then waits (the test SIGKILLs it)."""
    from hostile_109_worker import call

    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id=THREAD, resource_id=RESOURCE, messages=[
            Message(id="k-u", role="user", parts=(TextPart(text="Look it up."),))])
        await turn.step([call("k-c1", "k-call")])
        (folder / "began_seq").write_text(str(turn.began_seq))
        mark(folder, "called")
        await asyncio.Event().wait()
    return {}


async def frozen_migration(url: str, n: int, folder: Path) -> dict[str, Any]:
    """A replica starting on a new database stops (as under SIGSTOP) inside its first migration
    step, holding the migrations' lock: it marks ``in-migration`` and stands still until ``thaw``."""
    from contextlib import contextmanager

    from obsmem.migrations import PostgresDialect

    step = PostgresDialect.step

    @contextmanager
    def frozen(self: PostgresDialect, conn: Any) -> Any:
        with step(self, conn):
            if not (folder / "in-migration").exists():
                mark(folder, "in-migration")
                while not (folder / "thaw").exists():
                    time.sleep(0.05)
            yield

    PostgresDialect.step = frozen  # type: ignore[method-assign]
    errors: list[str] = []
    async with Memory(url) as memory:
        try:
            await memory.create_thread(thread_id=f"m{n}", resource_id=RESOURCE)
        except ObsmemError as exc:
            errors.append(type(exc).__name__)
    return {"errors": errors}


async def first_turn(url: str, n: int, folder: Path) -> dict[str, Any]:
    """Another replica starting on the same new database: one turn."""
    async with Memory(url) as memory:
        turn = await memory.begin_turn(thread_id=f"f{n}", resource_id=RESOURCE, messages=[
            Message(id=f"f{n}-u", role="user", parts=(TextPart(text="Hello."),))])
        await turn.end()
        return {"context": [m.id for m in turn.context.messages]}


async def paused_forget(url: str, n: int, folder: Path) -> dict[str, Any]:
    """``forget("ValueOne")`` over thread ``shared``, paused as it writes back message ``two``
    (``rewriting`` ... ``go``), after it read it: the first time, at its store's message
    rewrite (``rewrite_message``, or ``save_messages`` for a store without one)."""
    async with Memory(url) as memory:
        store = memory.store
        paused: list[bool] = []
        if hasattr(store, "rewrite_message"):
            rewrite = store.rewrite_message

            async def pausing_rewrite(message: Message, **kwargs: Any) -> bool:
                if message.id == "two" and not paused:
                    paused.append(True)
                    mark(folder, "rewriting")
                    await asyncio.to_thread(wait_for, folder, "go")
                return bool(await rewrite(message, **kwargs))

            store.rewrite_message = pausing_rewrite  # type: ignore[attr-defined]
        else:
            save = store.save_messages

            async def pausing(thread_id: str, messages: list[Message], **kwargs: Any) -> list[Message]:
                if any(m.id == "two" for m in messages) and not paused:
                    paused.append(True)
                    mark(folder, "rewriting")
                    await asyncio.to_thread(wait_for, folder, "go")
                return await save(thread_id, messages, **kwargs)

            store.save_messages = pausing  # type: ignore[method-assign]
        await memory.forget("ValueOne", thread_id=THREAD)
    return {"paused": bool(paused)}


SCENARIOS = {"paused_forget": paused_forget, "first_turn": first_turn, "frozen_migration": frozen_migration, "killed_mid_tool": killed_mid_tool, "paused_delete": paused_delete, "resource_chat": resource_chat, "frozen_turn": frozen_turn, "working_memory_turn": working_memory_turn}

if __name__ == "__main__":
    scenario, url, number, folder = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    print(json.dumps(asyncio.run(SCENARIOS[scenario](url, number, folder))))

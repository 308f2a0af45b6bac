"""A long-lived process serving many users: what one ``Memory`` keeps in this process must not
grow with the number of threads it has seen, and a deleted user's text must not stay in any of
its caches ("Delete means gone from every table and every generation").

Structure counts, never timings: live task objects and per-lineage records counted with ``gc``
after N threads and after 2N, and a unique word searched for in everything the ``Memory`` and
obsmem's modules reach after ``delete_resource``.
"""

from __future__ import annotations

import asyncio
import gc
import re
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from obsmem import BudgetConfig, Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.models.testing import FunctionModel
from obsmem.om import buffering
from obsmem.om.activation import WindowGrowth
from obsmem.om.offline import offload
from obsmem.om.windows import Windows
from obsmem.errors import StorageError
from obsmem import tokens
from obsmem.storage import leasing, ledger
from obsmem.types import TextPart
from obsmem.vectors import InMemoryVectorIndex
from obsmem.storage.sqlite.store import SQLiteStore

pytestmark = pytest.mark.anyio

TEXT = "I moved to Berlin last week and my sister Anna visits on Friday; the flat needs a new desk. " * 3
MARK = "zqxvorbleplum"  # in no word list, no prompt, no test: only the deleted user's messages


def _buffering() -> MemoryConfig:
    """Buffering on and a small threshold: a few turns of a thread start a background buffer."""
    return MemoryConfig(observation=ObservationConfig(message_tokens=400))


async def _serve(memory: Memory, first: int, count: int, *, turns: int = 3) -> None:
    """``count`` users, one thread each, a few turns each (enough to start a buffer)."""
    for index in range(first, first + count):
        for step in range(turns):
            turn = await memory.begin_turn(
                thread_id=f"thread-{index}", resource_id=f"user-{index}",
                messages=[Message.user(f"{index} {step} {TEXT}")],
            )  # fmt: skip
            await turn.end([Message.assistant(f"ok {TEXT}")])
    await memory.settled()


def _live(kind: type) -> int:
    gc.collect()
    return sum(isinstance(o, kind) for o in gc.get_objects())


def _tasks() -> int:
    import asyncio

    return _live(asyncio.Task)


async def test_done_buffer_tasks_are_not_kept_per_thread(tmp_path: Path) -> None:
    """Every thread whose window started a background buffer left its finished task (and its
    start time) in the engine for the life of the process: 2N threads, twice the tasks."""
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=_buffering()) as memory:
        await _serve(memory, 0, 10)
        after_few = _tasks()
        await _serve(memory, 10, 40)
        after_many = _tasks()
        assert memory.engine.buffered is not None
        buffered = memory.engine.buffered
        assert after_many <= after_few + 2, (after_few, after_many)
        assert len(buffered._observation_tasks) + len(buffered._in_flight) <= 4


async def test_window_growth_is_bounded_and_goes_with_its_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adaptive buffer's growth samples were kept per lineage, for every thread ever seen,
    and outlived ``delete_resource``."""
    monkeypatch.setattr(buffering, "GROWTH_KEPT", 8, raising=False)
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=_buffering()) as memory:
        await _serve(memory, 0, 30, turns=2)
        assert _live(WindowGrowth) <= 8
        for index in range(30):
            await memory.delete_resource(f"user-{index}")
        assert _live(WindowGrowth) == 0


async def test_budget_keeps_a_bounded_table_of_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a budget, the spend of every resource whose observation was routed to the model
    was kept for the life of the process: one entry per user it ever served."""
    monkeypatch.setattr(ledger, "SPENT_KEPT", 8, raising=False)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=400, buffer_tokens=False),
                          budget=BudgetConfig(max_tokens=10**9))  # fmt: skip
    observer = FunctionModel(lambda messages, settings: "<observations>\n* 🔴 (10:00) User moved to Berlin.\n</observations>")
    async with Memory("memory://", config=config, observer=observer) as memory:
        await _serve(memory, 0, 30)
        assert observer.calls >= 30  # each user's observation asked the budget
        assert _live(ledger._Spent) <= 8


class _ReleasesFail:
    """The user's store during an outage of its lease releases ("database is locked")."""

    def __init__(self, inner: SQLiteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def release_lease(self, key: str, owner: str) -> bool:
        raise StorageError("database is locked")


async def test_leases_an_outage_left_unreleased_are_a_bounded_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every lease whose release failed was recorded for the life of the process, and only a
    later step of the same lineage took it off: an outage met by N threads left N records."""
    monkeypatch.setattr(leasing, "_UNRELEASED", {})
    monkeypatch.setattr(leasing, "UNRELEASED_KEPT", 8, raising=False)
    inner = SQLiteStore(tmp_path / "om.db")
    async with inner, Memory(_ReleasesFail(inner), config=_buffering()) as memory:
        await _serve(memory, 0, 30)
        assert leasing._UNRELEASED  # the outage was met
        assert sum(len(keys) for keys in leasing._UNRELEASED.values()) <= 8


_WORDS = "apple river stone cloud garden violin market ticket window harbor pencil rocket tunnel candle".split()


def _long_observations(messages: list[Message], settings: object) -> str:
    """About 45,000 characters of distinct observation lines (a long-observed user's head)."""
    seed = sum(len(m.text) for m in messages)
    lines = [f"* 🟡 (10:{i % 60:02d}) User mentioned the {_WORDS[(seed + i) % 14]} {_WORDS[(seed * i) % 14]} "
             f"number {seed * 7919 + i} near the {_WORDS[i % 14]} {i}." for i in range(600)]  # fmt: skip
    return "<observations>\nDate: Jun 1, 2025\n" + "\n".join(lines) + "\n</observations>"


async def test_kept_windows_count_their_heads(tmp_path: Path) -> None:
    """The engine's kept windows (SQLite) counted only their messages against their bound: a
    thread whose messages were all observed kept a window of no message and a head of every
    observation, counted as 0 characters, so such windows were never let go: 40 users, 40 heads
    and 1.9M characters kept under a bound of 200,000."""
    config = MemoryConfig(observation=ObservationConfig(message_tokens=100_000, buffer_tokens=False))
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=config,
                      observer=FunctionModel(_long_observations)) as memory:  # fmt: skip
        memory.engine.core.windows = Windows(memory.store, max_chars=200_000)
        for index in range(40):
            turn = await memory.begin_turn(thread_id=f"t{index}", resource_id=f"u{index}",
                                           messages=[Message.user(f"hello {index}, I like tea")])  # fmt: skip
            await turn.end([Message.assistant("ok")])
            await memory.observe(f"t{index}")
            await memory.get_context(f"t{index}")
        assert len(await memory.get_observations("t0")) > 40_000
        kept = memory.engine.core.windows._kept.values()
        held = sum(len(head.active_observations) for _, (head, _), _ in kept if head is not None)
        assert held <= 200_000, (len(kept), held)


async def test_counted_parts_kept_by_identity_are_bounded_by_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token counter kept every counted message's parts by identity up to 12,500 entries,
    whatever their size: a process reading many large messages (files, tool results) kept
    gigabytes there (measured: +11 MB per 60 threads of 180k-character messages, linear, while
    the windows and decoded rows stayed at their 16M-character bounds)."""
    monkeypatch.setattr(tokens, "PARTS_KEPT_CHARS", 200_000, raising=False)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=100_000, buffer_tokens=False))
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=config) as memory:
        for index in range(80):
            said = f"file {index}: " + "lorem ipsum dolor sit amet " * 110  # ~3,000 characters
            turn = await memory.begin_turn(thread_id=f"t{index}", resource_id=f"u{index}",
                                           messages=[Message.user(said)])  # fmt: skip
            await turn.end([Message.assistant("ok")])
        kept = memory.counter._cache.by_parts.values()
        held = sum(len(part.text) for entry in kept for part in entry[0] if isinstance(part, TextPart))
        assert len(kept) > 10  # parts are kept
        assert held <= 200_000, (len(kept), held)


# -- a deleted user's text in this process ------------------------------------------------------


def _roots(memory: Memory) -> Iterator[tuple[Any, str]]:
    yield memory, "memory"
    for name, module in list(sys.modules.items()):
        if isinstance(module, ModuleType) and (name == "obsmem" or name.startswith("obsmem.")):
            yield module, name
    yield re, "re"  # its compiled-pattern cache


def _holding(memory: Memory, needle: str) -> dict[str, int]:
    """Where strings holding ``needle`` (any case) are reachable from ``memory`` and obsmem's
    modules: the first path that reached each, cut after its root's name and four steps."""
    gc.collect()
    # Other libraries' module globals (reached through a function's ``__globals__``) are not
    # this process's memory of the user: asyncio's would lead to this test's own frame. Nor is
    # the state a C module holds (on Python 3.13 ``_asyncio``'s ``_current_tasks``, whose running
    # task is this test's, is a referent of the module object itself).
    others = [m for n, m in list(sys.modules.items())
              if isinstance(m, ModuleType) and m is not re and not (n == "obsmem" or n.startswith("obsmem."))]  # fmt: skip
    seen = {id(vars(m)) for m in others} | {id(m) for m in others}
    found: dict[str, int] = {}
    queue = deque(_roots(memory))
    while queue:
        item, path = queue.popleft()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            if needle in item.lower():
                found[path] = found.get(path, 0) + 1
            continue
        if isinstance(item, bytes | int | float | bool | type(None) | asyncio.AbstractEventLoop):
            continue  # (the loop's queue holds this test's own running task: on 3.13 a Task reaches it)
        refs = gc.get_referents(item)
        if isinstance(item, dict):
            refs.extend(item)  # (gc does not list a dict's str keys)
        for ref in refs:
            step = path if path.count(">") >= 4 else f"{path}>{type(ref).__name__}"
            if isinstance(item, ModuleType):
                step = next((f"{path}.{k}" for k, v in vars(item).items() if v is ref), step)
            queue.append((ref, step))
    return found


@pytest.mark.parametrize(("store", "erase"), [
    ("memory", "delete_resource"), ("sqlite", "delete_resource"), ("sqlite", "delete_thread"), ("sqlite", "forget"),
    ("postgres", "delete_resource"),
])  # fmt: skip
async def test_an_erase_leaves_no_text_in_process_caches(
    tmp_path: Path, store: str, erase: str, request: pytest.FixtureRequest
) -> None:
    """After ``delete_resource`` (or ``delete_thread``, or ``forget`` of the word), the user's
    messages were still held decoded by the SQLite store's row cache, by the token counter's kept
    parts and line counts, by the offline reflector's fact cache, and in patterns of ``re``'s
    cache built from their values."""
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 'om.db'}"}.get(store)
    url = url or request.getfixturevalue("postgres_url")
    small = MemoryConfig(observation=ObservationConfig(message_tokens=2000), reflection=ReflectionConfig(observation_tokens=1000))
    async with Memory(url, config=small) as memory:
        for index in range(16):
            said = (f"My favourite fruit is the Zqxvorbleplum number {index}, I moved to Zqxvorbleplumville "
                    "last week and my dog is called Zqxvorbleplumdog. ") * 20  # fmt: skip
            turn = await memory.begin_turn(thread_id="t-alice", resource_id="alice", messages=[Message.user(said)])
            await turn.end([Message.assistant(f"Noted, Zqxvorbleplum {index} fruit. " * 10)])
        other = await memory.begin_turn(thread_id="t-bob", resource_id="bob", messages=[Message.user("hello")])
        await other.end([Message.assistant("hi")])
        await memory.settled()
        assert MARK in (await memory.get_observations("t-alice")).lower()  # memory worked on it
        assert len(await memory.list_generations("t-alice")) > 1  # and reflected
        del turn
        if erase == "delete_resource":
            await memory.delete_resource("alice")
        elif erase == "delete_thread":
            await memory.delete_thread("t-alice")
        else:
            for spelling in ("Zqxvorbleplumville", "Zqxvorbleplumdog", "Zqxvorbleplum"):
                await memory.forget(spelling, resource_id="alice")
        assert _holding(memory, MARK) == {}


async def test_an_erase_ends_the_idle_offline_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline roles observe a large window in a child interpreter, kept for the next job
    with its caches (the lines it reflected, ``re``'s patterns) for the life of the process: a
    deleted user's text stayed in the idle child after ``delete_resource``."""
    said = " ".join(f"On day {i} I fed Zqxvorbleplumdog number {i} at the harbour." for i in range(700))  # ~40k chars
    monkeypatch.delenv("OBSMEM_OFFLINE_PROCESS", raising=False)
    config = MemoryConfig(observation=ObservationConfig(message_tokens=30_000, max_tokens_per_batch=50_000))
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}", config=config) as memory:
        turn = await memory.begin_turn(thread_id="t-alice", resource_id="alice", messages=[Message.user(said)])
        await turn.end([Message.assistant("ok")])
        await memory.observe("t-alice")
        await memory.settled()
        assert offload.stats()["children"]  # observed in a child, which waits for the next job
        await memory.delete_resource("alice")
        assert offload.stats()["children"] == 0



async def test_vector_namespaces_of_deleted_users_are_not_kept() -> None:
    """The exact vector index (in memory, and SQLite's matrix) kept every namespace it ever
    held, deleted or not, and scanned them all at every search: a process that served and
    deleted N users kept N namespaces (their resource ids) and searched through N."""
    index = InMemoryVectorIndex(4)
    for user in range(300):
        await index.upsert(f"g{user}", [1.0, 0.0, 0.0, float(user % 3)], namespace=f"resource:u{user}/thread:t")
        assert await index.count(f"resource:u{user}/") == 1
        await index.delete_namespace(f"resource:u{user}/")
    await index.upsert("kept", [0.0, 1.0, 0.0, 0.0], namespace="resource:alive/thread:t")
    assert [hit.key for hit in await index.search([0.0, 1.0, 0.0, 0.0], namespace_prefix="resource:")] == ["kept"]
    assert len(index._exact._namespace_id) <= 2

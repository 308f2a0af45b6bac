"""One typed error everywhere (issue 12, item 7).

Every public constructor and method answers a bad argument with an :class:`ObsmemError` subclass
whose message names the argument — never a bare pydantic ``ValidationError``, ``TypeError``,
``AttributeError``, ``KeyError`` or ``ValueError``, and never by accepting the value and failing
later. The first tests are the regressions the issue reported; the property tests below feed
arbitrary values to every entry point of :data:`.entry_points.ENTRIES`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from obsmem import (
    ConfigError,
    InvalidInputError,
    Memory,
    MemoryConfig,
    Message,
    ObservationConfig,
    ObsmemError,
    ReflectionError,
    ReflectionRequest,
    ReflectionResult,
    SyncMemory,
    Thread,
    ToolResultPart,
)
from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.worker import Worker

from .entry_points import ENTRIES, MESSAGE, RESOURCE, THREAD, Entry, public_arguments

# ------------------------------------------------------------------------------------------------
# The regressions reported in the issue
# ------------------------------------------------------------------------------------------------


def test_message_user_with_a_number_is_invalid_input_naming_text() -> None:
    with pytest.raises(InvalidInputError, match="text"):
        Message.user(123)  # type: ignore[arg-type]


def test_an_empty_thread_id_is_invalid_input_everywhere() -> None:
    with pytest.raises(InvalidInputError, match="thread_id"):
        Message.user("hi", thread_id="")
    with pytest.raises(InvalidInputError, match="id"):
        Thread(id="", resource_id="u1")

    async def turn() -> None:
        async with Memory("memory://") as memory:
            with pytest.raises(InvalidInputError, match="thread_id"):
                await memory.begin_turn(thread_id="", resource_id="u1", messages=[Message.user("hi")])
            with pytest.raises(InvalidInputError, match="thread_id"):
                await memory.get_context("")

    asyncio.run(turn())
    with SyncMemory("memory://") as sync_memory, pytest.raises(InvalidInputError, match="thread_id"):
        sync_memory.begin_turn(thread_id="", resource_id="u1")


def test_a_resource_scope_config_dict_builds_a_working_memory() -> None:
    async def run() -> None:
        async with Memory("memory://", config={"scope": "resource"}) as memory:
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hi")])
            await turn.end()
            assert memory.config.scope == "resource"
            assert [m.text for m in turn.context.messages][-1] == "hi"

    asyncio.run(run())


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("model", 42),
        ("model", {1000: 42}),
        ("observer", object()),
        ("reflector", object()),
        ("failure_policy", "ignore"),
        ("working_memory_scope", "org"),
        ("extractors", [42]),
        ("counter", "tiktoken"),
        ("clock", 1.5),
        ("on_event", "print"),
        ("store", 123),
    ],
)
def test_memory_refuses_a_bad_argument_when_built_not_later(argument: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        Memory("memory://", **{argument: value}) if argument != "store" else Memory(value)  # type: ignore[arg-type]
    assert caught.value.option.startswith(argument), caught.value


def test_a_fractional_token_count_for_buffer_tokens_is_refused() -> None:
    with pytest.raises(ConfigError, match="observation.buffer_tokens"):
        MemoryConfig(observation={"buffer_tokens": 1.5})
    with pytest.raises(ConfigError, match="observation.buffer_tokens"):
        Memory("memory://", config={"observation": {"buffer_tokens": 1.5}})
    # the valid forms keep their meaning: a fraction of the threshold, or a whole token count
    assert ObservationConfig(buffer_tokens=0.25).resolved_buffer_tokens == 7500
    assert ObservationConfig(buffer_tokens=2000).resolved_buffer_tokens == 2000
    assert ObservationConfig(buffer_tokens=2000.0).resolved_buffer_tokens == 2000


class _BrokenReflector:
    name = "broken"

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        raise RuntimeError("the reflector's model is down")


async def _observed_memory(policy: str) -> Memory:
    memory = Memory("memory://", reflector=_BrokenReflector(), failure_policy=policy)  # type: ignore[arg-type]
    await memory.create_thread("t1", "u1")
    await memory.save_messages("t1", [Message.user("I live in Munich."), Message.assistant("Noted.")])
    await memory.observe("t1")
    record = await memory.get_record("t1")
    assert record is not None and record.active_observations.strip()
    return memory


def test_manual_reflect_raises_reflection_error_under_the_throw_policy() -> None:
    async def run() -> None:
        memory = await _observed_memory("throw")
        async with memory:
            before = await memory.get_record("t1")
            with pytest.raises(ReflectionError, match="model is down"):
                await memory.reflect("t1")
            after = await memory.get_record("t1")
            assert before is not None and after is not None
            assert (after.generation, after.active_observations) == (
                before.generation,
                before.active_observations,
            )

    asyncio.run(run())


@pytest.mark.parametrize("policy", ["warn", "continue"])
def test_manual_reflect_returns_the_failed_outcome_under_the_other_policies(policy: str) -> None:
    async def run() -> None:
        memory = await _observed_memory(policy)
        async with memory:
            outcome = await memory.reflect("t1")
            assert not outcome.applied and outcome.reason == "failed"
            assert isinstance(outcome.error, RuntimeError)

    asyncio.run(run())


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_data_no_store_could_keep_is_refused_when_saved_the_same_in_every_store(
    url: str, tmp_path: Path
) -> None:
    unstorable = Message(
        role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="t", result={"handle": object()}),)
    )
    dated = ToolResultPart(tool_call_id="c1", tool_name="t", result={"at": datetime(2025, 1, 1, tzinfo=UTC)})

    async def run() -> None:
        async with Memory(f"sqlite:///{tmp_path / 'om.db'}" if url == "sqlite" else url) as memory:
            await memory.create_thread("t1", "u1")
            with pytest.raises(InvalidInputError, match=r"messages\[0\]\.parts\[0\]\.result"):
                await memory.save_messages("t1", [unstorable])
            with pytest.raises(InvalidInputError, match=r"messages\[1\]\.metadata"):
                await memory.begin_turn(
                    thread_id="t1", messages=[Message.user("a"), Message.user("b", metadata={"x": object()})]
                )
            with pytest.raises(InvalidInputError, match="metadata"):
                await memory.create_thread("t2", "u1", metadata={"x": object()})
            assert await memory.list_messages("t1") == [], "nothing of a refused batch is saved"
            # what pydantic can write as JSON is kept (a datetime becomes its ISO text)
            saved = await memory.save_messages("t1", [Message(role="tool", parts=(dated,))])
            assert len(saved) == 1

    asyncio.run(run())


def test_worker_refuses_unknown_kinds_and_impossible_numbers() -> None:
    store = MemoryStore()
    with pytest.raises(ConfigError, match="kinds"):
        Worker(store, kinds=["bogus"])
    with pytest.raises(ConfigError, match="claim_ttl_s"):
        Worker(store, claim_ttl_s=float("nan"))
    with pytest.raises(ConfigError, match="concurrency"):
        Worker(store, concurrency=1.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="store"):
        Worker("memory://")  # type: ignore[arg-type]


def test_huge_counts_are_refused_before_they_reach_sqlite(tmp_path: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{tmp_path / 'om.db'}") as memory:
            await memory.create_thread("t1", "u1")
            with pytest.raises(InvalidInputError, match="limit"):
                await memory.list_messages("t1", limit=2**70)
            with pytest.raises(InvalidInputError, match="offset"):
                await memory.list_threads("u1", offset=2**70)

    asyncio.run(run())


# ------------------------------------------------------------------------------------------------
# Arbitrary values into every public entry point
# ------------------------------------------------------------------------------------------------


def test_every_public_entry_point_is_in_the_table() -> None:
    covered = {(entry.target, entry.argument) for entry in ENTRIES}
    missing = [
        f"{target}({argument}=...)"
        for target, argument in public_arguments()
        if (target, argument) not in covered
    ]
    assert not missing, f"add these to ENTRIES (or to NOT_FUZZED with a reason): {missing}"


_SETTINGS = settings(
    max_examples=50,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _judge(entry: Entry, value: Any, error: BaseException | None) -> None:
    if error is None:
        return
    label = f"{entry.target}({entry.argument}={value!r})"
    if not isinstance(error, ObsmemError):
        raise AssertionError(
            f"{label} raised {type(error).__module__}.{type(error).__name__}: {error}"
        ) from error
    text = " ".join([str(error), *getattr(error, "__notes__", [])])
    words = (entry.argument, *entry.names)
    assert any(word in text for word in words), f"{label}: {type(error).__name__} does not name it: {error}"


def _outcome(run: Callable[[], Any]) -> BaseException | None:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - judged by _judge
        return exc
    return None


def _fuzz(entry: Entry, call: Callable[[Any], Any]) -> None:
    @_SETTINGS
    @given(value=entry.values)
    def check(value: Any) -> None:
        _judge(entry, value, _outcome(lambda: call(value)))

    check()


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a store URL drawn as text (``x.db``) names a file relative to the current folder
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.kind == "plain"], ids=lambda e: e.id)
def test_constructors_and_functions_answer_any_value_with_a_typed_error(entry: Entry) -> None:
    _fuzz(entry, lambda value: entry.call(None, value))


_FIXTURE_MESSAGES = [Message.user("hello", id=MESSAGE), Message.assistant("hi")]


@contextmanager
def _running_memory(tmp_path: Path) -> Iterator[tuple[asyncio.AbstractEventLoop, Memory]]:
    loop = asyncio.new_event_loop()
    store = SQLiteStore(tmp_path / "fuzz.db")
    memory = Memory(store, config={"retrieval": True})
    try:
        loop.run_until_complete(memory.create_thread(THREAD, RESOURCE))
        loop.run_until_complete(memory.save_messages(THREAD, _FIXTURE_MESSAGES))
        yield loop, memory
    finally:
        loop.run_until_complete(memory.aclose())
        loop.run_until_complete(store.close())
        loop.close()


def _awaited(loop: asyncio.AbstractEventLoop, result: Any) -> Any:
    return loop.run_until_complete(result) if inspect.isawaitable(result) else result


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.kind == "memory"], ids=lambda e: e.id)
def test_memory_methods_answer_any_value_with_a_typed_error(entry: Entry, tmp_path: Path) -> None:
    with _running_memory(tmp_path) as (loop, memory):
        _fuzz(entry, lambda value: _awaited(loop, entry.call(memory, value)))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.kind == "sync"], ids=lambda e: e.id)
def test_sync_memory_methods_answer_any_value_with_a_typed_error(entry: Entry, tmp_path: Path) -> None:
    with SyncMemory(f"sqlite:///{tmp_path / 'fuzz.db'}", config={"retrieval": True}) as memory:
        memory.create_thread(THREAD, RESOURCE)
        memory.save_messages(THREAD, _FIXTURE_MESSAGES)
        _fuzz(entry, lambda value: entry.call(memory, value))


def test_the_fuzzed_entry_points_accept_their_valid_values(tmp_path: Path) -> None:
    """The checks refuse nothing valid: the documented forms of each argument still work."""

    async def run() -> None:
        async with Memory(f"sqlite:///{tmp_path / 'ok.db'}", config={"retrieval": True}) as memory:
            await memory.create_thread("t1", "u1", title="Trip", metadata={"k": [1, 2.5, None]}, org_id="o1")
            assert [t.id for t in await memory.list_threads("u1", limit=0)] == []
            turn = await memory.begin_turn(
                thread_id="t1",
                messages=({"role": "user", "parts": [{"type": "text", "text": "hi"}]},),
                model="openai:gpt-4o-mini",
            )
            await turn.step(m for m in [Message.assistant("hello")])  # type: ignore[arg-type]  # any iterable
            await turn.end()
            assert len(await memory.list_messages("t1", after_seq=0, limit=None)) == 2
            result = await memory.recall("t1", mode="threads", page=0, limit=5)
            assert result is not None
            ids = [m.id for m in await memory.list_messages("t1")]
            assert (await memory.recall("t1", cursor=ids[0], limit=5)).message_ids == ids
            assert (await memory.recall("t1", cursor=ids[0], page=-1, limit=5)).message_ids == []
            assert await memory.call_recall_tool("t1", None)
            assert memory.recall_tool(flavor="openai")
            await memory.reflect("t1", guidance=None)

    asyncio.run(run())
    assert Worker(
        MemoryStore(), kinds=("observe",), claim_ttl_s=5, poll_interval_s=0.5, max_attempts=3
    ).kinds == ("observe",)

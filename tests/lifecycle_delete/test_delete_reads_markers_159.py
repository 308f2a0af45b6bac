"""``delete_thread`` reads of the user's other threads only the messages that can hold the
deleted thread's observation sections, on every store.

It takes the deleted thread's ``<thread id>`` sections out of the markers on the other threads'
messages (in resource scope a reflection's end marker quotes every thread's section; an import
copies such markers as they were). To find them it read every message of every other thread
of the user, whole: with a user of 200 threads x 500 messages a delete of one read 100,000 rows,
in thread scope too, where no marker holds a section. It now asks the store, a page at a time,
for the messages whose stored form holds a section tag, and still strips every one of them.
Counted in messages handed out by the store's methods, not time."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig, ReflectionConfig
from obsmem.transfer import export_resource, import_resource
from obsmem.types import DataPart

pytestmark = pytest.mark.anyio

OTHERS, PER_THREAD = 6, 60
SECTION = '<thread id="victim">\n* User said the gate code is VICTIM-9931\n</thread>'
KEPT = '<thread id="o0">\n* User keeps bees\n</thread>'


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/m.db"}.get(request.param)
    if url is None:
        url = request.getfixturevalue("postgres_url")
    async with Memory(url, config=MemoryConfig(observation=ObservationConfig(message_tokens=200))) as memory:
        yield memory


def count_messages(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Wrap every public coroutine method of the memory's store so the messages it hands out
    are counted, by thread id."""
    read: dict[str, int] = {}
    store = memory.store
    for name, _ in inspect.getmembers(type(store), inspect.iscoroutinefunction):
        if name.startswith("_"):
            continue

        def wrap(real: Any) -> Any:
            async def counted(*args: Any, **kwargs: Any) -> Any:
                found = await real(*args, **kwargs)
                for item in found if isinstance(found, list | tuple) else [found]:
                    if isinstance(item, Message):
                        read[item.thread_id or ""] = read.get(item.thread_id or "", 0) + 1
                return found

            return counted

        monkeypatch.setattr(store, name, wrap(getattr(store, name)))
    return read


async def _chat(memory: Memory, thread_id: str, turns: int, *, code: str = "") -> None:
    for i in range(turns):
        said = f"Turn {i} of {thread_id}: I water bed {i} every {i + 2} days, remember."
        if code:
            said += f" My gate code is {code}."
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="alice",
                                       messages=[Message.user(said)])
        await turn.end([Message.assistant(f"Noted: bed {i} every {i + 2} days.")])


async def _fill(memory: Memory, thread_id: str, count: int) -> None:
    await memory.create_thread(thread_id, "alice")
    await memory.save_messages(thread_id, [
        Message.user(f"{thread_id} line {n}") if n % 2 == 0 else Message.assistant(f"{thread_id} reply {n}")
        for n in range(count)
    ])


async def _mark(memory: Memory, thread_id: str, count: int, observations: str, cycle: int) -> None:
    """``count`` answers in ``thread_id``, each carrying an end marker quoting ``observations``
    (as a resource-scope reflection's end marker does; an import copies them as they are)."""
    saved = await memory.save_messages(thread_id, [Message.assistant(f"answer {n}") for n in range(count)])
    for n, message in enumerate(saved):
        data = {"cycle_id": f"refl-{cycle + n}", "observations": observations}
        await memory.store.add_message_parts(message.id, [DataPart(name="om-observation-end", data=data)])


def _quoted(messages: list[Message]) -> list[str]:
    return [
        part.data["observations"] for m in messages for part in m.parts
        if isinstance(part, DataPart) and "observations" in part.data
    ]


async def test_a_delete_in_thread_scope_reads_no_message_of_the_other_threads(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _chat(memory, "victim", 4)
    for t in range(OTHERS):
        await _fill(memory, f"o{t}", PER_THREAD)
    await _chat(memory, "o0", 6)  # observed (markers on its messages), none holds a section
    await memory.settled()
    read = count_messages(memory, monkeypatch)
    assert await memory.delete_thread("victim") is True
    others = {t: n for t, n in read.items() if t != "victim"}
    assert sum(others.values()) == 0, f"{others} messages of the other threads read by one delete"
    assert len(await memory.list_messages("o3")) == PER_THREAD


async def test_markers_quoting_the_deleted_thread_are_still_stripped_and_only_they_are_read(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _chat(memory, "victim", 2)
    for t in range(OTHERS):
        await _fill(memory, f"o{t}", PER_THREAD)
    # markers quoting the victim's section: more in o1 than one page of the delete's reads, a few in o4
    await _mark(memory, "o1", 620, f"{KEPT}\n{SECTION}", 0)
    await _mark(memory, "o4", 3, f"{SECTION}\n{KEPT}", 1000)
    await _mark(memory, "o2", 1, KEPT, 2000)  # another thread's section only: kept as it is
    read = count_messages(memory, monkeypatch)
    assert await memory.delete_thread("victim") is True
    others = {t: n for t, n in read.items() if t != "victim"}
    # each marked message found once, then its rewrite (a store without a native compare-and-set
    # reads it again and saves it: up to 3 rows in all); the unmarked ones never
    assert set(others) == {"o1", "o2", "o4"}, f"{others} messages read by one delete"
    assert others["o1"] <= 3 * 620 and others["o4"] <= 3 * 3 and others["o2"] == 1, others
    monkeypatch.undo()
    for t in range(OTHERS):
        for message in await memory.store.list_messages(f"o{t}"):
            dumped = message.model_dump_json()
            assert "VICTIM-9931" not in dumped and 'id=\\"victim\\"' not in dumped, (t, dumped)
    assert _quoted(await memory.store.list_messages("o2")) == [KEPT]
    o1 = _quoted(await memory.store.list_messages("o1"))
    assert len(o1) == 620 and {q.strip() for q in o1} == {KEPT}
    assert {q.strip() for q in _quoted(await memory.store.list_messages("o4"))} == {KEPT}


async def test_resource_scope_reflections_markers_are_read_and_stripped_the_plain_threads_never(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = MemoryConfig(
        scope="resource", observation=ObservationConfig(message_tokens=300),
        reflection=ReflectionConfig(observation_tokens=300),
    )
    async with Memory(f"sqlite:///{tmp_path}/r.db", config=config) as memory:
        await _chat(memory, "victim", 20, code="VICTIM-9931")
        await _chat(memory, "o0", 20)
        for t in range(1, OTHERS):
            await _fill(memory, f"o{t}", PER_THREAD)
        await memory.settled()
        quoting = [
            m for m in await memory.store.list_messages("o0")
            if any('<thread id="victim">' in q for q in _quoted([m]))
        ]
        assert quoting, "no marker of o0 quotes the victim's section: the test proves nothing"
        read = count_messages(memory, monkeypatch)
        assert await memory.delete_thread("victim") is True
        others = {t: n for t, n in read.items() if t != "victim"}
        assert set(others) <= {"o0"}, f"{others} messages read by one delete"
        monkeypatch.undo()
        for t in range(OTHERS):
            for message in await memory.store.list_messages(f"o{t}"):
                dumped = message.model_dump_json()
                assert "VICTIM-9931" not in dumped and 'id=\\"victim\\"' not in dumped, (t, dumped)


async def test_markers_imported_from_resource_scope_are_stripped_in_thread_scope(
    memory: Memory, tmp_path: Path
) -> None:
    """A resource's history exported from a resource-scope memory and imported where the scope is
    thread (a config change): the reflections' end markers quoting the victim's section still go."""
    config = MemoryConfig(
        scope="resource", observation=ObservationConfig(message_tokens=300),
        reflection=ReflectionConfig(observation_tokens=300),
    )
    async with Memory(f"sqlite:///{tmp_path}/source.db", config=config) as source:
        await _chat(source, "victim", 20, code="VICTIM-9931")
        await _chat(source, "o0", 20)
        await source.settled()
        await export_resource(source.store, "alice", tmp_path / "alice.jsonl")
    await import_resource(memory.store, tmp_path / "alice.jsonl")

    def quoting(messages: list[Message]) -> int:
        return sum('<thread id="victim">' in q for q in _quoted(messages))

    assert quoting(await memory.store.list_messages("o0")) > 0  # else the test proves nothing
    assert await memory.delete_thread("victim") is True
    assert quoting(await memory.store.list_messages("o0")) == 0
    assert "VICTIM-9931" not in "".join(m.model_dump_json() for m in await memory.store.list_messages("o0"))

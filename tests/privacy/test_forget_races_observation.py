"""``Memory.forget(value)`` while an observation (synchronous or buffered) already holds the
value in its model call: the observation must not bring it back when it commits.

A real loop through the public API on SQLite: the offline observer, wrapped so that a call whose
messages hold the value waits on a gate the test opens (a slow LLM observer, without timing);
``forget`` runs while the call waits; then the gate opens, the work settles and the conversation
goes on. The value must be nowhere: the observations, the context, every generation, every
message part (the cycle markers included), the database file's bytes. The messages that
observation covered stay pending and are observed again from what is stored now.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, TextPart
from obsmem.om.offline.observer import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult

pytestmark = pytest.mark.anyio

SECRET = "ZEBRAQUUX42"
FILLER = [
    "We talked about the weather in Lisbon and the train schedule for Monday.",
    "I need to buy groceries: apples, bread, oat milk and coffee beans.",
    "My sister Ana is visiting next weekend, she likes hiking in Sintra.",
    "Remind me to call the dentist about the appointment on Thursday at 3pm.",
    "The project deadline moved to the 14th, and the budget review is on Friday.",
]


class GatedObserver(OfflineObserver):
    """The offline observer; a call (a buffer's, or a synchronous one's: ``buffered``) whose
    messages hold ``needle`` waits for ``gate``."""

    def __init__(self, needle: str, *, buffered: bool) -> None:
        super().__init__()
        self.needle, self.buffered = needle, buffered
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        if request.buffered == self.buffered and any(self.needle in (m.text or "") for m in request.messages):
            self.entered.set()
            await self.gate.wait()
        return await super().observe(request)


async def _turn(memory: Memory, i: int, *texts: str, thread: str = "t1") -> None:
    said = Message(role="user", parts=tuple(TextPart(text=t) for t in texts))
    async with memory.turn(thread_id=thread, resource_id="alice", messages=[said]) as turn:
        await turn.step([Message.assistant(f"Noted {i}. " + FILLER[(i + 2) % 5])])


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
@pytest.mark.parametrize("whole", [True, False], ids=["message-deleted", "part-removed"])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["same-memory", "another-memory"])
async def test_a_value_forgotten_while_an_observation_holds_it_stays_forgotten(
    tmp_path: Path, buffered: bool, whole: bool, elsewhere: bool
) -> None:
    """``whole``: the value is the message's only part (forget deletes the message), else one of
    two (forget removes that part; the message stays, with the same seq). ``elsewhere``: the
    forget runs on another ``Memory`` over the same file (another process, as far as obsmem is
    concerned: nothing in memory is shared).

    On main (synchronous): ``forget`` returned ``{'messages': 1}`` and the store was clean at that
    moment, but the observation committed afterwards: the value was back in ``get_observations``,
    in every context, in generations [5, 4, 3, 2] and in an ``om-observation-end`` marker. On main
    (buffered, part removed): the chunk landed with the value ('ZEBRAQUUX42' in the observations)."""
    path = tmp_path / "m.db"
    await _race(f"sqlite:///{path}", buffered=buffered, whole=whole, elsewhere=elsewhere)
    held = [f.name for f in tmp_path.iterdir() if f.is_file() and SECRET.encode() in f.read_bytes()]
    assert held == []


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
async def test_on_postgresql_a_value_forgotten_while_an_observation_holds_it_stays_forgotten(
    postgres_url: str, buffered: bool
) -> None:
    """The same race on PostgreSQL, the forget run by another ``Memory`` (the deployment where
    processes race). On main: the value came back in the observations ('ZEBRAQUUX42' in them)."""
    await _race(postgres_url, buffered=buffered, whole=False, elsewhere=True, thread=f"t-{uuid.uuid4().hex[:8]}")


async def _race(url: str, *, buffered: bool, whole: bool, elsewhere: bool, thread: str = "t1") -> None:
    observer = GatedObserver(SECRET, buffered=buffered)
    config = MemoryConfig(
        # (buffers take the messages well before a 400-token threshold; 120 observes them at once)
        observation={"message_tokens": 400, "buffer_tokens": 0.2} if buffered else {"message_tokens": 120, "buffer_tokens": False},
        reflection={"observation_tokens": 200},
    )
    memory = Memory(url, observer=observer, config=config)
    for i in range(6):
        await _turn(memory, i, f"Turn {i}: " + FILLER[i % 5], thread=thread)
    await memory.settled()
    secret = [f"My locker code is {SECRET}. " + FILLER[1]] if whole else [f"My locker code is {SECRET}.", FILLER[1]]
    tasks = [asyncio.create_task(_turn(memory, 100, *secret, thread=thread))]
    i = 101
    while not observer.entered.is_set() and i < 140:  # turns go on until an observation holds the value
        await asyncio.sleep(0.02)
        if tasks[-1].done() and not observer.entered.is_set():
            tasks.append(asyncio.create_task(_turn(memory, i, f"Turn {i}: " + FILLER[i % 5], thread=thread)))
            i += 1
    assert observer.entered.is_set(), "no observation took the message holding the value"
    if elsewhere:
        async with Memory(url, config=config) as other:
            counts = await other.forget(SECRET)
    else:
        counts = await memory.forget(SECRET)
    assert counts["messages"] + counts["parts"] >= 1
    observer.gate.set()
    await asyncio.gather(*tasks)
    await memory.settled()
    for j in range(200, 206):
        await _turn(memory, j, f"Turn {j}: " + FILLER[j % 5], thread=thread)
    await memory.settled()

    observations = await memory.get_observations(thread)
    context = await memory.get_context(thread)
    generations = await memory.list_generations(thread, limit=1000)
    messages = await memory.list_messages(thread)
    assert SECRET not in observations
    assert not [m.id for m in context.messages if SECRET in m.text]
    assert [g.generation for g in generations if SECRET in g.active_observations] == []
    assert [g.generation for g in generations if any(SECRET in c.observations for c in g.buffered_chunks)] == []
    assert [(m.id, p.type) for m in messages for p in m.parts if SECRET in p.model_dump_json()] == []
    # the conversation around it is still observed: nothing was lost but the value
    assert "Sintra" in observations or "groceries" in observations
    await memory.aclose()


@pytest.mark.parametrize("buffered", [False, True], ids=["synchronous", "buffered"])
async def test_an_observation_begun_while_a_forget_runs_commits_nothing_of_the_value(
    tmp_path: Path, buffered: bool
) -> None:
    """The other order: the forget has begun (it fenced the record) but has not reached the
    thread's messages yet (a forget over a large store walks many threads first; here its pass
    over the messages waits on a gate, standing in for that walk) when an observation reads the
    window, value included, and calls its model. The forget then finishes; the observation's
    result must not bring the value back.

    On main (with the fence raised once, before the messages change): the value was back in the
    observations, generation 0 and a data marker part (found by a hostile review); buffered, the
    buffer took the value into its model call and its chunk was committed."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    config = MemoryConfig(
        observation={"message_tokens": 400, "buffer_tokens": 0.2} if buffered else {"message_tokens": 300, "buffer_tokens": False},
        reflection={"observation_tokens": 5000},
    )
    observer = GatedObserver(SECRET, buffered=buffered)
    memory = Memory(url, observer=observer, config=config)
    for i in range(3):
        await _turn(memory, i, f"Turn {i}: " + FILLER[i % 5])
    await memory.settled()
    await _turn(memory, 50, f"My locker code is {SECRET}.", FILLER[1])  # below the threshold: pending
    await memory.settled()
    other = Memory(url, config=config)
    fenced, go = asyncio.Event(), asyncio.Event()
    walk = other._forget_in_thread

    async def slow_walk(*args: Any) -> None:
        fenced.set()
        await go.wait()
        await walk(*args)

    other._forget_in_thread = slow_walk  # type: ignore[method-assign]
    forgetting = asyncio.create_task(other.forget(SECRET))
    await fenced.wait()
    tasks: list[asyncio.Task[None]] = []
    i = 60
    while not observer.entered.is_set() and i < 90:  # turns go on until an observation holds the value
        tasks.append(asyncio.create_task(_turn(memory, i, f"Turn {i}: " + FILLER[i % 5] + " " + FILLER[(i + 1) % 5])))
        i += 1
        for _ in range(100):
            await asyncio.sleep(0.01)
            if observer.entered.is_set() or tasks[-1].done():
                break
    if not buffered:  # a buffer sees the forget running and makes no call; an observation calls, then commits nothing
        assert observer.entered.is_set(), "no observation took the message holding the value"
    go.set()
    await forgetting
    observer.gate.set()
    await asyncio.gather(*tasks)
    await memory.settled()
    for j in range(200, 206):
        await _turn(memory, j, f"Turn {j}: " + FILLER[j % 5])
    await memory.settled()
    observations = await memory.get_observations("t1")
    generations = await memory.list_generations("t1", limit=1000)
    messages = await memory.list_messages("t1")
    await memory.aclose()
    await other.aclose()
    assert SECRET not in observations
    assert [g.generation for g in generations if SECRET in g.active_observations] == []
    assert [g.generation for g in generations if any(SECRET in c.observations for c in g.buffered_chunks)] == []
    assert [(m.id, p.type) for m in messages for p in m.parts if SECRET in p.model_dump_json()] == []
    assert "groceries" in observations or "Sintra" in observations  # the rest is observed once the forget is done
    held = [f.name for f in tmp_path.iterdir() if f.is_file() and SECRET.encode() in f.read_bytes()]
    assert held == []

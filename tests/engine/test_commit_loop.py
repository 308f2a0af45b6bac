"""The one compare-and-set loop (``om/cycle.py``): attempts, pauses, and how it ends.

The pauses go through an injected ``sleep`` and a seeded ``rng``, so every test here knows
exactly how long the loop would have waited, and none of them waits at all.
"""

from __future__ import annotations

import random

import pytest

from obsmem.clock import FakeClock
from obsmem.om.cycle import Commit, CommitPolicy, Written, commit
from obsmem.om.engine import Engine
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.storage.contract import BufferedChunk, ObservationRecord, WriteResult
from obsmem.storage.memory import MemoryStore
from obsmem.tokens import TokenCounter
from obsmem.types import Thread

from .helpers import START, Conversation, small_config

pytestmark = pytest.mark.anyio


class Pauses:
    """An injected sleep that records what it was asked to wait."""

    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


def policy(attempts: int = 4, seed: int = 7) -> tuple[CommitPolicy, Pauses]:
    pauses = Pauses()
    return CommitPolicy(attempts=attempts, backoff_s=0.01, sleep=pauses, rng=random.Random(seed)), pauses


def expected_pauses(count: int, seed: int = 7, backoff_s: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0, backoff_s * 2 ** min(attempt, 6)) for attempt in range(count)]


class Counter:
    """A value under compare-and-set: ``version`` moves on every write; ``stale`` writes are
    refused (another writer won), each bumping the stored version as that writer would."""

    def __init__(self, stale: int = 0, gone_after: int | None = None) -> None:
        self.version = 1
        self.value = 0
        self.stale = stale
        self.gone_after = gone_after
        self.writes: list[tuple[int, int]] = []  # (expected version, proposed value)

    async def read(self) -> tuple[int, int] | None:
        return (self.version, self.value)

    async def write(self, current: tuple[int, int], proposed: int) -> Written[tuple[int, int]]:
        self.writes.append((current[0], proposed))
        if self.gone_after is not None and len(self.writes) > self.gone_after:
            return Written("gone", None)
        if self.stale > 0 or current[0] != self.version:
            self.stale -= 1
            self.version += 1
            self.value += 10  # the other writer's change
            return Written("stale", (self.version, self.value))
        self.version += 1
        self.value = proposed
        return Written("applied", (self.version, self.value))


async def add_one(current: tuple[int, int]) -> int:
    return current[1] + 1


async def test_a_write_that_applies_at_once_never_pauses() -> None:
    loop, pauses = policy()
    target = Counter()
    done = await commit(target.read, add_one, target.write, policy=loop)
    assert done == Commit("applied", (2, 1), 1, (1, 0))
    assert pauses.waited == []


async def test_a_stale_write_composes_again_onto_the_head_it_was_handed() -> None:
    loop, pauses = policy()
    target = Counter(stale=2)
    done = await commit(target.read, add_one, target.write, policy=loop)
    assert done.applied and done.current == (4, 21) and done.proposal == 21
    # Each retry composed onto the value the stale write returned, not onto a stale copy.
    assert target.writes == [(1, 1), (2, 11), (3, 21)]
    assert done.base == (3, 20)
    assert pauses.waited == expected_pauses(2)
    assert all(0 <= p <= 0.01 * 2**i for i, p in enumerate(pauses.waited)), "jitter within the backoff"


async def test_every_attempt_stale_ends_exhausted_without_a_pause_after_the_last() -> None:
    loop, pauses = policy(attempts=4)
    target = Counter(stale=99)
    done = await commit(target.read, add_one, target.write, policy=loop)
    assert done.status == "exhausted" and not done.applied
    assert len(target.writes) == 4, "one attempt limit"
    assert done.current == (5, 40), "the last head seen"
    assert pauses.waited == expected_pauses(3)


async def test_the_backoff_doubles_up_to_a_cap() -> None:
    pauses = Pauses()
    always_max = random.Random()
    always_max.uniform = lambda a, b: b  # type: ignore[method-assign]
    loop = CommitPolicy(attempts=10, backoff_s=0.005, sleep=pauses, rng=always_max)
    target = Counter(stale=99)
    await commit(target.read, add_one, target.write, policy=loop)
    assert pauses.waited == [0.005 * 2**min(i, 6) for i in range(9)]


async def test_compose_declining_stops_the_loop_with_the_head_it_saw() -> None:
    loop, pauses = policy()
    target = Counter(stale=1)

    async def only_from_zero(current: tuple[int, int]) -> int | None:
        return 1 if current[1] == 0 else None  # after the other writer's change it no longer applies

    done = await commit(target.read, only_from_zero, target.write, policy=loop)
    assert done.status == "declined" and done.current == (2, 10) and done.base == (1, 0)
    assert len(target.writes) == 1 and pauses.waited == expected_pauses(1)


async def test_nothing_to_read_and_deleted_targets_are_gone() -> None:
    loop, _ = policy()

    async def nothing() -> tuple[int, int] | None:
        return None

    target = Counter()
    assert (await commit(nothing, add_one, target.write, policy=loop)).status == "gone"
    assert target.writes == []
    deleted = Counter(gone_after=0)
    assert (await commit(deleted.read, add_one, deleted.write, policy=loop)).status == "gone"

    async def stale_without_head(current: tuple[int, int], proposed: int) -> Written[tuple[int, int]]:
        return Written("stale", None)  # the lineage has no live head any more

    assert (await commit(target.read, add_one, stale_without_head, policy=loop)).status == "gone"


async def test_first_skips_the_initial_read() -> None:
    loop, _ = policy()
    target = Counter()
    reads = 0

    async def read() -> tuple[int, int] | None:
        nonlocal reads
        reads += 1
        return await target.read()

    done = await commit(read, add_one, target.write, policy=loop, first=(1, 0))
    assert done.applied and reads == 0


# ---- the engine commits through the same loop ---------------------------------------------------


class ContendedStore(MemoryStore):
    """Refuses the next ``stale`` record updates as if another writer had just written."""

    def __init__(self) -> None:
        super().__init__()
        self.stale = 0
        self.refused = 0

    async def update_record(self, record: ObservationRecord, *, expected_version: int) -> WriteResult:
        if self.stale > 0:
            self.stale -= 1
            self.refused += 1
            return WriteResult(status="stale", record=await self.get_head(record.lineage))
        return await super().update_record(record, expected_version=expected_version)


async def contended_engine(attempts: int) -> tuple[Engine, ContendedStore, Pauses, Thread]:
    counter, store = TokenCounter(), ContendedStore()
    pauses = Pauses()
    engine = Engine(
        store=store,
        observer=OfflineObserver(count_tokens=counter.count_text),
        reflector=OfflineReflector(count_tokens=counter.count_text),
        config=small_config(),
        counter=counter,
        clock=FakeClock(START),
        commit_policy=CommitPolicy(attempts=attempts, sleep=pauses, rng=random.Random(1)),
    )
    thread = await store.create_thread(Thread(id="t1", resource_id="u1"))
    conv = Conversation()
    await store.save_messages("t1", [conv.user("I live in Munich with my partner. " * 20), conv.assistant("Noted. " * 20)])
    return engine, store, pauses, thread


@pytest.mark.parametrize("stale", [0, 1, 3])
async def test_an_observation_commit_retries_under_the_engines_policy(stale: int) -> None:
    engine, store, pauses, thread = await contended_engine(attempts=4)
    await engine.head(thread)
    store.stale = stale
    outcome = await engine.observe(thread, force=True)
    assert outcome.applied and store.refused == stale
    assert pauses.waited == expected_pauses(stale, seed=1, backoff_s=0.005)
    assert outcome.record is not None and outcome.record.cursor("t1") == 2


async def test_an_observation_that_never_commits_stops_after_the_attempt_limit() -> None:
    """Other writers won every attempt: not applied, not raised (nothing failed here; as a
    reflection that never commits), and the messages stay pending."""
    engine, store, pauses, thread = await contended_engine(attempts=3)
    await engine.head(thread)
    store.stale = 99
    outcome = await engine.observe(thread, force=True)
    assert not outcome.applied and "on all 3 attempts" in outcome.reason
    assert store.refused == 3 and len(pauses.waited) == 2
    head = await store.get_head("thread:t1")
    assert head is not None and head.cursor("t1") == 0, "the messages stay pending"


async def test_activation_commits_through_the_same_loop() -> None:
    engine, store, pauses, thread = await contended_engine(attempts=4)
    head = await engine.head(thread)
    messages = await store.list_messages("t1")
    chunk = BufferedChunk(
        id="c1", cycle_id="buf-1", thread_id="t1", observations="* 🔴 (09:01) User lives in Munich.",
        observation_tokens=9, message_ids=tuple(m.id for m in messages), message_tokens=100,
        first_seq=messages[0].seq or 0, last_seq=messages[-1].seq or 0,
    )
    assert (await store.update_record(head.model_copy(update={"buffered_chunks": (chunk,)}),
                                      expected_version=head.version)).applied
    store.stale = 2
    outcome = await engine.activate(thread, count=None)
    assert outcome.applied and store.refused == 2 and len(pauses.waited) == 2
    assert outcome.record is not None and outcome.record.cursor("t1") == messages[-1].seq

"""A failing provider never holds a turn for minutes (issue 12, item 6, the engine side).

Seen from the user's side, over a real local HTTP server that answers ``429`` with
``retry-after: 20``. Before the fix a turn past the threshold observed synchronously and sat in
the retry loop (20 s per answer, up to the retry deadline); ``aclose()`` (what ``async with``
does) waited for every background buffer doing the same. Now:

* a turn waits on memory work at most ``Memory(max_turn_wait=...)`` (default 5 s, measured on
  the memory's clock; work about to sleep past it, like a ``retry-after: 20``, ends the wait at
  once); past it the turn goes on with the raw window (cut to a documented limit) and the work
  goes on in the background (or at a later boundary): the messages stay pending, nothing is
  lost. A model that is merely slow is waited for no longer than the bound;
* ``aclose()`` finishes within ``close_timeout`` (default 5 s), cancelling what is left; the
  messages stay pending and a later process observes them;
* the retry policy and the model time limit are options of ``Memory``.

No time is asserted. Each bound is shown by *what the turn or the close returned while the
work it gave up on was provably still unfinished*: the provider's answers are held on an event
(:class:`HeldModel`) or the retry's ``retry-after`` sleep never ends (:class:`HeldClock`, a
:class:`~obsmem.clock.FakeClock` whose time stands still and whose sleeps wait for the test).
Without the bound the boundary or the close would wait for that work forever; the
``asyncio.timeout`` around each test is only a hang guard that turns such a wait into a failure.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.engine.helpers import START, Conversation, chat_turns, fake_clock
from tests.models.wire_server import MemoryModelPlayer, Recorded, Reply, WireServer

from obsmem import Memory, MemoryConfig
from obsmem.clock import FakeClock
from obsmem.models import Endpoint, OpenAIChatModel
from obsmem.models.retry import RetryPolicy
from obsmem.om.engine import EngineEvent
from obsmem.om.llm.observer import LLMObserver
from obsmem.om.llm.reflector import LLMReflector

pytestmark = pytest.mark.anyio

#: Generous: no test here waits on time when the bounds hold (a few HTTP round trips, and in
#: :func:`test_a_slow_model_holds_no_turn_longer_than_the_bound` a few half-second bounds).
HANG_GUARD_S = 60

RATE_LIMITED = Reply(
    status=429, headers={"retry-after": "20"}, json={"error": {"message": "Rate limit reached"}}
)


class RateLimitedUntil:
    """Answers 429 (retry-after 20) until ``recovered`` (a predicate) says otherwise, then as a
    working memory model would."""

    def __init__(self, recovered: object) -> None:
        self.recovered = recovered
        self.player = MemoryModelPlayer()
        self.refused = 0

    def __call__(self, request: Recorded) -> Reply:
        if not self.recovered():  # type: ignore[operator]
            self.refused += 1
            return RATE_LIMITED
        return self.player(request)


class HeldModel:
    """A working memory model whose answers are held until :meth:`release`: ``arrived`` is set
    once a request waits, ``waiting`` counts the requests waiting now. (The server answers one
    request at a time, so later ones queue behind the held one.)"""

    def __init__(self) -> None:
        self.player = MemoryModelPlayer()
        self.arrived = threading.Event()
        self._go = threading.Event()
        self.waiting = 0

    def hold(self) -> None:
        self._go.clear()
        self.arrived.clear()

    def release(self) -> None:
        self._go.set()

    def __call__(self, request: Recorded) -> Reply:
        self.waiting += 1
        self.arrived.set()
        try:
            self._go.wait()
        finally:
            self.waiting -= 1
        return self.player(request)


class HeldClock(FakeClock):
    """Memory time that stands still, and sleeps (a retry's backoff) that last until
    :meth:`release`: work that starts one never finishes while the test holds it. ``held``
    counts the sleeps started."""

    def __init__(self) -> None:
        super().__init__(START)
        self.held = 0
        self._go = asyncio.Event()

    def release(self) -> None:
        self._go.set()

    async def sleep(self, seconds: float) -> None:
        self.held += 1
        await self._go.wait()
        await super().sleep(seconds)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


def openai_at(server: WireServer, timeout_s: float = 5) -> OpenAIChatModel:
    return OpenAIChatModel(
        "m", Endpoint("openai", server.url + "/v1", {}, "OPENAI_API_KEY"), timeout_s=timeout_s
    )


def buffered_config() -> MemoryConfig:
    # A turn is ~90 tokens: buffers start every ~2 turns, block_after (360) is passed in ~5 turns.
    return MemoryConfig(observation={"message_tokens": 300, "buffer_tokens": 0.2, "block_after": 1.2})


async def test_every_turn_stays_under_the_bound_while_the_provider_answers_429(
    server: WireServer, tmp_path: Path
) -> None:
    # The memory's clock holds every retry-after sleep: work that meets a 429 never finishes
    # while the turns run. Each boundary still returns, because the work it waits on is about
    # to sleep past its bound (the wait ends at once); the close returns for the same reason
    # and cancels what is left. Without either bound the test would wait here forever.
    recovered = False  # the provider refuses while the turns run, then recovers
    responder = RateLimitedUntil(lambda: recovered)
    server.responder = responder
    clock = HeldClock()
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    conv = Conversation()
    events: list[EngineEvent] = []
    saved: list[str] = []
    memory = Memory(
        db, config=buffered_config(), observer=openai_at(server), reflector="offline", failure_policy="warn",
        clock=clock, max_turn_wait=0.5, close_timeout=0.5, on_event=events.append,
    )
    async with asyncio.timeout(HANG_GUARD_S):
        async with memory:
            for user_text, reply in chat_turns(12):
                user, answer = conv.user(user_text), conv.assistant(reply)
                saved += [user.id, answer.id]
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
                assert user.id in {m.id for m in turn.context.raw_messages}, "the question is always shown"
                context = await turn.step([answer])
                await turn.end()
                assert answer.id in {m.id for m in context.raw_messages}
            assert responder.refused >= 2, "the provider refused while the turns ran"
            assert clock.held >= 1, "memory work sat in a retry-after sleep that never ended"
            assert any(e.kind == "turn-wait-exceeded" for e in events), "a turn went on without its work"
            record = await memory.get_record("t1")
            assert record is not None and record.cursor("t1") == 0, "nothing was observed while it refused"
    assert memory.background.pending == 0, "the close cancelled the held work and left no task behind"

    # Nothing was lost: a later process, with the provider back, observes every message.
    recovered = True
    async with Memory(db, config=buffered_config(), observer=openai_at(server), reflector="offline") as later:
        stored = await later.list_messages("t1")
        assert [m.id for m in stored if not m.is_marker_only] == saved
        outcome = await later.observe("t1")
        assert outcome.applied
        record = await later.get_record("t1")
        assert record is not None and record.cursor("t1") == max(m.seq or 0 for m in stored)


async def test_a_slow_model_holds_no_turn_longer_than_the_bound(server: WireServer, tmp_path: Path) -> None:
    # No retry here: the provider answers, but only when the test lets it. A turn waits for it
    # at most max_turn_wait (plain time on the system clock: nothing sleeps), then goes on; the
    # observation lands in the background once the answer comes. The model's own time limit is
    # longer than the hang guard, so without the bound a turn would wait for the answer.
    model = HeldModel()
    server.responder = model
    conv = Conversation()
    events: list[EngineEvent] = []
    config = MemoryConfig(observation={"message_tokens": 300, "buffer_tokens": False})
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    memory = Memory(
        db, config=config, observer=openai_at(server, timeout_s=10 * HANG_GUARD_S), reflector="offline",
        max_turn_wait=0.5, close_timeout=0.5, on_event=events.append,
    )
    model.hold()
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            async with memory:
                turns = chat_turns(16)
                for user_text, reply in turns:
                    user = conv.user(user_text)
                    async with memory.turn(thread_id="t1", resource_id="u1", messages=[user]) as turn:
                        await turn.step([conv.assistant(reply)])
                    if turn.waited_out:
                        break
                assert turn.waited_out, "a turn went on without its work"
                assert any(e.kind == "turn-wait-exceeded" for e in events)
                await asyncio.to_thread(model.arrived.wait)  # the observer's request is at the model, held
                record = await memory.get_record("t1")
                assert record is None or record.cursor("t1") == 0, "the turn returned before the answer"
                model.release()
                await memory.settled()
                record = await memory.get_record("t1")
                assert record is not None and record.cursor("t1") > 0, "the work finished in the background"

                # One more held observation in flight when the memory closes: the close gives up
                # on it after close_timeout and cancels it.
                model.hold()
                for user_text, reply in turns:
                    user = conv.user(user_text)
                    async with memory.turn(thread_id="t1", resource_id="u1", messages=[user]) as turn:
                        await turn.step([conv.assistant(reply)])
                    if turn.waited_out:
                        break
                assert turn.waited_out, "a later turn went on without its work"
                await asyncio.to_thread(model.arrived.wait)
            assert model.waiting == 1, "the memory closed while the model still held its answer"
            assert memory.background.pending == 0, "the close cancelled that work and left no task behind"
    finally:
        model.release()


async def test_a_turn_does_not_sit_in_the_retry_loop_for_a_minute_of_429s(server: WireServer) -> None:
    # The memory's clock is a FakeClock: the retry loop's 20 s waits take no real time, and the
    # server refuses for the first (virtual) minute. Before the fix the turn that reached the
    # threshold sat through the whole minute and came back observed; now it comes back at once,
    # with its messages pending and raw, and the work finishes in the background.
    clock = fake_clock()
    responder = RateLimitedUntil(lambda: clock.monotonic() >= 60.0)
    server.responder = responder
    conv = Conversation()
    config = MemoryConfig(observation={"message_tokens": 300, "buffer_tokens": False})
    async with Memory(
        "memory://", config=config, observer=openai_at(server), reflector="offline", clock=clock,
        max_turn_wait=5.0,
    ) as memory:
        blocked_turn = None
        for index, (user_text, reply) in enumerate(chat_turns(6)):
            before = clock.monotonic()
            async with memory.turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)]) as turn:
                await turn.step([conv.assistant(reply)])
            if responder.refused and blocked_turn is None:
                blocked_turn = index
                record = await memory.get_record("t1")
                assert record is not None and record.cursor("t1") == 0, (
                    f"the turn waited {clock.monotonic() - before:g} s of the memory's clock for the "
                    "provider to recover"
                )
                assert len(turn.context.raw_messages) >= 2 * (index + 1) - 1
        assert blocked_turn is not None, "no turn reached the threshold"
        await memory.settled()
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") > 0, "the work finished in the background"
        assert responder.player.observer_calls >= 1


async def test_async_with_exit_is_bounded_and_leaves_the_work_resumable(server: WireServer, tmp_path: Path) -> None:
    # The provider refuses for good and the memory's clock holds every retry-after sleep: the
    # background work never finishes on its own, so the exit returns only by giving up on it.
    server.responder = RateLimitedUntil(lambda: False)
    clock = HeldClock()
    db = f"sqlite:///{tmp_path / 'memory.db'}"
    conv = Conversation()
    memory = Memory(
        db, config=buffered_config(), observer=openai_at(server), reflector="offline", failure_policy="warn",
        clock=clock, max_turn_wait=0.2, close_timeout=0.5,
    )
    async with asyncio.timeout(HANG_GUARD_S):
        async with memory:
            for user_text, reply in chat_turns(8):
                async with memory.turn(thread_id="t1", resource_id="u1", messages=[conv.user(user_text)]) as turn:
                    await turn.step([conv.assistant(reply)])
            assert memory.background.pending >= 1, "work is still waiting on the provider"
            assert clock.held >= 1, "in a retry-after sleep that never ends"
    assert memory.background.pending == 0, "aclose leaves no task behind"
    # The work is resumable: messages pending, no lease left held by the closed memory.
    server.responder = MemoryModelPlayer()
    async with Memory(db, config=buffered_config(), observer=openai_at(server), reflector="offline") as later:
        record = await later.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
        lineage = later.engine.lineage(await later.get_thread("t1"))
        lease = await later.store.get_lease(f"buffer-observation:{lineage}")
        assert lease is None or lease.is_expired(later.clock.now())
        assert (await later.observe("t1")).applied


async def test_past_the_bound_the_raw_window_is_trimmed_to_block_after_and_reported(server: WireServer) -> None:
    clock = fake_clock()
    server.responder = RateLimitedUntil(lambda: False)
    conv = Conversation()
    events: list[EngineEvent] = []
    # No backoff: every turn past the threshold tries again, so every such turn waits out.
    config = buffered_config().replace(observation={"failure_backoff": False})
    async with Memory(
        "memory://", config=config, observer=openai_at(server), reflector="offline", clock=clock,
        failure_policy="warn", max_turn_wait=1.0, on_event=events.append,
    ) as memory:
        limit = 2 * config.observation.message_tokens
        trimmed: list[int] = []
        for user_text, reply in chat_turns(30):
            user, answer = conv.user(user_text), conv.assistant(reply)
            async with memory.turn(thread_id="t1", resource_id="u1", messages=[user]) as turn:
                raw = turn.context.raw_messages
                assert raw[-1].id == user.id
                tokens = sum(memory.counter.count_message(m) for m in raw if m.id != user.id)
                assert tokens <= limit, f"{tokens} raw tokens besides the input (limit {limit})"
                trimmed.append(turn.trimmed)
                assert turn.context.trimmed == turn.trimmed, "the context reports its own trim"
                context = await turn.step([answer])
                trimmed.append(turn.trimmed)
                assert context.trimmed == turn.trimmed
        assert max(trimmed) > 0, "the window grew past the limit and was trimmed"
        stored = await memory.list_messages("t1")
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0, "trimmed messages stay pending, not lost"
        assert len([m for m in stored if not m.is_marker_only]) == 60, "every message is stored"
        reported = [e for e in events if e.kind == "context-trimmed"]
        assert reported and reported[-1].data["messages"] == trimmed[-1]
        assert reported[-1].data["limit"] == limit
        await memory.aclose(cancel=True)


async def test_retry_policy_and_model_time_limit_are_options_of_memory(server: WireServer) -> None:
    policy = RetryPolicy(max_retries=2, max_total_s=10.0)
    async with Memory(
        "memory://", model=openai_at(server), retry=policy, model_timeout_s=42.0,
    ) as memory:
        observer, reflector = memory.engine.observer, memory.engine.reflector
        assert isinstance(observer, LLMObserver) and isinstance(reflector, LLMReflector)
        assert observer.retry_policy is policy and reflector.retry_policy is policy
        assert memory.engine.model_timeout_s == 42.0
    async with Memory("memory://") as memory:
        assert memory.max_turn_wait == 5.0 and memory.close_timeout == 5.0
        assert memory.engine.model_timeout_s == 60.0

"""A seeded lifecycle fuzzer: two engines, one store, random operations, invariants after each.

Everything random comes from one ``random.Random(seed)``; time is a :class:`FakeClock`; the
background model calls (buffered observations, buffered reflections) are held on per-call
events that the fuzzer releases, crashes or cancels in an order it draws (a seed-drawn share
of them returns by itself, like a fast model, so chunks pile up as they do in production). So
one seed is one exact run, and a failure reprints as the seed plus the log of the operations
that led to it.

Checks: every record the store accepts is checked as it is written (:class:`ProbeStore`), every
observer request is checked as it is made (contiguous batch, no call split from its result), and
after every operation the whole stored state is checked with :func:`invariants.check_thread`.

Interleavings. On the in-memory store every store call can yield to the event loop (drawn from
the seed), so a released buffer, the other engine and the actor's step interleave *inside*
operations: between a read of the head and its compare-and-set. The loop has no threads and no
timers that fire, so this stays deterministic. The SQLite store does its I/O on a worker thread,
whose timing the loop cannot control; there the fuzzer runs one coroutine chain at a time
(background tasks start behind a gate and are let through one by one), which keeps every
*logical* race (a buffer started from an old window finishing after activation, reflection,
another engine's buffer, a crash) but not the sub-operation ones.
"""

from __future__ import annotations

import asyncio
import random
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.errors import ObservationError, StorageError
from obsmem.om.cycle import CommitPolicy
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest, ReflectionResult
from obsmem.storage.contract import ObservationRecord, Store, lineage_key
from obsmem.tokens import TokenCounter
from obsmem.turn import Turn
from obsmem.types import TextPart, Thread, ToolCallPart, ToolResultPart

from .invariants import Snapshot, check_chunks, check_thread

__all__ = ["FuzzFailure", "LifecycleFuzz", "run_seed"]


async def _yield_once(_seconds: float) -> None:
    await asyncio.sleep(0)

THREAD = "t1"
RESOURCE = "u1"
LINEAGE = lineage_key("thread", THREAD, RESOURCE)
START = datetime(2025, 6, 15, 9, 0, tzinfo=UTC)
MODELS = [
    "openai:gpt-4o", "openai:gpt-5", "anthropic:claude-sonnet-4", "openai.responses:gpt-4o",
    "google:gemini-2.5-pro",
]

_COUNTER: TokenCounter | None = None


def shared_counter() -> TokenCounter:
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter()
    return _COUNTER


class FuzzFailure(AssertionError):
    """An invariant broke (or the run crashed or hung); ``fuzz`` is the run, when there is one."""

    fuzz: LifecycleFuzz | None = None


# ------------------------------------------------------------------------------------------------
# Text
# ------------------------------------------------------------------------------------------------

NAMES = ["Alex", "Mia", "Kim", "Noah", "Lena", "Omar", "Priya", "Jonas", "Sofia", "Tariq"]
CITIES = ["Munich", "Berlin", "Lisbon", "Oslo", "Kyoto", "Austin", "Porto", "Zurich", "Seville", "Quebec"]
THINGS = [
    "window seats", "night trains", "the blue Volvo", "Thai food", "hiking boots", "oat milk", "the red tent",
]
USER_SENTENCES = [
    "I live in {city} with my partner {name}.",
    "My daughter {name} is {n} years old.",
    "I work as a data engineer at Helio{n}.",
    "My budget for the trip is {n}00 euros.",
    "I'm planning to visit {city} next Friday with {name}.",
    "I prefer {thing} when I travel to {city}.",
    "I'm allergic to peanuts, and {name} cannot eat gluten.",
    "Can you explain how step {n} of the migration plan works in detail?",
    "What is the best way to get from {city} to {city2} in under {n} hours?",
    "Remind me that the dentist appointment for {name} is on the {n}th.",
]
ASSISTANT_SENTENCES = [
    "Sure. Step {n} moves table t{n} to the new cluster, verifies row counts, and switches reads.",
    "It usually takes about {n} minutes and can be rolled back by pointing reads back.",
    "I recommend booking {thing} in {city} because it costs {n} euros less than the alternatives.",
    "The fastest route from {city} to {city2} is the morning train, which takes {n} hours.",
    "The key consideration is consistency across replicas during the cutover window.",
    "{name} would probably enjoy the old town of {city}, especially the market on Saturdays.",
    "I have booked a table for {n} people at Nopa in {city} at 7 pm.",
]


def _sentences(rng: random.Random, templates: list[str], count: int) -> str:
    out = []
    for _ in range(count):
        template = rng.choice(templates)
        out.append(template.format(
            city=rng.choice(CITIES), city2=rng.choice(CITIES), name=rng.choice(NAMES),
            thing=rng.choice(THINGS), n=rng.randint(2, 99),
        ))
    return " ".join(out)


def _size(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.25:
        return 1
    if roll < 0.6:
        return rng.randint(2, 5)
    if roll < 0.9:
        return rng.randint(6, 14)
    if roll < 0.97:
        return rng.randint(15, 30)
    return rng.randint(40, 70)  # larger than the whole message threshold


# ------------------------------------------------------------------------------------------------
# Held model calls
# ------------------------------------------------------------------------------------------------


@dataclass
class Held:
    """One background model call, parked until the fuzzer releases, crashes or cancels it."""

    n: int
    agent: str
    kind: str  # "observation" | "reflection"
    task: asyncio.Task[Any]
    event: asyncio.Event = field(default_factory=asyncio.Event)
    fate: str = "pending"  # pending | ok | raise | cancelled
    detail: str = ""

    def label(self) -> str:
        return f"#{self.n}({self.agent} {self.kind}{' ' + self.detail if self.detail else ''})"


class HeldObserver(OfflineObserver):
    def __init__(self, fuzz: LifecycleFuzz, agent: str) -> None:
        super().__init__(count_tokens=shared_counter().count_text)
        self.fuzz = fuzz
        self.agent = agent

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.fuzz.check_request(self.agent, request)
        if request.buffered:  # a buffered (background) call
            seqs = [m.seq for m in request.messages]
            await self.fuzz.hold(self.agent, "observation", f"seq {seqs[0]}-{seqs[-1]}" if seqs else "")
        elif self.fuzz.fail_next_sync:
            self.fuzz.fail_next_sync = False
            raise RuntimeError("injected failure of a synchronous observation")
        else:
            await self.fuzz.maybe_yield()  # a synchronous call takes time too: others run meanwhile
        return await super().observe(request)


class HeldReflector(OfflineReflector):
    def __init__(self, fuzz: LifecycleFuzz, agent: str) -> None:
        super().__init__(count_tokens=shared_counter().count_text)
        self.fuzz = fuzz
        self.agent = agent

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        if not request.continuation_hints:  # a buffered (background) reflection
            await self.fuzz.hold(self.agent, "reflection")
        else:
            await self.fuzz.maybe_yield()
        return await super().reflect(request)


# ------------------------------------------------------------------------------------------------
# The store proxy: yields (in-memory mode), mirrors messages, checks every applied write
# ------------------------------------------------------------------------------------------------

_WRITES = ("update_record", "update_record_marking", "create_generation", "create_record")


class ProbeStore:
    """Delegates to the real store; see the module docstring for what it adds."""

    def __init__(self, inner: Store, fuzz: LifecycleFuzz) -> None:
        self._inner = inner
        self._fuzz = fuzz
        self.url = inner.url

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(target):
            return target
        fuzz = self._fuzz

        async def call(*args: Any, **kwargs: Any) -> Any:
            await fuzz.maybe_yield()
            try:
                result = await target(*args, **kwargs)
            except StorageError as exc:
                if name in _WRITES:
                    fuzz.violation(f"store refused {name}: {exc}")
                raise
            if name == "save_messages":
                fuzz.mirror(result)
            elif name in ("save_messages_marked", "save_messages_marked_early"):  # a save with the window's marks
                fuzz.mirror(result[0])
            elif name == "update_record_marking":  # a head write with its markers: (result, message, marks)
                if result[0].applied and result[0].record is not None:
                    fuzz.check_write("update_record", result[0].record)
            elif name in _WRITES and result.applied and result.record is not None:
                fuzz.check_write(name, result.record)
            await fuzz.maybe_yield()
            return result

        setattr(self, name, call)  # built once per method
        return call


# ------------------------------------------------------------------------------------------------
# The fuzzer
# ------------------------------------------------------------------------------------------------


@dataclass
class Agent:
    name: str
    memory: Memory
    incarnation: int = 1


@dataclass
class PendingCall:
    call_id: str
    message_id: str
    deliver_at: int
    orphan: bool


class LifecycleFuzz:
    def __init__(self, seed: int, store: Store, *, sqlite: bool, ops: int = 40) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.inner = store
        self.store = ProbeStore(store, self)
        self.sqlite = sqlite
        self.n_ops = ops
        self.clock = FakeClock(START)
        self.log: list[str] = []
        self.violations: list[str] = []
        self.held: list[Held] = []
        self.waiting: set[asyncio.Task[Any]] = set()
        self.gates: list[tuple[asyncio.Task[Any], asyncio.Event]] = []
        self.tasks: list[tuple[str, asyncio.Task[Any]]] = []
        self.yields = not sqlite
        self.fail_next_sync = False
        self.held_count = 0
        self.msg_count = 0
        self.saved_ids: list[str] = []
        self.known: dict[str, tuple[int, bool]] = {}  # id → (seq, observable)
        self.messages: dict[str, Message] = {}  # what save_messages returned, by id
        self.pairs: dict[str, tuple[str, str]] = {}
        self.orphans: set[str] = set()
        self.pending_call: PendingCall | None = None
        self.turn: Turn | None = None
        self.turn_agent: Agent | None = None
        self.model: str | None = self.rng.choice(MODELS)
        self.snapshot = Snapshot()
        self.max_cursor = 0
        self.config = self._draw_config()
        self.agents: list[Agent] = []
        self.stats: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.op_number = 0
        self.notes: list[str] = []  # background events of the current op, for the log
        self.checked_state: tuple[str, int, int] | None = None
        self.retired: list[ObservationRecord] = []
        self.retired_under: str | None = None

    # -- configuration ------------------------------------------------------------------------
    def _draw_config(self) -> MemoryConfig:
        rng = self.rng
        message_tokens = rng.choice([400, 500, 600, 800, 1000])
        observation_tokens = rng.choice([600, 800, 1000, 1200, 1500])
        observation: dict[str, Any] = {
            "message_tokens": message_tokens,
            "buffer_tokens": 0.2,
            "buffer_activation": rng.choice([0.8, 0.8, 0.5, 0.3, 1.0]),
            "buffer_on_idle": rng.random() < 0.5,
            "activate_on_provider_change": True,
        }
        block = rng.choice(["default", "default", None, 1.0, 1.5, 3.0])
        if block != "default":
            observation["block_after"] = block
        reflection: dict[str, Any] = {"observation_tokens": observation_tokens}
        refl_buffer = rng.choice([0.5, 0.5, 0.3, 0.8, None])
        reflection["buffer_activation"] = refl_buffer
        if refl_buffer is not None:
            reflection["block_after"] = rng.choice([1.2, 1.5, 2.0, None])
        self.idle_ttl = rng.choice([None, 120.0, 300.0])
        self.auto_release = rng.choice([0.0, 0.3, 0.6, 0.8])
        self.auto_released = 0
        self.failure_policy = rng.choice(["throw", "warn"])
        return MemoryConfig(
            observation=ObservationConfig(**observation),
            reflection=ReflectionConfig(**reflection),
            activate_after_idle=self.idle_ttl if self.idle_ttl is not None else None,
            temporal_markers=rng.random() < 0.3,
        )

    def _new_memory(self, name: str) -> Memory:
        memory = Memory(
            self.store,
            config=self.config,
            observer=HeldObserver(self, name),
            reflector=HeldReflector(self, name),
            counter=shared_counter(),
            clock=self.clock,
            failure_policy=self.failure_policy,  # type: ignore[arg-type]
            on_event=self._event,
        )
        # A lost compare-and-set pauses before retrying; in real time that pause would let other
        # tasks run in an order the seed does not decide, so here it yields once, seeded.
        memory.engine.core.commit_policy = CommitPolicy(sleep=_yield_once, rng=random.Random(f"{self.seed}:{name}"))
        buffered = memory.engine.buffered
        assert buffered is not None, "the fuzz config always buffers"
        original = buffered.spawn

        def spawn(work: Coroutine[Any, Any, None], task_name: str) -> asyncio.Task[None] | None:
            gate: asyncio.Event | None = asyncio.Event() if self.sqlite else None

            async def run() -> None:
                if gate is not None:
                    await gate.wait()
                await work

            task = original(run(), task_name)
            # Cancelled (or refused) before it began: close the work so it is never "never awaited".
            if task is None:
                work.close()
            else:
                task.add_done_callback(lambda _: work.close())
                self.tasks.append((name, task))
                if gate is not None:
                    self.waiting.add(task)
                    self.gates.append((task, gate))
            return task

        buffered.spawn = spawn
        return memory

    def _event(self, event: Any) -> None:
        key = event.kind
        if key == "activation":
            key = f"activation:{event.data.get('triggered_by')}"
        self.events[key] = self.events.get(key, 0) + 1

    # -- hooks used by the observer, reflector and store proxy -----------------------------------
    async def maybe_yield(self) -> None:
        if self.yields:
            for _ in range(self.rng.choice((0, 0, 0, 1, 1, 2))):
                await asyncio.sleep(0)

    async def hold(self, agent: str, kind: str, detail: str = "") -> None:
        task = asyncio.current_task()
        assert task is not None
        self.held_count += 1
        if self.rng.random() < self.auto_release:  # a fast model: the call returns by itself
            self.auto_released += 1
            what = f"{agent} {kind}{' ' + detail if detail else ''}"
            self.notes.append(f"#{self.held_count}({what}) returns by itself")
            if not self.sqlite:
                for _ in range(self.rng.randint(0, 3)):
                    await asyncio.sleep(0)
            return
        call = Held(self.held_count, agent, kind, task, detail=detail)
        self.held.append(call)
        self.waiting.add(task)
        try:
            await call.event.wait()
        except asyncio.CancelledError:
            call.fate = "cancelled"
            raise
        finally:
            self.waiting.discard(task)
        if call.fate == "raise":
            raise RuntimeError(f"injected crash of held call {call.label()}")

    def mirror(self, messages: list[Message]) -> None:
        for message in messages:
            seq = message.seq or 0
            self.known[message.id] = (seq, message.role != "system" and not message.is_marker_only)
            self.messages[message.id] = message

    def observable_seqs(self) -> list[tuple[int, str]]:
        return sorted((seq, mid) for mid, (seq, ok) in self.known.items() if ok)

    def check_write(self, name: str, record: ObservationRecord) -> None:
        cursor = record.cursor(THREAD)
        if cursor < self.max_cursor:
            self.violation(f"{name} wrote cursor {cursor} below an earlier cursor {self.max_cursor}")
        self.max_cursor = max(self.max_cursor, cursor)
        for problem in check_chunks(record, THREAD, self.observable_seqs()):
            self.violation(f"{name} wrote: {problem}")

    def check_request(self, agent: str, request: ObservationRequest) -> None:
        """A batch is a contiguous run of observable messages and never splits a call from its result."""
        ids = [m.id for m in request.messages]
        seqs = [m.seq or 0 for m in request.messages]
        kind = "buffered" if request.buffered else "sync"
        if seqs != sorted(set(seqs)):
            self.violation(f"{agent} {kind} observation got messages out of order: {ids}")
        if seqs:
            inside = [mid for seq, mid in self.observable_seqs() if seqs[0] <= seq <= seqs[-1]]
            if inside != ids:
                self.violation(
                    f"{agent} {kind} observation batch {ids} is not contiguous (range holds {inside})"
                )
        present = set(ids)
        for call_id, (call_mid, result_mid) in sorted(self.pairs.items()):
            if (call_mid in present) != (result_mid in present) and result_mid in self.known:
                self.violation(f"{agent} {kind} observation batch {ids} splits tool call {call_id}")

    def violation(self, text: str) -> None:
        self.violations.append(f"[op {self.op_number}] {text}")

    # -- background control -------------------------------------------------------------------------
    def live_held(self) -> list[Held]:
        return [h for h in self.held if h.fate == "pending" and not h.task.done()]

    async def quiesce(self) -> None:
        """Run background work until every task is finished or parked (held call, closed gate).

        On SQLite, gates open one at a time, each task running alone until it parks."""
        spins = 0
        self.tasks = [(name, t) for name, t in self.tasks if not t.done()]
        while True:
            runnable = [t for _, t in self.tasks if not t.done() and t not in self.waiting]
            if not runnable:
                gated = [(t, g) for t, g in self.gates if not g.is_set() and not t.done()]
                if not gated:
                    self.gates = []
                    return
                task, gate = gated[0]
                self.waiting.discard(task)
                gate.set()
                continue
            spins += 1
            if spins > 200_000:
                raise FuzzFailure("background work never settled (a task neither finishes nor parks)")
            if self.sqlite and spins > 20:
                await asyncio.sleep(0.0005)
            else:
                await asyncio.sleep(0)

    def release(self, call: Held, fate: str) -> None:
        call.fate = fate
        self.waiting.discard(call.task)
        call.event.set()

    # -- messages ------------------------------------------------------------------------------------
    def _msg_id(self, kind: str) -> str:
        self.msg_count += 1
        return f"m{self.msg_count:03d}{kind}"

    def _tick(self) -> datetime:
        self.clock.advance(self.rng.randint(1, 90))
        return self.clock.now()

    def user_message(self) -> Message:
        text = _sentences(self.rng, USER_SENTENCES, _size(self.rng))
        return Message(
            id=self._msg_id("u"), role="user", parts=(TextPart(text=text),), created_at=self._tick()
        )

    def assistant_message(self) -> Message:
        text = _sentences(self.rng, ASSISTANT_SENTENCES, _size(self.rng))
        return Message(
            id=self._msg_id("a"), role="assistant", parts=(TextPart(text=text),), created_at=self._tick()
        )

    def call_message(self, call_id: str) -> Message:
        parts: list[Any] = []
        if self.rng.random() < 0.4:
            parts.append(TextPart(text="Let me check the weather first."))
        args = {"city": self.rng.choice(CITIES)}
        parts.append(ToolCallPart(tool_call_id=call_id, tool_name="get_weather", args=args))
        return Message(id=self._msg_id("c"), role="assistant", parts=tuple(parts), created_at=self._tick())

    def result_message(self, call_id: str) -> Message:
        size = self.rng.choice([1, 1, 5, 40])
        result = {"temp_c": self.rng.randint(-5, 35), "notes": " ".join(["cloudy with light wind"] * size)}
        return Message(
            id=self._msg_id("r"), role="tool",
            parts=(ToolResultPart(tool_call_id=call_id, tool_name="get_weather", result=result),),
            created_at=self._tick(),
        )

    def _before_new_message(self, ids: list[str]) -> None:
        """A call still waiting when another message arrives is an orphan from then on."""
        pending = self.pending_call
        if pending is not None:
            self.pending_call = None
            self.orphans.add(pending.call_id)
        self.saved_ids.extend(ids)

    # -- the operations ------------------------------------------------------------------------------
    def agent(self) -> Agent:
        return self.rng.choice(self.agents)

    async def thread(self, agent: Agent) -> Thread:
        return await agent.memory.get_thread(THREAD)

    async def end_turn(self) -> None:
        if self.turn is not None:
            turn, self.turn, self.turn_agent = self.turn, None, None
            await turn.end()

    async def _past_an_abandoned_call(self, agent: Agent, messages: list[Message]) -> list[Message]:
        """The Turn API refuses a message after a call still waiting for its result; data stored
        before that rule (or through ``save_messages``) can still hold one, and the engine must
        cope: such messages are saved directly, and the turn is driven with no input."""
        pending = self.pending_call
        if pending is None or not pending.orphan or not messages:
            return messages
        await agent.memory.save_messages(THREAD, messages)
        return []

    async def begin(self, agent: Agent, messages: list[Message], note: str) -> str:
        await self.end_turn()
        sent = await self._past_an_abandoned_call(agent, messages)
        self._before_new_message([m.id for m in messages])
        self.turn = await agent.memory.begin_turn(
            thread_id=THREAD, resource_id=RESOURCE, messages=sent, model=self.model
        )
        self.turn_agent = agent
        ids = ",".join(m.id for m in messages) or "-"
        return f"{agent.name} begin_turn({ids}) model={self.model} {note}".rstrip()

    async def step_with(self, messages: list[Message]) -> str:
        if self.turn is None:
            return await self.begin(self.agent(), messages, "(no open turn)")
        assert self.turn_agent is not None
        sent = await self._past_an_abandoned_call(self.turn_agent, messages)
        self._before_new_message([m.id for m in messages])
        await self.turn.step(sent)
        return f"{self.turn_agent.name} turn.step({','.join(m.id for m in messages) or '-'})"

    async def op_user(self) -> str:
        return await self.begin(self.agent(), [self.user_message()], "")

    async def op_assistant(self) -> str:
        return await self.step_with([self.assistant_message()])

    async def op_tool_call(self) -> str:
        call_id = f"call{self.msg_count + 1}"
        message = self.call_message(call_id)
        note = await self.step_with([message])
        orphan = self.rng.random() < 0.2
        self.pending_call = PendingCall(call_id, message.id, len(self.log) + self.rng.choice([1, 2]), orphan)
        return f"{note} [tool call {call_id}{' never answered' if orphan else ''}]"

    async def op_tool_result(self) -> str:
        pending = self.pending_call
        assert pending is not None and not pending.orphan
        self.pending_call = None
        result = self.result_message(pending.call_id)
        self.pairs[pending.call_id] = (pending.message_id, result.id)
        batch = [result] if self.rng.random() < 0.5 else [result, self.assistant_message()]
        return await self.step_with(batch)

    async def op_step(self) -> str:
        if self.turn is not None and self.rng.random() < 0.5:
            await self.turn.step([])
            assert self.turn_agent is not None
            return f"{self.turn_agent.name} turn.step([])"
        agent = self.agent()
        await agent.memory.engine.advance(await self.thread(agent), actor_model=self.model)
        return f"{agent.name} engine.advance"

    async def op_release(self) -> str:
        live = self.live_held()
        if not live:
            await self.quiesce()
            return "release: nothing held (quiesced)"
        if self.rng.random() < 0.15:
            order = live[:]
            self.rng.shuffle(order)
            for call in order:
                self.release(call, "ok")
            await self.quiesce()
            return "release all " + " ".join(c.label() for c in order)
        call = self.rng.choice(live)
        self.release(call, "ok")
        settle = self.sqlite or self.rng.random() < 0.6
        if settle:
            await self.quiesce()
        return f"release {call.label()}{'' if settle else ' (runs during the next op)'}"

    async def op_crash(self) -> str:
        live = self.live_held()
        if not live:
            return "crash: nothing held"
        call = self.rng.choice(live)
        if self.rng.random() < 0.5:
            self.release(call, "raise")
            how = "raises"
        else:
            call.fate = "cancelled"
            self.waiting.discard(call.task)
            call.task.cancel()
            how = "task cancelled"
        await self.quiesce()
        return f"crash {call.label()} ({how})"

    async def op_activate(self) -> str:
        agent = self.agent()
        count = self.rng.choice([None, 1, 1, 2])
        outcome = await agent.memory.engine.activate(await self.thread(agent), count=count)
        return f"{agent.name} engine.activate(count={count}) applied={outcome.applied}"

    async def op_observe(self) -> str:
        agent = self.agent()
        force = self.rng.random() < 0.7
        outcome = await agent.memory.engine.observe(await self.thread(agent), force=force)
        return f"{agent.name} engine.observe(force={force}) applied={outcome.applied}"

    async def op_reflect(self) -> str:
        agent = self.agent()
        if self.rng.random() < 0.6:
            outcome = await agent.memory.engine.maybe_reflect(await self.thread(agent))
            return f"{agent.name} engine.maybe_reflect applied={outcome.applied}"
        outcome = await agent.memory.reflect(THREAD)
        return f"{agent.name} memory.reflect applied={outcome.applied}"

    async def op_idle(self) -> str:
        await self.end_turn()
        agent = self.agent()
        buffered = agent.memory.engine.buffered
        assert buffered is not None
        started = await buffered.maybe_start_buffer(await self.thread(agent), idle=True)
        ttl = self.idle_ttl or 300.0
        pause = self.rng.choice([ttl / 2, ttl + 5, ttl * 2, 700.0])  # each outlives a buffer lease left unrenewed (60 s)
        self.clock.advance(pause)
        return f"{agent.name} idle: maybe_start_buffer(idle)={started}, clock +{pause:g}s"

    async def op_provider(self) -> str:
        previous = self.model
        self.model = self.rng.choice([m for m in MODELS if m != previous])
        return await self.begin(self.agent(), [self.user_message()], f"(provider change from {previous})")

    async def op_tick(self) -> str:
        seconds = self.rng.choice([5, 60, 400, 700])
        self.clock.advance(seconds)
        return f"clock +{seconds}s"

    async def op_zombie(self) -> str:
        kind = self.rng.choice(["observation", "reflection"])
        key = f"buffer-{kind}:{LINEAGE}"
        ttl = self.rng.choice([30, 300, 900])
        lease = await self.inner.acquire_lease(key, "dead-worker", ttl_s=ttl, now=self.clock.now())
        return f"a dead worker holds {key} for {ttl}s: {'taken' if lease else 'busy'}"

    async def op_restart(self) -> str:
        agent = self.agent()
        if self.turn_agent is agent:
            await self.end_turn()
        await agent.memory.aclose(cancel=True)  # its held calls see CancelledError
        agent.memory = self._new_memory(agent.name)
        agent.incarnation += 1
        return f"{agent.name} restarts (old background work cancelled; incarnation {agent.incarnation})"

    async def op_sync_fail(self) -> str:
        self.fail_next_sync = True
        return "the next synchronous observation fails"

    async def op_waited_step(self) -> str:
        """Release an engine's own in-flight buffer and step it, so the step waits and takes it."""
        await self.quiesce()
        agent = self.agent()
        buffered = agent.memory.engine.buffered
        assert buffered is not None
        task = buffered._observation_tasks.get(LINEAGE)
        call = next((h for h in self.live_held() if h.task is task), None)
        if call is None:
            return await self.op_step()
        self.release(call, self.rng.choice(["ok", "ok", "raise"]))
        await agent.memory.engine.advance(await self.thread(agent), actor_model=self.model)
        return f"{agent.name} release {call.label()} as {call.fate} then engine.advance"

    async def op_concurrent(self) -> str:
        """Two operations of two engines at once (in-memory store only)."""
        first, second = self.agents[0], self.agents[1]
        if self.rng.random() < 0.5:
            first, second = second, first
        choices: list[tuple[str, Callable[[Agent], Awaitable[Any]]]] = [
            ("advance", lambda a: self._advance(a)),
            ("activate", lambda a: self._activate(a)),
            ("observe", lambda a: self._observe(a)),
            ("maybe_reflect", lambda a: self._maybe_reflect(a)),
            ("idle-buffer", lambda a: self._idle_buffer(a)),
        ]
        jobs: list[Awaitable[Any]] = []
        names: list[str] = []
        if self.turn is not None and self.pending_call is None and self.rng.random() < 0.5:
            message = self.assistant_message()
            self._before_new_message([message.id])
            jobs.append(self.turn.step([message]))
            assert self.turn_agent is not None
            names.append(f"{self.turn_agent.name} turn.step({message.id})")
            other = second if self.turn_agent is first else first
            name, job = self.rng.choice(choices)
            jobs.append(job(other))
            names.append(f"{other.name} {name}")
        else:
            for agent in (first, second):
                name, job = self.rng.choice(choices)
                jobs.append(job(agent))
                names.append(f"{agent.name} {name}")
        results = await asyncio.gather(*jobs, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return "concurrently: " + " | ".join(names)

    async def op_race(self) -> str:
        """Release held calls and, without letting them settle, run an engine operation: the
        background work finishes (reads the head, compares-and-sets) in the middle of it."""
        live = self.live_held()
        released = self.rng.sample(live, k=min(len(live), self.rng.choice([1, 1, 2])))
        for call in released:
            self.release(call, "ok")
        agent = self.agent()
        name, job = self.rng.choice([
            ("observe", self._observe), ("activate", self._activate), ("advance", self._advance),
            ("maybe_reflect", self._maybe_reflect), ("idle-buffer", self._idle_buffer),
        ])
        await job(agent)
        return f"release {' '.join(c.label() for c in released) or '-'} racing {agent.name} {name}"

    async def _advance(self, agent: Agent) -> Any:
        return await agent.memory.engine.advance(await self.thread(agent), actor_model=self.model)

    async def _activate(self, agent: Agent) -> Any:
        return await agent.memory.engine.activate(await self.thread(agent), count=self.rng.choice([None, 1]))

    async def _observe(self, agent: Agent) -> Any:
        return await agent.memory.engine.observe(await self.thread(agent), force=True)

    async def _maybe_reflect(self, agent: Agent) -> Any:
        return await agent.memory.engine.maybe_reflect(await self.thread(agent))

    async def _idle_buffer(self, agent: Agent) -> Any:
        buffered = agent.memory.engine.buffered
        assert buffered is not None
        return await buffered.maybe_start_buffer(await self.thread(agent), idle=True)

    def draw(self) -> str:
        index = len(self.log)
        pending = self.pending_call
        if pending is not None and not pending.orphan and index >= pending.deliver_at:
            return "tool_result"
        weights = {
            "user": 14, "assistant": 14, "tool_call": 5, "step": 7, "release": 16, "crash": 4,
            "activate": 5, "observe": 3, "reflect": 4, "idle": 5, "provider": 3, "tick": 2,
            "zombie": 1, "restart": 1, "sync_fail": 1,
        }
        if not self.sqlite:
            weights["concurrent"] = 5
            weights["waited_step"] = 3
            weights["race"] = 8
        names = sorted(weights)
        op = self.rng.choices(names, weights=[weights[n] for n in names])[0]
        message_ops = ("user", "assistant", "tool_call", "provider")
        if pending is not None and not pending.orphan and op in message_ops:
            return "tool_result"  # the result comes right after its call, before any other message
        if op in ("concurrent", "race") and pending is not None and not pending.orphan:
            return "step"
        return op

    # -- the run ---------------------------------------------------------------------------------
    async def check(self, where: str, *, full: bool = False) -> None:
        """Every invariant, on a consistent state. Between ops the messages come from the mirror
        of what the store returned on save (cheap); ``full`` reads them back from the store."""
        self.yields = False  # a check reads a consistent state: nothing interleaves with it
        try:
            await self._check(full)
        except AssertionError as exc:
            self.violation(f"{where}: {exc}")
        finally:
            self.yields = not self.sqlite
        if self.violations:
            raise FuzzFailure("\n".join(self.violations))

    async def _check(self, full: bool) -> None:
        # The invariants are a function of the stored records and messages: when neither moved
        # since the last check (same head, same version, same messages), they still hold.
        head = await self.inner.get_head(LINEAGE)
        state = (head.id, head.version, len(self.messages)) if head is not None else None
        if not full and state is not None and state == self.checked_state:
            return
        self.checked_state = state
        context = await self.agents[0].memory.get_context(THREAD)
        pairs = {k: v for k, v in self.pairs.items() if k not in self.orphans}
        mirrored = None if full else sorted(self.messages.values(), key=lambda m: m.seq or 0)
        retired = None
        if not full and head is not None and head.id == self.retired_under:
            retired = self.retired  # the head is the same generation: the retired ones did not move
        self.snapshot = await check_thread(
            self.inner, THREAD, RESOURCE, context=context, expected_ids=self.saved_ids,
            pairs=pairs, previous=self.snapshot, messages=mirrored,
            head=head if retired is not None else None, retired=retired,
        )
        if retired is None and head is not None:
            generations = await self.inner.list_generations(LINEAGE, limit=10_000)
            if [g.id for g in generations if g.superseded_by is None] == [head.id]:
                self.retired = [g for g in generations if g.superseded_by is not None]
                self.retired_under = head.id

    async def run(self) -> None:
        self.agents = [Agent("A", self._new_memory("A")), Agent("B", self._new_memory("B"))]
        await self.agents[0].memory.create_thread(THREAD, RESOURCE)
        try:
            for number in range(1, self.n_ops + 1):
                self.op_number = number
                op = self.draw()
                self.stats[op] = self.stats.get(op, 0) + 1
                fail_sync = self.fail_next_sync
                try:
                    note = await getattr(self, f"op_{op}")()
                except ObservationError as exc:
                    if not (fail_sync and self.failure_policy == "throw"):
                        raise
                    self.fail_next_sync = False
                    note = f"{op}: the injected synchronous failure surfaced: {type(exc).__name__}"
                if self.sqlite:
                    await self.quiesce()
                if self.notes:
                    note += f" [{'; '.join(self.notes)}]"
                    self.notes = []
                self.log.append(note)
                await self.check(f"after op {number} ({op})")
                self.log[-1] += f"   → {self.snapshot.brief()} held={[h.n for h in self.live_held()]}"
            await self.finish()
        finally:
            for call in self.live_held():
                self.release(call, "ok")
            for agent in self.agents:
                await agent.memory.aclose(cancel=True)

    async def finish(self) -> None:
        """Let every held call finish (in a drawn order), settle, and check the final state."""
        self.fail_next_sync = False
        self.op_number = self.n_ops + 1  # "op 41" is the final settling
        await self.end_turn()
        for round_ in range(50):
            live = self.live_held()
            if not live and all(t.done() for _, t in self.tasks):
                break
            self.rng.shuffle(live)
            for call in live:
                self.release(call, self.rng.choice(["ok", "ok", "ok", "raise"]))
                if self.sqlite or self.rng.random() < 0.5:
                    await self.quiesce()
            await self.quiesce()
            self.log.append(f"finish round {round_}: released {[c.n for c in live]}")
        else:
            raise FuzzFailure("background work kept starting new held calls")
        for agent in self.agents:
            await agent.memory.settled()
            errors = agent.memory.background.errors
            if errors:
                self.violation(f"{agent.name}: background tasks died with {errors!r}")
        await self.check("final", full=True)
        self.log.append(f"final: {self.snapshot.brief()}")
        # One more forced observation must leave the actor a consistent, fully covered window.
        thread = await self.thread(self.agents[1])
        outcome = await self.agents[1].memory.engine.observe(thread, force=True)
        self.log.append(f"B engine.observe(force=True) applied={outcome.applied}")
        await self.quiesce()
        await self.check("after a final forced observation", full=True)
        self.log.append(f"final: {self.snapshot.brief()}")
        if self.snapshot.chunks:
            self.violation(f"a forced observation left chunks behind: {self.snapshot.chunks}")
        if self.violations:
            raise FuzzFailure("\n".join(self.violations))

    def describe(self) -> str:
        lines = [(f"seed {self.seed} ({type(self.inner).__name__}), config: "
                 f"message_tokens={self.config.observation.message_tokens} "
                 f"buffer_activation={self.config.observation.buffer_activation} "
                 f"block_after={self.config.observation.block_after} "
                 f"buffer_on_idle={self.config.observation.buffer_on_idle} "
                 f"observation_tokens={self.config.reflection.observation_tokens} "
                 f"reflection.buffer_activation={self.config.reflection.buffer_activation} "
                 f"reflection.block_after={self.config.reflection.block_after} "
                 f"idle_ttl={self.idle_ttl} temporal_markers={self.config.temporal_markers} "
                 f"failure_policy={self.failure_policy} auto_release={self.auto_release}")]
        lines += [f"  {i + 1:3d}. {entry}" for i, entry in enumerate(self.log)]
        return "\n".join(lines)


async def run_seed(
    seed: int, store: Store, *, sqlite: bool, ops: int = 40, timeout_s: float = 60.0
) -> LifecycleFuzz:
    """Run one seed; raise :class:`FuzzFailure` with the seed and the op log on any problem."""
    fuzz = LifecycleFuzz(seed, store, sqlite=sqlite, ops=ops)
    try:
        async with asyncio.timeout(timeout_s):  # only ever reached by a hang
            await fuzz.run()
    except Exception as exc:
        detail = str(exc) if isinstance(exc, FuzzFailure) else "".join(traceback.format_exception(exc))
        failure = FuzzFailure(
            f"lifecycle fuzz failed — reproduce with seed={seed}, "
            f"{type(store).__name__}\n{detail}\n\nop log:\n{fuzz.describe()}"
        )
        failure.fuzz = fuzz
        raise failure from exc
    return fuzz


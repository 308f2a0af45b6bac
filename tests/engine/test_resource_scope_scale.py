"""Issue 18, resource scope at scale: observer batching across the threads of a resource, other
threads' tokens toward the threshold when sharing is on, buffered reflection in resource scope,
and the reflector's "now" on the user's clock (issue 15 leftover)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.models.testing import ScriptedModel
from obsmem.om.llm.reflector import LLMReflector
from obsmem.om.activation import reflection_slice
from obsmem.om.offline.observer import OfflineObserver
from obsmem.om.offline.reflector import OfflineReflector
from obsmem.om.outcomes import EngineEvent
from obsmem.om.protocols import ObservationRequest, ObservationResult, ReflectionRequest, ReflectionResult
from obsmem.om.selection import MAX_OTHER_THREADS, choose_other_threads
from obsmem.om.context import other_conversations_block
from obsmem.om.step import other_block_tokens, read_other_threads
from obsmem.om.sections import split_sections
from obsmem.om.text.format import is_boundary_line

from .helpers import Conversation, chat_turns, fake_clock

pytestmark = pytest.mark.anyio

TOKYO = timezone(timedelta(hours=9))
SHORT = "<observations>\nDate: Jun 15, 2025\n* 🔴 (23:30) User lives in Munich.\n</observations>"


def _now_line(model: ScriptedModel) -> str:
    text = model.requests[-1][0][-1].text
    return next(line for line in text.splitlines() if "The current date and time is" in line)


# --------------------------------------------------------------------------------------------
# 4. The LLM reflector states "now" on the user's clock
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("configured", [None, "Asia/Tokyo"])
async def test_reflection_states_now_in_the_newest_observed_messages_offset_or_the_configured_zone(
    configured: str | None,
) -> None:
    """The LLM observer shows "now" in the newest message's own offset (or ``timezone=``); the
    reflector did in UTC: 14:xx UTC instead of 23:xx in Tokyo (main: fails)."""
    start = datetime(2025, 6, 15, 14, 0, tzinfo=timezone.utc)  # 23:00 in Tokyo
    model = ScriptedModel([SHORT], repeat_last=True)
    config = MemoryConfig(
        timezone=configured,
        observation=ObservationConfig(message_tokens=400, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    clock = FakeClock(start + timedelta(minutes=40))
    memory = Memory("memory://", config=config, clock=clock, reflector=LLMReflector(model, count_tokens=len))
    async with memory:
        conv = Conversation(start)
        for user_text, reply in chat_turns(6):
            user, assistant = conv.user(user_text), conv.assistant(reply)
            if configured is None:  # the messages carry the user's offset
                user = user.model_copy(update={"created_at": user.created_at.astimezone(TOKYO)})
                assistant = assistant.model_copy(update={"created_at": assistant.created_at.astimezone(TOKYO)})
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
            await turn.step([assistant])
            await turn.end()
        await memory.observe("t1")
        outcome = await memory.reflect("t1")
        assert outcome.applied, outcome.reason
    line = _now_line(model)
    assert "23:40" in line, line
    assert "14:40" not in line


# --------------------------------------------------------------------------------------------
# 3. Buffered reflection works in resource scope
# --------------------------------------------------------------------------------------------


def buffered_resource_config(*, observation_tokens: int = 600, shared: bool = False) -> MemoryConfig:
    return MemoryConfig(
        scope="resource", share_threads_in_resource=shared,
        observation=ObservationConfig(message_tokens=400),
        reflection=ReflectionConfig(observation_tokens=observation_tokens, buffer_activation=0.5),
    )


async def talk(memory: Memory, conv: Conversation, thread_id: str, turns: int, topic: str) -> None:
    for user_text, reply in chat_turns(turns):
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="u1", messages=[conv.user(f"[{topic}] {user_text}")])
        await turn.step([conv.assistant(f"[{topic}] {reply}")])
        await turn.end()
        await memory.settled()


async def test_buffered_reflection_runs_and_activates_in_resource_scope_with_sections_kept() -> None:
    """The background reflection is stored and swapped in at the threshold, and every line stays
    in its thread's section (main: resource scope always reflected synchronously)."""
    events: list[EngineEvent] = []
    memory = Memory("memory://", config=buffered_resource_config(), clock=fake_clock(), on_event=events.append)
    async with memory:
        conv = Conversation()
        for _ in range(3):
            await talk(memory, conv, "work", 8, "work")
            await talk(memory, conv, "home", 8, "home")
        kinds = [e.kind for e in events]
        assert "reflection-buffered" in kinds, kinds
        assert "reflection-activated" in kinds, kinds
        head = await memory.store.get_head("resource:u1")
        assert head is not None and head.generation >= 1
        sections = [(tid, body) for tid, body in split_sections(head.active_observations) if tid is not None]
        assert {tid for tid, _ in sections} == {"work", "home"}
        for tid, body in sections:
            other = "home" if tid == "work" else "work"
            assert f"[{other}]" not in body, (tid, body)
        outside = [body for tid, body in split_sections(head.active_observations) if tid is None]
        assert all(is_boundary_line(body) for body in outside), outside


class GatedReflector:
    """The offline reflector, held at its first call until released."""

    def __init__(self) -> None:
        self.inner = OfflineReflector()
        self.name = "gated"
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        self.entered.set()
        await self.release.wait()
        return await self.inner.reflect(request)


async def test_a_thread_deleted_while_a_buffered_reflection_runs_leaves_nothing_behind() -> None:
    """The background reflection condensed the deleted thread's section: it must neither be
    stored nor activated (the successor would bring the thread's text back)."""
    reflector = GatedReflector()
    memory = Memory("memory://", config=buffered_resource_config(), clock=fake_clock(), reflector=reflector,
                    max_turn_wait=None)
    async with memory:
        conv = Conversation()
        for topic in ("home", "work") * 6:
            for user_text, reply in chat_turns(4):
                turn = await memory.begin_turn(thread_id=topic, resource_id="u1",
                                               messages=[conv.user(f"[{topic}] {user_text}")])
                await turn.step([conv.assistant(f"[{topic}] {reply}")])
                await turn.end()
                for _ in range(50):  # let the observation buffers land (they never wait on the gate)
                    await asyncio.sleep(0)
            if reflector.entered.is_set():
                break
        assert reflector.entered.is_set(), "a buffered reflection started"
        head = await memory.store.get_head("resource:u1")
        assert head is not None and '<thread id="home">' in head.active_observations
        assert await memory.delete_thread("home")
        reflector.release.set()
        await memory.settled()
        for _ in range(3):
            await talk(memory, conv, "work", 8, "work")
        head = await memory.store.get_head("resource:u1")
        assert head is not None
        assert "[home]" not in head.active_observations and '<thread id="home">' not in head.active_observations
        assert head.buffered_reflection is None or "[home]" not in head.buffered_reflection.text
        generations = await memory.store.list_generations("resource:u1")
        assert len(generations) >= 2, "the work thread went on reflecting"


def test_a_resource_scope_reflection_slice_is_whole_sections() -> None:
    text = "\n".join(
        [
            '<thread id="a">', "* a1", "* a2", "* a3", "</thread>", "", "--- message boundary (x) ---", "",
            '<thread id="b">', "* b1", "* b2", "* b3", "</thread>",
        ]
    )
    lines = text.split("\n")
    for budget_lines in range(1, len(lines) + 1):
        taken, count = reflection_slice(text, len(lines), budget_lines, sections=True)
        assert count in (5, 6, 7, 8, len(lines)), (budget_lines, count)
        opened = sum(1 for line in taken.split("\n") if line.startswith("<thread"))
        closed = sum(1 for line in taken.split("\n") if line == "</thread>")
        assert opened == closed >= 1
    assert reflection_slice(text, len(lines), 3, sections=False)[1] == 3  # thread scope: lines as before


# --------------------------------------------------------------------------------------------
# 1. Observer batching across the threads of a resource
# --------------------------------------------------------------------------------------------


class RecordingObserver:
    """The offline observer, recording each request: the thread it is for, the threads its
    messages come from, and their message tokens."""

    def __init__(self) -> None:
        self.inner = OfflineObserver()
        self.name = "recording"
        self.requests: list[tuple[str | None, set[str | None], list[str]]] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.requests.append(
            (request.thread_id, {m.thread_id for m in request.messages}, [m.id for m in request.messages])
        )
        return await self.inner.observe(request)


def sync_resource_config(*, shared: bool = False, max_tokens_per_batch: int = 10_000) -> MemoryConfig:
    return MemoryConfig(
        scope="resource", share_threads_in_resource=shared,
        observation=ObservationConfig(message_tokens=400, buffer_tokens=False,
                                      max_tokens_per_batch=max_tokens_per_batch),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )


async def chat(memory: Memory, conv: Conversation, thread_id: str, turns: int, topic: str) -> None:
    for user_text, reply in chat_turns(turns):
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="u1",
                                       messages=[conv.user(f"[{topic}] {user_text}")])
        await turn.step([conv.assistant(f"[{topic}] {reply}")])
        await turn.end()
    await memory.settled()


@pytest.mark.parametrize("buffered", [False, True])
async def test_a_due_observation_takes_the_other_threads_that_are_nearly_due_along(buffered: bool) -> None:
    """``home`` holds more than half the threshold (not due on its own); ``work``'s observation
    observes it in the same cycle, in requests of its own, into its own section, with its cursor
    (main: ``home`` stayed unobserved until its own turn reached the threshold)."""
    observer = RecordingObserver()
    config = buffered_resource_config(observation_tokens=100_000) if buffered else sync_resource_config()
    memory = Memory("memory://", config=config, clock=fake_clock(), observer=observer)
    async with memory:
        conv = Conversation()
        await chat(memory, conv, "home", 4, "home")
        head = await memory.store.get_head("resource:u1")
        assert head is None or head.cursor("home") == 0, "home is not due on its own"
        await chat(memory, conv, "work", 8, "work")
        head = await memory.store.get_head("resource:u1")
        assert head is not None
        assert head.cursor("home") > 0, "home was observed in work's cycle"
        assert head.cursor("work") > 0
        home_ids = {m.id for m in await memory.store.list_messages("home")}
        for request_thread, message_threads, _ in observer.requests:
            assert message_threads == {request_thread}, "one thread's transcript per request"
        observed_home = [ids for tid, _, ids in observer.requests if tid == "home"]
        assert observed_home and set().union(*observed_home) <= home_ids
        newest_home_user = [m for m in await memory.store.list_messages("home") if m.role == "user"][-1]
        assert head.cursor("home") < (newest_home_user.seq or 0), "home's newest user message stays raw"
        sections = {tid: body for tid, body in split_sections(head.active_observations) if tid is not None}
        assert "[home]" in sections["home"] and "[home]" not in sections["work"]


async def test_a_resource_with_many_threads_observes_a_bounded_number_per_cycle() -> None:
    """Ten siblings are each past half the threshold; one due observation of ``work`` takes at
    most ``max_tokens_per_batch`` tokens of them (and at most MAX_OTHER_THREADS threads), the
    largest first; the rest wait."""
    observer = RecordingObserver()
    events: list[EngineEvent] = []
    memory = Memory("memory://", config=sync_resource_config(max_tokens_per_batch=600), clock=fake_clock(),
                    observer=observer, on_event=events.append)
    async with memory:
        conv = Conversation()
        for i in range(10):
            await chat(memory, conv, f"side{i}", 4, f"side{i}")
        assert not observer.requests, "no sibling is due on its own"
        for _ in range(12):  # up to work's first observation cycle
            await chat(memory, conv, "work", 1, "work")
            head = await memory.store.get_head("resource:u1")
            assert head is not None
            if head.cursor("work") > 0:
                break
        assert head.cursor("work") > 0
        joined = {tid for tid, _, _ in observer.requests if tid != "work"}
        assert 1 <= len(joined) <= MAX_OTHER_THREADS
        side_tokens = {e.thread_id: e.data["tokens"] for e in events if e.kind == "observation-start"}
        assert set(side_tokens) == joined | {"work"}
        del side_tokens["work"]
        assert sum(side_tokens.values()) <= 600, side_tokens
        assert sum(1 for i in range(10) if head.cursor(f"side{i}") == 0) >= 10 - MAX_OTHER_THREADS


def test_choose_other_threads_takes_safe_prefixes_largest_first_within_the_cap() -> None:
    conv = Conversation()
    pending = [conv.assistant("looking it up"), conv.call("c1"), conv.result("c1", 20), conv.assistant("and now"),
               conv.call("c2")]
    chatty = [conv.user("one"), conv.assistant("two"), conv.user("three"), conv.assistant("four")]
    for seq, message in enumerate([*pending, *chatty], start=1):
        message.__dict__["seq"] = seq  # stored messages carry a seq
    windows = {"tools": pending, "chatty": chatty}
    counts = {"tools": [10] * len(pending), "chatty": [30] * len(chatty)}
    chosen = choose_other_threads(windows, counts, minimum=1, max_tokens=1000)
    by_thread = {p.thread_id: p for p in chosen}
    assert [m.id for m in by_thread["tools"].messages] == [m.id for m in pending[:4]], "the pending call stays"
    assert [m.id for m in by_thread["chatty"].messages] == [m.id for m in chatty[:2]], "the newest user stays raw"
    assert [p.thread_id for p in chosen] == ["tools", "chatty"], "ordered by oldest message"
    # the cap: the largest (chatty, 60 tokens) first; tools' longest prefix that fits the rest
    capped = choose_other_threads(windows, counts, minimum=1, max_tokens=80)
    assert {p.thread_id: p.tokens for p in capped} == {"chatty": 60, "tools": 10}
    assert choose_other_threads(windows, counts, minimum=50, max_tokens=1000)[0].thread_id == "chatty"
    assert len(choose_other_threads(windows, counts, minimum=1, max_tokens=1000, max_threads=1)) == 1


# --------------------------------------------------------------------------------------------
# 2. With sharing on, the other threads shown in a context count toward its threshold
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("buffered", [False, True])
async def test_with_sharing_the_other_conversations_count_toward_the_threshold(buffered: bool) -> None:
    """Three threads take turns; each one's context shows the others' unobserved messages. Their
    tokens count toward the threshold, so a context (raw messages + the other-conversations
    block) stays within the threshold and one turn (main: up to ~980 tokens at a 400 threshold,
    each thread observing only when its own messages reached it)."""
    config = (
        MemoryConfig(scope="resource", share_threads_in_resource=True,
                     observation=ObservationConfig(message_tokens=400),
                     reflection=ReflectionConfig(observation_tokens=100_000))
        if buffered else sync_resource_config(shared=True)
    )
    memory = Memory("memory://", config=config, clock=fake_clock())
    async with memory:
        conv = Conversation()
        await chat(memory, conv, "a", 6, "a")
        sizes: list[int] = []
        for _ in range(8):
            for tid in ("a", "b", "c"):
                await chat(memory, conv, tid, 1, tid)
                context = await memory.get_context(tid)
                raw = memory.counter.count_messages(context.raw_messages)
                block = sum(
                    memory.counter.count_text(m.text) for m in context.system_messages
                    if "START_OTHER_CONVERSATIONS_BLOCK" in m.text
                )
                sizes.append(raw + block)
        assert any(size > 0 for size in sizes)
        assert max(sizes) <= 400 + 100, sizes  # the threshold and one turn (~85 tokens)
        head = await memory.store.get_head("resource:u1")
        assert head is not None and head.cursor("b") > 0 and head.cursor("c") > 0


async def test_the_block_counts_only_when_sharing_is_on() -> None:
    """Without sharing nothing of the other threads is shown, so nothing of them counts: a thread
    below its threshold is not observed because a sibling is large."""
    observer = RecordingObserver()
    memory = Memory("memory://", config=sync_resource_config(shared=False), clock=fake_clock(), observer=observer)
    async with memory:
        conv = Conversation()
        await chat(memory, conv, "a", 6, "a")
        await chat(memory, conv, "b", 2, "b")
        before = len(observer.requests)
        await chat(memory, conv, "a", 1, "a")
        assert len(observer.requests) == before, "a's own window is below the threshold: no cycle"


async def test_a_buffered_reflection_states_now_on_the_users_clock_too() -> None:
    """The background reflection's request carries the zone as well (resource scope, messages in
    +09:00): "now" is 23:xx in Tokyo, not 14:xx UTC (main: no background reflection in resource
    scope, and the reflector stated UTC)."""
    start = datetime(2025, 6, 15, 14, 0, tzinfo=timezone.utc)
    model = ScriptedModel([SHORT], repeat_last=True)
    clock = FakeClock(start + timedelta(minutes=50))
    memory = Memory("memory://", config=buffered_resource_config(), clock=clock,
                    reflector=LLMReflector(model, count_tokens=len))
    async with memory:
        conv = Conversation(start)
        for _ in range(3):
            for topic in ("work", "home"):
                for user_text, reply in chat_turns(8):
                    user = conv.user(f"[{topic}] {user_text}")
                    assistant = conv.assistant(f"[{topic}] {reply}")
                    turn = await memory.begin_turn(
                        thread_id=topic, resource_id="u1",
                        messages=[user.model_copy(update={"created_at": user.created_at.astimezone(TOKYO)})],
                    )
                    await turn.step([assistant.model_copy(update={"created_at": assistant.created_at.astimezone(TOKYO)})])
                    await turn.end()
                    await memory.settled()
            if model.requests:
                break
    assert model.requests, "a background reflection ran"
    line = _now_line(model)
    assert "23:50" in line and "UTC+09:00" in line, line


async def test_the_other_threads_are_read_from_their_own_cursors_and_none_is_missed() -> None:
    """The other threads are read in one store call, each from its own cursor in the record (a
    thread without one, new or never observed, whole): nothing observed is read again, and no
    thread is missed."""
    memory = Memory("memory://", config=sync_resource_config(shared=True), clock=fake_clock())
    async with memory:
        conv = Conversation()
        await chat(memory, conv, "a", 6, "a")
        await chat(memory, conv, "b", 6, "b")
        thread_a = await memory.get_thread("a")
        head = await memory.store.get_head("resource:u1")
        assert head is not None and head.cursor("a") > 0 and head.cursor("b") > 0
        reads: list[tuple[dict[str, int], str | None]] = []
        read_after = memory.store.list_resource_messages_after

        async def spy(resource_id: str, cursors: Mapping[str, int], *, exclude_thread_id: str | None = None) -> list[Message]:
            reads.append((dict(cursors), exclude_thread_id))
            return await read_after(resource_id, cursors, exclude_thread_id=exclude_thread_id)

        memory.store.list_resource_messages_after = spy  # type: ignore[method-assign]
        others = await read_other_threads(memory.engine.core, thread_a, head)
        assert reads == [({"a": head.cursor("a"), "b": head.cursor("b")}, "a")], "one call, every cursor"
        assert set(others.windows) == {"b"}
        await chat(memory, conv, "c", 1, "c")  # new: no cursor yet
        others = await read_other_threads(memory.engine.core, thread_a, head)
        assert set(others.windows) == {"b", "c"} and others.windows["c"]
        b_unobserved = [m for m in await memory.store.list_messages("b") if (m.seq or 0) > head.cursor("b")]
        assert [m.id for m in others.windows["b"]] == [m.id for m in b_unobserved if not m.is_marker_only]
        assert others.block_tokens > 0


async def test_the_block_tokens_match_the_rendered_block_and_are_remembered_per_thread() -> None:
    memory = Memory("memory://", config=sync_resource_config(shared=True), clock=fake_clock())
    async with memory:
        conv = Conversation()
        others = [
            (f"t{i}", [conv.user(f"[t{i}] {u}") if j % 2 == 0 else conv.assistant(f"[t{i}] {u}")
                       for j, (u, _) in enumerate(chat_turns(i + 1))])
            for i in range(5)
        ]
        core = memory.engine.core
        exact = memory.counter.count_text(other_conversations_block(others) or "")
        counted = other_block_tokens(core, others)
        assert abs(counted - exact) <= 2 * len(others), (counted, exact)
        remembered = len(core.other_block_memo)
        assert other_block_tokens(core, others) == counted and len(core.other_block_memo) == remembered
        assert other_block_tokens(core, []) == 0


async def test_a_synchronous_cycle_leaves_the_other_threads_to_a_running_buffer() -> None:
    """While a buffer of the resource holds its lease (here: another process's), a synchronous
    observation observes its own thread only; the buffer takes the others along when it lands
    (observing them first would throw its call away). Once the lease is free they join again."""
    observer = RecordingObserver()
    config = MemoryConfig(
        scope="resource",
        observation=ObservationConfig(message_tokens=400, block_after=1.0),
        reflection=ReflectionConfig(observation_tokens=100_000),
    )
    clock = fake_clock()
    memory = Memory("memory://", config=config, clock=clock, observer=observer)
    async with memory:
        conv = Conversation()
        await chat(memory, conv, "home", 4, "home")
        head = await memory.store.get_head("resource:u1")
        assert head is not None and head.cursor("home") == 0, "home is not due on its own"
        held = await memory.store.acquire_lease("buffer-observation:resource:u1", "elsewhere", ttl_s=3600,
                                                now=clock.now())
        assert held is not None
        for _ in range(12):
            await chat(memory, conv, "work", 1, "work")
            head = await memory.store.get_head("resource:u1")
            assert head is not None
            if head.cursor("work") > 0:
                break
        assert head.cursor("work") > 0, "work observed synchronously (no buffer could run)"
        assert head.cursor("home") == 0, "home left to the running buffer"
        await memory.store.release_lease("buffer-observation:resource:u1", "elsewhere")
        for _ in range(12):
            await chat(memory, conv, "work", 1, "work")
            head = await memory.store.get_head("resource:u1")
            assert head is not None
            if head.cursor("home") > 0:
                break
        assert head.cursor("home") > 0, "with the lease free, home joins a cycle again"

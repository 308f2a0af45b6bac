"""A lighter turn (issue 18): the shortcuts a step takes give exactly what the full rules give.

* :func:`~obsmem.om.selection.plain_conversation` lets a step skip
  :func:`~obsmem.om.text.own.drop_obsmem_messages` and
  :func:`~obsmem.om.text.own.conversation_view`: wherever it says yes, they return the same
  objects in the same order.
* A message keeps its parts' token cost on itself (text, reasoning and data parts only): every
  count equals a fresh counter's, also after a copy with other parts or another role, and the
  memo never shows in equality, dumps or repr.
"""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.models.testing import FunctionModel
from obsmem.om.buffering import StepResult
from obsmem.om.engine import Quiet
from obsmem.om.context import build_context
from obsmem.om.text import own
from obsmem.om.selection import observable_messages, plain_conversation
from obsmem.om.text.own import CONTINUATION, MARKER_KEY, conversation_messages, drop_obsmem_messages
from obsmem.tokens import TokenCounter
from obsmem.types import DataPart, Message, ReasoningPart, TextPart, Thread, ToolCallPart, ToolResultPart

_GAP = "<system-reminder>3 hours later — Mon Jun 16 2025 12:00 UTC</system-reminder>"

#: One of each kind a window can hold, obsmem's own messages (with and without the marker)
#: among them.
SAMPLES: list[Message] = [
    Message.user("hello"),
    Message.assistant("hi there"),
    Message.user("note <system-reminder>from a framework</system-reminder> the rest"),
    Message.user(CONTINUATION),
    Message.user(_GAP),
    Message(role="user", parts=(TextPart(text=CONTINUATION), TextPart(text="and a question"))),
    Message.system("You are a helpful assistant."),
    Message.system("<observations>\n* a line\n</observations>"),
    Message.system("* a middle chunk, no marker"),
    Message.assistant("from a context", metadata={MARKER_KEY: "continuation"}),
    Message.assistant("app metadata", metadata={MARKER_KEY: {"instructions": {}}}),
    Message(role="assistant", parts=(DataPart(name="om-observation-start", data={"cycle_id": "c"}),)),
    Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"}),)),
    Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="search", result="found"),)),
    Message(role="assistant", parts=(ReasoningPart(text="thinking"), TextPart(text="answer"))),
    Message.user("<system-reminder>unclosed"),
]


def _windows() -> list[list[Message]]:
    """Every ordered pair and triple of samples, and each sample alone."""
    pairs = itertools.permutations(SAMPLES, 2)
    triples = itertools.islice(itertools.permutations(SAMPLES, 3), 0, None, 7)
    return [[m] for m in SAMPLES] + [list(p) for p in pairs] + [list(t) for t in triples]


def test_plain_conversation_means_the_full_rules_change_nothing() -> None:
    plain = 0
    for window in _windows():
        full = [m for m in conversation_messages(window) if m.role != "system" and not m.is_marker_only]
        assert observable_messages(window) == full
        if plain_conversation(window):
            plain += 1
            assert [id(m) for m in drop_obsmem_messages(window)] == [id(m) for m in window]
            assert [id(m) for m in conversation_messages(window)] == [id(m) for m in window]
    assert plain > 20  # the shortcut is taken for ordinary windows


def test_the_own_text_shortcuts_return_what_the_full_rules_return() -> None:
    plain = 0
    for window in _windows():
        assert drop_obsmem_messages(window) == own._drop_obsmem_messages(window)
        assert drop_obsmem_messages(iter(window)) == own._drop_obsmem_messages(window)
        assert conversation_messages(window) == own._conversation_messages(window)
        if plain_conversation(window):
            plain += 1
            assert [id(m) for m in own._drop_obsmem_messages(window)] == [id(m) for m in window]
            assert [id(m) for m in own._conversation_messages(window)] == [id(m) for m in window]
            returned = drop_obsmem_messages(window)
            assert returned is not window  # a new list: the caller's is never shared
    assert plain > 20


@pytest.mark.parametrize(
    "message",
    [SAMPLES[2], SAMPLES[3], SAMPLES[4], SAMPLES[5], SAMPLES[6], SAMPLES[9], SAMPLES[15]],
    ids=["reminder-in-text", "continuation", "gap", "merged-continuation", "system", "marked", "unclosed"],
)
def test_what_the_full_rules_may_change_is_never_plain(message: Message) -> None:
    assert not plain_conversation([Message.user("a"), message])


def test_context_from_a_plain_window_equals_the_full_rules() -> None:
    window = [m.model_copy(update={"seq": i + 1, "thread_id": "t"}) for i, m in enumerate(SAMPLES[:2] + SAMPLES[12:15])]
    assert plain_conversation(window)
    now = SAMPLES[0].created_at
    shortcut = build_context(None, window, thread_id="t", now=now, counter=TokenCounter())
    # The same window with a system message in front takes the full path; the raw tail is the same.
    full = build_context(None, [SAMPLES[6], *window], thread_id="t", now=now, counter=TokenCounter())
    assert shortcut.raw_messages == full.raw_messages
    assert shortcut.receipt is not None and full.receipt is not None
    assert shortcut.receipt.raw_message_ids == full.receipt.raw_message_ids
    assert shortcut.receipt.section_tokens["raw"] == full.receipt.section_tokens["raw"]


@pytest.mark.parametrize("exact", [True, False])
def test_a_message_counted_twice_counts_the_same_as_fresh(exact: bool) -> None:
    counter = TokenCounter(exact=exact)
    for message in SAMPLES:
        first = counter.count_message(message)
        assert counter.count_message(message) == first == TokenCounter(exact=exact, cache_size=0).count_message(message)
        # A copy with other parts or another role is counted for what it holds now.
        longer = message.model_copy(update={"parts": (*message.parts, TextPart(text="one more sentence here"))})
        assert counter.count_message(longer) == TokenCounter(exact=exact, cache_size=0).count_message(longer)
        as_system = message.model_copy(update={"role": "system"})
        assert counter.count_message(as_system) == TokenCounter(exact=exact, cache_size=0).count_message(as_system)


def test_the_memo_follows_the_estimator_and_never_shows() -> None:
    message = Message.user("The shipment to Lisbon left on Tuesday, invoice 4471 is filed.")
    twin = Message(**{name: getattr(message, name) for name in type(message).model_fields})
    exact, heuristic = TokenCounter(exact=True), TokenCounter(exact=False)
    assert exact.count_message(message) == TokenCounter(exact=True, cache_size=0).count_message(message)
    assert heuristic.count_message(message) == TokenCounter(exact=False, cache_size=0).count_message(message)
    assert exact.count_message(message) == TokenCounter(exact=True, cache_size=0).count_message(message)
    assert message == twin and twin == message
    assert message.model_dump() == twin.model_dump()
    assert repr(message) == repr(twin)


def test_a_tool_message_changed_by_a_new_message_is_counted_afresh() -> None:
    """A message is a value (:class:`~obsmem.types.Message`): a tool call's count is kept on its
    message like a text's, and a changed call (a new message, or a copy with new parts) is
    counted from its content. (Changing ``args`` in place is outside the contract: the count
    kept is the first one.)"""
    message = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c", tool_name="search", args={"q": "x"}),))
    counter = TokenCounter()
    before = counter.count_message(message)
    longer = ToolCallPart(tool_call_id="c", tool_name="search", args={"q": "a much longer query with many more words in it than before"})
    changed = message.model_copy(update={"parts": (longer,)})
    assert counter.count_message(changed) > before
    assert counter.count_message(changed) == TokenCounter().count_message(Message(role="assistant", parts=(longer,)))
    assert counter.count_message(message) == before


def test_a_copy_sharing_the_parts_is_counted_by_lookup_and_counts_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A store hands out copies of a message it decoded once (same parts tuple): a copy's count
    is found by the tuple's identity (no part hashed again) and equals a fresh count."""
    from obsmem import tokens

    counter = TokenCounter(exact=False)
    original = Message.user("the harbour invoice for batch 7 is due on Friday " * 20)
    first = counter.count_message(original)
    copy = original.model_copy(update={"metadata": {"x": 1}})
    copy.__dict__.pop("_obsmem_parts_cost", None)  # as decoded afresh: no memo of its own
    copy.__dict__.pop("_obsmem_count", None)
    fresh = TokenCounter(exact=False).count_message(Message.user(original.text))
    hashed: list[object] = []
    digest = tokens._part_digest
    monkeypatch.setattr(tokens, "_part_digest", lambda part: hashed.append(part) or digest(part))
    assert counter.count_message(copy) == first == fresh
    assert hashed == []
    # A message with other parts (same text, another tuple) is counted, not looked up wrongly.
    other = Message.user("short")
    assert counter.count_message(other) == TokenCounter(exact=False).count_message(other)


def test_contexts_built_from_the_same_record_share_no_mutable_metadata() -> None:
    """The observation messages are kept between steps and shared read-only: changing one's
    metadata raises (a copy is changeable), and no other context ever sees a change."""
    from datetime import UTC, datetime

    from obsmem.storage.contract import ObservationRecord

    record = ObservationRecord(
        id="omr_1", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1",
        active_observations="Date: Dec 1, 2026\n* 🔴 (09:00) User works on the harbour invoices.",
    )
    now = datetime(2026, 12, 2, tzinfo=UTC)
    first = build_context(record, [Message.user("hi")], thread_id="t1", now=now)
    second = build_context(record, [Message.user("hi")], thread_id="t1", now=now)
    assert [m.text for m in first.system_messages] == [m.text for m in second.system_messages]
    with pytest.raises(TypeError, match="read-only"):
        first.system_messages[0].metadata["mutated"] = True
    changed = first.system_messages[0].model_copy(deep=True)
    changed.metadata["mutated"] = True
    assert all("mutated" not in m.metadata for m in second.system_messages)
    third = build_context(record, [Message.user("hi")], thread_id="t1", now=now)
    assert all("mutated" not in m.metadata for m in third.system_messages)
    assert third.receipt is not None and third.receipt.context_hash == second.receipt.context_hash  # type: ignore[union-attr]


def test_a_kept_message_digest_follows_the_parts_and_the_role() -> None:
    """context_hash keeps each message's digest on it: a copy with other parts or another
    role hashes afresh, equal content hashes equal, and the memo never shows."""
    from obsmem.om.receipts import context_hash, message_digest

    first = Message.user("the harbour invoice")
    digest = message_digest(first)
    assert message_digest(Message.user("the harbour invoice")) == digest
    assert message_digest(first.model_copy(update={"parts": (TextPart(text="another"),)})) != digest
    assert message_digest(first.model_copy(update={"role": "assistant"})) != digest
    assert message_digest(first.model_copy(update={"metadata": {"x": 1}})) == digest
    assert first == Message.user("the harbour invoice", id=first.id, created_at=first.created_at)
    assert "_obsmem_digest" not in first.model_dump_json() and "_obsmem_digest" not in repr(first)
    # A tool message keeps its digest too (a message is a value): a changed call is a new
    # message, or a copy with new parts, and hashes afresh.
    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "x"}),))
    before = context_hash([first, call])
    assert context_hash([first, call]) == before
    other = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "y"})
    assert context_hash([first, call.model_copy(update={"parts": (other,)})]) != before
    assert context_hash([first, Message(role="assistant", parts=(other,))]) != before


@pytest.mark.anyio
async def test_a_message_saved_again_with_new_content_shows_as_saved(tmp_path: object) -> None:
    """begin_turn reads the window before saving and adds what it saved: a stored message sent
    again (same id) with new content is shown as saved, once, in its place."""
    from obsmem import Memory

    async with Memory("memory://") as memory:
        first = Message.user("my budget is 100 EUR", id="u1")
        turn = await memory.begin_turn(thread_id="t", resource_id="r", messages=[first])
        await turn.end([Message.assistant("Noted.", id="a1")])
        edited = Message.user("my budget is 120 EUR", id="u1")
        turn = await memory.begin_turn(thread_id="t", messages=[edited, Message.user("and now?", id="u2")])
        texts = [(m.id, m.text) for m in turn.context.raw_messages]
        await turn.end()
    assert texts == [("u1", "my budget is 120 EUR"), ("a1", "Noted."), ("u2", "and now?")]


# --------------------------------------------------------------------------------------------
# A boundary known quiet while its save commits is one the full step leaves alone
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("slow_observer", [False, True])
@pytest.mark.anyio
async def test_a_boundary_known_quiet_is_one_the_full_step_leaves_alone(tmp_path: Path, slow_observer: bool) -> None:
    """A turn on SQLite decides, while its save reaches the disk, whether the boundary is quiet
    (``Engine.quiet_step``: no read, no write) and then skips the step. Over a real buffered
    loop with tool calls, model switches, idle gaps, activations and reflections, every boundary
    it called quiet is one the full step (``advance_if_quiet``, run on the same state) leaves
    exactly as it is: no outcome, the same head, the same window, no store write, no work started.
    With a slow observer (each call takes 15 minutes of the memory's clock) adaptive buffering
    declines buffers a synchronous observation would overtake: those boundaries are quiet too."""
    clock = FakeClock(datetime(2025, 6, 15, 9, 0, tzinfo=UTC))
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=700),
        reflection=ReflectionConfig(observation_tokens=900),
    )
    observer: Any = "offline"
    if slow_observer:
        calls = [0]

        def slow(messages: list[Message], settings: object) -> str:
            calls[0] += 1
            clock.advance(900)
            return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (09:00) User tracks shipment batch {calls[0]}.\n</observations>"

        observer = FunctionModel(slow, name="test:slow-observer")
    memory = Memory(f"sqlite:///{tmp_path / 'quiet.db'}", config=config, clock=clock, observer=observer)
    engine = memory.engine
    predict, full = engine.quiet_step, engine.advance_if_quiet
    writes = _WriteCounter(memory.store)
    lifecycle = engine.buffered
    assert lifecycle is not None
    spawn, spawned = lifecycle.spawn, [0]

    def counted_spawn(*args: Any, **kwargs: Any) -> Any:
        spawned[0] += 1
        return spawn(*args, **kwargs)

    lifecycle.spawn = counted_spawn
    checked: list[bool] = []
    mismatches: list[str] = []

    async def checked_quiet(thread: Thread, **kwargs: Any) -> Quiet | None:
        growth = {k: (list(g.samples), g.last) for k, g in lifecycle._growth.items()}
        quiet = await predict(thread, **kwargs)
        if {k: (list(g.samples), g.last) for k, g in lifecycle._growth.items()} != growth:
            mismatches.append("the prediction changed the window-growth bookkeeping")
        if quiet is not None:
            before = (writes.count, spawned[0])
            step = await full(thread, **kwargs)
            if not isinstance(step, StepResult) or step.outcomes or (writes.count, spawned[0]) != before:
                mismatches.append(f"predicted quiet, the step did {step!r}")
            elif step.record is not quiet.result.record or [m.id for m in step.messages] != [
                m.id for m in quiet.result.messages
            ]:
                mismatches.append("predicted quiet, the step left another window")
        checked.append(quiet is not None)
        return quiet

    engine.quiet_step = checked_quiet  # type: ignore[method-assign]
    overtaken, declined_overtaken = lifecycle._overtaken, [0]

    def counted_overtaken(*args: Any) -> bool:
        declined = overtaken(*args)
        declined_overtaken[0] += declined
        return declined

    lifecycle._overtaken = counted_overtaken  # type: ignore[method-assign]
    models = ["openai:gpt-4o", "openai:gpt-4o", "anthropic:claude-sonnet-4-5", None]
    try:
        for i in range(110):
            clock.advance(3 * 3600 if i % 13 == 12 else 120)
            text = f"turn {i}: the shipment {i * 37} to Lisbon leaves on pier {i % 9}; " + "details " * 25
            turn = await memory.begin_turn(
                thread_id="t", resource_id="r", messages=[Message.user(text)], model=models[(i // 17) % 4]
            )
            if i % 5 == 0:
                call = Message(role="assistant", parts=(ToolCallPart(tool_call_id=f"c{i}", tool_name="track", args={"n": i}),))
                await turn.step([call])
                result = Message(role="tool", parts=(ToolResultPart(tool_call_id=f"c{i}", tool_name="track", result=f"pier {i}"),))
                await turn.step([result])
            await turn.step([Message.assistant(f"noted {i}: " + "the invoice is filed " * 8)])
            await turn.end()
            await asyncio.sleep(0)
            if i % 7 == 0:
                await memory.settled()
        events = await memory.list_generations("t")
    finally:
        await memory.aclose()
    assert mismatches == []
    assert checked.count(True) > 25  # many boundaries were known quiet (this loop buffers and activates often)
    if slow_observer:
        assert declined_overtaken[0] > 0  # the loop reached boundaries where a buffer was declined as overtaken
    assert checked.count(False) > 10  # and the others went through the step (activations, buffers)
    assert len(events) > 1  # the loop reflected: the check saw more than one generation


class _WriteCounter:
    """Counts the SQLite store's write transactions: every write method goes through ``_write``
    but the early save, which runs its own (both wrapped on the instance; wrapping the public
    methods would turn the store's combined writes off, which stand in for them only while they
    are its own)."""

    WRITES = ("_write", "save_messages_marked_early")

    def __init__(self, store: Any) -> None:
        self.count = 0
        for name in self.WRITES:
            method = getattr(store, name, None)
            if method is not None:
                setattr(store, name, self._counted(method))

    def _counted(self, method: Any) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await method(*args, **kwargs)

        return counted


@pytest.mark.parametrize("max_turn_wait", [None, 5.0])
@pytest.mark.anyio
async def test_knowing_a_boundary_quiet_changes_no_buffering_decision(tmp_path: Path, max_turn_wait: float | None) -> None:
    """The same scripted loop with and without the quiet shortcut leaves the same window-growth
    bookkeeping (what adaptive buffering decides by) and the same buffers, observations and
    contexts: the shortcut only skips work, it never counts a boundary twice or not at all."""

    async def run(shortcut: bool, folder: Path) -> tuple[object, ...]:
        clock = FakeClock(datetime(2025, 6, 15, 9, 0, tzinfo=UTC))
        config = MemoryConfig(
            observation=ObservationConfig(message_tokens=700), reflection=ReflectionConfig(observation_tokens=900)
        )
        memory = Memory(f"sqlite:///{folder / 'm.db'}", config=config, clock=clock, max_turn_wait=max_turn_wait)
        if not shortcut:
            async def never(*_: Any, **__: Any) -> None:
                return None

            memory.engine.quiet_step = never  # type: ignore[method-assign,assignment]
        lifecycle = memory.engine.buffered
        assert lifecycle is not None
        contexts = []
        try:
            for i in range(40):
                clock.advance(120)
                text = f"turn {i}: the shipment {i * 37} to Lisbon leaves on pier {i % 9}; " + "details " * 25
                now = clock.now()
                turn = await memory.begin_turn(
                    thread_id="t", resource_id="r", messages=[Message.user(text, created_at=now)]
                )
                reply = Message.assistant(f"noted {i}: " + "the invoice is filed " * 8, created_at=now)
                context = await turn.step([reply])
                contexts.append([m.text for m in context.messages])
                await turn.end()
                await memory.settled()
            growth = {k: (list(g.samples), g.last) for k, g in lifecycle._growth.items()}
            record = await memory.get_record("t")
        finally:
            await memory.aclose()
        assert record is not None
        return growth, record.active_observations, record.threads["t"].cursor, contexts

    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    assert await run(True, tmp_path / "on") == await run(False, tmp_path / "off")

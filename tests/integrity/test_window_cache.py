"""A turn does not read its thread again when nothing changed, and sees every change when
something did (issue 18, "a lighter turn").

On SQLite an engine keeps the window (record and unobserved messages) it last read or wrote with
the store's mark for it (:mod:`obsmem.om.windows`): a quiet boundary reads one mark row instead of
the window, and a step whose save finds the kept mark reads nothing. Here a second ``Memory`` on
the same file (another process, in effect) changes the thread between the first one's boundaries
— a new message, an edited one, a forgotten one, an observation — and every change is in the
first one's next context.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.errors import ThreadNotFoundError
from obsmem.om.context import ContextWindow

pytestmark = pytest.mark.anyio

QUIET = MemoryConfig(
    observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=40_000),
)


def texts(context: ContextWindow) -> str:
    return "\n".join(m.text for m in context.messages)


def observed(context: ContextWindow) -> str:
    return "\n".join(m.text for m in context.system_messages)


def counting(memory: Memory) -> Counter[str]:
    """Count the store calls ``memory`` makes (wrapping its store object's methods). Not the plain
    ``save_messages``: the store's combined saves stand in for it only while it is the store's own
    (one replaced on the instance is called instead), so wrapping it would change the path."""
    calls: Counter[str] = Counter()
    store = memory.store
    for name in ("read_window", "read_window_marked", "window_mark", "list_messages",
                 "save_messages_marked", "save_messages_marked_early"):
        real = getattr(store, name)

        def wrapped(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        setattr(store, name, wrapped)
    return calls


async def test_a_quiet_turn_reads_a_mark_not_the_window(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'w.db'}", config=QUIET)
    for i in range(3):
        async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"q{i}")]) as turn:
            await turn.step([Message.assistant(f"a{i}")])
    calls = counting(memory)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("q3")])
    context = await turn.step([Message.assistant("a3")])
    await turn.end()
    assert calls == Counter(window_mark=1, save_messages_marked_early=2), calls
    assert [m.text for m in context.messages] == [f"{r}{i}" for i in range(4) for r in "qa"]
    await memory.aclose()


async def test_another_writers_changes_are_in_the_next_context(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    mine, other = Memory(url, config=QUIET), Memory(url, config=QUIET)
    first = Message.user("My locker code is 4417.", id="m-first")
    async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[first]) as turn:
        await turn.step([Message.assistant("Noted: 4417.", id="m-reply")])
    async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("And my desk is 12.")]) as turn:
        await turn.step([Message.assistant("Desk 12, noted.")])

    # Between two turns: an edit, a forgotten value, a new message, all by the other writer.
    await other.save_messages("t1", [first.model_copy(update={"parts": Message.user("My locker code is 9902.").parts})])
    await other.forget("Desk 12", thread_id="t1")
    await other.save_messages("t1", [Message.user("(from the web app) Call me Sam.")])
    turn = await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("What do you know?")])
    shown = texts(turn.context)
    assert "9902" in shown and "4417" not in shown.split("Noted")[0]
    assert "Desk 12" not in shown and "Call me Sam" in shown

    # Between a turn's begin and its step: the other writer's message is in the step's context.
    await other.save_messages("t1", [Message.user("(from the web app) I prefer mornings.")])
    context = await turn.step([Message.assistant("Here is what I know.")])
    assert "I prefer mornings" in texts(context)
    await turn.end()
    await mine.aclose()
    await other.aclose()


async def test_an_observation_made_elsewhere_is_in_the_next_step(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=30_000, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=40_000),
    )
    mine, other = Memory(url, config=config), Memory(url, config=config)

    async def talk(i: int) -> None:
        text = f"On day {i} the shipment to Rotterdam number {1000 + i} was delayed by the customs office."
        async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant(f"Understood, shipment {1000 + i} delayed.")])

    await talk(0)
    assert (await mine.observe("t1")).applied  # a head, kept by ``mine`` with its version
    for i in (1, 2, 3):
        await talk(i)
    turn = await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("Anything else?")])
    assert "1000" in observed(turn.context) and "1002" not in observed(turn.context)
    assert (await other.observe("t1")).applied
    context = await turn.step([Message.assistant("Let me check.")])
    # The record the other writer moved on is the one shown, and what it observed left the tail.
    assert "1002" in observed(context)
    assert not any("1002" in m.text for m in context.raw_messages)
    await turn.end()
    await mine.aclose()
    await other.aclose()


async def test_after_its_own_observation_a_turn_reads_a_mark_and_shows_what_it_wrote(tmp_path: Path) -> None:
    memory = Memory(f"sqlite:///{tmp_path / 'w.db'}", config=QUIET)
    for i in range(3):
        text = f"Invoice {4400 + i} for the harbour crane repair was approved by Dana on Monday."
        async with await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant(f"Noted invoice {4400 + i}.")])
    assert (await memory.observe("t1")).applied  # this engine's own write of the head
    calls = counting(memory)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("Which invoices?")])
    # (The input check reads the thread's newest messages: the window holds none after it.)
    assert calls["window_mark"] == 1 and not calls["read_window_marked"] and not calls["read_window"], calls
    assert "4402" in observed(turn.context)
    assert [m.text for m in turn.context.raw_messages] == ["Which invoices?"]
    await turn.end()
    await memory.aclose()


async def test_a_kept_window_is_always_what_a_read_finds(tmp_path: Path) -> None:
    """Buffering, activation and their markers all write while turns run: after
    every boundary, the window the engine keeps equals a plain read of the store."""
    from obsmem.storage.contract import read_window

    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=600), reflection=ReflectionConfig(observation_tokens=2000)
    )
    memory = Memory(f"sqlite:///{tmp_path / 'w.db'}", config=config)
    core = memory.engine.core
    lineage = "thread:t1"
    checked = 0
    for i in range(40):
        text = f"Day {i}: crate {7000 + i} left the Antwerp depot for Lyon, driver Noor, pallet count {i % 7 + 2}."
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(text)])
        await turn.step([Message.assistant(f"Logged crate {7000 + i}.")])
        await turn.end()
        await memory.settled()
        if (lineage, "t1") in core.windows._kept:
            kept = core.windows._kept[(lineage, "t1")][1]
            assert kept == await read_window(memory.store, lineage, "t1"), i
            checked += 1
    record = await memory.get_record("t1")
    assert record is not None and record.observation_tokens > 0 and checked >= 30  # observed, mostly kept
    marked = [m for m in await memory.list_messages("t1") if any(p.type == "data" for p in m.parts)]
    assert marked  # markers were written on messages along the way
    await memory.aclose()


# -- found by a hostile review of the kept windows (each failed before its fix) ------------------


async def test_the_apps_own_objects_are_never_kept_and_a_contexts_messages_are_read_only(tmp_path: Path) -> None:
    """An app that changes its own message objects after saving them (a reused dict, a tool
    call's arguments) does not change what later contexts show: they show what was stored. A
    context's messages are shared by later contexts, so they refuse changes."""
    from obsmem.types import ToolCallPart, ToolResultPart

    memory = Memory(f"sqlite:///{tmp_path / 'w.db'}", config=QUIET)
    user = Message.user("book a table", metadata={"channel": "web"})
    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="book", args={"people": 2}),))
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="book", result={"ok": True}),))
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
    await turn.step([call])
    user.metadata["channel"] = "changed by the app"
    call.parts[0].args["people"] = 99  # type: ignore[index]
    context = await turn.step([result])
    shown = {m.id: m for m in context.messages}
    assert shown[user.id].metadata == {"channel": "web"}
    assert shown[call.id].tool_calls[0].args == {"people": 2}
    with pytest.raises(TypeError):
        shown[user.id].metadata["seen"] = True
    with pytest.raises(TypeError):
        shown[call.id].tool_calls[0].args["people"] = 3  # type: ignore[index]
    copy = shown[user.id].model_copy(deep=True)
    copy.metadata["seen"] = True  # a deep copy is the app's to change
    again = {m.id: m for m in (await memory.get_context("t1")).messages}
    assert again[user.id].metadata == {"channel": "web"}
    await turn.end()
    await memory.aclose()


async def test_a_steps_context_holds_what_json_kept_as_a_read_would(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from obsmem.types import ToolCallPart, ToolResultPart

    url = f"sqlite:///{tmp_path / 'w.db'}"
    memory = Memory(url, config=QUIET)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("rows?")])
    call = Message(
        role="assistant", metadata={"tags": ("a", "b")},
        parts=(ToolCallPart(tool_call_id="c1", tool_name="rows", args={"ids": (1, 2)}),),
    )
    result = Message(
        role="tool", parts=(ToolResultPart(
            tool_call_id="c1", tool_name="rows", result={"when": datetime(2025, 5, 1, tzinfo=UTC), "rows": (1, 2)}
        ),),
    )
    await turn.step([call])
    context = await turn.step([result])
    fresh = Memory(url, config=QUIET)
    read = await fresh.get_context("t1")
    assert [m.model_dump() for m in context.raw_messages] == [m.model_dump() for m in read.raw_messages]
    assert json.dumps([m.tool_results[0].result for m in context.raw_messages if m.tool_results])  # JSON, as stored
    await turn.end()
    await memory.aclose()
    await fresh.aclose()


async def test_a_store_subclass_that_saves_its_own_way_is_called(tmp_path: Path) -> None:
    import re

    from obsmem.storage import SQLiteStore

    class Redacting(SQLiteStore):
        async def save_messages(self, thread_id: str, messages: list[Message]) -> list[Message]:
            clean = [
                m.model_copy(update={"parts": Message.user(re.sub(r"(\d{4} ){3}\d{4}", "[card]", m.text)).parts})
                for m in messages
            ]
            return await super().save_messages(thread_id, clean)

    memory = Memory(Redacting(tmp_path / "w.db"), config=QUIET)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("card 4111 1111 1111 1111")])
    context = await turn.step([Message.assistant("ok")])
    assert [m.text for m in await memory.list_messages("t1")] == ["card [card]", "ok"]
    assert "4111" not in texts(context) and "4111" not in texts(turn.context)
    await turn.end()
    await memory.aclose()


async def test_a_head_made_anew_after_a_reset_elsewhere_shows_every_message(tmp_path: Path) -> None:
    """Another process deletes the thread's observations (its lineage) while the thread stays;
    this engine then makes a fresh head (cursor 0): every message is unobserved again, none is
    lost from the window this engine kept (a head written over another head than the kept one's
    is no reason to keep the window)."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    admin, mine = Memory(url, config=QUIET), Memory(url, config=QUIET)
    for i in range(3):
        async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"invoice {4400 + i}")]) as turn:
            await turn.step([Message.assistant(f"noted {4400 + i}")])
    assert (await mine.observe("t1")).applied
    async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("and 4500?")]) as turn:
        assert [m.text for m in turn.context.raw_messages] == ["and 4500?"]
    await admin.store.delete_lineage("thread:t1")
    await mine.reflect("t1")  # makes a fresh head before it reads
    raw = [m.text for m in (await mine.get_context("t1")).raw_messages]
    assert raw == [m.text for m in (await admin.get_context("t1")).raw_messages]
    assert "invoice 4400" in raw and len(raw) == 7
    await admin.aclose()
    await mine.aclose()


async def test_a_thread_deleted_elsewhere_leaves_no_kept_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    mine, other = Memory(url, config=QUIET), Memory(url, config=QUIET)
    async with await mine.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("my PIN is 1234")]) as turn:
        await turn.step([Message.assistant("ok")])
    assert len(mine.engine.core.windows) == 1
    await other.delete_thread("t1")
    with pytest.raises(ThreadNotFoundError):
        await mine.get_context("t1")
    assert len(mine.engine.core.windows) == 0
    await mine.aclose()
    await other.aclose()


def test_kept_windows_are_bounded_by_characters_too() -> None:
    from obsmem.om.windows import Windows
    from obsmem.storage import MemoryStore

    windows = Windows(MemoryStore(), max_chars=10_000)
    big = [Message.user("x" * 3_000, id=f"m{i}").model_copy(update={"seq": i + 1}) for i in range(3)]
    for n in range(4):
        windows._keep(("thread:t", f"t{n}"), (1, 1, None, None), (None, list(big[:1])))
    assert len(windows) == 3  # 3 × 3,000 characters fit in 10,000; the oldest went
    windows._keep(("thread:t", "huge"), (1, 1, None, None), (None, [Message.user("y" * 20_000)]))
    assert len(windows) == 3 and ("thread:t", "huge") not in windows._kept

"""A memory model down for hours leaves more messages pending than an engine keeps in memory
(:data:`obsmem.om.windows.MAX_MESSAGES`). Every turn then goes on without its memory work and shows
the newest of them, cut to the raw limit. What such a turn reads and counts must be what its cut
needs, not the whole backlog: before, each of its boundaries read and decoded every pending
message again (three whole-window reads a turn: ~0.4 s a turn at 10,000 pending, ~0.9 s at
20,000, while ``max_turn_wait`` promised 0.05 s), and counted all of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Message
from obsmem.om.windows import MAX_MESSAGES

from tests.integrity.test_pending_window_work import _Tally, backlog, behind

pytestmark = pytest.mark.anyio

PENDING = MAX_MESSAGES + 4_000


async def test_a_turn_past_the_kept_window_reads_and_counts_what_its_cut_needs(tmp_path: Path) -> None:
    async with behind(tmp_path) as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("first")])
        await turn.step([Message.assistant("ok")])
        await turn.end()

        tally = _Tally(memory)
        shown: list[int] = []
        for i in range(3):
            turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
            assert turn.context.messages[-1].text == f"question {i}", "the input is shown"
            assert turn.context.trimmed > PENDING - 1_000, "the window is cut to the raw limit"
            shown.append(len(turn.context.raw_messages) + turn.context.trimmed)
            context = await turn.step([Message.assistant(f"answer {i}")])
            assert context.raw_messages[-1].text == f"answer {i}"
            assert len(context.raw_messages) + context.trimmed == shown[-1] + 1, "every pending message is counted in"
            await turn.end()
        boundaries = 6
        # Before: ~36,000 rows read a turn (the whole window, three times) and ~12,000 messages
        # counted a boundary; now the newest few hundred, whatever is pending.
        assert tally.rows / boundaries < 2_000, f"{tally.rows} rows read in {boundaries} boundaries"
        assert tally.counted / boundaries < 3_000, f"{tally.counted} messages counted in {boundaries} boundaries"
        # one more pending message a turn (its question and answer, less the one observed: none)
        assert shown == [shown[0], shown[0] + 2, shown[0] + 4]
        stored = await memory.list_messages("t1")
        assert len([m for m in stored if not m.is_marker_only]) == PENDING + 8, "nothing pending is lost"


async def test_the_cut_keeps_the_newest_question_and_all_after_it_however_long(tmp_path: Path) -> None:
    """A tool loop longer than the raw limit since the newest question: the cut never falls after
    that question, so the tail read goes back far enough to reach it."""
    async with behind(tmp_path) as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("look everything up")])
        answers = [Message.assistant(f"Step {i}: I looked up shipment {i} and its invoice; noted.") for i in range(900)]
        context = await turn.step(answers)
        raw = [m.text for m in context.raw_messages]
        assert "look everything up" in raw, "the question the loop answers stays in view"
        assert raw[raw.index("look everything up") :][-900:] == [m.text for m in answers]
        await turn.end()


async def test_the_newest_messages_are_cut_where_the_whole_window_would_be(tmp_path: Path) -> None:
    """Read alone, the newest messages of a long window are cut exactly as the whole window is:
    the same messages kept (tool calls with their results, the cut before a user message) and the
    same count left out."""
    from obsmem.om.selection import observable_messages
    from obsmem.types import ToolCallPart, ToolResultPart

    async with behind(tmp_path) as memory:
        await backlog(memory, "t1", PENDING)
        loops: list[Message] = []
        for i in range(300):  # tool loops at the newest end, where the cut falls
            loops += [
                Message.user(f"Check order {i} and its refund, please."),
                Message(role="assistant", parts=(
                    ToolCallPart(tool_call_id=f"a{i}", tool_name="order", args={"id": i}),
                    ToolCallPart(tool_call_id=f"b{i}", tool_name="refund", args={"id": i}),
                )),
                Message(role="tool", parts=(ToolResultPart(tool_call_id=f"a{i}", tool_name="order", result=f"order {i}: shipped"),)),
                Message(role="tool", parts=(ToolResultPart(tool_call_id=f"b{i}", tool_name="refund", result="none"),)),
                Message.assistant(f"Order {i} shipped; no refund is due."),
            ]
        await memory.store.save_messages("t1", loops)
        thread = await memory.get_thread("t1")
        engine = memory.engine
        record, window = await engine.core.stored_window(thread)  # read whole: now known too long to keep
        whole = engine.trim_window(thread, record, observable_messages(window))
        _, read, cut = await engine.behind_window(thread)
        assert len(read) < 2_000, "only the newest messages were read"
        assert [m.id for m in cut.kept] == [m.id for m in whole.kept]
        assert cut.trimmed == whole.trimmed > PENDING
        assert cut.kept[0].role == "user"


async def test_get_context_past_the_kept_window_reads_what_its_cut_needs(tmp_path: Path) -> None:
    """``Memory.get_context`` while the work is behind cuts the window as a turn does: of a window
    too long to keep, the newest messages only are read (before: the whole window, each call)."""
    async with behind(tmp_path) as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("where is my parcel?")])
        await turn.end([Message.assistant("On its way.")])
        tally = _Tally(memory)
        context = await memory.get_context("t1")
        assert [m.text for m in context.raw_messages][-2:] == ["where is my parcel?", "On its way."]
        assert context.trimmed > PENDING - 1_000
        assert tally.rows < 2_000, f"{tally.rows} rows read"


async def test_a_turn_with_a_model_failing_for_good_does_not_read_the_backlog_itself(tmp_path: Path) -> None:
    """A memory model that fails at once (a revoked key: no retries) ends each boundary's work
    before the next: every boundary then begins memory work again. For a window too long to keep
    that work reads the whole window, in the background; the turn itself does not (before: it
    read it inline, every boundary, to tell whether the boundary was quiet)."""
    import asyncio

    from obsmem.errors import ModelRequestError

    def revoked(messages: list[Message], settings: object) -> str:
        raise ModelRequestError("HTTP 401: invalid API key")

    async with behind(tmp_path, revoked) as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("first")])
        await turn.end([Message.assistant("ok")])
        await memory.settled()

        mine = asyncio.current_task()
        read = [0]
        store = memory.store
        for name in ("list_messages", "read_window", "read_window_marked", "get_messages"):
            method = getattr(store, name, None)
            if method is None:
                continue

            def counted(method: object = method) -> object:
                async def call(*args: object, **kwargs: object) -> object:
                    result = await method(*args, **kwargs)  # type: ignore[operator]
                    if asyncio.current_task() is mine:  # the turn's own reads, not its background work's
                        for value in result if isinstance(result, tuple) else (result,):
                            if isinstance(value, list):
                                read[0] += len(value)
                    return result

                return call

            setattr(store, name, counted())
        for i in range(3):
            turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
            assert turn.context.messages[-1].text == f"question {i}"
            await turn.step([Message.assistant(f"answer {i}")])
            await turn.end()
            await memory.settled()
        assert read[0] / 6 < 2_000, f"{read[0]} rows read by the turns themselves in 6 boundaries"


async def test_memory_work_backing_off_reads_the_backlog_once_a_boundary(tmp_path: Path) -> None:
    """While the observer backs off after failing (a revoked key), each boundary's memory work
    still finds the window over its threshold, reads it, and skips the call. It reads it once:
    before, the observation step read it whole twice more (its own read of the window, then the
    threshold step's read after it) only to find the backoff."""
    from obsmem.errors import ModelRequestError

    def revoked(messages: list[Message], settings: object) -> str:
        raise ModelRequestError("HTTP 401: invalid API key")

    async with behind(tmp_path, revoked, failure_policy="warn") as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("first")])
        await turn.end([Message.assistant("ok")])
        await memory.settled()
        tally = _Tally(memory)
        for i in range(3):
            turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
            await turn.step([Message.assistant(f"answer {i}")])
            await turn.end()
            await memory.settled()
        assert tally.rows / 6 < 1.5 * PENDING, f"{tally.rows} rows read in 6 boundaries ({PENDING} pending)"

"""A memory model failing for a long time leaves thousands of messages pending: every turn then
goes on without its memory work and shows the newest of them, cut to the raw limit. What such a
turn does must not grow with what is pending beyond what its cut needs: the window the engine
keeps is not read from the store again at every boundary, and no context of the whole window is
built only to be thrown away for the cut one."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.errors import ModelUnavailableError
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio

PENDING = 2_000


def _down(messages: list[Message], settings: Any) -> str:
    raise ModelUnavailableError("the memory model's provider is down")


class _Tally:
    """Rows the store hands out, and messages the token counter counts, on one Memory."""

    def __init__(self, memory: Memory) -> None:
        self.rows = 0
        self.counted = 0
        store, counter = memory.store, memory.counter
        for name in ("list_messages", "read_window", "read_window_marked", "get_messages"):
            method = getattr(store, name, None)
            if method is not None:
                setattr(store, name, self._rows(method))
        each, one = counter.count_each, counter.count_message

        def count_each(messages: Any) -> int:
            listed = list(messages)
            self.counted += len(listed)
            return each(listed)

        def count_message(message: Message) -> int:
            self.counted += 1
            return one(message)

        counter.count_each = count_each  # type: ignore[method-assign]
        counter.count_message = count_message  # type: ignore[method-assign]

    def _rows(self, method: Any) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            for value in result if isinstance(result, tuple) else (result,):
                if isinstance(value, list):
                    self.rows += len(value)
            return result

        return counted


def behind(tmp_path: Path, fail: Callable[[list[Message], Any], str] = _down, **options: Any) -> Memory:
    """A Memory over SQLite whose memory models fail with ``fail``, each turn waiting 0.01 s at most
    for its memory work: turns go on with the raw window cut. ``options``: more of Memory's."""
    model = FunctionModel(fail, name="test:down")
    return Memory(
        f"sqlite:///{tmp_path / 'memory.db'}",
        config=MemoryConfig(observation=ObservationConfig(message_tokens=3_000)),
        observer=model, reflector=model, max_turn_wait=0.01, **options,
    )


async def backlog(memory: Memory, thread_id: str, n: int) -> None:
    """``n`` messages (questions and answers) stored in a new thread ``thread_id``, pending."""
    await memory.create_thread(thread_id, "alice")
    messages: list[Message] = []
    for i in range(n // 2):
        messages += [
            Message.user(f"Question {i} about the shipment to Lisbon and invoice {i * 7}?"),
            Message.assistant(f"Answer {i}: noted."),
        ]
    for start in range(0, len(messages), 1_000):
        await memory.store.save_messages(thread_id, messages[start : start + 1_000])


async def test_a_turn_with_thousands_pending_neither_rereads_nor_builds_the_whole_window(tmp_path: Path) -> None:
    async with behind(tmp_path) as memory:
        await backlog(memory, "t1", PENDING)
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("first")])
        await turn.step([Message.assistant("ok")])
        await turn.end()
        assert turn.context.trimmed > PENDING // 2, "the window is cut to the raw limit"

        tally = _Tally(memory)
        for i in range(3):
            turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"question {i}")])
            assert turn.context.trimmed > PENDING // 2
            assert turn.context.messages[-1].text == f"question {i}", "the input is shown"
            await turn.step([Message.assistant(f"answer {i}")])
            await turn.end()
        boundaries = 6
        # Before: every boundary read the whole window again (~2,000 rows, 12,000 in all) ... A
        # head written meanwhile (the failing work's backoff, whenever the retries end on a slow
        # machine) makes the kept window stale once: one read of it whole is allowed.
        assert tally.rows < PENDING + boundaries * PENDING / 10, f"{tally.rows} rows read in {boundaries} boundaries"
        # ... and counted it three times over (a context of all of it was built ahead, while the
        # save committed, and thrown away for the cut one): 6,400 messages a boundary; now the cut
        # counts it (2,400 a boundary: the window once, and the context's sections).
        assert tally.counted / boundaries < 1.6 * PENDING, f"{tally.counted} messages counted in {boundaries} boundaries"
        stored = await memory.list_messages("t1")
        assert len([m for m in stored if not m.is_marker_only]) == PENDING + 8, "nothing pending is lost"

"""A turn whose observation keeps losing the compare-and-set to other processes goes on.

Found by a hostile review: 8 processes on one resource (PostgreSQL, resource scope, sharing on)
made ordinary turns raise ``ObservationError: Could not commit the observation … after 8
attempts; the store kept changing underneath`` from ``step``. No model failed: other writers
won the race every time. ``failure_policy`` documents raising when a memory model call fails;
losing to other writers is not that, and the turn has nothing to fix. Now the observation is not
applied, the turn gets its context (the messages stay pending, raw) and a later boundary observes
them; the outcome says why.

Here a second ``Memory`` on the same SQLite file stands for the other processes: it moves the
thread's head on every commit this process tries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.storage import lineage_key

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(
    observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
    reflection=ReflectionConfig(observation_tokens=100_000),
)


def _always_beaten(mine: Memory, other: Memory) -> list[int]:
    """Before each compare-and-set of ``mine``'s store, ``other`` writes the head first."""
    store: Any = mine.store
    lost: list[int] = []
    for name in ("update_record", "update_record_marking"):
        write = getattr(store, name)

        async def beaten(record: Any, *args: Any, _write: Any = write, **kwargs: Any) -> Any:
            head = await other.store.get_head(lineage_key("thread", "t", "u"))
            if head is not None and beating:
                await other.store.update_record(head, expected_version=head.version)
                lost.append(head.version)
            return await _write(record, *args, **kwargs)

        setattr(store, name, beaten)
    return lost


beating = True


async def test_a_turn_goes_on_when_other_writers_win_every_commit(tmp_path: Path) -> None:
    global beating
    path = f"sqlite:///{tmp_path / 'm.db'}"
    async with Memory(path, config=CONFIG) as mine, Memory(path, config=CONFIG) as other:
        for i in range(20):  # a head, then a window past the threshold
            turn = await mine.begin_turn(
                thread_id="t", resource_id="u", messages=[Message.user(f"note {i}: the pallet count is {i * 3}")]
            )
            await turn.end([Message.assistant(f"noted {i}")])
        await mine.settled()
        before = await mine.get_record("t")
        assert before is not None and before.cursor("t") > 0
        # More than the threshold saved without a turn (nothing observes them): the next turn must.
        await mine.save_messages("t", [Message.user(f"later note {i}: pallet {i} is in bay {i % 7}") for i in range(30)])
        lost = _always_beaten(mine, other)
        turn = await mine.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("What is the count now?")])
        assert lost, "other writers moved the head before this process's commits"
        failed = [o for o in turn.outcomes if o.operation == "observation" and not o.applied]
        assert failed and "other writers" in failed[0].reason, turn.outcomes
        assert turn.context.raw_messages[-1].text == "What is the count now?"
        pending = [m.text for m in turn.context.raw_messages]
        assert "later note 0: pallet 0 is in bay 0" in pending, "the messages stay pending, raw"
        await turn.end()
        beating = False
        turn = await mine.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("And tomorrow?")])
        assert any(o.operation == "observation" and o.applied for o in turn.outcomes), turn.outcomes
        await turn.end()

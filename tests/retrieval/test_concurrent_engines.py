"""Two processes' worth of engines on one SQLite file: groups still tile the observed messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.om.text.groups import ObservationGroup

from .helpers import covered_ids, dated_messages, groups_of, memory_for, recall_all, replay

pytestmark = pytest.mark.anyio


async def test_two_engines_sharing_a_thread_never_cover_a_message_twice(tmp_path: Path) -> None:
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=600, buffer_tokens=0.3),
        reflection=ReflectionConfig(observation_tokens=100_000),
        retrieval=True,
    )
    first, second = memory_for(tmp_path / "m.db", config), memory_for(tmp_path / "m.db", config)
    async with first, second:
        messages = dated_messages(240)
        for index in range(0, len(messages), 2):
            await replay(first if (index // 2) % 3 else second, "t1", "alice", messages[index : index + 2])
            if index % 8 == 0:
                await first.settled()
        await first.settled()
        await second.settled()
        await first.observe("t1")
        record = await first.get_record("t1")
        assert record is not None
        groups: list[ObservationGroup] = groups_of(record.active_observations)
        covered = [
            mid for g in sorted(groups, key=lambda g: g.first_seq) for mid in await covered_ids(first, g)
        ]
        observed = [m.id for m in await first.list_messages("t1") if (m.seq or 0) <= record.cursor("t1")]
        assert covered == observed  # every observed message in exactly one group, in order
        for group in groups:
            assert await recall_all(second, "t1", group_id=group.id) == await covered_ids(first, group)

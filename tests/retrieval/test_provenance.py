"""Observation groups record exactly the messages they were made from, and reflection keeps it.

The acceptance test of issue 5: on a 500-message thread, ``recall`` of each observation group
returns exactly the messages that group's observer call was given, and the groups tile the
observed messages (each exactly once). With reflection on, every reflected group spans the
source groups it condensed, and together the reflected groups still reach every observed message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem.om.text.groups import ObservationGroup
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.om.selection import observable_messages
from obsmem.tokens import TokenCounter

from .helpers import (
    RecordingObserver,
    covered_ids,
    dated_messages,
    groups_of,
    memory_for,
    recall_all,
    replay,
    retrieval_config,
)

pytestmark = pytest.mark.anyio


def _tile(groups: list[ObservationGroup], observed_seqs: list[int]) -> None:
    """The groups' spans cover ``observed_seqs`` exactly once, in order, with no gaps."""
    covered = [
        seq for g in sorted(groups, key=lambda g: g.first_seq) for seq in observed_seqs if g.covers(seq)
    ]
    assert covered == observed_seqs


async def test_each_group_of_a_500_message_thread_recalls_exactly_its_messages(tmp_path: Path) -> None:
    counter = TokenCounter()
    observer = RecordingObserver(OfflineObserver(count_tokens=counter.count_text))
    memory = memory_for(tmp_path / "m.db", retrieval_config(), observer=observer, counter=counter)
    async with memory:
        await replay(memory, "t1", "alice", dated_messages(500))
        record = await memory.get_record("t1")
        assert record is not None
        groups = groups_of(record.active_observations)
        calls = {ids[0]: ids for ids in observer.calls}
        assert len(groups) == len(observer.calls) >= 40  # one group per observation cycle
        cursor = record.cursor("t1")
        observed = [
            m for m in observable_messages(await memory.list_messages("t1")) if (m.seq or 0) <= cursor
        ]
        assert len(observed) >= 450
        _tile(groups, [m.seq or 0 for m in observed])
        for group in groups:
            assert group.kind == "observation"
            expected = calls[group.first_message_id]
            assert await covered_ids(memory, group) == expected
            assert await recall_all(memory, "t1", group_id=group.id) == expected
            assert (group.first_message_id, group.last_message_id) == (expected[0], expected[-1])


async def test_reflection_keeps_provenance_across_several_generations(tmp_path: Path) -> None:
    counter = TokenCounter()
    observer = RecordingObserver(OfflineObserver(count_tokens=counter.count_text))
    config = retrieval_config(observation_tokens=1500)
    memory = memory_for(tmp_path / "m.db", config, observer=observer, counter=counter)
    async with memory:
        await replay(memory, "t1", "alice", dated_messages(500))
        generations = list(reversed(await memory.list_generations("t1")))
        assert len(generations) >= 3  # several reflections happened
        calls = {ids[0]: ids for ids in observer.calls}
        # Every observation group ever made (each lives in the generation it was made in).
        made = {
            g.id: g
            for gen in generations
            for g in groups_of(gen.active_observations)
            if g.kind == "observation"
        }
        assert len(made) == len(observer.calls)
        head = generations[-1]
        observed = [
            m
            for m in observable_messages(await memory.list_messages("t1"))
            if (m.seq or 0) <= head.cursor("t1")
        ]
        _tile(list(made.values()), [m.seq or 0 for m in observed])
        for group in made.values():  # old groups stay recallable after they were reflected away
            assert await recall_all(memory, "t1", group_id=group.id) == calls[group.first_message_id]
        for before, after in zip(generations, generations[1:], strict=False):
            sources = groups_of(before.active_observations)
            reflected = [g for g in groups_of(after.active_observations) if g.kind == "reflection"]
            kept = [g for g in groups_of(after.active_observations) if g.kind == "observation"]
            assert reflected, "a reflection produces reflection groups"
            condensed = [g for g in sources if g.id not in {k.id for k in kept}]
            source_ids = {mid for g in condensed for mid in await covered_ids(memory, g)}
            reflected_ids = {mid for g in reflected for mid in await covered_ids(memory, g)}
            assert source_ids <= reflected_ids  # nothing observed became unreachable
            starts = {g.first_seq for g in condensed}
            ends = {g.last_seq for g in condensed}
            for group in reflected:  # spans are min start .. max end of real sources
                assert group.first_seq in starts and group.last_seq in ends
                assert await recall_all(memory, "t1", group_id=group.id) == await covered_ids(memory, group)
        # The newest generation still covers every observed message through its groups.
        _covers = {mid for g in groups_of(head.active_observations) for mid in await covered_ids(memory, g)}
        assert {m.id for m in observed} <= _covers


class QuietEveryThirdCall:
    """An observer that finds nothing worth noting in every third cycle (as a real one may)."""

    def __init__(self, inner: RecordingObserver) -> None:
        self.inner = inner
        self.name = "quiet-every-third"

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        result = await self.inner.observe(request)
        return ObservationResult(observations="") if len(self.inner.calls) % 3 == 0 else result


async def test_a_cycle_that_notes_nothing_still_covers_its_messages(tmp_path: Path) -> None:
    counter = TokenCounter()
    recording = RecordingObserver(OfflineObserver(count_tokens=counter.count_text))
    memory = memory_for(tmp_path / "m.db", retrieval_config(), observer=QuietEveryThirdCall(recording))
    async with memory:
        await replay(memory, "t1", "alice", dated_messages(120))
        record = await memory.get_record("t1")
        assert record is not None
        groups = groups_of(record.active_observations)
        empty = [g for g in groups if not g.body]
        assert len(groups) == len(recording.calls) and len(empty) == len(recording.calls) // 3
        observed = [m for m in await memory.list_messages("t1") if (m.seq or 0) <= record.cursor("t1")]
        _tile(groups, [m.seq or 0 for m in observed])
        for group in empty:
            assert await recall_all(memory, "t1", group_id=group.id) == await covered_ids(memory, group)
        shown = (await memory.get_context("t1")).prefix_text
        assert all(f"`{g.id}`" not in shown for g in empty)  # the actor never sees an empty group
        assert all(f"`{g.id}`" in shown for g in groups if g.body)

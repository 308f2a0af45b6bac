"""Retrieval mode in the actor's context, in buffered and resource-scoped memory, and when off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.om.text.format import is_boundary_line
from obsmem.om.text.groups import strip_groups
from obsmem.om.offline import OfflineObserver
from obsmem.tokens import TokenCounter
from obsmem.vectors import InMemoryVectorIndex

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


def _recording() -> RecordingObserver:
    return RecordingObserver(OfflineObserver(count_tokens=TokenCounter().count_text))


async def test_retrieval_off_adds_no_markup_and_changes_nothing_else(tmp_path: Path) -> None:
    texts = {}
    calls = {}
    for enabled in (False, True):
        observer = _recording()
        config = retrieval_config().replace(retrieval={"enabled": enabled})
        async with memory_for(tmp_path / f"{enabled}.db", config, observer=observer) as memory:
            await replay(memory, "t1", "alice", dated_messages(120))
            record = await memory.get_record("t1")
            assert record is not None
            texts[enabled], calls[enabled] = record.active_observations, observer.calls
            context = await memory.get_context("t1")
            shown = "\n".join(m.text for m in context.system_messages)
            assert ("recall-instructions" in shown) == enabled
            assert ("## Group `" in shown) == enabled
            assert "<observation-group" not in shown
    assert "<observation-group" not in texts[False] and "<observation-group" in texts[True]
    assert calls[True] == calls[False]  # the same cycles over the same messages
    def lines(text: str) -> list[str]:  # an empty cycle adds an empty group (and its boundary) only
        return [line for line in text.splitlines() if line.strip() and not is_boundary_line(line)]

    assert lines(strip_groups(texts[True])) == lines(texts[False])  # the same observations


async def test_the_context_prefix_is_byte_stable_and_names_every_group(tmp_path: Path) -> None:
    config = retrieval_config(observation_tokens=1500, instructions="Prefer recall for code snippets.")
    async with memory_for(tmp_path / "m.db", config) as memory:
        messages = dated_messages(200)
        await replay(memory, "t1", "alice", messages[:198])
        turn = await memory.begin_turn(thread_id="t1", messages=[messages[198]])
        first = turn.context.prefix_text
        second = (await turn.step([messages[199]])).prefix_text
        await turn.end()
        assert first == second == (await memory.get_context("t1")).prefix_text
        assert "Additional guidance:\nPrefer recall for code snippets." in first
        record = await memory.get_record("t1")
        assert record is not None and record.generation >= 1
        groups = groups_of(record.active_observations)
        assert {g.kind for g in groups} == {"observation", "reflection"}
        assert re.findall(r"## Group `([0-9a-f]{12})`", first) == [g.id for g in groups]


async def test_resource_scope_recall_is_announced_before_anything_is_observed(tmp_path: Path) -> None:
    async with memory_for(tmp_path / "m.db", retrieval_config(scope="resource")) as memory:
        await memory.create_thread("t1", "alice")
        context = await memory.get_context("t1")
        assert [m.metadata["obsmem"] for m in context.system_messages] == ["recall-instructions"]
        assert 'mode "threads"' in context.system_messages[0].text
    async with memory_for(tmp_path / "t.db", retrieval_config(scope="thread")) as memory:
        await memory.create_thread("t1", "alice")
        assert (await memory.get_context("t1")).system_messages == []


async def test_buffered_chunks_are_groups_indexed_when_buffered(tmp_path: Path) -> None:
    observer = _recording()
    embedder = LexicalHashEmbedder()
    index = InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=1200, buffer_tokens=0.25),
        reflection=ReflectionConfig(observation_tokens=100_000),
        retrieval={"vector": True},
    )
    memory = memory_for(tmp_path / "m.db", config, observer=observer, embedder=embedder, vector_index=index)
    async with memory:
        messages = dated_messages(300)
        indexed_before_activation = False
        for start in range(0, len(messages), 2):
            await replay(memory, "t1", "alice", messages[start : start + 2])
            await memory.settled()
            record = await memory.get_record("t1")
            assert record is not None
            for chunk in record.buffered_chunks:
                (group,) = groups_of(chunk.observations)
                assert (group.first_seq, group.last_seq) == (chunk.first_seq, chunk.last_seq)
                assert list(chunk.message_ids) == await covered_ids(memory, group)
                hits = await index.count(f"obsmem-groups/r:alice/t:t1/g:{group.id}/")
                indexed_before_activation = indexed_before_activation or hits > 0
        assert indexed_before_activation
        record = await memory.get_record("t1")
        assert record is not None
        groups = groups_of(record.active_observations)
        assert len(groups) >= 5
        calls = {ids[0]: ids for ids in observer.calls}
        for group in groups:
            assert await recall_all(memory, "t1", group_id=group.id) == calls[group.first_message_id]


async def test_resource_scoped_memory_keeps_groups_inside_their_threads(tmp_path: Path) -> None:
    config = MemoryConfig(
        scope="resource",
        observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=300),
        retrieval={"scope": "thread"},
    )
    async with memory_for(tmp_path / "m.db", config) as memory:
        one, two = dated_messages(120, "p"), dated_messages(120, "q")
        for start in range(0, 120, 20):
            await replay(memory, "t1", "alice", one[start : start + 20])
            await replay(memory, "t2", "alice", two[start : start + 20])
        generations = await memory.list_generations("t1")
        assert len(generations) >= 2
        record = generations[0]
        groups = groups_of(record.active_observations)
        assert {g.thread_id for g in groups} == {"t1", "t2"}
        assert any(g.kind == "reflection" for g in groups)
        for group in groups:
            ids = await covered_ids(memory, group)
            prefix = "pm" if group.thread_id == "t1" else "qm"
            assert ids and all(i.startswith(prefix) for i in ids)  # a group never spans threads
            assert await recall_all(memory, group.thread_id, group_id=group.id) == ids
        t2_group = next(g for g in groups if g.thread_id == "t2")
        with pytest.raises(Exception, match="within reach"):
            await memory.recall("t1", group_id=t2_group.id)  # thread-scoped recall


async def test_buffered_reflection_keeps_groups_whole_and_every_message_reachable(tmp_path: Path) -> None:
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=800, buffer_tokens=0.25),
        reflection=ReflectionConfig(observation_tokens=1200, buffer_activation=0.5),
        retrieval=True,
    )
    events: list[str] = []
    async with memory_for(tmp_path / "m.db", config, on_event=lambda e: events.append(e.kind)) as memory:
        messages = dated_messages(400)
        for start in range(0, len(messages), 2):
            await replay(memory, "t1", "alice", messages[start : start + 2])
            await memory.settled()
        generations = await memory.list_generations("t1")
        assert any(g.origin == "reflection" for g in generations)
        assert "reflection-activated" in events  # a background reflection over a group-safe slice
        for generation in generations:
            text = generation.active_observations
            assert (
                text.count("<observation-group ")
                == text.count("</observation-group>")
                == len(groups_of(text))
            )
        head = generations[0]
        reachable = {mid for g in groups_of(head.active_observations) for mid in await covered_ids(memory, g)}
        observed = [m.id for m in messages if int(m.id[1:]) < 400]
        cursor_ids = [m.id for m in await memory.list_messages("t1") if (m.seq or 0) <= head.cursor("t1")]
        assert set(cursor_ids) <= reachable and len(cursor_ids) > 200
        assert set(cursor_ids) <= set(observed)

"""The recall tool's modes: paging by group and cursor, detail levels, budgets, threads, search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from obsmem import ConfigError, Memory, MemoryConfig, Message
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import InvalidInputError
from obsmem.om.text.groups import ObservationGroup
from obsmem.om.selection import observable_messages
from obsmem.types import TextPart
from obsmem.vectors import InMemoryVectorIndex, SQLiteVectorIndex, VectorIndex

from .helpers import START, covered_ids, dated_messages, groups_of, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio


async def _groups(memory: Memory, thread_id: str = "t1") -> list[ObservationGroup]:
    record = await memory.get_record(thread_id)
    assert record is not None
    return groups_of(record.active_observations)


async def _ids(memory: Memory, thread_id: str = "t1") -> list[str]:
    return [m.id for m in observable_messages(await memory.list_messages(thread_id))]


async def _seeded(tmp_path: Path, count: int = 80, **kwargs: Any) -> Memory:
    memory = memory_for(tmp_path / "m.db", retrieval_config(**kwargs.pop("retrieval", {})), **kwargs)
    await replay(memory, "t1", "alice", dated_messages(count))
    return memory


async def test_a_group_is_paged_in_order_and_the_pages_add_up_to_its_messages(tmp_path: Path) -> None:
    async with await _seeded(tmp_path) as memory:
        group = (await _groups(memory))[2]
        expected = await covered_ids(memory, group)
        assert len(expected) >= 7
        pages = []
        for page in (1, 2, 3):
            result = await memory.recall("t1", group_id=group.id, limit=3, page=page, detail="high")
            assert result.group is not None and result.group.range == group.range
            pages.append(result.message_ids)
            assert result.has_prev_page == (page > 1)
        assert [mid for page in pages for mid in page] == expected[:9]
        assert all(len(page) == 3 for page in pages[: len(expected) // 3])
        last = await memory.recall("t1", group_id=group.id, limit=3, page=(len(expected) + 2) // 3)
        assert not last.has_next_page
        backwards = await memory.recall("t1", group_id=group.id, anchor="end", limit=3)
        assert backwards.message_ids == expected[-3:]  # the newest three, in order


async def test_cursor_pages_forward_and_backward_from_a_message(tmp_path: Path) -> None:
    async with await _seeded(tmp_path) as memory:
        ids = await _ids(memory)
        at = ids.index("m0030")
        forward = await memory.recall("t1", cursor="m0030", limit=5)
        assert forward.message_ids == ids[at : at + 5] and forward.has_next_page
        assert (await memory.recall("t1", cursor="m0030", limit=5, page=2)).message_ids == ids[
            at + 5 : at + 10
        ]
        assert (await memory.recall("t1", cursor="m0030", limit=5, page=-1)).message_ids == ids[at - 5 : at]
        backward = await memory.recall("t1", cursor="m0030", limit=5, anchor="end")
        assert backward.message_ids == ids[at - 4 : at + 1]
        assert (await memory.recall("t1", cursor="m0030", limit=5, anchor="end", page=2)).message_ids == ids[
            at - 9 : at - 4
        ]
        assert (await memory.recall("t1", limit=4)).message_ids == ids[:4]  # the thread from its start
        assert (await memory.recall("t1", limit=4, anchor="end")).message_ids == ids[-4:]  # its latest
        inside = await memory.recall("t1", group_id=(await _groups(memory))[0].id, cursor="m0002", limit=2)
        assert inside.message_ids == ["m0002", "m0003"]
        with pytest.raises(InvalidInputError, match="not one of the messages of group"):
            await memory.recall("t1", group_id=(await _groups(memory))[0].id, cursor="m0030")
        with pytest.raises(InvalidInputError, match="one message id, not a range"):
            await memory.recall("t1", cursor="m0001:m0009")


async def test_detail_levels_shorten_or_show_long_parts(tmp_path: Path) -> None:
    long_text = " ".join(f"word{i}" for i in range(600))
    memory = memory_for(tmp_path / "m.db", retrieval_config())
    async with memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages(
            "t1", [Message(id="long", role="assistant", parts=(TextPart(text=long_text),), created_at=START)]
        )
        low = await memory.recall("t1", cursor="long")
        high = await memory.recall("t1", cursor="long", detail="high", token_budget=100_000)
        assert high.messages[0].text == long_text and not high.truncated
        assert "[truncated" in low.messages[0].text and len(low.messages[0].text) < len(long_text) // 3
        assert memory.counter.count_text(low.messages[0].text) <= 110


async def test_a_small_budget_truncates_and_continue_with_fetches_the_rest(tmp_path: Path) -> None:
    long_text = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog {i}" for i in range(200))
    memory = memory_for(tmp_path / "m.db", retrieval_config())
    async with memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages(
            "t1",
            [
                Message(id="huge", role="assistant", parts=(TextPart(text=long_text),), created_at=START),
                *dated_messages(6, "x"),
            ],
        )
        args: dict[str, Any] | None = {"cursor": "huge", "detail": "high", "limit": 20}
        pieces: list[str] = []
        seen: list[str] = []
        calls = 0
        while args is not None:
            answer = await memory.call_recall_tool("t1", args, token_budget=400)
            json.dumps(answer)  # a tool answer is plain JSON
            calls += 1
            assert answer["tokens"] <= 400
            for message in answer["messages"]:
                if message["id"] == "huge":
                    pieces.append(message["text"])
                else:
                    seen.append(message["id"])
            args = answer.get("continue_with")
            assert (args is not None) == answer["truncated"]
        assert "".join(pieces) == long_text  # continued by char_offset, nothing lost or repeated
        assert seen == [f"xm{i:04d}" for i in range(6)]
        assert calls >= 5


async def test_threads_mode_lists_only_reachable_threads(tmp_path: Path) -> None:
    for scope, expected in (("resource", ["t1", "t2", "t3"]), ("thread", ["t1"])):
        memory = memory_for(tmp_path / f"{scope}.db", retrieval_config(scope=scope))
        async with memory:
            for tid in ("t1", "t2", "t3"):
                await memory.create_thread(tid, "alice", title=f"about {tid}")
            await memory.create_thread("other", "bob")
            first = await memory.recall("t1", mode="threads", limit=2)
            rest = await memory.recall("t1", mode="threads", limit=2, page=2)
            listed = [t.id for t in first.threads] + [t.id for t in rest.threads]
            assert sorted(listed) == expected
            assert first.has_next_page == (scope == "resource")
            assert [t.current for t in first.threads if t.id == "t1"] == [True]


async def _search_memory(tmp_path: Path, index: VectorIndex, embedder: LexicalHashEmbedder) -> Memory:
    config = retrieval_config(vector=True)
    memory = memory_for(tmp_path / "m.db", config, embedder=embedder, vector_index=index)
    await replay(memory, "t1", "alice", dated_messages(80))
    return memory


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_search_finds_the_group_that_covers_the_words(tmp_path: Path, kind: str) -> None:
    embedder = LexicalHashEmbedder()
    index: VectorIndex = (
        InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
        if kind == "memory"
        else await SQLiteVectorIndex.open(
            tmp_path / "v.db", dimensions=embedder.dimensions, space=embedder.name
        )
    )
    async with await _search_memory(tmp_path, index, embedder) as memory:
        groups = await _groups(memory)
        assert await index.count() >= len(groups)  # every group was indexed at observation time
        result = await memory.recall("t1", mode="search", query="Terraform billing service deploy", limit=3)
        assert 1 <= len(result.groups) <= 3
        best = result.groups[0]
        assert best.id in {g.id for g in groups} and "Terraform" in (best.snippet or "")
        messages = await memory.recall("t1", group_id=best.id, detail="high", token_budget=100_000)
        assert any("Terraform" in m.text for m in messages.messages)
        capped = await memory.recall("t1", mode="search", query="code", limit=50)
        assert len(capped.groups) <= 20
    await index.close()


async def test_reflection_replaces_the_reflected_groups_vectors(tmp_path: Path) -> None:
    embedder = LexicalHashEmbedder()
    index = InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
    config = retrieval_config(vector=True, observation_tokens=1500)
    memory = memory_for(tmp_path / "m.db", config, embedder=embedder, vector_index=index)
    async with memory:
        await replay(memory, "t1", "alice", dated_messages(160))
        assert len(await memory.list_generations("t1")) >= 2
        live = {g.id for g in await _groups(memory)}
        indexed = {
            hit.namespace.rstrip("/").rsplit("/g:", 1)[-1]
            for hit in await index.search(embedder.embed_sync(["code"])[0], 10_000)
        }
        assert indexed == live  # reflected-away groups left the index; the reflection's came in
        result = await memory.recall("t1", mode="search", query="marathon Berlin", limit=5)
        assert result.groups and {g.id for g in result.groups} <= live


async def test_tool_schema_and_dispatcher(tmp_path: Path) -> None:
    plain = Memory("memory://", config=MemoryConfig(retrieval=True))
    schema = plain.recall_tool()
    assert schema["name"] == "recall"
    assert schema["parameters"]["properties"]["mode"]["enum"] == ["messages", "threads"]
    assert plain.recall_tool(flavor="openai")["function"]["name"] == "recall"
    assert "input_schema" in plain.recall_tool(flavor="anthropic")
    await plain.aclose()
    embedder = LexicalHashEmbedder()
    with pytest.raises(ConfigError, match="retrieval.vector"):
        Memory("memory://", config=MemoryConfig(retrieval={"vector": True}))
    with pytest.raises(ConfigError, match="dimensional"):
        Memory(
            "memory://",
            config=MemoryConfig(retrieval={"vector": True}),
            embedder=embedder,
            vector_index=InMemoryVectorIndex(16),
        )
    async with await _seeded(tmp_path) as memory:
        assert "error" in await memory.call_recall_tool("t1", {"mode": "everything"})
        assert "error" in await memory.call_recall_tool("t1", {"bogus": 1})
        assert "error" in await memory.call_recall_tool("t1", {"page": "two"})
        assert "error" in await memory.call_recall_tool("t1", {"mode": "search", "query": "x"})  # vector off
        assert "error" in await memory.call_recall_tool("t1", {"group_id": "000000000000"})
        ok = await memory.call_recall_tool("t1", {"cursor": "m0004", "limit": "2"})
        assert [m["id"] for m in ok["messages"]] == ["m0004", "m0005"]
    off = Memory("memory://")
    await off.create_thread("t1", "alice")
    with pytest.raises(ConfigError, match="retrieval"):
        await off.recall("t1", cursor="x")
    await off.aclose()


async def test_search_returns_nothing_rather_than_groups_with_nothing_in_common(tmp_path: Path) -> None:
    embedder = LexicalHashEmbedder()
    index = InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
    async with await _search_memory(tmp_path, index, embedder) as memory:
        result = await memory.recall("t1", mode="search", query="?! …")
        assert result.groups == () and result.note is not None
        answer = await memory.call_recall_tool("t1", {"mode": "search", "query": "?! …"})
        assert answer["groups"] == () or answer["groups"] == []

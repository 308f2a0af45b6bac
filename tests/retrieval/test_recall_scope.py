"""Recall never crosses its scope (Mastra #21863: recall returned another resource's messages).

Two users share one store and one vector index, as a multi-tenant server would. Every way of
naming the other user's data — a group id, a message cursor, a thread id, a search whose words
only match the other user, a poisoned vector entry — is refused or comes back empty, and the
refusal reads exactly like an id that does not exist, so it cannot be used to probe.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import RecallNotFoundError
from obsmem.om.group_index import group_namespace
from obsmem.vectors import InMemoryVectorIndex

from .helpers import dated_messages, groups_of, memory_for, replay, retrieval_config

pytestmark = pytest.mark.anyio


async def _two_users(tmp_path: Path, scope: str) -> tuple[Memory, InMemoryVectorIndex, LexicalHashEmbedder]:
    embedder = LexicalHashEmbedder()
    index = InMemoryVectorIndex(embedder.dimensions, space=embedder.name)
    config = retrieval_config(scope=scope, vector=True)
    memory = memory_for(tmp_path / "shared.db", config, embedder=embedder, vector_index=index)
    await replay(memory, "alice-1", "alice", dated_messages(40, "a"))
    await replay(memory, "bob-1", "bob", dated_messages(40, "b"))
    await replay(memory, "bob-2", "bob", dated_messages(40, "c"))
    # "ali" is a prefix of "alice": namespaces must not match by accident.
    await replay(memory, "ali-1", "ali", dated_messages(40, "d"))
    return memory, index, embedder


async def _alice_group(memory: Memory) -> str:
    record = await memory.get_record("alice-1")
    assert record is not None
    return groups_of(record.active_observations)[0].id


@pytest.mark.parametrize("scope", ["resource", "thread"])
async def test_another_users_ids_are_refused_like_unknown_ones(tmp_path: Path, scope: str) -> None:
    memory, index, _ = await _two_users(tmp_path, scope)
    async with memory:
        group_id = await _alice_group(memory)
        assert (await memory.recall("alice-1", group_id=group_id)).messages  # the owner can read it
        attempts = [
            {"group_id": group_id},
            {"cursor": "am0003"},
            {"target_thread_id": "alice-1"},
            {"group_id": group_id, "target_thread_id": "bob-1"},
        ]
        for caller in ("bob-1", "ali-1"):
            for kwargs in attempts:
                with pytest.raises(RecallNotFoundError) as refused:
                    await memory.recall(caller, **kwargs)  # type: ignore[arg-type]
                assert "alice" not in str(refused.value).replace("alice-1", "")
            # The same words as for an id that exists nowhere: no existence oracle.
            with pytest.raises(RecallNotFoundError) as unknown:
                await memory.recall(caller, group_id="ffffffffffff")
            with pytest.raises(RecallNotFoundError) as foreign:
                await memory.recall(caller, group_id=group_id)
            assert str(foreign.value) == str(unknown.value).replace("ffffffffffff", group_id)
            answer = await memory.call_recall_tool(caller, {"cursor": "am0003", "detail": "high"})
            assert set(answer) == {"error"} and "am0003" in answer["error"]


@pytest.mark.parametrize("scope", ["resource", "thread"])
async def test_search_and_threads_never_return_another_users_data(tmp_path: Path, scope: str) -> None:
    memory, index, embedder = await _two_users(tmp_path, scope)
    async with memory:
        assert await index.count() > 0
        alice_threads = {"alice-1"}
        # Words every user's messages share: the index holds hits of all four threads.
        for caller, reachable in (
            ("bob-1", {"bob-1", "bob-2"} if scope == "resource" else {"bob-1"}),
            ("ali-1", {"ali-1"}),
        ):
            result = await memory.recall(
                caller, mode="search", query="Terraform billing marathon code", limit=20
            )
            assert result.groups and {g.thread_id for g in result.groups} <= reachable
            for group in result.groups:
                messages = await memory.recall(caller, group_id=group.id, detail="high")
                assert {m.thread_id for m in messages.messages} <= reachable
            threads = await memory.recall(caller, mode="threads", limit=50)
            assert {t.id for t in threads.threads} <= reachable
            assert not {t.id for t in threads.threads} & alice_threads
            every = await memory.recall(caller, limit=20, anchor="end")
            assert {m.thread_id for m in every.messages} == {caller}


async def test_a_poisoned_vector_under_the_callers_namespace_is_not_followed(tmp_path: Path) -> None:
    memory, index, embedder = await _two_users(tmp_path, "resource")
    async with memory:
        group_id = await _alice_group(memory)
        # An entry that claims to be Bob's but points at Alice's thread and group.
        forged = group_namespace("bob", "alice-1", group_id)
        await index.upsert(f"{forged}0", embedder.embed_sync(["zebra quantum xylophone"])[0], forged)
        result = await memory.recall("bob-1", mode="search", query="zebra quantum xylophone", limit=20)
        assert group_id not in {g.id for g in result.groups}
        assert {g.thread_id for g in result.groups} <= {"bob-1", "bob-2"}


@pytest.mark.parametrize("scope", ["resource", "thread"])
async def test_the_same_users_other_thread_is_reachable_only_in_resource_scope(
    tmp_path: Path, scope: str
) -> None:
    memory, _, _ = await _two_users(tmp_path, scope)
    async with memory:
        record = await memory.get_record("bob-2")
        assert record is not None
        other_group = groups_of(record.active_observations)[0].id
        if scope == "resource":
            assert (await memory.recall("bob-1", target_thread_id="bob-2", limit=3)).message_ids == [
                "cm0000",
                "cm0001",
                "cm0002",
            ]
            assert (await memory.recall("bob-1", group_id=other_group)).messages[0].thread_id == "bob-2"
        else:
            for kwargs in ({"target_thread_id": "bob-2"}, {"group_id": other_group}, {"cursor": "cm0001"}):
                with pytest.raises(RecallNotFoundError):
                    await memory.recall("bob-1", **kwargs)  # type: ignore[arg-type]

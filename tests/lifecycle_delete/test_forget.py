"""Sentinel tests: plant a unique string everywhere memory keeps text, forget it (or delete the
resource), and find it nowhere in the store: every table of SQLite and PostgreSQL, every dict of
the in-memory store, every stored generation."""

from __future__ import annotations

from typing import Literal

import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.storage import Store
from obsmem.storage.forgetting import FORGOTTEN
from obsmem.types import Message, ToolCallPart, ToolResultPart

from .scan import scan

pytestmark = pytest.mark.anyio

SENTINEL = "QZXSENTINEL42"


def config(scope: Literal["thread", "resource"] = "thread") -> MemoryConfig:
    return MemoryConfig(
        scope=scope,
        observation=ObservationConfig(message_tokens=60, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=80),
    )


async def plant(memory: Memory, thread_id: str, resource_id: str, secret: str, turns: int = 6) -> None:
    """The secret in user text, tool calls and results, observations across reflections and
    working memory (thread and resource keys)."""
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id,
            messages=[Message.user(f"My project codename is {secret} and I need step {i} of the plan for t{i}.")],
        )
        await turn.step([
            Message(role="assistant", parts=(
                ToolCallPart(tool_call_id=f"{thread_id}-c{i}", tool_name="lookup", args={"q": secret}),
            )),
            Message(role="tool", parts=(
                ToolResultPart(tool_call_id=f"{thread_id}-c{i}", tool_name="lookup", result=f"found {secret} row {i}"),
            )),
            Message.assistant(f"Done step {i}."),
        ])
        await turn.end()
    await memory.settled()
    await memory.store.set_working_memory(f"thread:{thread_id}", f"name: Ada\ncodename: {secret}")
    await memory.store.set_working_memory(f"resource:{resource_id}", f"codename: {secret}\nteam: core")


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_forget_leaves_no_trace_anywhere(store: Store, scope: Literal["thread", "resource"]) -> None:
    memory = Memory(store, config=config(scope), max_turn_wait=None)
    await plant(memory, "t1", "u1", SENTINEL)
    await plant(memory, "t2", "u1", "other-" + SENTINEL)
    generations = await memory.list_generations("t1")
    assert sum(g.origin == "reflection" for g in generations) >= 2
    assert sum(SENTINEL in g.active_observations for g in generations) >= 3
    assert scan(store, SENTINEL)

    counts = await memory.forget(SENTINEL)

    assert scan(store, SENTINEL) == []
    assert counts["messages"] > 0 and counts["generations"] >= 2 and counts["working_memory"] == 3
    # What did not hold the value stays; each tool result keeps its call.
    messages = await memory.list_messages("t1")
    calls = [p for m in messages for p in m.tool_calls]
    results = [p for m in messages for p in m.tool_results]
    assert len(calls) == len(results) == 6
    assert {c.tool_call_id for c in calls} == {r.tool_call_id for r in results}
    assert all(c.args == FORGOTTEN for c in calls) and all(r.result == FORGOTTEN for r in results)
    assert await memory.get_working_memory("t1") in ("name: Ada", "team: core")
    for generation in await memory.list_generations("t1"):
        assert SENTINEL not in generation.model_dump_json()
    # The memory goes on working after forgetting.
    turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("What is step 7?")])
    await turn.end()
    assert scan(store, SENTINEL) == []
    await memory.aclose()


async def test_forget_in_one_thread_keeps_the_others(store: Store) -> None:
    memory = Memory(store, config=config(), max_turn_wait=None)
    await plant(memory, "t1", "u1", SENTINEL, turns=2)
    await plant(memory, "t2", "u1", SENTINEL, turns=2)
    await memory.forget(SENTINEL, thread_id="t1")
    assert all(SENTINEL not in m.model_dump_json() for m in await memory.list_messages("t1"))
    assert any(SENTINEL in m.model_dump_json() for m in await memory.list_messages("t2"))
    await memory.forget(SENTINEL, resource_id="u1")
    assert scan(store, SENTINEL) == []
    await memory.aclose()


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_delete_resource_leaves_no_trace(store: Store, scope: Literal["thread", "resource"]) -> None:
    resource = "RES-" + SENTINEL
    memory = Memory(store, config=config(scope), max_turn_wait=None)
    await plant(memory, "t1", resource, SENTINEL)
    await plant(memory, "t2", resource, SENTINEL, turns=2)
    await plant(memory, "keep", "u2", "kept-value", turns=2)
    await store.enqueue_work("observe", "t1", now=memory.clock.now())
    await store.acquire_lease(f"sync-reflection:resource:{resource}", "w", ttl_s=60, now=memory.clock.now())
    assert scan(store, resource) and scan(store, SENTINEL)

    counts = await memory.delete_resource(resource)

    assert scan(store, resource) == [] and scan(store, SENTINEL) == []
    assert counts["threads"] == 2 and counts["messages"] > 0 and counts["records"] >= 3
    assert counts["working_memory"] == 3 and counts["work_items"] == 1 and counts["leases"] == 1
    assert await memory.list_threads(resource) == []
    assert [t.id for t in await memory.list_threads("u2")] == ["keep"]
    assert await memory.get_record("keep") is not None
    await memory.aclose()

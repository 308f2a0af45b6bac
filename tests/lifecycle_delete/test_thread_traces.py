"""What a deleted thread left behind outside its own rows: the resource's working memory (kept per
resource) and the knowledge agents' lane rows. Run on every adapter pair (in memory, SQLite,
PostgreSQL)."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from obsmem import Memory, MemoryConfig
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import LANE_PREFIX
from obsmem.storage import Store
from obsmem.types import Message

from .scan import scan
from .test_knowledge_sentinel import Stores, stores  # noqa: F401  (the fixture)

pytestmark = pytest.mark.anyio

SECRET = "ZEBRAQUUX42"
FILLER = ("We talked about the weather in Lisbon and the train schedule for Monday.",
          "I need to buy groceries: apples, bread, oat milk and coffee beans.",
          "My sister Ana is visiting next weekend, she likes hiking in Sintra.",
          "Remind me to call the dentist about the appointment on Thursday at 3pm.",
          "The project deadline moved to the 14th, and the budget review is on Friday.")  # fmt: skip


def _config(scope: Literal["thread", "resource"], *, working_memory: bool = True) -> MemoryConfig:
    return MemoryConfig(
        scope=scope, reflection={"observation_tokens": 200},
        observation={"message_tokens": 120, "buffer_tokens": False, "manage_working_memory": working_memory},
    )  # fmt: skip


async def _converse(memory: Memory, thread: str, turns: int, said: dict[int, str] | None = None) -> None:
    for i in range(turns):
        text = (said or {}).get(i) or f"Turn {i}: " + FILLER[i % len(FILLER)]
        async with memory.turn(thread_id=thread, resource_id="alice", messages=[Message.user(text)]) as turn:
            await turn.step([Message.assistant(f"Noted turn {i}. " + FILLER[(i + 2) % len(FILLER)])])
    await memory.settled()


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_delete_thread_leaves_none_of_its_facts_in_the_resources_working_memory(
    stores: Stores, scope: Literal["thread", "resource"]
) -> None:
    """``working_memory_scope="resource"``: the observer keeps one working memory per user
    (``resource:<id>``), fed by every thread; its lines name no thread, so deleting a thread clears
    it (the next observation of another thread writes it again).

    On main: ``AssertionError: assert 'ZEBRAQUUX42' not in '## Key fact…'``: after
    ``delete_thread("t1")`` the other thread's working memory (the row ``resource:alice``) still
    read "- User stated their locker code is ZEBRAQUUX42." and its context showed it."""
    store: Store = stores.store
    memory = Memory(store, config=_config(scope), working_memory_scope="resource", max_turn_wait=None)
    await _converse(memory, "t2", 6)
    await _converse(memory, "t1", 10, {2: f"My locker code is {SECRET}."})
    assert SECRET in (await memory.get_working_memory("t2") or ""), "the fact reached the user's working memory"

    assert await memory.delete_thread("t1")

    assert SECRET not in (await memory.get_working_memory("t2") or "")
    context = await memory.get_context("t2")
    assert not any(SECRET in (m.text or "") for m in context.messages)
    assert scan(store, SECRET) == []
    await _converse(memory, "t2", 6)  # memory goes on: the next observation writes it again
    assert await memory.get_working_memory("t2")

    assert (await memory.delete_resource("alice"))["working_memory"] >= 1
    assert await store.get_working_memory("resource:alice") is None
    await memory.aclose()


@pytest.mark.parametrize("how", ["delete_thread", "delete_resource"])
async def test_deleting_a_thread_deletes_its_knowledge_lanes(stores: Stores, how: str) -> None:
    """The knowledge agents keep a lane per agent and thread (``obsmem:knowledge:lane:capture:<id>``,
    ``curate:<id>``, ``learn:<id>``: cursors, observation cycle ids) and a lane index, as working
    memory rows of the main store.

    On main: ``assert [...] == []``, "Left contains 3 more items, first extra item:
    'obsmem:knowledge:lane:capture:alice-therapy-2026'": after ``delete_resource("alice")`` (or
    ``delete_thread``) the rows ``obsmem:knowledge:lane:{capture,curate,learn}:alice-therapy-2026``
    and the index ``["curate:alice-therapy-2026"]`` were still there."""
    thread = "alice-therapy-2026"
    memory = Memory(stores.store, config=_config("thread", working_memory=False), max_turn_wait=None,
                    knowledge=Knowledge(stores.knowledge, actor="tester"))  # fmt: skip
    await _converse(memory, "other", 2)
    await _converse(memory, thread, 30)
    keys = [f"{LANE_PREFIX}{agent}:{thread}" for agent in ("capture", "curate", "learn")]
    held = [key for key in keys if await stores.store.get_working_memory(key) is not None]
    assert len(held) >= 2, held
    assert f"curate:{thread}" in json.loads(await stores.store.get_working_memory(LANE_PREFIX + "index") or "[]")

    if how == "delete_thread":
        assert await memory.delete_thread(thread)
    else:
        await memory.delete_resource("alice")
    await memory.settled()

    assert [key for key in keys if await stores.store.get_working_memory(key) is not None] == []
    index = await stores.store.get_working_memory(LANE_PREFIX + "index")
    assert thread not in (index or "")
    assert scan(stores.store, thread) == []
    await memory.aclose()

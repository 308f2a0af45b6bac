"""The cost ledger forgets too (issues 14 and 18): its rows hold ids, never text, and deleting a
thread or a resource deletes them. The ids are the sentinel: after the delete, no table of any
adapter (the ledger's ``model_calls`` included) holds them."""

from __future__ import annotations


import pytest

from obsmem import Memory, MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.models.testing import FunctionModel
from obsmem.storage import Store
from obsmem.types import Message

from .scan import scan

pytestmark = pytest.mark.anyio

THREAD = "THR-QZXLEDGER17"
RESOURCE = "RES-QZXLEDGER18"


def observer(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
    n = len(messages[-1].text)
    return ModelResponse(
        f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) The user asked for step {n} of the plan.\n</observations>",
        usage=Usage(input_tokens=200, output_tokens=20, cached_input_tokens=50),
    )


def memory_on(store: Store) -> Memory:
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=60, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=80),
    )
    return Memory(store, config=config, model=FunctionModel(observer, name="openai:gpt-4o-mini"),
                  max_turn_wait=None)


async def talk(memory: Memory, thread_id: str, resource_id: str, turns: int = 6) -> None:
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id,
            messages=[Message.user(f"I need step {i} of the plan, with every detail you have, please.")],
        )
        await turn.step([Message.assistant(f"Here is step {i} of the plan, in full detail.")])
        await turn.end()
    await memory.settled()


async def test_delete_thread_deletes_its_ledger_rows(store: Store) -> None:
    memory = memory_on(store)
    await talk(memory, THREAD, "r-keep")
    await talk(memory, "other", "r-keep", turns=4)
    assert (await memory.usage(thread_id=THREAD)).total().calls > 0
    assert any(line.startswith("model_calls") or "ModelCall" in line or "_model_calls" in line
               for line in scan(store, THREAD))
    kept = (await memory.usage(thread_id="other")).total()

    assert await memory.delete_thread(THREAD)

    assert scan(store, THREAD) == []
    assert (await memory.usage(thread_id=THREAD)).total().calls == 0
    assert (await memory.usage(thread_id="other")).total() == kept  # the other thread's rows stay
    await memory.aclose()


async def test_delete_resource_deletes_its_ledger_rows(store: Store) -> None:
    memory = memory_on(store)
    await talk(memory, "t1", RESOURCE)
    await talk(memory, "t2", RESOURCE, turns=4)
    await talk(memory, "keep", "u2", turns=4)
    assert (await memory.usage(resource_id=RESOURCE)).total().calls > 0
    assert scan(store, RESOURCE)

    counts = await memory.delete_resource(RESOURCE)

    assert scan(store, RESOURCE) == []
    assert counts["model_calls"] > 0
    assert (await memory.usage(resource_id=RESOURCE)).total().calls == 0
    assert (await memory.usage(resource_id="u2")).total().calls > 0
    await memory.aclose()

"""``delete_thread`` in resource scope with ``share_threads_in_resource``: a sibling's memory
does not keep what the deleted thread said (found by a hostile review of the core API).

With sharing on, a thread's observer is shown its siblings' observations. On main the default
offline observer took its "(changing from …)" values from all of them: t2's line "User stated
their vault code is KEEP-WOMBAT-123 (changing from DELETEME-AARDVARK-991)" quoted t1's code,
and so did the end markers on t2's messages. After ``delete_thread("t1")`` the deleted code was
still in t2's observations, context, generations and messages. Now the offline observer's
"changing from" comes from the thread's own lines only: a sibling's value is shown to the
actor (that is what sharing is for), never copied into this thread's memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.config import ObservationConfig, ReflectionConfig
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

GONE, KEPT = "DELETEME-AARDVARK-991", "KEEP-WOMBAT-123"


async def _talk(memory: Memory, thread: str, code: str, turns: int) -> None:
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread, resource_id="alice",
            messages=[Message.user(f"Turn {i}: my vault code is {code} and I keep bed {i} watered.")],
        )
        await turn.step([Message(role="assistant", parts=(ToolCallPart(tool_call_id=f"{thread}-{i}", tool_name="vault"),))])
        await turn.step([Message(role="tool", parts=(
            ToolResultPart(tool_call_id=f"{thread}-{i}", tool_name="vault", result="ok"),))])
        await turn.end([Message.assistant(f"Noted for bed {i}.")])
    await memory.settled()


async def test_a_deleted_threads_value_is_not_kept_in_a_sharing_sibling(tmp_path: Path) -> None:
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=True,
        observation=ObservationConfig(message_tokens=300), reflection=ReflectionConfig(observation_tokens=800),
    )
    async with Memory(f"sqlite:///{tmp_path}/m.db", config=config) as memory:
        await _talk(memory, "t1", GONE, 25)
        await _talk(memory, "t2", KEPT, 10)
        # positive control: while t1 exists, t2's actor is shown t1's value (sharing on)
        shared = "\n".join(m.text for m in (await memory.get_context("t2")).messages)
        assert GONE in shared and KEPT in await memory.get_observations("t2")
        await memory.delete_thread("t1")

        assert GONE not in await memory.get_observations("t2")  # on main: "(changing from DELETEME-…)"
        assert GONE not in "\n".join(m.text for m in (await memory.get_context("t2")).messages)
        for generation in await memory.list_generations("t2", limit=1_000):
            assert GONE not in generation.active_observations
        for message in await memory.list_messages("t2"):
            assert GONE not in message.model_dump_json()  # nor in the end markers on t2's messages
    for path in tmp_path.iterdir():
        assert GONE.encode() not in path.read_bytes(), path.name

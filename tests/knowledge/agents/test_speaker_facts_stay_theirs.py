"""What a user says about themselves stays theirs, whatever levels capture is configured to.

Capture files what the speaker says about themselves under the speaker's node (``User``). With
``node_level="org"`` that node was made at org scope, one for every user of the org, and with
``record_level="org"`` the records went to org scope too: bob asking "what is my phone number?"
was reminded of alice's, worded as his own ("[[User]] their phone number is …"). With
``node_level="resource"`` and ``record_level="org"`` every capture failed instead
(``KnowledgeNotFoundError``: a record at org scope cannot see a node of alice's scope), so
nothing was ever captured. Now the speaker's node and their records are never broader than
their resource, and a record is never broader than the scope that sees its node.
"""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio

PHONE = "+49 151 5550 7720"
ASK = "What is my phone number? Put it in my signature."


async def _reminded(memory: Memory, thread_id: str, resource_id: str) -> str:
    turn = await memory.begin_turn(thread_id=thread_id, resource_id=resource_id, messages=[Message.user(ASK)])
    shown = "\n".join(
        m.text for m in turn.context.messages if m.metadata.get("obsmem") in ("knowledge-reminder", "knowledge-pins")
    )
    await turn.end()
    return shown


@pytest.mark.parametrize(
    ("node_level", "record_level"),
    [("org", "org"), ("resource", "org"), ("org", "resource"), ("resource", "resource"), ("org", "thread")],
)
async def test_one_users_own_facts_never_reach_another_user(node_level: str, record_level: str) -> None:
    config = MemoryConfig(
        observation={"message_tokens": 120, "buffer_tokens": False},
        knowledge={"trust": "verified", "record_level": record_level, "node_level": node_level, "ceiling": "org"},
    )
    knowledge = Knowledge.in_memory()
    try:
        async with Memory("memory://", config=config, knowledge=knowledge) as memory:
            async with memory.turn(
                thread_id="a1", resource_id="alice", messages=[Message.user(f"My phone number is {PHONE}, please note it.")]
            ) as turn:
                await turn.step([Message.assistant("Noted.")])
            await memory.observe("a1")
            await memory.settled()
            runs = await memory.capture_knowledge("a1")  # catches up anything a failed run left
            await memory.settled()
            bob = await _reminded(memory, "b1", "bob")
            alice = await _reminded(memory, "a1" if record_level == "thread" else "a2", "alice")
    finally:
        await knowledge.close()
    assert PHONE not in bob, f"bob was reminded of alice's number: {bob!r}"
    assert PHONE in alice, f"alice's own number was not captured or not reminded ({runs!r}): {alice!r}"

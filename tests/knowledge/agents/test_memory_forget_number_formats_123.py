"""``Memory.forget`` of a phone number leaves the number in another format in the messages and
observations (helper-123's review). The knowledge side forgets every form of a number (its
national digits: :func:`obsmem.knowledge.store.values.forget_key`), but the conversation side
matches a case-sensitive substring (``obsmem.storage.forgetting``), so after
``forget("+49 151 2345678")`` the observation "User stated their phone number is 0151 2345678"
stays and the context shows it on every turn. Fixed (this was a strict xfail): the conversation's forget reads a
phone number by its national digits too (obsmem.phones, used by storage/forgetting.py)."""

from __future__ import annotations

import pytest

from .alice import alice_memory, said

pytestmark = pytest.mark.anyio


async def test_a_forgotten_number_leaves_no_other_format_in_the_conversation(anyio_backend: str) -> None:
    async with alice_memory() as (memory, knowledge, clock):
        scope = memory.knowledge_agents.scope(None, "alice", "t1").key  # type: ignore[union-attr]
        await said(memory, clock, "My phone number is 0151 2345678.", after_s=3600)
        await memory.forget("+49 151 2345678", resource_id="alice")
        assert (await knowledge.review.pending(scope)).items == []  # knowledge: gone (8dbb628)
        assert "2345678" not in await memory.get_observations("t1")
        assert not [m for m in await memory.list_messages("t1") if "2345678" in m.text]  # the message too

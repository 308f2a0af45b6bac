"""The privacy boundary holds before the knowledge store: what the knowledge agents capture from
observations, and what a user pins, is redacted with the same placeholders as model requests."""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.knowledge import Knowledge

from .knowledge_boundary import EMAIL, boundary_config, check_stored, stored_texts, tell_email_and_key

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("privacy", [True, False])
async def test_captured_and_pinned_text_is_redacted_before_the_knowledge_store(privacy: bool) -> None:
    config = boundary_config(privacy, buffer_tokens=False)
    events: list[str] = []
    async with Knowledge.in_memory() as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge,
                          on_event=lambda e: events.append(e.kind)) as memory:  # fmt: skip
            await tell_email_and_key(memory)
            await memory.observe("t1")
            await memory.settled()
            await memory.pin("t1", f"Always send invoices to {EMAIL}.")
        texts = await stored_texts(knowledge)
    check_stored(texts, events, privacy=privacy, who="the agents")

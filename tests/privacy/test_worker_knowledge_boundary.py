"""``obsmem worker --knowledge`` holds the privacy boundary too (issue 14): a Memory in queue mode
hands its knowledge work to a worker, and what the worker's agents capture is redacted before the
knowledge store exactly as in the application (the Memory-side test is test_knowledge_boundary)."""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.knowledge import Knowledge
from obsmem.storage import MemoryStore
from obsmem.worker import Worker

from .knowledge_boundary import boundary_config, check_stored, stored_texts, tell_email_and_key

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("privacy", [True, False])
async def test_the_worker_redacts_what_its_agents_capture(privacy: bool) -> None:
    config = boundary_config(privacy, buffer_tokens=0.5)
    events: list[str] = []
    store = MemoryStore()
    async with Knowledge.in_memory() as knowledge:
        async with Memory(store, config=config, knowledge=knowledge, background="queue") as memory:
            await tell_email_and_key(memory)
            await memory.observe("t1")
            await memory.settled()
            assert [item.kind for item in await store.list_work("knowledge")] == ["knowledge"]
            worker = Worker(store, config=config, knowledge=knowledge, poll_interval_s=0.01,
                            on_event=lambda e: events.append(e.kind))  # fmt: skip
            await worker.run(exit_when_idle=True)
        texts = await stored_texts(knowledge)
    check_stored(texts, events, privacy=privacy, who="the worker's agents")

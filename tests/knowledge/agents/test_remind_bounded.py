"""The remind agent's search is bounded by a cap on the request's words, not by the message's
size. Found by a hostile review: with 1,500 records in a user's scope, a 281 KiB message (32k
distinct words) made the reminder's search take 15.4 s (every word checked against every visible
record), holding the knowledge store's one worker thread, so another tenant's unrelated read
waited 15.7 s. Counted, not timed (:mod:`tests.integrity.work_count`), on the in-memory knowledge
store, whose search runs in this thread."""

from __future__ import annotations

import pytest

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import AgentSettings, RemindAgent
from obsmem.knowledge.store.scopes import Scope
from tests.integrity.work_count import async_work
from tests.knowledge.agents.test_agents_linear import _word

pytestmark = pytest.mark.anyio
T1 = Scope("acme", "alice", "t1")


def _request(words: int) -> str:
    return "Here is my log: " + " ".join(_word(i, 3) for i in range(words))


async def test_a_long_message_costs_the_reminder_no_more_than_a_shorter_one() -> None:
    """On main: 4× the request's words cost the reminder's run 4× the work (each word searched
    against every record: 2.9× here), so the cost had no bound but the message's size."""
    async with Knowledge.in_memory(embedder=LexicalHashEmbedder(64), clock=FakeClock()) as knowledge:
        node = await knowledge.node("Notes", "topic", T1.key)
        for i in range(60):
            await knowledge.append(node.id, f"note {_word(i, 1)} about {_word(i, 2)} and {_word(i, 5)}", T1.key,
                                   reason="fixture")  # fmt: skip
        agent = RemindAgent(knowledge, AgentSettings(remind_limit=3, remind_tokens=300), lambda t: len(t.split()))
        await agent.remind(_request(10), T1)  # warm up: caches, imports
        short, _ = await async_work(agent.remind(_request(400), T1))
        long, _ = await async_work(agent.remind(_request(1600), T1))
    # Reading the request itself is linear (≈ 47k events more for the 1,200 more words); since the
    # search reads only the rows its terms match (helper-168) it no longer hides that: capped 2.1×,
    # uncapped 3.9× (old search: 1.8× and 3.0×).
    assert long / short <= 2.5, f"4× the words cost {long / short:.1f}× the work"
    # positive control: a request naming a record still gets it
    async with Knowledge.in_memory(embedder=LexicalHashEmbedder(64), clock=FakeClock()) as knowledge:
        node = await knowledge.node("Dog", "topic", T1.key)
        record = await knowledge.append(node.id, "the dog Kiki sleeps in the kitchen", T1.key, reason="fixture")
        agent = RemindAgent(knowledge, AgentSettings(remind_limit=3, remind_tokens=300), lambda t: len(t.split()))
        reminder = await agent.remind(_request(1600) + " where does the dog Kiki sleep", T1)
        assert record.id in reminder.sources

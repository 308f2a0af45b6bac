"""``obsmem bench knowledge``: which facts the knowledge agents capture from LoCoMo conversations.

Each conversation is replayed through a ``Memory`` with a knowledge store (offline agents by
default, ``model`` for the LLM ones); the live records are then scored against the QA evidence
turns with :func:`obsmem.knowledge.agents.metrics.score_knowledge`: precision, recall,
duplicates per fact, contradictions left live, tokens per agent.

Only the user's (speaker A's) evidence turns count as facts to capture: the capture agent reads
what *the user* stated, and LoCoMo's speaker B plays the assistant in the replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from obsmem import Memory, MemoryConfig
from obsmem.bench.locomo import SCORED_CATEGORIES, LocomoConversation, load_locomo
from obsmem.bench.replay import replay
from obsmem.clock import FakeClock
from obsmem.config import KnowledgeConfig
from obsmem.knowledge import Knowledge, RecordView
from obsmem.knowledge.agents.metrics import KnowledgeScore, score_knowledge

__all__ = ["KnowledgeBenchRow", "run_knowledge_bench"]


@dataclass(frozen=True, slots=True)
class KnowledgeBenchRow:
    conversation: str
    score: KnowledgeScore

    def as_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation, **self.score.as_dict()}


def _evidence(conversation: LocomoConversation) -> list[str]:
    by_id = {turn.dia_id: turn for turn in conversation.turns}
    wanted: dict[str, str] = {}
    for question in conversation.questions:
        if question.category not in SCORED_CATEGORIES:
            continue
        for dia_id in question.evidence:
            turn = by_id.get(dia_id)
            if turn is not None and turn.speaker == conversation.speaker_a:
                wanted[dia_id] = turn.text
    return list(wanted.values())


async def _one(conversation: LocomoConversation, config: MemoryConfig, model: str | None) -> KnowledgeBenchRow:
    clock = FakeClock(conversation.turns[0].created_at) if conversation.turns else FakeClock()
    knowledge = Knowledge.in_memory(clock=clock)
    chosen = config.replace(knowledge=KnowledgeConfig(trust="verified", model=model))
    thread = f"locomo-{conversation.sample_id}"
    async with Memory("memory://", config=chosen, knowledge=knowledge, clock=clock) as memory:
        await replay(memory, conversation.messages(), thread_id=thread, resource_id=thread, clock=clock)
        await memory.observe(thread)
        await memory.settled()
        await memory.capture_knowledge(thread)
        await memory.curate_knowledge(thread)
        assert memory.knowledge_agents is not None
        scope = memory.knowledge_agents.scope(None, thread, thread)
        live = []
        for node in (await knowledge.store.list_nodes(scope.key, limit=1000)).items:
            live += (await knowledge.store.list_about(node.id, scope.key, view=RecordView(), limit=1000)).items
        runs = list(memory.knowledge_agents.runs)
    await knowledge.close()
    return KnowledgeBenchRow(conversation.sample_id, score_knowledge(live, _evidence(conversation), runs))


async def run_knowledge_bench(
    data: Path, *, conversations: list[str] | None = None, config: MemoryConfig | None = None,
    model: str | None = None,
) -> list[KnowledgeBenchRow]:
    """One row per LoCoMo conversation (``conversations``: only those sample ids)."""
    chosen = config or MemoryConfig(observation={"message_tokens": 2_000, "buffer_tokens": False},
                                    reflection={"observation_tokens": 8_000})
    return [await _one(c, chosen, model) for c in load_locomo(data, conversations)]

"""Scope names and a small shared fixture world for the knowledge conformance tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from obsmem.knowledge.store.base import TablesKnowledgeStore
from obsmem.knowledge.store.contract import NewNodeMention, Node, Record, RecordDraft, Tombstone, TrustState

ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"
BOB = "org:acme/resource:bob"


class Act(TypedDict):
    actor: str
    reason: str


ACT: Act = {"actor": "tester", "reason": "conformance"}


@dataclass
class World:
    jane: Node
    tea: Node
    secret: Node
    fact: Record  # verified, thread t1, about Jane, mentions Tea
    candidate: Record  # candidate, thread t1
    tombstone: Tombstone  # thread t1


async def build_world(store: TablesKnowledgeStore) -> World:
    """Everything private to thread t1 sits beside things shared by the whole resource."""
    jane = await store.create_node("Jane", "person", RES, **ACT)
    secret = await store.create_node("Secret plan", "project", T1, description="t1 only", **ACT)
    fact = await store.append_record(
        RecordDraft(
            jane.id,
            "Jane likes [[Tea]] a lot",
            T1,
            source_thread_id="t1",
            mentions=[NewNodeMention("Tea", RES)],
        ),
        **ACT,
    )
    tea = await store.resolve_node("tea", RES)
    assert tea is not None
    candidate = await store.append_record(
        RecordDraft(
            jane.id, "Jane might be moving", T1, source_thread_id="t1", trust=TrustState.CANDIDATE
        ),
        **ACT,
    )
    tombstone = await store.add_tombstone(jane.id, T1, "Jane hates tea", **ACT)
    return World(jane, tea, secret, fact, candidate, tombstone)

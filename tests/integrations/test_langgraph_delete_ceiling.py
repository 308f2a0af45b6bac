"""A LangGraph delete is a write: ``KnowledgeBaseStore`` refuses it beyond the store's ceiling,
as it refuses a put there.

An org store (ceiling ``org``) keeps a shared policy in ``("org:acme", "policies")``. Alice's
agent store (scope ``org:acme/resource:alice/thread:t1``, ceiling ``resource``) may read it (its
scope sees the org) but may not change it: ``aput`` is refused with ``CeilingExceededError``,
and ``adelete`` (which hard-erases the item and its history for the whole org) must be too.

On main: ``await alice.adelete(("org:acme", "policies"), "p1")`` returned without error
(``Failed: DID NOT RAISE <class 'obsmem.errors.CeilingExceededError'>``) and the org store's
``aget`` then returned ``None``: the policy and its history were erased for every user of the
org. The same went for the sync ``delete`` and for ``abatch([PutOp(..., None)])``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.store.base import PutOp

from obsmem import CeilingExceededError
from obsmem.integrations.langgraph import NAMESPACE_KIND, KnowledgeBaseStore
from obsmem.knowledge import Knowledge, RecordView

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE_T1 = "org:acme/resource:alice/thread:t1"
POLICIES = ("org:acme", "policies")


async def _history(org: KnowledgeBaseStore, knowledge: Knowledge) -> list[str]:
    """Every record's value (superseded ones too) of the org policy item, sorted."""
    nodes = (await knowledge.store.list_nodes(ORG, kind=NAMESPACE_KIND)).items
    [node] = [n for n in nodes if n.scope == ORG and n.metadata["langgraph"]["namespace"] == list(POLICIES)]
    page = await knowledge.store.list_about(node.id, ORG, view=RecordView(include_superseded=True), limit=100)
    return sorted(record.metadata["langgraph"]["value"]["text"] for record in page.items)


async def test_a_delete_beyond_the_ceiling_is_refused_and_keeps_the_item(tmp_path: Path) -> None:
    async with Knowledge.sqlite(tmp_path / "lg.db") as knowledge:
        org = KnowledgeBaseStore(knowledge, scope=ORG, ceiling="org")
        alice = KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="resource")
        await org.aput(POLICIES, "p1", {"text": "expenses need approval"})
        await org.aput(POLICIES, "p1", {"text": "expenses over 100 EUR need approval"})
        assert await _history(org, knowledge) == [
            "expenses need approval", "expenses over 100 EUR need approval"]
        # Alice's store sees the org item (reads are not capped by the ceiling) ...
        seen = await alice.aget(POLICIES, "p1")
        assert seen is not None and seen.value == {"text": "expenses over 100 EUR need approval"}

        # ... but may not change it: the put is refused (the reference behaviour) ...
        with pytest.raises(CeilingExceededError):
            await alice.aput(POLICIES, "p1", {"text": "no approval needed"})
        # ... and so is the delete, through each of LangGraph's entry points
        with pytest.raises(CeilingExceededError):
            await alice.adelete(POLICIES, "p1")
        with pytest.raises(CeilingExceededError):
            await alice.abatch([PutOp(POLICIES, "p1", None)])
        # the sync API, from a thread other than the loop's (as LangGraph runs sync nodes)
        with pytest.raises(CeilingExceededError):
            await asyncio.to_thread(alice.delete, POLICIES, "p1")
        # a delete of a key that does not exist there is refused too: the namespace is the limit
        with pytest.raises(CeilingExceededError):
            await alice.adelete(POLICIES, "no-such-key")

        # the org item and its whole history are still there, for the org and for Alice
        kept = await org.aget(POLICIES, "p1")
        assert kept is not None and kept.value == {"text": "expenses over 100 EUR need approval"}
        assert await _history(org, knowledge) == [
            "expenses need approval", "expenses over 100 EUR need approval"]
        assert [i.key for i in await alice.asearch(POLICIES)] == ["p1"]

        # positive controls: within the ceiling, deletes still work, for Alice's own items ...
        await alice.aput(("memories",), "city", {"text": "alice lives in Berlin"})
        await alice.aput(("org:acme", "resource:alice", "thread:t1", "scratch"), "n", {"text": "t1 note"})
        await alice.adelete(("memories",), "city")
        assert await alice.aget(("memories",), "city") is None
        await asyncio.to_thread(alice.delete, ("org:acme", "resource:alice", "thread:t1", "scratch"), "n")
        assert await alice.aget(("org:acme", "resource:alice", "thread:t1", "scratch"), "n") is None
        # ... and for the org store on the org item
        await org.abatch([PutOp(POLICIES, "p1", None)])
        assert await org.aget(POLICIES, "p1") is None
        assert await alice.aget(POLICIES, "p1") is None


async def test_a_put_refused_beyond_the_ceiling_leaves_no_namespace_behind(tmp_path: Path) -> None:
    """On main the refused put had already created the namespace's node in the org scope (kind
    ``langgraph-namespace``, named after the namespace): every org member's
    ``list_namespaces`` then listed ``("org:acme", "drafts")``, which holds nothing."""
    async with Knowledge.sqlite(tmp_path / "lg.db") as knowledge:
        org = KnowledgeBaseStore(knowledge, scope=ORG, ceiling="org")
        alice = KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="resource")
        with pytest.raises(CeilingExceededError):
            await alice.aput(("org:acme", "drafts"), "d1", {"text": "a draft for everyone"})
        assert (await knowledge.store.list_nodes(ORG, kind=NAMESPACE_KIND)).items == []
        assert await org.alist_namespaces() == []
        # Into an existing namespace there, as into a missing one: refused by the knowledge
        # store, and audited both times.
        await org.aput(POLICIES, "p1", {"text": "expenses need approval"})
        with pytest.raises(CeilingExceededError):
            await alice.aput(POLICIES, "p1", {"text": "no approval needed"})
        refused = [e for e in (await knowledge.store.list_activity(ORG, limit=100)).items
                   if e.action.value == "write-refused"]
        assert len(refused) == 2
        assert await org.alist_namespaces() == [POLICIES]

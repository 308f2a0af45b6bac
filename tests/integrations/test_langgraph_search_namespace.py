"""LangGraph store: a search hit's namespace addresses the item it came from (found by helper-141).

An org-level store (default_level='org') puts ("memories",) "x"; a resource-level store of the
same user searching ("memories",) got the org item with namespace ("memories",), but for that
store ("memories",) is its own resource's namespace: get(hit.namespace, hit.key) read None (or
its own item of that key), and a delete there erased its own item, not the hit. A hit (and a
listed namespace) that lives elsewhere than the bare namespace means to this store is named with
its scope segments now (("org:acme", "memories")), which reads and writes it."""

from __future__ import annotations

import pytest

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio


async def test_a_search_hit_is_readable_under_the_namespace_it_reports() -> None:
    async with Knowledge.in_memory() as knowledge:
        scope = "org:acme/resource:alice/thread:t1"
        org = KnowledgeBaseStore(knowledge, scope=scope, ceiling="org", default_level="org")
        await org.aput(("memories",), "x", {"v": "org item"})
        alice = KnowledgeBaseStore(knowledge, scope=scope, ceiling="resource")
        (hit,) = await alice.asearch(("memories",))
        assert hit.namespace == ("org:acme", "memories") and hit.value == {"v": "org item"}
        item = await alice.aget(hit.namespace, hit.key)
        assert item is not None and item.value == hit.value
        assert await alice.aget(("memories",), "x") is None  # alice's own namespace holds no "x"
        await alice.aput(("memories",), "x", {"v": "alice's own"})
        both = {("memories",): {"v": "alice's own"}, ("org:acme", "memories"): {"v": "org item"}}
        # what alice sees under ("memories",) still includes the org's items, each named so it is addressable
        assert {h.namespace: h.value for h in await alice.asearch(("memories",))} == both
        assert {h.namespace: h.value for h in await alice.asearch(("org:acme",))} == {("org:acme", "memories"): {"v": "org item"}}
        for hit in await alice.asearch(("memories",)):
            assert (await alice.aget(hit.namespace, hit.key)).value == hit.value  # type: ignore[union-attr]
        assert ("org:acme", "memories") in await alice.alist_namespaces()
        # the org store reads what it wrote under its own name, and under the explicit one
        assert (await org.aget(("memories",), "x")).value == {"v": "org item"}  # type: ignore[union-attr]
        assert (await org.aget(("org:acme", "memories"), "x")).value == {"v": "org item"}  # type: ignore[union-attr]
        # written under the explicit name, the org store's bare name finds the same item
        await org.aput(("org:acme", "memories"), "y", {"v": "org y"})
        assert (await org.aget(("memories",), "y")).value == {"v": "org y"}  # type: ignore[union-attr]

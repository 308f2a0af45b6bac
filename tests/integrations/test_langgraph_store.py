"""LangGraph's BaseStore over obsmem knowledge: graphs read and write through ``compile(store=...)``,
namespaces map to scopes, ceilings and visibility are enforced by obsmem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore, GetOp, PutOp

from obsmem import CeilingExceededError, InvalidInputError, InvalidScopeError
from obsmem.knowledge import ActivityAction, Knowledge
from obsmem.integrations.langgraph import KnowledgeBaseStore, namespace_scope
from obsmem.knowledge import Scope
from tests.integrations.agent_model import AgentModel, ToolRule
from tests.models.wire_server import WireServer

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ALICE_T1 = "org:acme/resource:alice/thread:t1"
ALICE_T2 = "org:acme/resource:alice/thread:t2"
BOB_T1 = "org:acme/resource:bob/thread:t1"


class State(TypedDict):
    text: str
    found: list[str]


def memory_graph(store: BaseStore, namespace: tuple[str, ...]) -> Any:
    """A graph whose nodes remember the input and recall by search, through LangGraph's runtime store."""

    async def remember(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        key = f"note-{len(await runtime.store.asearch(namespace, limit=100))}"
        await runtime.store.aput(namespace, key, {"text": state["text"]})
        return {}

    async def recall(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        items = await runtime.store.asearch(namespace, query=state["text"], limit=5)
        return {"found": [item.value["text"] for item in items]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


async def test_a_graph_writes_and_reads_knowledge_through_its_store() -> None:
    async with Knowledge.in_memory(actor="graph") as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        graph = memory_graph(store, ("memories",))
        await graph.ainvoke({"text": "Alice is allergic to peanuts", "found": []})
        result = await graph.ainvoke({"text": "Alice moved to Berlin", "found": []})
        assert result["found"][0] == "Alice moved to Berlin"
        # the items are knowledge records in Alice's resource scope (the default level)
        hits = await knowledge.search("peanuts", "org:acme/resource:alice")
        assert [h.scope for h in hits if h.kind == "record"] == ["org:acme/resource:alice"]
        assert "peanuts" in hits[0].text
        # a graph run for another thread of Alice sees them; Bob's does not
        sibling = await memory_graph(KnowledgeBaseStore(knowledge, scope=ALICE_T2), ("memories",)).ainvoke(
            {"text": "peanuts", "found": []})
        assert "Alice is allergic to peanuts" in sibling["found"]
        bob = await memory_graph(KnowledgeBaseStore(knowledge, scope=BOB_T1), ("memories",)).ainvoke(
            {"text": "peanuts", "found": []})
        assert bob["found"] == ["peanuts"]  # only what Bob's own run just wrote


async def test_put_get_update_delete_and_list() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        await store.aput(("prefs",), "Theme", {"value": "dark", "n": 1})
        await store.aput(("prefs",), "theme", {"value": "light", "n": 2})  # another key (case kept)
        first = await store.aget(("prefs",), "Theme")
        assert first is not None and first.value == {"value": "dark", "n": 1} and first.key == "Theme"
        await store.aput(("prefs",), "Theme", {"value": "blue", "n": 3})
        updated = await store.aget(("prefs",), "Theme")
        assert updated is not None and updated.value["value"] == "blue"
        assert updated.created_at == first.created_at and updated.updated_at >= first.updated_at
        assert {i.value["n"] for i in await store.asearch(("prefs",), filter={"n": {"$gte": 2}})} == {2, 3}
        assert [i.key for i in await store.asearch(("prefs",), filter={"value": "light"})] == ["theme"]
        await store.adelete(("prefs",), "Theme")
        assert await store.aget(("prefs",), "Theme") is None
        assert [i.key for i in await store.asearch(("prefs",))] == ["theme"]
        await store.aput(("org:acme", "resource:alice", "thread:t1", "scratch"), "k", {"v": 1})
        assert await store.alist_namespaces() == [("org:acme", "resource:alice", "thread:t1", "scratch"), ("prefs",)]
        assert await store.alist_namespaces(prefix=("prefs",)) == [("prefs",)]
        assert await store.alist_namespaces(max_depth=1) == [("org:acme",), ("prefs",)]


async def test_namespaces_map_to_scopes() -> None:
    default = Scope.parse("org:acme/resource:alice")
    assert namespace_scope(("memories",), default) == default
    assert namespace_scope(("org:acme", "facts"), default) == Scope("acme")
    assert namespace_scope(("org:acme", "resource:alice", "thread:t9", "x"), default) == Scope("acme", "alice", "t9")


async def test_a_put_beyond_the_ceiling_is_refused_and_audited() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="resource")
        with pytest.raises(CeilingExceededError):
            await store.aput(("org:acme", "facts"), "policy", {"text": "everyone sees this"})
        events = (await knowledge.store.list_activity("org:acme")).items
        assert any(e.action == ActivityAction.WRITE_REFUSED for e in events)
        assert await store.aget(("org:acme", "facts"), "policy") is None
        # positive control: the same put with an org ceiling is stored, and the resource-level one
        # is fine under the resource ceiling
        await KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="org").aput(("org:acme", "facts"), "policy", {"t": 1})
        await store.aput(("org:acme", "resource:alice", "facts"), "k", {"t": 2})
        assert (await store.aget(("org:acme", "facts"), "policy")) is not None
        assert (await store.aget(("org:acme", "resource:alice", "facts"), "k")) is not None


async def test_another_scope_is_never_read_or_written() -> None:
    async with Knowledge.in_memory() as knowledge:
        alice = KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="thread")
        bob = KnowledgeBaseStore(knowledge, scope=BOB_T1, ceiling="thread")
        await alice.aput(("org:acme", "resource:alice", "thread:t1", "notes"), "secret", {"text": "alice secret plan"})
        await bob.aput(("org:acme", "resource:bob", "thread:t1", "notes"), "secret", {"text": "bob secret plan"})
        # positive control: each sees its own
        assert [i.value["text"] for i in await alice.asearch((), query="secret plan")] == ["alice secret plan"]
        assert [i.value["text"] for i in await bob.asearch((), query="secret plan")] == ["bob secret plan"]
        assert [i.value["text"] for i in await alice.asearch(("org:acme",))] == ["alice secret plan"]
        # negative: naming the other's namespace is refused, for reads and writes
        with pytest.raises(InvalidScopeError):
            await alice.aget(("org:acme", "resource:bob", "thread:t1", "notes"), "secret")
        with pytest.raises(InvalidScopeError):
            await alice.aput(("org:acme", "resource:bob", "thread:t1", "notes"), "x", {"text": "planted"})
        assert await alice.alist_namespaces() == [("org:acme", "resource:alice", "thread:t1", "notes")]
        # a sibling thread of Alice does not see t1's thread-scoped items either
        sibling = KnowledgeBaseStore(knowledge, scope=ALICE_T2)
        assert await sibling.asearch((), query="secret plan") == []


async def test_a_synchronous_node_uses_the_store_from_its_thread() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)

        def sync_node(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
            assert runtime.store is not None
            runtime.store.put(("sync",), "k", {"text": state["text"]})
            item = runtime.store.get(("sync",), "k")
            return {"found": [item.value["text"]] if item else []}

        builder = StateGraph(State)
        builder.add_node("n", sync_node)
        builder.add_edge(START, "n")
        graph = builder.compile(store=store)
        await store.alist_namespaces()  # the loop the store runs on
        result = await graph.ainvoke({"text": "from a thread", "found": []})
        assert result["found"] == ["from a thread"]


async def test_items_persist_in_a_sqlite_knowledge_store(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.db"
    async with Knowledge.sqlite(path) as knowledge:
        await KnowledgeBaseStore(knowledge, scope=ALICE_T1).aput(("memories",), "city", {"city": "Berlin"})
    async with Knowledge.sqlite(path) as knowledge:
        item = await KnowledgeBaseStore(knowledge, scope=ALICE_T2).aget(("memories",), "city")
    assert item is not None and item.value == {"city": "Berlin"}


def test_the_example_runs_ten_turns_against_the_local_server() -> None:
    model = AgentModel(rules=[
        ToolRule(r"remember that (.+)", "remember", lambda m: {"fact": m.group(1)}),
        ToolRule(r"what do you know about (\w+)", "recall", lambda m: {"query": m.group(1)}),
    ])
    with WireServer() as wire:
        wire.responder = model
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples" / "langgraph_store.py"), "--base-url", f"{wire.url}/v1",
             "--model", "agent-test-model"],
            capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": "test-key"},
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("user: ") == 10
    assert "The tool said: remembered: my sister Anna lives in Lyon" in done.stdout
    assert "The tool said: my sister Anna lives in Lyon" in done.stdout  # recalled through the store
    assert "I am allergic to peanuts" in done.stdout.split("what do you know about peanuts?", 1)[1]
    records = done.stdout.split("knowledge records about Anna:", 1)[1]
    assert "Anna lives in Lyon" in records
    assert model.invalid == [] and model.tool_calls == 10


async def test_bad_arguments_raise_obsmem_errors() -> None:
    async with Knowledge.in_memory() as knowledge:
        with pytest.raises(InvalidInputError, match="knowledge"):
            KnowledgeBaseStore("not knowledge", scope=ALICE_T1)  # type: ignore[arg-type]
        with pytest.raises(InvalidScopeError):
            KnowledgeBaseStore(knowledge, scope="alice")
        with pytest.raises(InvalidScopeError, match="ceiling"):
            KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="galaxy")
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1)
        with pytest.raises(InvalidInputError, match="namespace"):
            await store.abatch([GetOp(("",), "k")])  # LangGraph checks puts itself; reads come straight here
        with pytest.raises(InvalidInputError, match="ttl"):
            await store.abatch([PutOp(("n",), "k", {"v": 1}, ttl=5.0)])  # aput refuses it before (supports_ttl)
        with pytest.raises(InvalidInputError, match="async"):
            store.put(("n",), "k", {"v": 1})  # on the event loop's own thread: would deadlock, refused


async def test_a_delete_leaves_no_copy_of_the_value_in_the_database(tmp_path: Path) -> None:
    """LangGraph's delete means the item is gone: a user who asks an agent to delete a stored
    secret must not find it in the database file, its log or the audit trail. Before the fix the
    delete was a soft remove: every version stayed in the file and in the audit events."""
    secret = "SSN-078-05-1120-DELETEME"
    path = tmp_path / "lg.db"
    async with Knowledge.sqlite(path) as knowledge:
        store = KnowledgeBaseStore(knowledge, scope=ALICE_T1, ceiling="resource")
        await store.aput(("memories",), "ssn", {"text": f"my ssn is {secret}"})
        await store.aput(("memories",), "ssn", {"text": f"updated: ssn {secret} (confirmed)"})
        await store.aput(("memories",), "color", {"text": "blue"})
        await store.adelete(("memories",), "ssn")
        assert await store.aget(("memories",), "ssn") is None
        assert [i.key for i in await store.asearch(("memories",))] == ["color"]
        events = (await knowledge.store.list_activity("org:acme/resource:alice", limit=1000)).items
        assert not [e.action for e in events if secret in e.model_dump_json()], "the audit log keeps the value"
        assert ActivityAction.RECORD_DELETED in {e.action for e in events}, "the delete itself is audited"
        on_disk = {f.name: f.read_bytes().count(secret.encode()) for f in tmp_path.iterdir()}
        assert not any(on_disk.values()), f"copies of the deleted value while open: {on_disk}"
        await store.aput(("memories",), "ssn", {"text": "a new value under the same key"})
        again = await store.aget(("memories",), "ssn")
        assert again is not None and again.value == {"text": "a new value under the same key"}
    on_disk = {f.name: f.read_bytes().count(secret.encode()) for f in tmp_path.iterdir()}
    assert not any(on_disk.values()), f"copies of the deleted value after closing: {on_disk}"

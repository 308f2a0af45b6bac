"""Erasing a user's knowledge once the user has no live thread left.

``forget`` and ``delete_resource`` found the knowledge scopes to erase from the resource's *live*
threads only, so once those were deleted (one by one, or never there: knowledge written through
``remember``), the knowledge stayed and was shown to the user's next thread. They now also find
the scopes the knowledge store itself holds for the resource (every org for a library caller;
within ``knowledge_within`` for a confined one, never another org's), and for a whole-store
forget every org's. Each test runs on every adapter pair (in memory, SQLite, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import InvalidInputError, Memory, MemoryConfig
from obsmem.cli import app
from obsmem.knowledge import Knowledge
from obsmem.knowledge.agents import CAPTURE_GUIDANCE
from obsmem.types import Message

from .scan import KNOWLEDGE_TABLES, scan_sqlite
from .test_forget import config
from .test_knowledge_sentinel import Stores, stores  # noqa: F401  (the fixture)

SECRET = "ZEBRAQUUX42"


async def _alice_pinned_then_thread_deleted(stores: Stores, org: str | None) -> Memory:
    """Alice pins a fact (resource level, the default), then deletes her only thread."""
    memory = Memory(stores.store, config=config("thread"), max_turn_wait=None,
                    knowledge=Knowledge(stores.knowledge, actor="tester"))  # fmt: skip
    await memory.create_thread("t1", "alice", org_id=org)
    await memory.pin("t1", f"Always mention the gate code {SECRET}-PIN.")
    assert await memory.delete_thread("t1")
    assert stores.scan(SECRET), "the pin is the resource's, not the thread's: it outlives the thread"
    return memory


async def _shown_to_a_new_thread(memory: Memory, org: str | None) -> bool:
    await memory.create_thread("t2", "alice", org_id=org)
    pins = await memory.list_pins("t2")
    context = await memory.get_context("t2")
    return any(SECRET in pin.text for pin in pins) or any(SECRET in (m.text or "") for m in context.messages)


@pytest.mark.anyio
async def test_whole_store_forget_reaches_knowledge_without_live_threads(stores: Stores) -> None:
    """On main: ``KeyError: 'knowledge_records'``: ``forget(value)`` returned no ``knowledge_*``
    count at all (no live thread, so no org to forget in); the pin stayed in
    ``knowledge_records`` and was shown to alice's next thread."""
    memory = await _alice_pinned_then_thread_deleted(stores, None)

    counts = await memory.forget(SECRET)

    assert counts["knowledge_records"] == 1
    assert stores.scan(SECRET) == []
    assert not await _shown_to_a_new_thread(memory, None)
    await memory.aclose()


@pytest.mark.anyio
async def test_delete_resource_reaches_its_knowledge_in_its_org_without_live_threads(stores: Stores) -> None:
    """On main: ``assert 0 == 1`` on ``knowledge_records``: with alice's thread in org ``acme``
    deleted, ``delete_resource("alice")`` purged ``org:default/resource:alice`` only (its fallback
    for a resource without threads) and the pin in ``org:acme/resource:alice`` stayed."""
    memory = await _alice_pinned_then_thread_deleted(stores, "acme")

    counts = await memory.delete_resource("alice")

    assert counts["knowledge_records"] == 1
    assert stores.scan(SECRET) == []
    assert not await _shown_to_a_new_thread(memory, "acme")
    await memory.aclose()


@pytest.mark.anyio
async def test_forget_in_a_resource_reaches_its_org_not_the_default_one(stores: Stores) -> None:
    """On main: ``assert 0 == 1`` on ``knowledge_records``: ``forget(value, resource_id="alice")``
    counted ``knowledge_forgotten: 1`` only, a digest in ``org:default/resource:alice``, while the
    record in ``org:acme/resource:alice`` stayed."""
    memory = await _alice_pinned_then_thread_deleted(stores, "acme")

    counts = await memory.forget(SECRET, resource_id="alice")

    assert counts["knowledge_records"] == 1
    assert stores.scan(SECRET) == []
    assert len(await stores.knowledge.list_forgotten("org:acme/resource:alice")) == 1
    assert await stores.knowledge.list_forgotten("org:default/resource:alice") == []
    assert not await _shown_to_a_new_thread(memory, "acme")
    await memory.aclose()


@pytest.mark.anyio
async def test_confined_erasure_reaches_its_org_only(stores: Stores) -> None:
    """``knowledge_within`` (what the MCP ``forget`` tool and the REST resource delete pass): the
    resource's knowledge in that org goes, the same resource id's knowledge in another org stays.

    On main: ``forget(value, resource_id="alice", knowledge_within="org:acme/resource:alice")``
    raised InvalidInputError "the forget covers 'org:default/resource:alice', which is not within
    'org:acme/resource:alice'" once alice had no live thread (and ``delete_resource`` had no
    ``knowledge_within``)."""
    memory = await _alice_pinned_then_thread_deleted(stores, "acme")
    knowledge = Knowledge(stores.knowledge, actor="tester")
    other = await knowledge.node("User", "person", "org:globex/resource:alice")
    kept = await knowledge.append(other.id, f"globex's alice: {SECRET}-GLOBEX", "org:globex/resource:alice",
                                  reason="another tenant")  # fmt: skip

    counts = await memory.forget(SECRET, resource_id="alice", knowledge_within="org:acme/resource:alice")

    assert counts["knowledge_records"] == 1
    assert stores.scan(SECRET + "-PIN") == []
    assert await stores.knowledge.get_record(kept.id, "org:globex/resource:alice") is not None
    assert await stores.knowledge.list_forgotten("org:globex/resource:alice") == []
    assert not await _shown_to_a_new_thread(memory, "acme")

    await memory.pin("t2", "Another fact: the vault word is PLUMTREE77.")  # not the forgotten value
    with pytest.raises(InvalidInputError, match="knowledge_within"):  # a thread outside: refused, nothing deleted
        await memory.delete_resource("alice", knowledge_within="org:globex/resource:alice")
    assert (await memory.get_thread("t2")).org_id == "acme" and stores.scan("PLUMTREE77")
    assert await memory.delete_thread("t2")
    counts = await memory.delete_resource("alice", knowledge_within="org:acme/resource:alice")
    assert counts["knowledge_records"] == 1
    assert await stores.knowledge.get_record(kept.id, "org:globex/resource:alice") is not None
    assert stores.scan("PLUMTREE77") == []
    assert await stores.knowledge.list_forgotten("org:acme/resource:alice") == []  # purged with the rest
    await memory.aclose()


@pytest.mark.anyio
async def test_a_confined_forget_of_an_unknown_resource_answers_as_before(stores: Stores) -> None:
    """A resource with neither threads nor knowledge in the caller's org is refused exactly as one
    that exists nowhere, whether or not another org holds knowledge under that id (no probing).
    Passes on main too: it guards that reaching stored scopes kept this answer."""
    memory = Memory(stores.store, config=config("thread"), max_turn_wait=None,
                    knowledge=Knowledge(stores.knowledge, actor="tester"))  # fmt: skip
    knowledge = Knowledge(stores.knowledge, actor="tester")
    node = await knowledge.node("User", "person", "org:globex/resource:ghost")
    await knowledge.append(node.id, f"ghost knows {SECRET}", "org:globex/resource:ghost", reason="other tenant")

    answers = []
    for resource in ("ghost", "nobody"):
        with pytest.raises(InvalidInputError) as refused:
            await memory.forget(SECRET, resource_id=resource, knowledge_within=f"org:acme/resource:{resource}")
        answers.append(str(refused.value).replace(resource, "<id>"))
    assert answers[0] == answers[1]
    assert stores.scan(SECRET), "another org's knowledge is not touched"
    await memory.aclose()


@pytest.mark.anyio
async def test_delete_thread_drops_capture_guidance_learnt_only_in_it(stores: Stores) -> None:
    """The curate agent's ``capture-guidance`` nodes list the attributes of the user's records
    (a thread's own in a node of that thread, which its siblings never see); an attribute captured
    only in a deleted thread (records at thread level) must not stay listed anywhere.

    Once: after ``delete_thread("t1")`` the resource's node still read "Attributes in use for
    User: locker code. Give a changed value the same attribute …" though no record with that
    attribute was left (``'locker code' is contained here``)."""
    settings = config("thread").model_dump()
    settings["knowledge"] = {"record_level": "thread", "trust": "verified"}
    memory = Memory(stores.store, config=MemoryConfig(**settings), max_turn_wait=None,
                    knowledge=Knowledge(stores.knowledge, actor="tester"))  # fmt: skip
    for thread, said in (("t2", "My favourite colour is teal."), ("t1", "My locker code is LKQZ-5512.")):
        await memory.create_thread(thread, "alice")
        for i in range(4):
            text = said if i == 1 else f"Turn {i}: the project deadline moved to the 14th."
            async with memory.turn(thread_id=thread, resource_id="alice", messages=[Message.user(text)]) as turn:
                await turn.step([Message.assistant(f"Noted turn {i}.")])
        await memory.observe(thread)
        await memory.settled()
        await memory.curate_knowledge(thread)
    scope, own = "org:default/resource:alice", "org:default/resource:alice/thread:t1"
    before = await stores.knowledge.resolve_node(CAPTURE_GUIDANCE, own)
    assert before is not None and before.scope == own and "locker code" in (before.content or ""), before
    assert stores.scan("LKQZ-5512"), "the value is stored before the delete"

    assert await memory.delete_thread("t1")

    for where in (scope, own, "org:default/resource:alice/thread:t2"):
        after = await stores.knowledge.resolve_node(CAPTURE_GUIDANCE, where)
        assert after is None or "locker code" not in (after.content or ""), (where, after)
    assert stores.scan("locker code") == []
    # a value no timestamp or id can hold ("5512" alone once matched a timestamp's microseconds)
    assert stores.scan("LKQZ-5512") == []
    await memory.aclose()


def test_cli_forget_reaches_every_orgs_knowledge(tmp_path: Path) -> None:
    """``obsmem forget VALUE --knowledge …`` (the whole store) reaches the knowledge of an org with
    no live thread (knowledge written through ``remember``).

    On main: ``assert '1 knowledge_records' in …``: it printed "forgot 'ZEBRAQUUX42' in every
    thread: … 0 knowledge_records, … 1 knowledge_forgotten" (a digest in ``org:default`` only) and
    the record in ``org:acme/resource:carol`` stayed."""
    path = tmp_path / "cli.db"

    async def plant() -> None:
        async with Knowledge.sqlite(path, actor="tester") as knowledge, Memory(f"sqlite:///{path}") as memory:
            await memory.create_thread("t9", "bob")  # a live thread, in the default org
            await memory.save_messages("t9", [Message.user("hello")])
            node = await knowledge.node("User", "person", "org:acme/resource:carol")
            await knowledge.append(node.id, f"carol's door code is {SECRET}", "org:acme/resource:carol",
                                   reason="remembered")  # fmt: skip

    asyncio.run(plant())
    assert scan_sqlite(path, SECRET, KNOWLEDGE_TABLES)
    result = CliRunner().invoke(app, ["forget", SECRET, "--store", str(path), "--knowledge", str(path), "--yes"])
    assert result.exit_code == 0, result.output
    assert re.search(r"\b1 knowledge_record\b", result.output), result.output
    assert scan_sqlite(path, SECRET, KNOWLEDGE_TABLES) == []

"""Knowledge writes are scoped like reads (issue 13, item 4).

Every write names the scope it acts from and is checked against what that scope may see and
against record ceilings; raising a ceiling is an explicitly privileged call; tombstones match
normalised text and near-duplicates; every refusal is an audit event (``write-refused``).

The first tests are the reproductions from the issue, through the public facade
(:mod:`obsmem.knowledge`); the property test below runs every write method from random actor
scopes over a random world of orgs, resources and threads.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import CeilingExceededError, KnowledgeNotFoundError, ObsmemError, TombstonedValueError
from obsmem.knowledge import (
    ActivityAction,
    InMemoryKnowledgeStore,
    Knowledge,
    Level,
    RecordDraft,
    Scope,
    TrustState,
)
from obsmem.knowledge.store.contract import NewNodeMention

pytestmark = pytest.mark.anyio

ORG = "org:acme"
RES = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
T2 = "org:acme/resource:alice/thread:t2"
EVIL = "org:evil"
EVIL_THREAD = "org:evil/resource:mallory/thread:x"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Knowledge]:
    clock = FakeClock()
    embedder = LexicalHashEmbedder(32)
    if request.param == "memory":
        facade = Knowledge.in_memory(embedder=embedder, actor="agent", clock=clock)
    else:
        facade = Knowledge.sqlite(tmp_path / "k.db", embedder=embedder, actor="agent", clock=clock)
    async with facade:
        yield facade


async def refusals(knowledge: Knowledge, scope: str) -> list[dict[str, object]]:
    events = (await knowledge.store.list_activity(scope)).items
    return [e.details for e in events if e.action is ActivityAction.WRITE_REFUSED]


# -- the reproductions ---------------------------------------------------------------------------


async def test_another_orgs_actor_cannot_rename_a_node(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", ORG)
    for outsider in (EVIL, EVIL_THREAD):
        with pytest.raises(KnowledgeNotFoundError):
            await knowledge.store.update_node(
                jane.id, jane.version, scope=outsider, name="Pwned", actor="mallory", reason="x"
            )
    sibling_private = await knowledge.node("Plan", "project", T2)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.store.update_node(
            sibling_private.id, 1, scope=T1, description="overwritten", actor="t1", reason="x"
        )
    assert (await knowledge.store.get_node(jane.id, ORG)).name == "Jane"  # type: ignore[union-attr]
    assert (await knowledge.store.get_node(sibling_private.id, T2)).description is None  # type: ignore[union-attr]
    renamed = await knowledge.store.update_node(jane.id, 1, scope=T1, name="Jane D.", actor="t1", reason="ok")
    assert renamed is not None and renamed.name == "Jane D."  # what a scope sees, it may write
    assert [d["operation"] for d in await refusals(knowledge, EVIL_THREAD)] == [
        "update_node"
    ] * 2  # and org:evil's


async def test_merge_does_not_move_a_thread_private_description_into_an_org_node(
    knowledge: Knowledge,
) -> None:
    public = await knowledge.node("Jane Doe", "person", ORG)
    private = await knowledge.node("J. Doe", "person", T1, description="t1 only: salary 90k")
    merged = await knowledge.store.merge_nodes(
        private.id, public.id, private.version, scope=T1, actor="t1", reason="same person"
    )
    assert merged is not None and merged.description is None
    assert (await knowledge.store.get_node(public.id, T2)).description is None  # type: ignore[union-attr]
    other = await knowledge.node("Other", "person", ORG)
    secret = await knowledge.node("Secret", "person", T1)
    for outsider in (T2, EVIL):  # neither sees the source
        with pytest.raises(KnowledgeNotFoundError):
            await knowledge.store.merge_nodes(secret.id, other.id, 1, scope=outsider, actor="x", reason="x")


async def test_append_onto_a_node_the_writer_cannot_see_is_refused(knowledge: Knowledge) -> None:
    sibling_node = await knowledge.node("Plan", "project", T2)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.append(sibling_node.id, "the plan is off", T1, reason="x")
    foreign = await knowledge.node("Acme secret", "project", ORG)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.append(foreign.id, "leaked", EVIL, reason="x")
    assert (await knowledge.store.list_about(sibling_node.id, T2)).items == []
    assert [d["operation"] for d in await refusals(knowledge, T1)] == ["append_record"]


async def test_a_wikilink_cannot_create_a_node_above_the_records_ceiling(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    with pytest.raises(CeilingExceededError):
        await knowledge.append(
            jane.id, "Jane is seeing [[Dr Who]]", T1, reason="x", max_scope="thread", default_scope=ORG
        )
    assert await knowledge.store.resolve_node("Dr Who", T1) is None
    with pytest.raises(CeilingExceededError):  # straight to the store, bypassing the facade
        await knowledge.store.append_record(
            RecordDraft(
                jane.id,
                "see [[Dr Who]]",
                T1,
                max_scope=Level.THREAD,
                mentions=[NewNodeMention("Dr Who", ORG)],
            ),
            actor="x",
            reason="x",
        )
    assert await knowledge.store.resolve_node("Dr Who", T1) is None
    kept = await knowledge.append(jane.id, "Jane is seeing [[Dr Who]]", T1, reason="x", max_scope="thread")
    made = await knowledge.store.resolve_node("Dr Who", T1)
    assert made is not None and made.scope == T1 and kept.mentions == (made.id,)
    hidden = await knowledge.node("Hidden", "note", T2)
    with pytest.raises(KnowledgeNotFoundError):  # a mention of a node the record cannot see
        await knowledge.store.append_record(
            RecordDraft(jane.id, "see it", T1, mentions=[hidden.id]), actor="x", reason="x"
        )


async def test_raising_a_ceiling_needs_a_privileged_call(knowledge: Knowledge) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    record = await knowledge.append(jane.id, "Jane has a diagnosis", T1, reason="x", max_scope="thread")
    with pytest.raises(CeilingExceededError, match="privileged"):
        await knowledge.raise_ceiling(record.id, T1, "org", reason="promote")
    with pytest.raises(CeilingExceededError):
        await knowledge.rescope(record.id, T1, ORG, reason="promote")
    assert (await knowledge.store.load_record(record.id)).scope == T1  # type: ignore[union-attr]
    assert (await knowledge.store.load_record(record.id)).max_scope is Level.THREAD  # type: ignore[union-attr]
    raised = await knowledge.raise_ceiling(record.id, T1, "resource", reason="consented", privileged=True)
    assert raised.max_scope is Level.RESOURCE
    assert [d["refusal"] for d in await refusals(knowledge, T1)] == ["ceiling", "privilege"]


@pytest.mark.parametrize(
    "again",
    [
        "Jane\u200bhates tea",  # a zero-width space
        "Jane hates\u00a0tea",  # a no-break space
        "JANE HATES TEA!!",
        "Ｊａｎｅ hates tea",  # fullwidth letters (NFKC)
        "Jane hates\u2060 t\u200cea",  # word joiner, zero-width non-joiner
        "Jane really hates tea",  # a trivial rewording: token-set Jaccard 0.75
        "Jane hates the tea",
    ],
)
async def test_a_tombstone_is_not_bypassed_by_invisible_characters_or_rewording(
    knowledge: Knowledge, again: str
) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    record = await knowledge.append(jane.id, "Jane hates tea", T1, reason="x")
    await knowledge.remove(record.id, T1, reason="user deleted it", tombstone=True)
    outcome = await knowledge.capture(
        jane.id, again, context=T1, proposed_level="thread", ceiling="thread", reason="re-observed"
    )
    assert outcome.status == "refused-tombstoned" and outcome.record is None
    with pytest.raises(TombstonedValueError):
        await knowledge.append(jane.id, again, T1, reason="again")
    assert (await knowledge.store.list_about(jane.id, T1)).items == []
    refused = await refusals(knowledge, T1)
    assert [d["refusal"] for d in refused] == ["tombstoned", "tombstoned"]
    assert all(d["operation"] == "append_record" for d in refused)


@pytest.mark.parametrize("different", ["Jane is not vegan", "Jane likes coffee", "Jane hates coffee"])
async def test_a_tombstone_does_not_swallow_different_values(knowledge: Knowledge, different: str) -> None:
    jane = await knowledge.node("Jane", "person", RES)
    for text in ("Jane is vegan", "Jane hates tea"):
        await knowledge.store.add_tombstone(jane.id, T1, text, actor="x", reason="deleted")
    outcome = await knowledge.capture(
        jane.id, different, context=T1, proposed_level="thread", ceiling="thread", reason="observed"
    )
    assert outcome.status == "captured"


async def test_tombstones_and_review_act_only_on_what_the_scope_sees(knowledge: Knowledge) -> None:
    private = await knowledge.node("Plan", "project", T2)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.store.add_tombstone(private.id, T1, "the plan", actor="x", reason="x")
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.store.add_tombstone(private.id, EVIL, "the plan", actor="x", reason="x")
    assert await knowledge.store.list_tombstones(T2) == []
    record = await knowledge.append(private.id, "Plan is X", T2, reason="x", trust=TrustState.CANDIDATE)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.review.approve(record.id, T1, reason="x")
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.review.edit(record.id, T1, "Plan is Y", reason="x")


async def test_a_node_cannot_mention_what_its_scope_cannot_see(knowledge: Knowledge) -> None:
    hidden = await knowledge.node("Hidden", "note", T2)
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.store.create_node("Index", "note", T1, mentions=[hidden.id], actor="x", reason="x")
    with pytest.raises(KnowledgeNotFoundError):
        await knowledge.store.create_node(
            "Index", "note", T1, mentions=[NewNodeMention("Elsewhere", T2)], actor="x", reason="x"
        )
    public = await knowledge.node("Public", "note", ORG)
    with pytest.raises(KnowledgeNotFoundError):  # an org node cannot point into a thread
        await knowledge.store.update_node(public.id, 1, scope=T2, mentions=[hidden.id], actor="x", reason="x")
    assert await knowledge.store.resolve_node("Index", T1) is None


# -- every write, from random scopes, over a random world -----------------------------------------

ORGS = ["a", "b"]
ALL_SCOPES = [
    key
    for org in ORGS
    for key in (
        [f"org:{org}"]
        + [f"org:{org}/resource:{r}" for r in ("r1", "r2")]
        + [f"org:{org}/resource:{r}/thread:{t}" for r in ("r1", "r2") for t in ("t1", "t2")]
    )
]
WRITES = [
    "create_node",
    "update_node",
    "merge_nodes",
    "append_record",
    "capture",
    "remove_record",
    "restore_record",
    "rescope_record",
    "raise_ceiling",
    "set_trust",
    "add_tombstone",
    "review_edit",
]

Operation = tuple[str, int | None, int, int, int, Level, bool, bool]
RECORD_WRITES = {
    "remove_record",
    "restore_record",
    "rescope_record",
    "raise_ceiling",
    "set_trust",
    "review_edit",
}

scope_index = st.integers(0, len(ALL_SCOPES) - 1)
level = st.sampled_from(list(Level))
node_spec = st.tuples(scope_index, st.text(alphabet="abc", min_size=1, max_size=2))
record_spec = st.tuples(st.integers(0, 50), st.one_of(scope_index, st.none()), level, st.booleans())
operation = st.tuples(
    st.sampled_from(WRITES),
    st.one_of(scope_index, st.none()),  # the acting scope; None: the target's own scope
    st.integers(0, 50),  # a node
    st.integers(0, 50),  # another node / a record
    scope_index,  # a target or mention scope
    level,
    st.booleans(),
    st.booleans(),  # target/mention scope: a random one, or one on the acting scope's chain
)


class Act(TypedDict):
    actor: str
    reason: str


def _sees(acting: str, item: str) -> bool:
    return Scope.parse(acting).sees(item)


async def _check_world(store: InMemoryKnowledgeStore) -> None:
    """What must hold after any sequence of writes, whoever made them."""
    nodes = store.tables.nodes
    for record in store.tables.records.values():
        assert Scope.parse(record.scope).level >= record.max_scope, record
        assert _sees(record.scope, nodes[record.node_id].scope), record
        for target in record.mentions:
            assert _sees(record.scope, nodes[target].scope), record
    for node in nodes.values():
        for target in node.mentions:
            assert _sees(node.scope, nodes[target].scope), node
        if node.merged_into is not None:
            assert _sees(node.scope, nodes[node.merged_into].scope), node
    for tombstone in store.tables.tombstones.values():
        assert _sees(tombstone.scope, nodes[tombstone.node_id].scope), tombstone


async def _run_world(
    node_specs: list[tuple[int, str]],
    record_specs: list[tuple[int, int | None, Level, bool]],
    ops: list[Operation],
) -> None:
    knowledge = Knowledge.in_memory(embedder=LexicalHashEmbedder(16), actor="setup", clock=FakeClock())
    store = knowledge.store
    assert isinstance(store, InMemoryKnowledgeStore)
    node_ids: list[str] = []
    for node_scope, name in node_specs:
        node_ids.append((await knowledge.node(name, "thing", ALL_SCOPES[node_scope])).id)
    record_ids: list[str] = []
    for node_pick, scope, ceiling, candidate in record_specs:
        node = store.tables.nodes[node_ids[node_pick % len(node_ids)]]
        where = ALL_SCOPES[scope] if scope is not None else node.scope
        if not _sees(where, node.scope) or Scope.parse(where).level < ceiling:
            continue
        trust = TrustState.CANDIDATE if candidate else TrustState.VERIFIED
        made = await knowledge.append(
            node.id, f"fact {len(record_ids)}", where, reason="w", max_scope=ceiling, trust=trust
        )
        record_ids.append(made.id)
    for method, acting_i, node_i, other_i, target_i, ceiling, flag, on_chain in ops:
        node_id = node_ids[node_i % len(node_ids)]
        other_node = node_ids[other_i % len(node_ids)]
        record_id = record_ids[other_i % len(record_ids)] if record_ids else None
        node = store.tables.nodes[node_id]
        record = store.tables.records[record_id] if record_id else None
        if acting_i is not None:
            acting = ALL_SCOPES[acting_i]
        elif record is not None and method in RECORD_WRITES:
            acting = record.scope
        else:
            acting = node.scope
        chain = Scope.parse(acting).visible_keys()
        target = chain[target_i % len(chain)] if on_chain else ALL_SCOPES[target_i]
        before_nodes = dict(store.tables.nodes)
        before_records = dict(store.tables.records)
        act: Act = {"actor": "fuzz", "reason": "fuzz"}
        # Whether the acting scope may touch the target at all (visibility; ceilings are checked
        # by the world invariants afterwards).
        visible = {
            "create_node": True,
            "update_node": _sees(acting, node.scope),
            "merge_nodes": _sees(acting, node.scope),
            "append_record": _sees(acting, node.scope),
            "capture": _sees(acting, node.scope),
            "add_tombstone": _sees(acting, node.scope),
            "raise_ceiling": False,  # never without privileged=True
        }.get(method, record is not None and _sees(acting, record.scope))
        try:
            if method == "create_node":
                mention = NewNodeMention("m", target) if flag else other_node
                await store.create_node("new", "thing", acting, mentions=[mention], **act)
            elif method == "update_node":
                await store.update_node(
                    node_id,
                    node.version,
                    scope=acting,
                    name="renamed",
                    description="d",
                    mentions=[other_node] if flag else None,
                    **act,
                )
            elif method == "merge_nodes":
                await store.merge_nodes(node_id, other_node, node.version, scope=acting, **act)
            elif method == "append_record":
                mention = NewNodeMention("m", target) if flag else other_node
                await store.append_record(
                    RecordDraft(node_id, "appended", acting, max_scope=ceiling, mentions=[mention]), **act
                )
            elif method == "capture":
                await knowledge.capture(
                    node_id, "see [[m]]", context=acting, proposed_level=ceiling, ceiling=ceiling, reason="c"
                )
            elif method == "add_tombstone":
                await store.add_tombstone(node_id, acting, "fact 0", **act)
            elif record_id is None:
                continue
            elif method == "remove_record":
                await store.remove_record(record_id, acting, tombstone=flag, **act)
            elif method == "restore_record":
                await store.restore_record(record_id, acting, **act)
            elif method == "rescope_record":
                await store.rescope_record(record_id, acting, target, **act)
            elif method == "raise_ceiling":
                await store.raise_ceiling(record_id, acting, ceiling, **act)
            elif method == "set_trust":
                trust = TrustState.VERIFIED if flag else TrustState.REJECTED
                await store.set_trust(record_id, acting, trust, **act)
            elif method == "review_edit":
                await knowledge.review.edit(record_id, acting, "edited", reason="e")
            succeeded = True
        except ObsmemError:
            succeeded = False
        if succeeded and not visible:
            changed = before_nodes != store.tables.nodes or before_records != store.tables.records
            assert not changed, f"{method} from {acting} changed what it cannot see"
        if not succeeded:
            assert before_nodes == store.tables.nodes and before_records == store.tables.records
        await _check_world(store)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(node_spec, min_size=1, max_size=8),
    st.lists(record_spec, min_size=1, max_size=8),
    st.lists(operation, min_size=1, max_size=12),
)
def test_no_write_succeeds_on_what_the_actor_cannot_see_or_beyond_a_ceiling(
    node_specs: list[tuple[int, str]],
    record_specs: list[tuple[int, int | None, Level, bool]],
    ops: list[Operation],
) -> None:
    asyncio.run(_run_world(node_specs, record_specs, ops))

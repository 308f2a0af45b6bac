"""LangGraph's long-term memory (``BaseStore``) over obsmem's knowledge store, ceilings enforced.

::

    from langgraph.graph import StateGraph
    from obsmem.knowledge import Knowledge
    from obsmem.integrations.langgraph import KnowledgeBaseStore

    knowledge = Knowledge.sqlite("knowledge.db", actor="my-agent")
    store = KnowledgeBaseStore(knowledge, scope="org:acme/resource:alice/thread:t1", ceiling="resource")
    graph = builder.compile(store=store)      # nodes use store.aput / aget / asearch as usual

**Namespaces and scopes.** A namespace opens with the scope it lives in, one segment per level
(``("org:acme", "resource:alice", "memories")`` lives in ``org:acme/resource:alice``); the rest
names the collection. A namespace without scope segments lives in the store's own scope cut to
``default_level`` (``("memories",)`` → ``org:acme/resource:alice`` with the default
``"resource"``). Pass ``namespace_scope=`` to map namespaces your own way.

**What is enforced.** The store acts from ``scope``: it reads and writes only namespaces whose
scope that scope sees (itself and its ancestors; a sibling thread or another user is refused
with :class:`~obsmem.errors.InvalidScopeError`), and every item is a knowledge record whose
ceiling is ``ceiling``, so a put into a namespace broader than the ceiling is refused by the
knowledge store itself (:class:`~obsmem.errors.CeilingExceededError`, audited as
``write-refused``), and leaves nothing there (no namespace node is made for it); a delete
there is refused with the same error by this store, before it touches the knowledge store
(not audited). Searches read through the knowledge store's
visibility rules, so they never return an item of a scope the store's scope does not see.

**How items are kept.** A namespace is a node (kind ``langgraph-namespace``) named by the
namespace as written: forgetting a value one of its labels holds (``memory.forget``) deletes the
namespace with its items, and a later put there is refused (``TombstonedValueError``). An item is a record
about it whose attribute is the key, text the value as JSON (so knowledge search finds it) and
metadata the value itself. A put appends a record that supersedes the previous one (history is
kept while the item lives); a delete erases the item with its history: the records are
hard-deleted (:meth:`~obsmem.knowledge.Knowledge.erase`), no copy of the value stays. ``query`` searches
use the knowledge facade's fused lexical + semantic search (where other namespaces' hits fill what
it returns, the namespace's other items follow by their vectors' likeness); ``filter`` matches values as
LangGraph's own stores do: by equality (an object by the fields it names) or
``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``. TTLs are not supported.

The store is async (``abatch``); ``batch`` works from a thread other than that of the event loop
the store was made on (or, made outside one, that last ran ``abatch``): LangGraph runs synchronous
nodes and tools of an async graph in threads. A call that loop does not take within 30 s (its
thread held by ``graph.invoke`` called from async code) raises :class:`~obsmem.errors.InvalidInputError`
instead of waiting for good.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from obsmem.errors import CeilingExceededError, InvalidInputError, InvalidScopeError
from obsmem.knowledge import Knowledge, Level, Node, Record, RecordDraft, RecordView, Scope

__all__ = ["NAMESPACE_KIND", "KnowledgeBaseStore", "namespace_scope"]

NAMESPACE_KIND = "langgraph-namespace"
_LEVELS = ("org", "resource", "thread")
_META = "langgraph"
_SEARCH_LIMIT = 1000  # the most hits one knowledge search returns
_LOOP_START_WAIT_S = 30.0  # how long a synchronous call waits for the store's event loop to take it


def namespace_scope(namespace: tuple[str, ...], default: Scope) -> Scope:
    """The scope a namespace lives in: its leading ``org:``/``resource:``/``thread:`` segments,
    else ``default``."""
    ids: list[str] = []
    for segment, level in zip(namespace, _LEVELS, strict=False):
        if not segment.startswith(f"{level}:"):
            break
        ids.append(segment[len(level) + 1 :])
    if not ids:
        return default
    return Scope(*ids)


_HEX = "hex:"


def _attribute(key: str) -> str:
    """The record attribute for ``key``: the store casefolds attributes, so keys that are not
    already in that form are spelled in hex (two keys differing in case stay two items), and so
    are keys that look spelled (``"hex:41"``), which would otherwise be the attribute of ``"A"``."""
    plain = key == key.strip().casefold() and key and not key.startswith(_HEX)
    return key if plain else _HEX + key.encode().hex()


def _attributes(key: str) -> tuple[str, ...]:
    """The attributes ``key``'s records may have: :func:`_attribute`'s, and for a key that looks
    spelled, the key itself (how such keys were stored before they were spelled too)."""
    spelled = _attribute(key)
    legacy = key if key == key.strip().casefold() and key else spelled
    return (spelled,) if legacy == spelled else (spelled, legacy)


def _is_item(record: Record, key: str) -> bool:
    """``record`` is a record of the item ``key`` (its attribute, and the exact key it was put with)."""
    return record.attribute in _attributes(key) and record.metadata[_META].get("key") == key


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    return all(_fits(value.get(field), wanted) for field, wanted in conditions.items())


def _fits(actual: Any, wanted: Any) -> bool:
    """``actual`` meets ``wanted`` as LangGraph's own stores match a filter: operators, an object
    by the fields it names (``{"meta": {"lang": "en"}}`` matches ``{"lang": "en", "source": ...}``),
    a list item by item, anything else by equality."""
    if isinstance(wanted, Mapping) and wanted and all(str(k).startswith("$") for k in wanted):
        return all(_operator(actual, operator, operand) for operator, operand in wanted.items())
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(_fits(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple) and len(actual) == len(wanted)
            and all(_fits(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, operator: str, operand: Any) -> bool:
    try:
        return bool({
            "$eq": lambda: actual == operand, "$ne": lambda: actual != operand,
            "$gt": lambda: actual > operand, "$gte": lambda: actual >= operand,
            "$lt": lambda: actual < operand, "$lte": lambda: actual <= operand,
        }[operator]())
    except KeyError:
        raise InvalidInputError(f"filter: unknown operator {operator!r}", argument="filter") from None
    except TypeError:
        return False


class KnowledgeBaseStore(BaseStore):
    """A LangGraph ``BaseStore`` over a :class:`~obsmem.knowledge.Knowledge` (see the module docstring).

    ``scope``: the scope the store acts from (``org:…/resource:…[/thread:…]``). ``ceiling``: the
    broadest level its items may be stored at. ``default_level``: where namespaces without scope
    segments live. ``namespace_scope``: a custom ``(namespace, default) -> Scope`` mapping.
    """

    supports_ttl = False

    def __init__(
        self,
        knowledge: Knowledge,
        *,
        scope: str | Scope,
        ceiling: Level | str = Level.RESOURCE,
        default_level: Level | str | None = None,
        namespace_scope: Callable[[tuple[str, ...], Scope], Scope] = namespace_scope,
    ) -> None:
        if not isinstance(knowledge, Knowledge):
            raise InvalidInputError(
                f"knowledge: expected an obsmem Knowledge, got {type(knowledge).__name__}",
                argument="knowledge",
            )
        self.knowledge = knowledge
        self.scope = Scope.parse(scope)
        self.ceiling = _level(ceiling, "ceiling")
        level = Level.RESOURCE if default_level is None else _level(default_level, "default_level")
        self.default_scope = self.scope.at(min(level, self.scope.level))
        self.namespace_scope = namespace_scope
        # The loop synchronous calls are sent to: the one the store is made on (as LangGraph's
        # async stores take it), else the last that ran abatch. Without it a sync tool or node
        # that is the first to use the store in an async run (LangGraph runs it in a thread) was refused.
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()

    # -- LangGraph's entry points ---------------------------------------------------------------
    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self._loop = asyncio.get_running_loop()
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise InvalidInputError(f"Unknown store operation {type(op).__name__}", argument="ops")
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self._loop
        if loop is None or not loop.is_running() or _on_loop(loop):
            raise InvalidInputError(
                "KnowledgeBaseStore is async: use the a* methods (aget, aput, asearch) or run the graph with "
                "ainvoke; synchronous calls work from nodes LangGraph runs in threads of an async run "
                "(make the store inside the event loop that runs the graph)",
                argument="ops",
            )
        # A loop whose thread is held by synchronous code (graph.invoke called from a coroutine,
        # its tools run in threads) never runs the call: it is given up, unstarted, after
        # _LOOP_START_WAIT_S, where waiting for it would hang the run for good.
        lock = threading.Lock()
        started = threading.Event()
        state = ["waiting"]

        async def run() -> list[Result]:
            with lock:
                if state[0] == "abandoned":
                    return []
                state[0] = "started"
                started.set()
            return await self.abatch(list(ops))

        future = asyncio.run_coroutine_threadsafe(run(), loop)
        if not started.wait(_LOOP_START_WAIT_S):
            with lock:
                abandoned = state[0] == "waiting"
                if abandoned:
                    state[0] = "abandoned"
            if abandoned:
                future.cancel()
                raise InvalidInputError(
                    f"KnowledgeBaseStore: the event loop the store runs on did not take this call within "
                    f"{_LOOP_START_WAIT_S:g} s: its thread is held, as by graph.invoke/agent.invoke called "
                    "from async code (the call would wait for it for good). Run the graph with ainvoke/astream "
                    "there, or invoke it from a thread (asyncio.to_thread).",
                    argument="ops",
                )
        return future.result()

    # -- namespaces --------------------------------------------------------------------------------
    def _scope_of(self, namespace: tuple[str, ...]) -> Scope:
        if not namespace or not all(isinstance(s, str) and s for s in namespace):
            raise InvalidInputError(
                f"namespace: expected a tuple of non-empty strings, got {namespace!r}", argument="namespace"
            )
        for label in namespace:  # the node's name holds the labels as written
            try:
                label.encode()
            except UnicodeEncodeError:
                raise InvalidInputError(
                    f"namespace: the label {label!r} holds a lone surrogate (not UTF-8 text)", argument="namespace"
                ) from None
        return self.namespace_scope(tuple(namespace), self.default_scope)

    def _visible(self, namespace: tuple[str, ...]) -> Scope:
        scope = self._scope_of(namespace)
        if not self.scope.sees(scope):
            raise InvalidScopeError(
                f"Namespace {namespace!r} lives in scope '{scope.key}', which this store (acting from "
                f"'{self.scope.key}') may not read or write: only its own scope and its ancestors."
            )
        return scope

    @staticmethod
    def _node_name(namespace: tuple[str, ...]) -> str:
        """The namespace's node name: the namespace as written, so forgetting a value one of its
        labels holds finds the node and deletes it with its items, and a digest of it, as node
        names are case-insensitive (``("Memories",)`` and ``("memories",)`` stay two)."""
        written = json.dumps(list(namespace), ensure_ascii=False)
        return f"langgraph:{written}#{hashlib.sha256(written.encode()).hexdigest()[:16]}"

    @staticmethod
    def _hex_node_name(namespace: tuple[str, ...]) -> str:
        """The name earlier versions gave a namespace's node (still read): the namespace spelled
        in hex, which forgetting a value one of its labels holds did not find."""
        return "langgraph:" + json.dumps(list(namespace)).encode().hex()

    def _spellings(self, namespace: tuple[str, ...], scope: Scope) -> list[tuple[str, ...]]:
        """``namespace`` and its other spelling for the same scope and collection: with its scope
        segments (``("org:acme", "memories")``) or without them (``("memories",)``, as a store
        whose default is that scope writes it). Either may name the namespace's node, whichever
        store made it. (A custom ``namespace_scope`` mapping: only ``namespace`` itself.)"""
        if self.namespace_scope is not namespace_scope:
            return [namespace]
        collection = namespace[_scope_segments(namespace) :]
        if not collection:
            return [namespace]
        other = collection if len(collection) < len(namespace) else (*_segments(scope), *collection)
        return [namespace, other]

    def _addressed(self, namespace: tuple[str, ...], scope: Scope) -> tuple[str, ...]:
        """How this store names a namespace another store wrote as ``namespace`` into ``scope``:
        as written when that names ``scope`` here too, else with its scope segments (an org-level
        store's ``("memories",)`` is ``("org:acme", "memories")`` to a resource-level store, whose
        own ``("memories",)`` is its resource's), so a search hit's namespace reads the hit."""
        try:
            if self._scope_of(namespace) == scope:
                return namespace
        except InvalidInputError:
            return namespace
        spellings = self._spellings(namespace, scope)
        return spellings[-1] if len(spellings) > 1 and _scope_segments(spellings[-1]) else namespace

    async def _node(self, namespace: tuple[str, ...], scope: Scope, *, create: bool) -> Node | None:
        for spelling in self._spellings(namespace, scope):
            for name in (self._node_name(spelling), self._hex_node_name(spelling)):
                node = await self.knowledge.store.resolve_node(name, scope.key)
                if node is not None and node.scope == scope.key:
                    return node
        if not create:
            return None
        name = self._node_name(namespace)
        return await self.knowledge.store.create_node(
            name, NAMESPACE_KIND, scope.key, actor=self.knowledge.actor, reason="langgraph namespace",
            content="/".join(namespace), metadata={_META: {"namespace": list(namespace)}},
        )

    async def _current(
        self, node: Node, scope: Scope, key: str | None = None, *, superseded: bool = False
    ) -> list[Record]:
        """The records of ``node``'s items (of ``key``), current ones only unless ``superseded``."""
        view = RecordView(include_superseded=superseded)
        records: list[Record] = []
        by_attribute = getattr(self.knowledge.store, "list_about_attributes", None)
        if key is not None and by_attribute is not None:
            # one item's records by its attributes: a page of the namespace's every item, read
            # again for each get and put, made them slower the more items it held
            found = await by_attribute(node.id, self.scope.key, _attributes(key), view=view)
            records = [r for r in found if r.scope == scope.key and _META in r.metadata and _is_item(r, key)]
        after: str | None = None
        while key is None or by_attribute is None:
            page = await self.knowledge.store.list_about(
                node.id, self.scope.key, view=view, after=after, limit=100
            )
            records += [
                r for r in page.items
                if r.scope == scope.key and _META in r.metadata
                and (key is None or _is_item(r, key))
            ]
            if page.next_cursor is None:
                break
            after = page.next_cursor
        if superseded:
            return records
        # An item put under its older attribute and again under its own has a current record
        # under each: the newest is its value.
        newest: dict[str, Record] = {}
        for record in records:
            item_key = str(record.metadata[_META].get("key"))
            held = newest.get(item_key)
            if held is None or (record.captured_at, record.id) >= (held.captured_at, held.id):
                newest[item_key] = record
        kept = {id(r) for r in newest.values()}
        return [r for r in records if id(r) in kept]

    def _item(
        self, record: Record, namespace: tuple[str, ...], cls: type[Item] = Item, score: float | None = None
    ) -> Any:
        meta = record.metadata[_META]
        created = datetime.fromisoformat(meta["created_at"]) if meta.get("created_at") else record.captured_at
        if cls is SearchItem:
            return SearchItem(namespace, meta["key"], dict(meta["value"]), created, record.captured_at, score)
        return Item(value=dict(meta["value"]), key=meta["key"], namespace=namespace, created_at=created,
                    updated_at=record.captured_at)

    # -- operations --------------------------------------------------------------------------------
    async def _get(self, op: GetOp) -> Item | None:
        scope = self._visible(op.namespace)
        node = await self._node(op.namespace, scope, create=False)
        if node is None:
            return None
        records = await self._current(node, scope, op.key)
        return self._item(records[-1], tuple(op.namespace)) if records else None

    async def _put(self, op: PutOp) -> None:
        scope = self._visible(op.namespace)
        if op.ttl is not None:
            raise InvalidInputError("ttl: KnowledgeBaseStore does not support TTLs", argument="ttl")
        if op.value is None and scope.level < self.ceiling:
            # A delete is a write: beyond the ceiling it is refused as a put there is (by the
            # knowledge store), else a resource-level store could erase org-wide items.
            raise CeilingExceededError(
                f"Namespace {tuple(op.namespace)!r} lives in scope '{scope.key}', broader than this "
                f"store's {self.ceiling.label} ceiling: it may delete items at {self.ceiling.label} "
                "level or narrower only, as it may put them."
            )
        beyond = scope.level < self.ceiling
        node = await self._node(op.namespace, scope, create=op.value is not None and not beyond)
        previous = await self._current(node, scope, op.key) if node is not None else []
        if op.value is None:  # the whole timeline goes, or an older value would be current again
            timeline = await self._current(node, scope, op.key, superseded=True) if node is not None else []
            if timeline:  # hard: a deleted item (a secret the user asked to drop) keeps no copy
                await self.knowledge.erase([record.id for record in timeline], self.scope.key, reason="langgraph delete")
            return
        value = dict(op.value)
        first = previous[-1] if previous else None
        created = None
        if first is not None:
            created = first.metadata[_META].get("created_at") or first.captured_at.isoformat()
        text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
        # The store, not the facade: a value is data, so "[[...]]" in it must not create wikilink nodes.
        # Beyond the ceiling no namespace node is made (it would outlive the refusal): the
        # knowledge store refuses the record by its ceiling before it looks for the node, and
        # audits it, under the namespace's node name when there is no node.
        draft = RecordDraft(
            node.id if node is not None else self._node_name(op.namespace), text, scope.key,
            max_scope=self.ceiling, attribute=_attribute(op.key),
            metadata={_META: {
                "key": op.key, "value": json.loads(json.dumps(value, default=str)), "created_at": created,
            }},
        )
        await self.knowledge.store.append_record(draft, actor=self.knowledge.actor, reason="langgraph put")

    async def _namespaces(self) -> list[tuple[Node, tuple[str, ...]]]:
        found: list[tuple[Node, tuple[str, ...]]] = []
        after: str | None = None
        while True:
            page = await self.knowledge.store.list_nodes(
                self.scope.key, kind=NAMESPACE_KIND, after=after, limit=100
            )
            for node in page.items:
                meta = node.metadata.get(_META)
                if isinstance(meta, dict) and isinstance(meta.get("namespace"), list):
                    found.append((node, self._addressed(tuple(meta["namespace"]), Scope.parse(node.scope))))
            if page.next_cursor is None:
                return found
            after = page.next_cursor

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        candidates: dict[str, tuple[Record, tuple[str, ...]]] = {}
        for node, namespace in await self._namespaces():
            written = node.metadata[_META]["namespace"]  # (as its writer named it: what it sees there)
            if namespace[: len(prefix)] != prefix and tuple(written[: len(prefix)]) != prefix:
                continue
            scope = Scope.parse(node.scope)
            for record in await self._current(node, scope):
                if _matches(record.metadata[_META]["value"], op.filter or {}):
                    candidates[record.id] = (record, namespace)
        ranked: list[tuple[tuple[Record, tuple[str, ...]], float | None]]
        if op.query:
            # candidates ranked by the knowledge search, which takes at most _SEARCH_LIMIT hits:
            # a large page (limit=300) or a page far down (offset=250) asked for more and was refused
            wanted = min(_SEARCH_LIMIT, max(50, op.offset + op.limit) * 4)
            hits = await self.knowledge.search(op.query, self.scope.key, limit=wanted)
            ranked = [(candidates[h.id], h.score) for h in hits if h.kind == "record" and h.id in candidates]
            if len(ranked) < op.offset + op.limit and len(hits) >= wanted:
                # The search was cut off by other namespaces' hits (a busier user's items in the
                # same scope): the namespace's other items rank after its hits, by their vectors.
                seen = {record.id for (record, _), _ in ranked}
                rest = {rid: c for rid, c in candidates.items() if rid not in seen}
                ranked += await self._by_vector(op.query, rest, below=hits[-1].score)
        else:
            newest = sorted(candidates.values(), key=lambda c: c[0].captured_at, reverse=True)
            ranked = [(c, None) for c in newest]
        page = ranked[op.offset : op.offset + op.limit]
        return [self._item(record, namespace, SearchItem, score) for (record, namespace), score in page]

    async def _by_vector(
        self, query: str, candidates: Mapping[str, tuple[Record, tuple[str, ...]]], *, below: float
    ) -> list[tuple[tuple[Record, tuple[str, ...]], float | None]]:
        """``candidates`` whose stored vector is like the query's (cosine above 0, as the knowledge
        search's semantic side takes them), best first, scored under ``below`` (the last hit's)."""
        if not candidates:
            return []
        embedder = self.knowledge.embedder
        vector = (await embedder.embed([query]))[0]
        scopes = sorted({record.scope for record, _ in candidates.values()})
        best: dict[str, float] = {}
        for stored in await self.knowledge.store.list_vectors(scopes):
            if (
                stored.record_id in candidates and stored.embedder == embedder.name
                and stored.vector.shape == vector.shape
            ):
                score = float(stored.vector @ vector)
                if score > 0.0:
                    best[stored.record_id] = max(best.get(stored.record_id, 0.0), score)
        order = sorted(best, key=lambda rid: (-best[rid], rid))
        return [(candidates[rid], below * min(best[rid], 1.0)) for rid in order]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = sorted({namespace for _, namespace in await self._namespaces()})
        for condition in op.match_conditions or ():
            path = tuple(condition.path)

            def fits(candidate: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
                return len(candidate) >= len(pattern) and all(
                    p == "*" or p == c for p, c in zip(pattern, candidate, strict=False)
                )

            if condition.match_type == "prefix":
                namespaces = [n for n in namespaces if fits(n, path)]
            else:
                namespaces = [n for n in namespaces if fits(n[::-1], path[::-1])]
        if op.max_depth is not None:
            namespaces = sorted({n[: op.max_depth] for n in namespaces})
        return namespaces[op.offset : op.offset + op.limit]


def _scope_segments(namespace: tuple[str, ...]) -> int:
    """How many of ``namespace``'s leading segments name its scope (see :func:`namespace_scope`)."""
    count = 0
    for segment, level in zip(namespace, _LEVELS, strict=False):
        if not segment.startswith(f"{level}:"):
            break
        count += 1
    return count


def _segments(scope: Scope) -> tuple[str, ...]:
    """``scope`` as a namespace's leading segments."""
    ids = (scope.org, scope.resource, scope.thread)
    return tuple(f"{level}:{id_}" for level, id_ in zip(_LEVELS, ids, strict=True) if id_ is not None)


def _level(value: object, argument: str) -> Level:
    if isinstance(value, Level):
        return value
    name = value.strip().upper() if isinstance(value, str) else ""
    if name not in Level.__members__:
        raise InvalidScopeError(f"Invalid {argument} {value!r}; use one of 'org', 'resource', 'thread'.")
    return Level[name]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return getattr(loop, "_thread_id", None) == threading.get_ident()

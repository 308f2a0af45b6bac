"""The knowledge store's reads, written once against :class:`KnowledgeTables`.

Every record read goes through :func:`visible_records`, the one place that decides what a
caller may see: scope visibility, deletion, trust, tombstones and the two time axes. So a rule
added here holds for ``about``, ``mentioning``, ``related``, ``by_source``, search and the
review queue alike.

Bitemporal rules. ``as_known_at = K`` replays the store as it was at K: records captured
after K do not exist, deletions, trust changes and tombstones after K have not happened.
Records about the same node, attribute and scope form a timeline ordered by fact time
(``valid_from``; capture order breaks ties), and each record's validity ends where the next
one's begins. ``as_of = F`` keeps the records whose validity covers F; without ``as_of`` a read
returns only records that no known record supersedes.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from obsmem.errors import InvalidInputError
from obsmem.knowledge.store.contract import (
    ActivityAction,
    ActivityEvent,
    LexicalHit,
    Node,
    Page,
    Record,
    RecordView,
    Tombstone,
    TrustState,
)
from obsmem.knowledge.store.ids import is_ulid
from obsmem.knowledge.store.ops import terminal_node, tombstone_blocks
from obsmem.knowledge.store.scopes import Level, Scope
from obsmem.knowledge.store.speakers import hidden_from
from obsmem.knowledge.store.tables import (
    KnowledgeTables,
    name_key,
    node_order,
    node_search_text,
    record_search_text,
    search_probe,
    under,
)
from obsmem.knowledge.store.values import forgotten_digest, normalise_value, value_key

__all__ = ["KnowledgeReads", "check_limit", "shown_event", "shown_record", "shows_purge"]

_TERM = re.compile(r"\w{2,}", re.UNICODE)


def check_limit(limit: int) -> None:
    if not 1 <= limit <= 1000:
        raise InvalidInputError(f"limit must be between 1 and 1000 (got {limit}).")


def _known(moment: datetime | None, known_at: datetime | None) -> bool:
    return moment is not None and (known_at is None or moment <= known_at)


def _trust_at(record: Record, known_at: datetime | None) -> TrustState:
    changed = record.trust_changed_at
    if changed is not None and known_at is not None and changed > known_at:
        return TrustState.CANDIDATE
    return record.trust


Fetch = Callable[[str | None, int], tuple[list[Record], str | None]]
"""A page source: (``n`` rows in page order from beyond a cursor, the cursor after them or None
when there are no more)."""


def _stream(fetch: Callable[[str | None, int], list[Record]]) -> Fetch:
    """A :data:`Fetch` over a query that returns at most ``n`` rows beyond its cursor."""

    def page(cursor: str | None, n: int) -> tuple[list[Record], str | None]:
        rows = fetch(cursor, n)
        return rows, (rows[-1].id if len(rows) == n else None)

    return page


def shows_purge(event: ActivityEvent, scope_key: str, own: set[str]) -> bool:
    """Whether an audit read from ``scope_key`` shows ``event``: any event but a ``scope-purged``
    one stored at an org, which names the deleted resource by digest; that one only from the org
    itself or from the deleted resource's own scope and threads (``own``: the digests of the
    reader's scope and its ancestors), never from another resource of the org (bob's key read
    that alice's resource was deleted, when, by which key, and how much it held). A thread's
    deletion stays at its resource's scope, where the resource's threads see it."""
    if event.action is not ActivityAction.SCOPE_PURGED or event.scope == scope_key or event.subject_id in own:
        return True
    return Scope.parse(event.scope).level is not Level.ORG


def shown_record(t: KnowledgeTables, record: Record, reaches: Callable[[str], bool]) -> Record:
    """``record`` as a reader that reaches the scopes ``reaches`` accepts sees it: a removal as
    superseded by a record it cannot see (a thread's newer value closing its resource's, read
    from a sibling thread) is a plain removal, without the successor's id, so not history either
    (its validity would end at the successor's fact time, which is that scope's to know)."""
    if record.superseded_by is None:
        return record
    successor = t.record(record.superseded_by)
    if successor is None or reaches(successor.scope):
        return record  # (an erased successor: the reads date nothing by it, see _timeline_end)
    return record.model_copy(update={"superseded_by": None})


def shown_event(t: KnowledgeTables, event: ActivityEvent, reaches: Callable[[str], bool]) -> ActivityEvent:
    """``event`` as a reader that reaches the scopes ``reaches`` accepts sees it: a removal's
    ``details["reason_event"]`` (the event holding its full reason, in a narrower scope:
    :meth:`KnowledgeStore.remove_record`'s ``reason_within``) only where that event is read too."""
    linked = (event.details or {}).get("reason_event")
    if linked is None:
        return event
    held = t.event(linked) if isinstance(linked, str) else None
    if held is not None and reaches(held.scope):
        return event
    details = {k: v for k, v in event.details.items() if k != "reason_event"}
    return event.model_copy(update={"details": details})


def record_moved_away(t: KnowledgeTables, event: ActivityEvent, query: Scope, below: str | None) -> bool:
    """Whether ``event`` is about a record that lives now where ``query`` cannot see it (nor in
    ``below``'s subtree): one narrowed since (``rescope``) from the scope the event was logged at.
    Its earlier events stay where they were logged, and a ``record-created`` reason quotes the
    record's text: shown to a sibling, the narrowing would not have made it private. A refused
    write's event (the actor's own attempt, naming no text of the record) stays shown."""
    if event.subject_type != "record" or event.action is ActivityAction.WRITE_REFUSED:
        return False
    record = t.record(event.subject_id)
    if record is None or query.sees(record.scope):
        return False
    return below is None or not under(record.scope, below)


def _threads_of(query: Scope) -> str | None:
    """The key whose strict subtree holds ``query``'s threads: a resource's own key (an org or a
    thread scope has no threads of its own, so None)."""
    return query.key if query.level is Level.RESOURCE else None


#: The most nodes one read of a :meth:`KnowledgeReads.nodes` page asks each scope level for.
_MAX_NODE_CHUNK = 1_000


def _node_cursor(after: str) -> tuple[str, str]:
    """A ``next_cursor`` of :meth:`KnowledgeReads.nodes`: a JSON list of a name key and an id."""
    try:
        value = json.loads(after)
    except (ValueError, TypeError):
        value = None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise InvalidInputError(
            f"Invalid node cursor {_shown(after)!r}; pass a next_cursor from list_nodes.", argument="after"
        )
    return (value[0], value[1])


def _shown(after: object) -> object:
    return after[:40] + "…" if isinstance(after, str) and len(after) > 40 else after


def _id_cursor(after: str, listing: str) -> str:
    """A ``next_cursor`` of a listing paged by id (the audit log's events, the record listings):
    the id (a ULID) of the last item of the page before. Anything else would be compared with the
    ids as it is and answer a page from some arbitrary point (most often the start, or nothing)
    as if the cursor had been honoured."""
    if not is_ulid(after):
        raise InvalidInputError(
            f"Invalid after: {_shown(after)!r} is not {listing} cursor; "
            "pass the next_cursor of the page before.",
            argument="after",
        )
    return after


def _record_cursor(after: str | None) -> str | None:
    return None if after is None else _id_cursor(after, "a record listing")


class KnowledgeReads:
    """The read side of one snapshot."""

    def __init__(self, tables: KnowledgeTables) -> None:
        self.t = tables
        self._tombstone_cache: dict[str, dict[str, list[Tombstone]]] = {}
        self._timeline_cache: dict[tuple[str, str, datetime | None], dict[str, list[tuple[datetime, str]]]] = {}

    # -- the one visibility filter -------------------------------------------------------------
    def _tombstones(self, node_id: str) -> dict[str, list[Tombstone]]:
        """The node's tombstones by value key, read once a snapshot: a record is checked only
        against the tombstones of its own value (reads hide exact-key matches only), so a node
        with many tombstones is read in linear work."""
        by_key = self._tombstone_cache.get(node_id)
        if by_key is None:
            by_key = {}
            for tombstone in self.t.tombstones_for(node_id):
                by_key.setdefault(value_key(tombstone.value), []).append(tombstone)
            self._tombstone_cache[node_id] = by_key
        return by_key

    def _alive(self, record: Record, view: RecordView) -> bool:
        """Known, not deleted, trusted enough and not tombstoned, as of ``view.as_known_at``.

        A record removed as *superseded* (:attr:`Record.superseded_by`) is history, not a
        retraction: a read ``as_of`` a fact time still takes it (and keeps it only where its
        validity, which ends at its successor's, covers that time)."""
        known_at = view.as_known_at
        if known_at is not None and record.captured_at > known_at:
            return False
        if not view.include_deleted:
            history = view.as_of is not None and record.superseded_by is not None
            if _known(record.deleted_at, known_at) and not history:
                return False
            if known_at is not None and any(start <= known_at < end for start, end in record.removed_before):
                return False  # removed then, restored since
            tombstones = self._tombstones(record.node_id)
            # (a node without tombstones costs nothing per read: no key of its text to build)
            value = normalise_value(record.text) if tombstones else ""
            same_key = tombstones.get(value_key(value), ()) if tombstones else ()
            if any(
                _known(t.created_at, known_at) and tombstone_blocks(t, record.node_id, record.scope, value)
                for t in same_key
            ):
                return False
        trust = _trust_at(record, known_at)
        return trust is TrustState.VERIFIED or (trust is TrustState.CANDIDATE and view.include_candidates)

    def _timelines(self, node_id: str, attribute: str, known_at: datetime | None) -> dict[str, list[tuple[datetime, str]]]:
        """The node's timelines of ``attribute`` as known at ``known_at``: per scope, the (fact
        time, id) of its live records, in order. Built once per node, attribute and time in a
        snapshot from that attribute's records only, so a read's records find their successors
        by bisection and a page reads the timelines it shows, not all the node knows."""
        key = (node_id, attribute, known_at)
        timelines = self._timeline_cache.get(key)
        if timelines is None:
            self._read_timelines(node_id, [attribute], known_at)
            timelines = self._timeline_cache[key]
        return timelines

    def _read_timelines(self, node_id: str, attributes: Sequence[str], known_at: datetime | None) -> None:
        """Build the node's timelines of ``attributes`` as known at ``known_at`` (see
        :meth:`_timelines`) from one read of those attributes' records."""
        timeline_view = RecordView(as_known_at=known_at)
        built: dict[str, dict[str, list[tuple[datetime, str]]]] = {attribute: {} for attribute in attributes}
        for other in self.t.attributes_records(node_id, attributes):
            lines = built.get(other.attribute) if other.attribute is not None else None
            if lines is not None and self._alive(other, timeline_view):
                lines.setdefault(other.scope, []).append((other.valid_from, other.id))
        for attribute, timelines in built.items():
            for line in timelines.values():
                line.sort()
            self._timeline_cache[(node_id, attribute, known_at)] = timelines

    def _prefetch_timelines(self, records: Sequence[Record], known_at: datetime | None) -> None:
        """Read the timelines a page of ``records`` will ask for, a node at a time: a node whose
        every record has an attribute of its own (a LangGraph namespace's items) read the node's
        records once per record shown, quadratic in the node's size."""
        wanted: dict[str, list[str]] = {}
        for record in records:
            attribute = record.attribute
            if attribute is None or record.superseded_by is not None:
                continue
            if (record.node_id, attribute, known_at) not in self._timeline_cache:
                wanted.setdefault(record.node_id, []).append(attribute)
        for node_id, attributes in wanted.items():
            if len(attributes) > 1:
                self._read_timelines(node_id, list(dict.fromkeys(attributes)), known_at)

    def _timeline_end(self, record: Record, view: RecordView) -> tuple[datetime | None, bool]:
        """(end of validity, whether a known newer record superseded it)."""
        end = record.when.end if record.when is not None else None
        if record.superseded_by is not None and _known(record.deleted_at, view.as_known_at):
            # Removed as superseded: valid until its successor's fact time, and only while that
            # successor is still known (an erased one leaves nothing to date it by: not shown).
            successor = self.t.record(record.superseded_by)
            if successor is None or (view.as_known_at is not None and successor.captured_at > view.as_known_at):
                return record.valid_from, True
            start = successor.valid_from
            return (start if end is None else min(end, start)), True
        if record.attribute is None:
            return end, False
        line = self._timelines(record.node_id, record.attribute, view.as_known_at).get(record.scope, [])
        later = bisect_right(line, (record.valid_from, record.id))
        if later == len(line):
            return end, False
        successor_start = line[later][0]
        return (successor_start if end is None else min(end, successor_start)), True

    def visible_records(
        self, scope: str, view: RecordView, records: Iterable[Record], *, below: bool = False
    ) -> list[Record]:
        """The records visible from ``scope``; ``below``: also those stored below it, each as its
        own scope sees it (a reviewer's view of its threads; every rule but scope still applies)."""
        query = Scope.parse(scope)

        def reaches(key: str) -> bool:
            return query.sees(key) or (below and under(key, scope))

        records = [record for record in records if reaches(record.scope)]
        self._prefetch_timelines(records, view.as_known_at)
        result: list[Record] = []
        for record in records:
            # superseded by a record this reader cannot see: still superseded (every reader
            # that sees the record agrees), without the successor or a history dated by it
            unseen_successor = record.superseded_by is not None
            record = shown_record(self.t, record, reaches)
            unseen_successor = unseen_successor and record.superseded_by is None \
                and _known(record.deleted_at, view.as_known_at)
            if hidden_from(record, query.key):  # a speaker's fact an old version filed at org scope
                continue
            if not self._alive(record, view):
                continue
            valid_until, superseded = self._timeline_end(record, view)
            superseded = superseded or unseen_successor
            if view.as_of is None:
                if superseded and not view.include_superseded:
                    continue
            elif unseen_successor:
                continue  # its validity ended when the successor began: that scope's to know
            elif not (record.valid_from <= view.as_of and (valid_until is None or view.as_of < valid_until)):
                continue
            result.append(record.model_copy(update={"valid_until": valid_until}))
        return result

    # -- pages ---------------------------------------------------------------------------------
    def record(self, record_id: str, scope: str, view: RecordView) -> Record | None:
        found = self.t.record(record_id)
        if found is None:
            return None
        visible = self.visible_records(scope, view, [found])
        return visible[0] if visible else None

    def about(
        self, node_id: str, scope: str, view: RecordView, after: str | None, limit: int
    ) -> Page[Record]:
        check_limit(limit)
        _record_cursor(after)  # refused even where the node is gone
        node = terminal_node(self.t, node_id)
        if node is None:
            return Page([], None)
        return self._visible_page(_stream(lambda c, n: self.t.records_about_page(node.id, c, n)), scope, view, after, limit)

    def about_attributes(
        self, node_id: str, scope: str, view: RecordView, attributes: Sequence[str]
    ) -> list[Record]:
        """The records about the node with one of ``attributes`` that ``scope`` sees, newest
        first: those attributes' timelines only, not the node's other records."""
        node = terminal_node(self.t, node_id)
        if node is None or not attributes:
            return []
        rows = sorted(self.t.attributes_records(node.id, attributes), key=lambda r: r.id, reverse=True)
        return self.visible_records(scope, view, rows)

    def mentioning(
        self, node_id: str, scope: str, view: RecordView, after: str | None, limit: int
    ) -> Page[Record]:
        check_limit(limit)
        _record_cursor(after)  # refused even where the node is gone
        node = terminal_node(self.t, node_id)
        if node is None:
            return Page([], None)
        fetch = _stream(lambda c, n: self.t.records_mentioning_page(node.id, c, n))
        return self._visible_page(fetch, scope, view, after, limit)

    def related(
        self, node_id: str, scope: str, view: RecordView, after: str | None, limit: int
    ) -> Page[Record]:
        """The records about the node and those mentioning it, newest first, each once."""
        check_limit(limit)
        _record_cursor(after)  # refused even where the node is gone
        node = terminal_node(self.t, node_id)
        if node is None:
            return Page([], None)
        target = node.id

        def fetch(cursor: str | None, n: int) -> tuple[list[Record], str | None]:
            about = self.t.records_about_page(target, cursor, n)
            mentioning = self.t.records_mentioning_page(target, cursor, n)
            # Below the older of the two full batches' last ids a batch may be missing records:
            # the merge stops there, and the next one starts there.
            full = [batch[-1].id for batch in (about, mentioning) if len(batch) == n]
            floor = max(full) if full else None
            merged = sorted({r.id: r for r in [*about, *mentioning]}.values(), key=lambda r: r.id, reverse=True)
            return [r for r in merged if floor is None or r.id >= floor], floor

        return self._visible_page(fetch, scope, view, after, limit)

    def by_source(
        self, source_thread_id: str, scope: str, view: RecordView, after: str | None, limit: int
    ) -> Page[Record]:
        """Oldest first (the curation worklist); ``after`` means ids greater than it."""
        keys = Scope.parse(scope).visible_keys()

        def fetch(cursor: str | None, n: int) -> list[Record]:
            return self.t.records_page(
                keys, after=cursor, newest_first=False, limit=n, source_thread_id=source_thread_id
            )

        return self._visible_page(_stream(fetch), scope, view, after, limit)

    def superseded_by(
        self, record_id: str, scope: str, view: RecordView, after: str | None, limit: int
    ) -> Page[Record]:
        """The records removed as superseded by ``record_id``, oldest first; ``after`` means ids
        greater than it. Reads those records (and the successor), not the rest of their node."""
        check_limit(limit)
        _record_cursor(after)  # refused even where the record is gone
        successor = self.t.record(record_id)
        if successor is None or not Scope.parse(scope).sees(successor.scope):
            # (one it does not see: what it superseded reads there as plain removals)
            return Page([], None)
        node_id = successor.node_id
        fetch = _stream(lambda c, n: self.t.records_superseded_by(record_id, node_id, c, n))
        return self._visible_page(fetch, scope, view, after, limit)

    def candidates(
        self, scope: str, after: str | None, limit: int, *, within: bool = False, threads: bool = False
    ) -> Page[Record]:
        query = Scope.parse(scope)
        keys = query.visible_keys()
        if within:
            keys = keys[:1]  # the scope itself (narrow → broad)
        below = _threads_of(query) if threads else None
        view = RecordView(include_candidates=True, include_superseded=True)

        def fetch(cursor: str | None, n: int) -> list[Record]:
            return self.t.records_page(
                keys, after=cursor, newest_first=True, limit=n, trust=TrustState.CANDIDATE.value, below=below
            )

        return self._visible_page(_stream(fetch), scope, view, after, limit, below=below is not None)

    def _visible_page(
        self, fetch: Fetch, scope: str, view: RecordView, after: str | None, limit: int, *, below: bool = False
    ) -> Page[Record]:
        """A page of the visible records ``fetch(cursor, n)`` yields in page order, about ``n`` at
        a time from beyond ``cursor`` (with the cursor to go on from, None at the end): it reads
        about what it shows (more only where records are hidden), never all there is."""
        check_limit(limit)
        chunk = max(2 * limit, 64)
        shown: list[Record] = []
        cursor = _record_cursor(after)
        while len(shown) <= limit:
            rows, cursor = fetch(cursor, chunk)
            shown.extend(self.visible_records(scope, view, rows, below=below))
            if cursor is None:
                break
        items = shown[:limit]
        return Page(items, items[-1].id if len(shown) > limit else None)

    def activity(self, scope: str, after: str | None, limit: int, *, threads: bool = False) -> Page[ActivityEvent]:
        check_limit(limit)
        query = Scope.parse(scope)
        before = _id_cursor(after, "an audit log") if after is not None else None
        keys = query.visible_keys()
        below = _threads_of(query) if threads else None
        own = {forgotten_digest(key) for key in keys}

        def reaches(key: str) -> bool:
            return query.sees(key) or (below is not None and under(key, below))

        want = limit + 1  # one more than the page tells whether there is a next one
        shown: list[ActivityEvent] = []
        while True:
            events = self.t.events_page(keys, before, want, below)
            shown.extend(
                shown_event(self.t, e, reaches) for e in events
                if shows_purge(e, query.key, own) and not hidden_from(e, query.key)
                and not record_moved_away(self.t, e, query, below)
            )
            if len(shown) >= want or len(events) < want:
                break
            before = events[-1].id  # a sibling's deletions left the page short: read on
        items = shown[:limit]
        return Page(items, items[-1].id if len(shown) > limit else None)

    # -- nodes ---------------------------------------------------------------------------------
    def node(self, node_id: str, scope: str) -> Node | None:
        node = terminal_node(self.t, node_id)
        return node if node is not None and Scope.parse(scope).sees(node.scope) else None

    def resolve(self, name: str, scope: str) -> Node | None:
        """Narrow → broad along the scope's own chain, so sibling threads are never crossed."""
        query = Scope.parse(scope)
        for key in query.visible_keys():
            found = self.t.node_by_name(key, name_key(name))
            terminal = terminal_node(self.t, found.id) if found else None
            if terminal is not None and query.sees(terminal.scope):
                return terminal
        return None

    def nodes(
        self, scope: str, name_prefix: str | None, kind: str | None, after: str | None, limit: int
    ) -> Page[Node]:
        """A page of the nodes ``scope`` sees, in :func:`~obsmem.knowledge.store.tables.node_order`, after ``after`` (a
        ``next_cursor``). It reads about what it shows: the tables' pages from the cursor on,
        more of them only while merged nodes or other kinds leave this page short."""
        check_limit(limit)
        prefix = name_key(name_prefix) if name_prefix else None
        keys = Scope.parse(scope).visible_keys()
        cursor = _node_cursor(after) if after is not None else None
        items: list[Node] = []
        want = limit + 1  # one more than the page tells whether there is a next one
        while True:
            chunk = self.t.nodes_page(keys, after=cursor, prefix=prefix, limit=want)
            items += [n for n in chunk if n.merged_into is None and (kind is None or n.kind == kind)]
            if len(items) > limit or len(chunk) < want:
                break
            cursor = node_order(chunk[-1])
            want = min(want * 2, _MAX_NODE_CHUNK)  # a sparse kind: fewer, larger reads
        more = len(items) > limit
        items = items[:limit]
        return Page(items, json.dumps(list(node_order(items[-1]))) if more else None)

    # -- lexical search ------------------------------------------------------------------------
    def search(self, query: str, scope: str, view: RecordView, limit: int) -> list[LexicalHit]:
        """Count of query terms each node/record contains (case-insensitive substrings).

        The candidates are the rows whose search text holds a term's :func:`search_probe`,
        found by the tables' index (:meth:`KnowledgeTables.search_candidates`); each is scored
        here on its own text, so the index may offer more than match, never fewer."""
        check_limit(limit)
        terms = list(dict.fromkeys(_TERM.findall(query.casefold()))) or [query.strip().casefold()]
        terms = [t for t in terms if t]
        if not terms:
            return []
        keys = Scope.parse(scope).visible_keys()
        probes = [search_probe(term) for term in terms]
        if all(probes):
            # Only the rows whose text holds a term's probe, found by the tables' index: a search
            # decodes what can match, not all the scope chain knows.
            nodes, records = self.t.search_candidates(keys, list(dict.fromkeys(probes)))
        else:  # a term of NUL characters only: no index narrows it
            nodes, records = self.t.nodes_in(keys), self.t.records_in(keys)
        hits: list[LexicalHit] = []
        known_at = view.as_known_at
        for node in nodes:
            if node.merged_into is not None:
                continue
            if known_at is not None and node.updated_at > known_at:
                # A node keeps no history: created, renamed or rewritten since, what it held at
                # that moment is unknown, and its text now must not answer a search as of then.
                continue
            hay = node_search_text(node)
            score = sum(1 for term in terms if term in hay)
            if score:
                text = " — ".join(filter(None, [node.name, node.description, node.content]))
                hits.append(LexicalHit("node", node.id, node.id, text, node.scope, float(score)))
        for record in self.visible_records(scope, view, records):
            # the record's text folded once, not once per term (a 5,000-word query folded each
            # record's text 5,000 times: a million casefolds over 400 records)
            hay = record_search_text(record)
            score = sum(map(hay.__contains__, terms))
            if score:
                hits.append(
                    LexicalHit(
                        "record", record.id, record.node_id, record.text, record.scope, float(score), record
                    )
                )
        hits.sort(key=lambda h: (-h.score, h.kind != "node", h.id))
        return hits[:limit]

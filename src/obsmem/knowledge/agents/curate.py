"""The curate agent: walk the uncurated worklist in id order, merge duplicates, supersede
contradictions with a stated reason, remove stale plans, and keep the ``capture-guidance`` node
current.

The worklist of a lane (``curate:<thread>``) is every record captured from that thread
(:meth:`~obsmem.knowledge.store.contract.KnowledgeStore.list_by_source`, oldest id first) after
the lane's cursor. For each record, in order:

* **duplicate**: another live record about the same node already says it (its words contain the
  record's, or it is a near-duplicate) → the later one is removed (soft, audited) with the reason
  ``duplicate of <id>``; an earlier fragment whose every word the record repeats (and more) goes
  in favour of the fuller statement;
* **near-duplicate**: two records on the same node with the same attribute (and value), the same
  numbers, no negation or "done" on one side only, sharing at least three content words beyond
  everyday ones that make up two thirds of the shorter record's → the one with fewer content
  words goes (``duplicate of <id>: a near-duplicate of the same fact (…)``);
* **contradiction**, bounded to the same subject (node) *and* attribute, never wider: an older
  live record with the same attribute and a different value is superseded (removed, soft and
  audited, with the reason ``superseded by <id>: '<attribute>' changed from … to …``); a
  record that says which value it corrects (``…, not Kiwi``, ``instead of €2,400``) supersedes
  the older record holding that value: one with the same attribute, else only the newest one;
  a re-captured *older* statement is itself superseded by the newer value it contradicts. Two
  records whose capture named the same value of a category attribute (``metadata["value"]``:
  "work from Berlin", "first day at the Berlin office", both work city ``berlin``) are one value,
  not a change. Capture gives categories of the user's own one attribute (a daily drink, a work
  city, see :mod:`.extract`), so "their fuel is coffee" → "they switched to green tea" is a change;
* **stale** (soft, audited): a record that says a plan or task is finished ("the Anmeldung at
  the Bürgeramt is done", "… is cancelled", "… called off"; not "not done yet") removes each
  *older* record on the same node that states a plan (a time or "will", "need to", "next week",
  "scheduled", …) and is linked to it by the same attribute, or, when either has none, by at
  least two shared content words besides the plan/done words. The reason is ``stale: <id> says
  it is done: “<plan>” → “<done>” (stated <date>)``. A plain fact (no plan wording) is never
  stale by this rule, and nothing is removed for its age alone: a dated fact may stay true.

**Reasons stay in their scope.** A removal is logged at the removed record's scope. When the
record it goes for lives below that scope (a thread's newer value closing its resource's, which
the resource's other threads keep no more either), the reason logged there names neither that
record's text nor its id ("superseded by a record of a narrower scope: 'home city' changed from
“Munich” …"): every thread of the resource reads that log, and a sibling thread does not know
the record exists (its reads show the removal without a successor). The full reason, quoting
both, is logged in the narrower scope too (``remove_record``'s ``reason_within``) and is what
the run's report holds.

**Linear in the worklist.** A run reads each node's live records once and keeps that list
current as it removes records; what each record says (its key, words, numbers, plan or done
wording) is worked out once and indexed, so each record is compared only with the peers that
share its words, never with every peer. Before any removal that relies on a peer (the peer
removed, or the peer a record is removed for), the peer is read again: if someone else changed
it meanwhile, the node is read afresh and the record curated again from that read, as a run
that read every record's peers anew would have. A worklist record the list lacks although it is
live, or holds at another revision, makes the node be read again too. A record that only
*appears* on a node during a run (another thread's capture writing it, say) is not among the peers
of that run's later records; the next run that reads the node compares it.

**The cursor is fail-closed.** It advances through the last record the run finished and no
further; a run that finishes nothing (a failure on the first record) advances nothing and counts
as a failure, like any error, for the lane's durable backoff (1 min doubling to 1 h, in the
store, see :mod:`.lanes`).

**Triggers** (Gen D): a lane is due when it has at least ``curate_after_records`` uncurated
records, or when at least one record is uncurated and ``curate_max_age_s`` has passed since the
cursor last moved (or, with no cursor yet, since the oldest uncurated record was captured).
"""

from __future__ import annotations

import logging
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from obsmem.clock import Clock, SystemClock
from obsmem.knowledge.agents.capture import FactIndex, Said, held
from obsmem.knowledge.agents.common import ALL_RECORDS, EVERYDAY_WORDS, AgentRun, AgentSettings, content_tokens
from obsmem.knowledge.agents.lanes import LaneBusyError, Lanes, LaneState
from obsmem.knowledge.store.contract import KnowledgeStore, Record, RecordView, TrustState
from obsmem.knowledge.store.scopes import Scope, clamp_level, Level
from obsmem import telemetry

__all__ = ["CAPTURE_GUIDANCE", "RESERVED_NODES", "CurateAgent", "curation_due", "may_remove", "same_fact"]

logger = logging.getLogger("obsmem.knowledge")

ACTOR = "curate"
CAPTURE_GUIDANCE = "capture-guidance"
RESERVED_NODES = frozenset({"pinned", CAPTURE_GUIDANCE})
_LIVE = RecordView(include_candidates=True, include_superseded=True)
#: What a removal's reason logged at the removed record's scope says of a record of a narrower
#: scope it went for (a thread's, which the resource's other threads may not read): not its id.
_NARROWER = "a record of a narrower scope"
#: ... and where the rest of the reason is.
_THERE = "(the rest is in that scope's log)"
_GUIDANCE_LIMIT = 4000


def curation_due(
    state: LaneState, uncurated: Sequence[Record], now: datetime, *, after_records: int, max_age_s: float | None
) -> str | None:
    """Why the lane is due now ("count" or "age"), or None. Backoff is checked by the caller."""
    if not uncurated:
        return None
    if after_records > 0 and len(uncurated) >= after_records:
        return "count"
    if max_age_s is not None:
        baseline = state.cursor_updated_at or min(r.captured_at for r in uncurated)
        if (now - baseline).total_seconds() >= max_age_s:
            return "age"
    return None


def _mentions_value(text: str, value: str) -> bool:
    pattern = r"(?<!\w)" + re.escape(value.strip()) + r"(?!\w)"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _fragment(part: Record, whole: Record) -> bool:
    """Whether every content word of ``part`` is in ``whole`` (and ``whole`` says more)."""
    if part.attribute is not None and whole.attribute is not None and part.attribute != whole.attribute:
        return False
    words = content_tokens(part.text)
    return len(words) >= 3 and words < content_tokens(whole.text)  # two words ("Nadia Kessler") are a name


def _order(record: Record) -> tuple[datetime, str]:
    return (record.valid_from, record.id)


_NEGATION = frozenset({"not", "no", "never", "n't", "without"})
_DIGITS = re.compile(r"\d+")
#: A record that says a plan or task is finished ("the Anmeldung is done", "cancelled the
#: dentist"); "not done yet" / "still not finished" say the opposite.
_DONE = re.compile(r"\b(?:done|finished|completed|cancel(?:l)?ed|called\s+off|ticked\s+off|taken\s+care\s+of|"
                   r"no\s+longer\s+(?:needed|happening))\b", re.IGNORECASE)
_NOT_DONE = re.compile(r"\b(?:not|n't|never|yet\s+to\s+be)\s+(?:\w+\s+)?(?:done|finished|completed|cancel)"
                       r"|\bnot\s+yet\b", re.IGNORECASE)
#: A record that states a plan, a task or an appointment (something that happens at a time).
_PLAN = re.compile(r"\b(?:will|going\s+to|plans?\s+to|planning|planned|scheduled|booked|need(?:s)?\s+to|"
                   r"ha(?:ve|s)\s+to|tomorrow|tonight|next\s+\w+|this\s+(?:monday|tuesday|wednesday|thursday|"
                   r"friday|saturday|sunday|weekend|week|evening|afternoon|morning)|on\s+(?:monday|tuesday|"
                   r"wednesday|thursday|friday|saturday|sunday)|(?:at|by)\s+\d{1,2}(?::\d{2})?)\b", re.IGNORECASE)
_MARKERS = frozenset({"done", "finished", "completed", "cancelled", "canceled", "called", "off", "ticked", "taken",
                      "care", "longer", "needed", "happening", "will", "going", "plan", "plans", "planning",
                      "planned", "scheduled", "booked", "need", "needs", "tomorrow", "tonight", "next", "week",
                      "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "weekend"})


def _same_value(first: Record, second: Record) -> bool:
    """Whether both records name the same value of their attribute ("work from Berlin", "the Berlin office")."""
    a, b = first.metadata.get("value"), second.metadata.get("value")
    return isinstance(a, str) and a == b


def _near(first: Record, second: Record) -> bool:
    """Whether two records on one node say nearly the same thing: not different attributes (or values
    of one attribute), the same numbers, no negation on one side only, and at least three shared
    content words, not counting everyday ones ("last", "week", "made"), that make up two thirds or
    more of the shorter record's; a plan and the
    record that says it is done are never near-duplicates."""
    if first.attribute != second.attribute:
        return False
    if first.attribute is not None and not _same_value(first, second):
        return False
    if set(_DIGITS.findall(first.text)) != set(_DIGITS.findall(second.text)):
        return False
    a, b = content_tokens(first.text) - EVERYDAY_WORDS, content_tokens(second.text) - EVERYDAY_WORDS
    if (_NEGATION & _words(first.text)) != (_NEGATION & _words(second.text)):
        return False
    if bool(_DONE.search(first.text)) != bool(_DONE.search(second.text)):
        return False  # "the Anmeldung is done" is news about the plan, not the plan again
    shared = a & b
    return len(shared) >= 3 and 3 * len(shared) >= 2 * min(len(a), len(b))


def same_fact(first: Record, second: Record) -> bool:
    """Whether curation treats two records on one node as one fact stated twice (a restatement,
    a fragment of the other, or a near-duplicate)."""
    if first.node_id != second.node_id:
        return False
    if held(first.text, [second]) is not None or held(second.text, [first]) is not None:
        return True
    return _fragment(first, second) or _fragment(second, first) or _near(first, second)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w']+", text.casefold().replace("n't", " n't")))


# -- one run's view of a node: each record's traits worked out once, indexed by its words ----------

@dataclass(frozen=True, slots=True)
class _Traits:
    """What the rules above compare of one record, worked out once a run."""

    said: Said
    attribute: str | None
    order: tuple[datetime, str]
    bare: frozenset[str]  # content words less everyday ones (:func:`_near`)
    group: tuple[object, ...] | None  # what near-duplicates must share (:func:`_near`); None: near nothing
    plan: bool  # states a plan not said to be done (:meth:`finishes`)
    topic: frozenset[str]  # content words less plan and done words (:meth:`finishes`)

    @classmethod
    def of(cls, record: Record, said: Said | None = None) -> _Traits:
        said = said or Said.of(record.text)
        done = bool(_DONE.search(record.text))
        digits = frozenset(_DIGITS.findall(record.text))
        negations = frozenset(_NEGATION & _words(record.text))
        value = record.metadata.get("value") if record.attribute is not None else None
        group = None if record.attribute is not None and not isinstance(value, str) else (
            record.attribute, value, digits, negations, done)
        return cls(said, record.attribute, _order(record), frozenset(said.words - EVERYDAY_WORDS), group,
                   bool(_PLAN.search(record.text)) and not done, frozenset(said.words - _MARKERS))

    def fragment_of(self, whole: _Traits) -> bool:
        """:func:`_fragment` (``self`` the part)."""
        if self.attribute is not None and whole.attribute is not None and self.attribute != whole.attribute:
            return False
        return len(self.said.words) >= 3 and self.said.words < whole.said.words

    def near(self, other: _Traits) -> bool:
        """:func:`_near`: the same attribute, value, numbers, negations and done-ness, and enough
        shared words."""
        if self.group is None or self.group != other.group:
            return False
        shared = self.bare & other.bare
        return len(shared) >= 3 and 3 * len(shared) >= 2 * min(len(self.bare), len(other.bare))

    def fuller(self, other: _Traits) -> bool:
        """Whether ``self`` is the one to keep of two near-duplicates (more content words; then the
        earlier)."""
        a, b = len(self.said.words), len(other.said.words)
        return a > b or (a == b and self.order < other.order)

    def finishes(self, plan: _Traits) -> bool:
        """Whether a record of ``self`` (saying a plan or task is done) says that ``plan`` (a record
        on the same node) is finished.

        Bounded like supersession: the plan must state a plan (a time, "will", "need to", …) and
        be linked to the done record by the same attribute, or by at least two shared content
        words besides the plan and done words themselves ("the Anmeldung appointment on Monday" →
        "the Anmeldung appointment is done"). A plain fact is never stale by this rule.
        """
        if not plan.plan:
            return False
        if self.attribute is not None and plan.attribute is not None:
            return self.attribute == plan.attribute
        return len(self.topic & plan.topic) >= 2


def _rarest(postings: dict[str, set[int]], words: frozenset[str], count: int) -> set[int]:
    """The positions listed under the ``count`` words of ``words`` with the fewest."""
    probes = sorted(words, key=lambda word: (len(postings.get(word, ())), word))[:count]
    return set().union(*(postings.get(word, ()) for word in probes))


class _Peers:
    """The live records about one node as one run read them, kept current as the run removes them."""

    def __init__(self, records: list[Record]) -> None:
        self.facts = FactIndex(records)
        self._loaded = records
        self._traits: list[_Traits] = []
        self._by_attribute: dict[str, set[int]] = {}
        self._near_words: dict[tuple[object, ...], dict[str, set[int]]] = {}
        self._plans_by_attribute: dict[str, set[int]] = {}
        self._plan_words: dict[str, set[int]] = {}
        self._texts: tuple[str, list[int]] | None = None
        for position, record in enumerate(records):
            traits = _Traits.of(record, self.facts.said(position))
            self._traits.append(traits)
            for postings in self._postings(traits):
                postings.add(position)

    def _postings(self, traits: _Traits) -> Iterator[set[int]]:
        """Every curation index a record with ``traits`` is listed in."""
        if traits.attribute is not None:
            yield self._by_attribute.setdefault(traits.attribute, set())
        if traits.group is not None:
            words = self._near_words.setdefault(traits.group, {})
            for word in traits.bare:
                yield words.setdefault(word, set())
        if traits.plan:
            if traits.attribute is not None:
                yield self._plans_by_attribute.setdefault(traits.attribute, set())
            for word in traits.topic:
                yield self._plan_words.setdefault(word, set())

    def get(self, record_id: str) -> Record | None:
        position = self.facts.position(record_id)
        return None if position is None else self.facts.record(position)

    def record(self, position: int) -> Record:
        record = self.facts.record(position)
        assert record is not None, "a removed record is never a peer"
        return record

    def traits(self, position: int) -> _Traits:
        return self._traits[position]

    def describe(self, record: Record) -> tuple[int | None, _Traits]:
        """``record``'s position among these (None: not one of them) and its traits."""
        position = self.facts.position(record.id)
        return position, (self._traits[position] if position is not None else _Traits.of(record))

    def discard(self, record_id: str) -> None:
        position = self.facts.position(record_id)
        if position is None:
            return
        self.facts.discard(record_id)
        for postings in self._postings(self._traits[position]):
            postings.discard(position)

    def _by_order(self, found: set[int], skip: int | None) -> list[int]:
        found.discard(-1 if skip is None else skip)
        return sorted(found, key=lambda position: self._traits[position].order)

    def near(self, mine: _Traits, skip: int | None) -> list[int]:
        """The peers :func:`_near` pairs with a record of ``mine``, by :func:`_order`: only those
        sharing one of its ``n - 2`` rarest words can share three."""
        words = self._near_words.get(mine.group) if mine.group is not None else None
        if not words or len(mine.bare) < 3:
            return []
        found = _rarest(words, mine.bare, len(mine.bare) - 2)
        return [p for p in self._by_order(found, skip) if self._traits[p].near(mine)]

    def with_attribute(self, attribute: str, skip: int | None) -> list[int]:
        """The peers with ``attribute``, in the order read."""
        return sorted(self._by_attribute.get(attribute, set()) - {-1 if skip is None else skip})

    def finished_by(self, mine: _Traits, skip: int | None) -> list[int]:
        """The plans a record of ``mine`` finishes (:meth:`_Traits.finishes`), by :func:`_order`: those
        with its attribute, or sharing one of its ``n - 1`` rarest words (two are needed)."""
        found: set[int] = set()
        if mine.attribute is not None:
            found |= self._plans_by_attribute.get(mine.attribute, set())
        if len(mine.topic) >= 2:
            found |= _rarest(self._plan_words, mine.topic, len(mine.topic) - 1)
        return [p for p in self._by_order(found, skip) if mine.finishes(self._traits[p])]

    def mentioning(self, value: str, skip: int | None) -> list[int]:
        """The peers :func:`_mentions_value` finds ``value`` in, in the order read: one search
        over their texts joined by NULs, which no term matched here can span."""
        term = value.strip()
        live = self.facts.live()
        if not term or "\x00" in term:
            return [p for p in live if p != skip and _mentions_value(self.record(p).text, value)]
        if self._texts is None:
            starts, at = [], 0
            for record in self._loaded:
                starts.append(at)
                at += len(record.text) + 1
            self._texts = ("\x00".join(record.text for record in self._loaded), starts)
        joined, starts = self._texts
        pattern = re.compile(r"(?<!\w)" + re.escape(term) + r"(?!\w)", re.IGNORECASE)
        found = dict.fromkeys(bisect_right(starts, match.start()) - 1 for match in pattern.finditer(joined))
        return [p for p in found if p != skip and self.facts.record(p) is not None]


@dataclass
class _Run:
    """What one curation run keeps from record to record: each node's peers, and what it removed."""

    nodes: dict[str, _Peers] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)


class _Changed(Exception):
    """A peer changed under the run (someone else wrote it): curate the record again from a fresh read."""

    def __init__(self, node_id: str) -> None:
        super().__init__(node_id)
        self.node_id = node_id


class CurateAgent:
    """Offline curation over one knowledge store; lane state in the main store."""

    name = ACTOR

    def __init__(self, store: KnowledgeStore, lanes: Lanes, settings: AgentSettings,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.lanes = lanes
        self.settings = settings
        self.clock = clock or SystemClock()
        self._runs: dict[int, _Run] = {}  # by the id of the run's report, while its walk lasts

    @staticmethod
    def lane(source_thread_id: str) -> str:
        return f"curate:{source_thread_id}"

    async def worklist(self, context: Scope, source_thread_id: str, after: str | None, limit: int) -> list[Record]:
        page = await self.store.list_by_source(source_thread_id, context.key, view=ALL_RECORDS, after=after,
                                               limit=limit)
        return page.items

    async def due(self, context: Scope, source_thread_id: str) -> str | None:
        """Whether the lane is due now (trigger met and not backing off); no lease taken."""
        state = await self.lanes.read(self.lane(source_thread_id))
        now = self.clock.now()
        if not state.due(now):
            return None
        threshold = self.settings.curate_after_records
        limit = threshold if threshold > 0 else 1
        pending = await self.worklist(context, source_thread_id, state.cursor, max(1, limit))
        return curation_due(state, pending, now, after_records=threshold, max_age_s=self.settings.curate_max_age_s)

    async def run(
        self, context: Scope, source_thread_id: str, *, force: bool = False, triggered: bool = False
    ) -> AgentRun:
        """One curation run of the lane: skipped (busy, backing off, not due), no-op, ran or failed.

        ``triggered``: the caller's own trigger fired (a reflection): the count/age trigger is not
        checked, the backoff still is. ``force``: neither is (``obsmem`` CLI, tests).
        """
        report = AgentRun("curate")
        lane = self.lane(source_thread_id)
        try:
            async with self.lanes.hold(lane) as state:
                now = self.clock.now()
                if not force and not state.due(now):
                    report.status, report.detail = "skipped", "backing off"
                    return report
                try:
                    worklist = await self.worklist(context, source_thread_id, state.cursor, self.settings.curate_batch)
                    if not force and not triggered:
                        threshold = self.settings.curate_after_records
                        why = curation_due(state, worklist, now, after_records=threshold,
                                           max_age_s=self.settings.curate_max_age_s)
                        if why is None:
                            report.status, report.detail = "skipped", "not due"
                            return report
                    if not worklist:
                        report.status, report.detail = "no-op", "nothing uncurated"
                        return report
                    finished = await self._walk(worklist, context, report)
                except Exception as exc:  # the lane backs off; the turn never sees it
                    finished, report.detail = None, f"{type(exc).__name__}: {exc}"
                if finished is None:
                    report.status = "failed"
                    report.detail = report.detail or "ran but did not advance the cursor"
                    await self.lanes.write(lane, state.failed(report.detail, self.clock.now()))
                    return report
                report.cursor = finished
                await self.lanes.write(lane, state.succeeded(finished, self.clock.now()))
                await self.lanes.register(lane)
                try:
                    await self._guidance(context)
                except Exception as exc:  # guidance is advisory; the run stands
                    telemetry.log_failure(logger, "capture-guidance not updated", error=exc, operation="curate")
                return report
        except LaneBusyError as busy:
            report.status, report.detail = "skipped", str(busy)
            return report

    async def _walk(self, worklist: list[Record], context: Scope, report: AgentRun) -> str | None:
        """Curate in id order; the id of the last record finished (None: none was)."""
        finished: str | None = None
        self._runs[id(report)] = _Run(removed={r for r, _ in report.removed})  # kept from record to record
        try:
            for record in worklist:
                try:
                    await self._curate(record, context, report)
                except Exception as exc:
                    report.detail = f"stopped at {record.id}: {type(exc).__name__}: {exc}"
                    telemetry.log_failure(logger, "curation stopped at %s", record.id, error=exc, operation="curate")
                    break
                finished = record.id
        finally:
            del self._runs[id(report)]
        return finished

    async def _about(self, node_id: str, context: Scope) -> list[Record]:
        """The live records about a node (candidates and superseded ones included), in the store's order."""
        records: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(node_id, context.key, view=_LIVE, after=after, limit=500)
            records.extend(page.items)
            if page.next_cursor is None:
                return records
            after = page.next_cursor

    async def _peers(self, record: Record, context: Scope) -> list[Record]:
        return [p for p in await self._about(record.node_id, context) if p.id != record.id]

    async def _remove(self, victim: Record, context: Scope, reason: str, report: AgentRun, *,
                      superseded_by: str | None = None, private_to: str | None = None,
                      shared: str | None = None) -> None:
        """Soft-remove ``victim``; ``superseded_by``: a newer value of its attribute replaced it, so
        it stays history (reads ``as_of`` its time still return it), unlike a duplicate or a
        value the user corrected (never true).

        ``private_to``: the scope whose text ``reason`` may quote (the record it goes for lives
        there). When that scope is below the victim's (a thread's record closing its resource's),
        the removal is logged at the victim's scope, which every sibling thread reads, with
        ``shared`` (the reason without that text) instead, and ``reason`` in that scope's log.
        The run's report keeps ``reason``: it goes to the acting thread."""
        within: tuple[str, str] | None = None
        if private_to is not None and not Scope.parse(victim.scope).sees(private_to):
            shared = shared or f"removed because of {_NARROWER} {_THERE}"
            if shared != reason:
                within = (private_to, reason)
            reason = shared
        await self.store.remove_record(victim.id, context.key, actor=ACTOR, reason=reason,
                                       superseded_by=superseded_by, reason_within=within)
        report.removed.append((victim.id, reason if within is None else within[1]))

    async def _node_peers(self, record: Record, node_id: str, context: Scope, run: _Run) -> _Peers:
        """The node's live records as this run holds them; read (again) the first time, and when
        ``record`` (just read) shows that someone else wrote the node since."""
        peers = run.nodes.get(node_id)
        if peers is not None:
            held_here = peers.get(record.id)
            if held_here is not None and held_here.revision == record.revision:
                return peers
            if held_here is None and await self.store.get_record(record.id, context.key, _LIVE) is None:
                return peers  # not live (a tombstone hides it): no peer of any record, as when it was read
        peers = run.nodes[node_id] = _Peers(await self._about(record.node_id, context))
        return peers

    async def _curate(self, record: Record, context: Scope, report: AgentRun) -> None:
        run = self._runs.get(id(report)) or _Run(removed={r for r, _ in report.removed})
        try:
            await self._curate_once(record, context, report, run, confirm=True)
        except _Changed as changed:  # someone else wrote a peer it relied on: again, from a fresh read
            run.nodes.pop(changed.node_id, None)
            await self._curate_once(record, context, report, run, confirm=False)

    async def _curate_once(self, record: Record, context: Scope, report: AgentRun, run: _Run, *,
                           confirm: bool) -> None:
        current = await self.store.get_record(record.id, context.key, ALL_RECORDS)  # as it is now
        if current is None or current.deleted_at is not None or current.trust is TrustState.REJECTED:
            return
        record = current
        node = await self.store.get_node(record.node_id, context.key)
        if node is None or node.name.casefold() in RESERVED_NODES or node.kind == "skill":
            return
        peers = await self._node_peers(record, node.id, context, run)
        me, mine = peers.describe(record)

        async def remove(victim: Record, reason: str, keeper: Record, *, changed: bool = False,
                         shared: str | None = None) -> None:
            if not may_remove(victim, keeper):
                return  # the org's record stays: one user's record is no reason for the whole org
            if victim.trust is TrustState.VERIFIED and keeper.trust is not TrustState.VERIFIED:
                # An unreviewed candidate is invisible to reads until approved: it never takes a
                # verified record (a reviewer's, say) out of them. Approved, a newer value of the
                # same attribute closes the old one in the store's timeline; rejected, it is gone.
                return
            if confirm:  # the peers were read earlier in the run: is each one it relies on unchanged?
                for other in (victim, keeper):
                    if other.id != record.id:
                        now = await self.store.get_record(other.id, context.key, _LIVE)
                        if now is None or now.revision != other.revision:
                            raise _Changed(node.id)
            await self._remove(victim, context, reason, report, superseded_by=keeper.id if changed else None,
                               private_to=keeper.scope,
                               shared=shared if shared is not None else reason.replace(keeper.id, _NARROWER))
            run.removed.add(victim.id)
            peers.discard(victim.id)

        # 1. duplicates: the later statement of a fact goes, the first one stays.
        def changed_between(older: Record, newer: Record, newer_said: Said) -> bool:
            """Another value of their attribute stands between the two (Berlin, Paris, Berlin
            again): the later one is a change back, not the earlier one stated again."""
            value = newer.metadata.get("value")
            return peers.facts.changed_since(older, newer.attribute, newer.valid_from, newer_said,
                                             value if isinstance(value, str) else None)

        twin = peers.facts.holder(mine.said, accept=lambda p: p.id != record.id and _order(p) < mine.order
                                  and not changed_between(p, record, mine.said))
        if twin is not None:
            await remove(record, f"duplicate of {twin.id}: the same fact stated again", twin)
            return
        restated = peers.facts.held_by(mine.said) | peers.facts.parts(mine.said.words)
        restated.discard(-1 if me is None else me)
        for position in sorted(restated):  # in the order read, as the peers were walked
            peer, theirs = peers.record(position), peers.traits(position)
            if theirs.order > mine.order and peer.deleted_at is None and mine.said.holds(theirs.said):
                if not changed_between(record, peer, theirs.said):
                    await remove(peer, f"duplicate of {record.id}: the same fact stated again", record)
            elif theirs.order < mine.order and theirs.fragment_of(mine) and not changed_between(peer, record, mine.said):
                await remove(peer, f"duplicate of {record.id}: a fuller statement of the same fact", record)
        # 1b. near-duplicates: the shorter of two records that say nearly the same thing goes.
        for position in peers.near(mine, me):
            peer, theirs = peers.record(position), peers.traits(position)
            first, last = (peer, record) if theirs.order < mine.order else (record, peer)
            if changed_between(first, last, mine.said if last is record else theirs.said):
                continue
            keep, drop = (record, peer) if mine.fuller(theirs) else (peer, record)
            await remove(drop, f"duplicate of {keep.id}: a near-duplicate of the same fact "
                         f"(“{drop.text[:120]}” ≈ “{keep.text[:120]}”)", keep,
                         shared=f"duplicate of {_NARROWER}: a near-duplicate of the same fact "
                                f"(“{drop.text[:120]}”) {_THERE}")
            if drop is record:
                return
        # 2. contradictions on the same subject and attribute.
        if record.attribute is not None:
            same = [peers.record(p) for p in peers.with_attribute(record.attribute, me)
                    if peers.traits(p).said.key != mine.said.key and not _same_value(peers.record(p), record)]
            newer = [p for p in same if _order(p) > mine.order]
            if newer:
                latest = max(newer, key=_order)
                await remove(record, self._because(latest, record), latest, changed=True,
                             shared=self._because(latest, record, shown=False))
                return
            for older in sorted(same, key=_order):
                await remove(older, self._because(record, older), record, changed=True,
                             shared=self._because(record, older, shown=False))
        replaces = record.metadata.get("replaces") or []
        for value in replaces if isinstance(replaces, list) else []:
            holders = [peers.record(p) for p in peers.mentioning(str(value), me)
                       if peers.traits(p).order < mine.order and peers.record(p).id not in run.removed]
            if not holders:
                continue
            same_attribute = [p for p in holders if record.attribute is not None and p.attribute == record.attribute]
            for older in same_attribute or [max(holders, key=_order)]:
                await remove(older, self._because(record, older, corrected=str(value)), record,
                             shared=self._because(record, older, corrected=str(value), shown=False))
        # 3. stale plans: an older plan or task on this node that this record says is done.
        if _DONE.search(record.text) and not _NOT_DONE.search(record.text):
            gone = set(run.removed)
            for position in peers.finished_by(mine, me):
                plan = peers.record(position)
                if plan.id not in gone and peers.traits(position).order < mine.order:
                    await remove(plan, (
                        f"stale: {record.id} says it is done: “{plan.text}” → “{record.text}” "
                        f"(stated {record.valid_from.date().isoformat()})")[:1000], record,
                        shared=f"stale: {_NARROWER} says it is done: “{plan.text}” {_THERE}"[:1000])

    @staticmethod
    def _because(newer: Record, older: Record, corrected: str | None = None, *, shown: bool = True) -> str:
        """Why ``older`` goes for ``newer``; ``shown`` False: without ``newer``'s id, text or time
        (the reason logged where ``newer``'s scope is not read, see :meth:`_remove`)."""
        if not shown:
            if corrected is not None:
                return (f"superseded by {_NARROWER}: the user corrected “{corrected}”: “{older.text}” "
                        f"{_THERE}")[:1000]
            return (f"superseded by {_NARROWER}: '{newer.attribute}' changed from “{older.text}” "
                    f"{_THERE}")[:1000]
        stated = f" (stated {newer.valid_from.date().isoformat()})"
        if corrected is not None:
            return (f"superseded by {newer.id}: the user corrected “{corrected}”: “{older.text}” → "
                    f"“{newer.text}”{stated}")[:1000]
        return (f"superseded by {newer.id}: '{newer.attribute}' changed from “{older.text}” to "
                f"“{newer.text}”{stated}")[:1000]

    async def _guidance(self, context: Scope) -> None:
        """Keep ``capture-guidance`` listing the attributes in use, so later captures reuse them.

        A node shows its content to its whole scope, so the resource's node lists only the
        attributes of records stored for the whole resource (or broader); what a thread's own
        records add is listed in a node of that thread, which it resolves first and its siblings
        never see (nor do they see the resource's node rewritten from one thread's view)."""
        user = await self.store.resolve_node(self.settings.user_node, context.key)
        if user is None:
            return
        # The node shows the attributes to its whole scope: only records whose ceiling reaches it.
        level = clamp_level(Level.RESOURCE, self.settings.ceiling)
        shared: set[str] = set()  # stored at the node's level or above: every thread there sees them
        own: set[str] = set()  # everything this thread sees
        after: str | None = None
        while True:
            page = await self.store.list_about(user.id, context.key, view=_LIVE, after=after, limit=500)
            for record in page.items:
                if not record.attribute or record.max_scope > level:
                    continue  # a thread-private record's attribute is its own word: listed nowhere
                own.add(record.attribute)
                if Scope.parse(record.scope).level <= level:
                    shared.add(record.attribute)
            if page.next_cursor is None:
                break
            after = page.next_cursor
        await self._write_guidance(user.name, shared, context.at(level), context)
        if context.level > level:  # this thread's own list, resolved before the resource's
            await self._write_guidance(user.name, own if own != shared else set(), context, context)

    async def _write_guidance(self, name: str, attributes: set[str], where: Scope, context: Scope) -> None:
        """Write the guidance node stored at ``where``: created when there is something to list,
        cleared when its list became empty."""
        existing = await self.store.resolve_node(CAPTURE_GUIDANCE, where.key)
        if existing is not None and existing.scope != where.key:
            existing = None  # a broader one (the org's) is not ours to rewrite: ours goes beside it
        if not attributes:
            if existing is not None and existing.content:
                await self.store.update_node(existing.id, existing.version, scope=context.key, actor=ACTOR,
                                             reason="curate: capture guidance updated", content="")
            return
        names = ", ".join(sorted(attributes))
        content = (f"Attributes in use for {name}: {names}. Give a changed value the same attribute "
                   "so the new record supersedes the old one; state corrections as '…, not <old value>'.")
        content = content[:_GUIDANCE_LIMIT]
        if existing is None:
            await self.store.create_node(CAPTURE_GUIDANCE, "document", where.key, actor=ACTOR,
                                         reason="curate: capture guidance", content=content)
        elif existing.content != content:
            await self.store.update_node(existing.id, existing.version, scope=context.key, actor=ACTOR,
                                         reason="curate: capture guidance updated", content=content)


def may_remove(victim: Record, keeper: Record) -> bool:
    """Whether curation may take ``victim`` out of the reads because of ``keeper``: not a record
    the whole organisation reads (stored at an org scope) because of one resource's or thread's
    record. Every other user of the org would lose it with nothing in its place they can see,
    and the removal's reason, logged at the org scope where their audit log reads it, quotes the
    keeper's text. Within one resource (a thread's newer value closing the resource's) it may."""
    return Scope.parse(victim.scope).resource is not None or Scope.parse(keeper.scope).resource is None

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
from collections.abc import Sequence
from datetime import datetime

from obsmem.clock import Clock, SystemClock
from obsmem.knowledge.agents.capture import held
from obsmem.knowledge.agents.common import ALL_RECORDS, EVERYDAY_WORDS, AgentRun, AgentSettings, content_tokens
from obsmem.knowledge.agents.lanes import LaneBusyError, Lanes, LaneState
from obsmem.knowledge.store.contract import KnowledgeStore, Record, RecordView, TrustState
from obsmem.knowledge.store.scopes import Scope, clamp_level, Level
from obsmem.knowledge.store.values import value_key
from obsmem import telemetry

__all__ = ["CAPTURE_GUIDANCE", "RESERVED_NODES", "CurateAgent", "curation_due", "same_fact"]

logger = logging.getLogger("obsmem.knowledge")

ACTOR = "curate"
CAPTURE_GUIDANCE = "capture-guidance"
RESERVED_NODES = frozenset({"pinned", CAPTURE_GUIDANCE})
_LIVE = RecordView(include_candidates=True, include_superseded=True)
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


def _finishes(done: Record, plan: Record) -> bool:
    """Whether ``done`` says that ``plan`` (a plan or task on the same node) is finished.

    Bounded like supersession: the plan must state a plan (a time, "will", "need to", …) and
    be linked to the done record by the same attribute, or by at least two shared content
    words besides the plan and done words themselves ("the Anmeldung appointment on Monday" →
    "the Anmeldung appointment is done"). A plain fact is never stale by this rule.
    """
    if not _PLAN.search(plan.text) or _DONE.search(plan.text):
        return False
    if done.attribute is not None and plan.attribute is not None:
        return done.attribute == plan.attribute
    shared = (content_tokens(done.text) & content_tokens(plan.text)) - _MARKERS
    return len(shared) >= 2


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


def _fuller(first: Record, second: Record) -> bool:
    """Whether ``first`` is the one to keep of two near-duplicates (more content words; then the earlier)."""
    a, b = len(content_tokens(first.text)), len(content_tokens(second.text))
    return a > b or (a == b and _order(first) < _order(second))


class CurateAgent:
    """Offline curation over one knowledge store; lane state in the main store."""

    name = ACTOR

    def __init__(self, store: KnowledgeStore, lanes: Lanes, settings: AgentSettings,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.lanes = lanes
        self.settings = settings
        self.clock = clock or SystemClock()

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
        for record in worklist:
            try:
                await self._curate(record, context, report)
            except Exception as exc:
                report.detail = f"stopped at {record.id}: {type(exc).__name__}: {exc}"
                telemetry.log_failure(logger, "curation stopped at %s", record.id, error=exc, operation="curate")
                break
            finished = record.id
        return finished

    async def _peers(self, record: Record, context: Scope) -> list[Record]:
        peers: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(record.node_id, context.key, view=_LIVE, after=after, limit=500)
            peers.extend(p for p in page.items if p.id != record.id)
            if page.next_cursor is None:
                return peers
            after = page.next_cursor

    async def _remove(self, victim: Record, context: Scope, reason: str, report: AgentRun) -> None:
        await self.store.remove_record(victim.id, context.key, actor=ACTOR, reason=reason)
        report.removed.append((victim.id, reason))

    async def _curate(self, record: Record, context: Scope, report: AgentRun) -> None:
        current = await self.store.get_record(record.id, context.key, ALL_RECORDS)  # as it is now
        if current is None or current.deleted_at is not None or current.trust is TrustState.REJECTED:
            return
        record = current
        node = await self.store.get_node(record.node_id, context.key)
        if node is None or node.name.casefold() in RESERVED_NODES or node.kind == "skill":
            return
        peers = await self._peers(record, context)
        # 1. duplicates: the later statement of a fact goes, the first one stays.
        twin = held(record.text, [p for p in peers if _order(p) < _order(record)])
        if twin is not None:
            await self._remove(record, context, f"duplicate of {twin.id}: the same fact stated again", report)
            return
        for peer in peers:
            if _order(peer) > _order(record) and peer.deleted_at is None and held(peer.text, [record]) is record:
                await self._remove(peer, context, f"duplicate of {record.id}: the same fact stated again", report)
            elif _order(peer) < _order(record) and _fragment(peer, record):
                await self._remove(peer, context, f"duplicate of {record.id}: a fuller statement of the same fact",
                                   report)
        peers = [p for p in peers if p.id not in {r for r, _ in report.removed}]
        # 1b. near-duplicates: the shorter of two records that say nearly the same thing goes.
        for peer in sorted(peers, key=_order):
            if not _near(peer, record):
                continue
            keep, drop = (record, peer) if _fuller(record, peer) else (peer, record)
            await self._remove(drop, context, f"duplicate of {keep.id}: a near-duplicate of the same fact "
                               f"(“{drop.text[:120]}” ≈ “{keep.text[:120]}”)", report)
            if drop is record:
                return
        peers = [p for p in peers if p.id not in {r for r, _ in report.removed}]
        # 2. contradictions on the same subject and attribute.
        if record.attribute is not None:
            same = [p for p in peers if p.attribute == record.attribute and value_key(p.text) != value_key(record.text)
                    and not _same_value(p, record)]
            newer = [p for p in same if _order(p) > _order(record)]
            if newer:
                latest = max(newer, key=_order)
                await self._remove(record, context, self._because(latest, record), report)
                return
            for older in sorted(same, key=_order):
                await self._remove(older, context, self._because(record, older), report)
        replaces = record.metadata.get("replaces") or []
        for value in replaces if isinstance(replaces, list) else []:
            holders = [p for p in peers if _order(p) < _order(record) and _mentions_value(p.text, str(value))
                       and p.id not in {r for r, _ in report.removed}]
            if not holders:
                continue
            same_attribute = [p for p in holders if record.attribute is not None and p.attribute == record.attribute]
            for older in same_attribute or [max(holders, key=_order)]:
                await self._remove(older, context, self._because(record, older, corrected=str(value)), report)
        # 3. stale plans: an older plan or task on this node that this record says is done.
        if _DONE.search(record.text) and not _NOT_DONE.search(record.text):
            gone = {r for r, _ in report.removed}
            for plan in sorted(peers, key=_order):
                if plan.id not in gone and _order(plan) < _order(record) and _finishes(record, plan):
                    await self._remove(plan, context, (
                        f"stale: {record.id} says it is done: “{plan.text}” → “{record.text}” "
                        f"(stated {record.valid_from.date().isoformat()})")[:1000], report)

    @staticmethod
    def _because(newer: Record, older: Record, corrected: str | None = None) -> str:
        stated = f" (stated {newer.valid_from.date().isoformat()})"
        if corrected is not None:
            return (f"superseded by {newer.id}: the user corrected “{corrected}”: “{older.text}” → "
                    f"“{newer.text}”{stated}")[:1000]
        return (f"superseded by {newer.id}: '{newer.attribute}' changed from “{older.text}” to "
                f"“{newer.text}”{stated}")[:1000]

    async def _guidance(self, context: Scope) -> None:
        """Keep ``capture-guidance`` listing the attributes in use, so later captures reuse them."""
        user = await self.store.resolve_node(self.settings.user_node, context.key)
        if user is None:
            return
        attributes: dict[str, int] = {}
        after: str | None = None
        while True:
            page = await self.store.list_about(user.id, context.key, view=_LIVE, after=after, limit=500)
            for record in page.items:
                if record.attribute:
                    attributes[record.attribute] = attributes.get(record.attribute, 0) + 1
            if page.next_cursor is None:
                break
            after = page.next_cursor
        if not attributes:
            return
        names = ", ".join(sorted(attributes))
        content = (f"Attributes in use for {user.name}: {names}. Give a changed value the same attribute "
                   "so the new record supersedes the old one; state corrections as '…, not <old value>'.")
        content = content[:_GUIDANCE_LIMIT]
        level = clamp_level(Level.RESOURCE, self.settings.ceiling)
        existing = await self.store.resolve_node(CAPTURE_GUIDANCE, context.key)
        if existing is None:
            await self.store.create_node(CAPTURE_GUIDANCE, "document", context.at(level).key, actor=ACTOR,
                                         reason="curate: capture guidance", content=content)
        elif existing.content != content:
            await self.store.update_node(existing.id, existing.version, scope=context.key, actor=ACTOR,
                                         reason="curate: capture guidance updated", content=content)

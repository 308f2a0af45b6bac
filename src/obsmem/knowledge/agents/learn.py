"""The learn agent: a reusable procedure becomes a ``skill`` node, only with ≥2 distinct supports.

Offline by default. A *procedural* record says how something is always (or never) done:
``always``, ``never``, ``whenever``, ``every time``, ``each time``. Procedural records about the
same thing (their content words overlap by at least half) form a group; a group with at least two
*distinct* records (different ids, not duplicates of one another) is learned as a skill:

* a node of kind ``skill`` named ``skill: <key words>`` (created idempotently);
* one evidence record per supporting record, linked back to it, with a deterministic id: the
  first 10 characters of the source record's id (its time) plus 16 Crockford characters of
  ``sha256(name \\0 source id)``, so a re-run writes nothing twice.

Like curation it walks its lane's worklist (``learn:<thread>``) with a fail-closed cursor, and
at most one new skill per run. A record holding a secret (a password, a key, a PIN an application
stored itself, :func:`~obsmem.knowledge.secrets.holds_secret`) is never a skill's support: its
words would become the skill's name, procedure and evidence, new durable copies of the secret.

A procedural record the walk passes while it is still a candidate (pending review) is remembered in
the lane (its id only, the newest :data:`MAX_AWAITING`) and read again at every later run until a
reviewer decides: once approved it is learned from as if the walk found it then (the walk had passed
it for good, so a procedure approved after its capture was never learned); rejected or removed, it
is forgotten.

A skill is learned only from *served* records: verified (approved), live and current, never a
candidate still pending review nor one rejected or removed, so a proposal no reviewer approved
never becomes a skill (the node's name and content would serve its words). A search serves the
skill only while at least two of its supports are still served
(:func:`~obsmem.knowledge.repeats.serves_skill`); rejecting, removing or erasing a support removes
its evidence record and clears the node's content where it quotes it.
"""

from __future__ import annotations

import hashlib
import re

from obsmem.clock import Clock, SystemClock
from obsmem.knowledge.agents.capture import held
from obsmem.knowledge.agents.common import ALL_RECORDS, AgentRun, AgentSettings, content_tokens
from obsmem.knowledge.agents.lanes import LaneBusyError, Lanes
from obsmem.knowledge.repeats import LEARN_ACTOR, LEARN_EVIDENCE, SKILL_CONTENT, SKILL_KIND, learned_source
from obsmem.knowledge.secrets import holds_secret
from obsmem.knowledge.store.contract import DEFAULT_VIEW, KnowledgeStore, Record, RecordDraft, TrustState
from obsmem.knowledge.store.ids import ULID_ALPHABET
from obsmem.knowledge.store.scopes import Scope, clamp_level

__all__ = ["LearnAgent", "evidence_id", "is_procedural"]

ACTOR = LEARN_ACTOR
_PROCEDURAL = re.compile(r"\b(?:always|never|whenever|every time|each time|every morning|every week)\b",
                         re.IGNORECASE)
_SERVED = DEFAULT_VIEW  # verified, live, current: what a search serves, the only records a skill is learned from
#: The lane's ids of procedural records walked while pending review (see the module docstring).
AWAITING = "awaiting"
MAX_AWAITING = 64


def is_procedural(text: str) -> bool:
    return _PROCEDURAL.search(text) is not None


def evidence_id(skill_name: str, source_id: str) -> str:
    """Deterministic evidence record id: source time prefix + 16 chars of sha256(name\\0source)."""
    digest = int.from_bytes(hashlib.sha256(f"{skill_name}\0{source_id}".encode()).digest()[:10], "big")
    tail = "".join(ULID_ALPHABET[(digest >> (5 * i)) & 31] for i in range(16))[::-1]
    return source_id[:10] + tail


def _key(text: str) -> set[str]:
    return content_tokens(_PROCEDURAL.sub(" ", text))


class LearnAgent:
    name = ACTOR

    def __init__(self, store: KnowledgeStore, lanes: Lanes, settings: AgentSettings,
                 clock: Clock | None = None) -> None:
        self.store = store
        self.lanes = lanes
        self.settings = settings
        self.clock = clock or SystemClock()

    @staticmethod
    def lane(source_thread_id: str) -> str:
        return f"learn:{source_thread_id}"

    async def run(self, context: Scope, source_thread_id: str) -> AgentRun:
        report = AgentRun("learn")
        lane = self.lane(source_thread_id)
        try:
            async with self.lanes.hold(lane) as state:
                now = self.clock.now()
                if not state.due(now):
                    report.status, report.detail = "skipped", "backing off"
                    return report
                awaiting = [i for i in state.get(AWAITING, ()) or () if isinstance(i, str)]
                try:
                    page = await self.store.list_by_source(source_thread_id, context.key, view=ALL_RECORDS,
                                                           after=state.cursor, limit=self.settings.curate_batch)
                    worklist = page.items
                    if not worklist and not awaiting:
                        report.status = "no-op"
                        return report
                    learned, still = await self._decided(awaiting, context, report)
                    finished = state.cursor
                    if worklist:
                        finished = await self._walk(worklist, context, report, learned=learned, awaiting=still)
                except Exception as exc:
                    report.status, report.detail = "failed", f"{type(exc).__name__}: {exc}"
                    await self.lanes.write(lane, state.failed(report.detail, self.clock.now()))
                    return report
                report.cursor = finished
                done = state.succeeded(finished, self.clock.now())
                if still or awaiting:
                    done = done.with_extra(**{AWAITING: still[-MAX_AWAITING:]})
                await self.lanes.write(lane, done)
                if not report.written:
                    report.status = "no-op"
                return report
        except LaneBusyError as busy:
            report.status, report.detail = "skipped", str(busy)
            return report

    async def _walk(self, worklist: list[Record], context: Scope, report: AgentRun, *, learned: bool = False,
                    awaiting: list[str] | None = None) -> str | None:
        """Learn at most one skill from the worklist (none when ``learned`` already); the id it
        finished through. The procedural candidates it passes go to ``awaiting``."""
        finished: str | None = None
        for record in worklist:
            if record.deleted_at is None and is_procedural(record.text) and not holds_secret(record.text):
                if record.trust is TrustState.VERIFIED and not learned:
                    learned = await self._learn_from(record, context, report)
                elif record.trust is TrustState.CANDIDATE and awaiting is not None and record.id not in awaiting:
                    awaiting.append(record.id)
            finished = record.id
        return finished

    async def _decided(self, awaiting: list[str], context: Scope, report: AgentRun) -> tuple[bool, list[str]]:
        """The awaited candidates read again: one approved since is learned from (at most one skill
        a run: True then); those still pending stay awaited, the others are let go."""
        learned = False
        still: list[str] = []
        for record_id in awaiting:
            record = await self.store.load_record(record_id)
            if record is None or record.deleted_at is not None or record.trust is TrustState.REJECTED:
                continue
            if record.trust is TrustState.CANDIDATE or learned:
                still.append(record_id)  # (approved, but this run learned its one skill: the next one reads it)
            elif is_procedural(record.text) and not holds_secret(record.text):
                learned = await self._learn_from(record, context, report)
        return learned, still

    async def _procedural_records(self, record: Record, context: Scope) -> list[Record]:
        found: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(record.node_id, context.key, view=_SERVED, after=after, limit=500)
            found.extend(r for r in page.items if is_procedural(r.text) and not holds_secret(r.text))
            if page.next_cursor is None:
                return found
            after = page.next_cursor

    async def _learn_from(self, record: Record, context: Scope, report: AgentRun) -> bool:
        key = _key(record.text)
        if not key:
            return False
        group: list[Record] = []
        for other in sorted(await self._procedural_records(record, context), key=lambda r: r.id):
            other_key = _key(other.text)
            if not other_key or len(key & other_key) * 2 < len(key | other_key):
                continue
            if held(other.text, group) is not None:
                continue  # a duplicate is not a second support
            group.append(other)
        if len(group) < 2:
            return False
        shared = set.intersection(*(_key(r.text) for r in group))  # the group's, not the trigger's
        name = "skill: " + " ".join(sorted(shared or key)[:6])
        return await self.record_skill(name, "Procedure: " + group[-1].text, group, context, report)

    async def record_skill(self, name: str, procedure: str, group: list[Record], context: Scope,
                           report: AgentRun) -> bool:
        """Write the skill node and one evidence record per supporting record (idempotent)."""
        if any(holds_secret(text) for text in (name, procedure, *(record.text for record in group))):
            raise ValueError("a skill never holds a secret (a password, a key, a PIN): leave it out")
        distinct: list[Record] = []
        for record in group:
            # Read again as served: a candidate, a rejected or removed record is never a support.
            served = await self.store.get_record(record.id, record.scope, _SERVED)
            if served is not None and held(served.text, distinct) is None:
                distinct.append(served)
        if len(distinct) < 2:
            raise ValueError("a skill needs at least two distinct supporting records, each approved "
                             "(a candidate pending review is not one)")
        group = distinct
        # The node shows the records' words (its name, its procedure): no broader than the
        # narrowest ceiling among them, whatever the agent's own ceiling allows, nor than the
        # narrowest scope they are stored at (a thread's records make a skill of that thread only,
        # which its siblings never see and delete_thread's purge of its scope removes).
        level = max(clamp_level(self.settings.node_level, self.settings.ceiling),
                    *(r.max_scope for r in group), *(Scope.parse(r.scope).level for r in group))
        node = await self.store.resolve_node(name, context.key)
        if node is None or Scope.parse(node.scope).level > level:  # a thread's skill is not the resource's
            node = await self.store.create_node(
                name, SKILL_KIND, context.at(level).key, actor=ACTOR,
                reason=f"learn: a procedure supported by {len(group)} distinct records",
                content=procedure[:SKILL_CONTENT], metadata={"agent": ACTOR},
            )
        wrote = False
        for source in group:
            rid = evidence_id(name, source.id)
            if await self.store.load_record(rid) is not None:
                continue
            draft = RecordDraft(
                node.id, f"Procedure: {source.text}. Evidence source: {source.id}.", source.scope,
                source_thread_id=learned_source(source.source_thread_id),
                max_scope=source.max_scope, trust=TrustState.CANDIDATE,
                metadata={LEARN_EVIDENCE: source.id, "agent": ACTOR}, record_id=rid,
            )
            report.written.append(await self.store.append_record(
                draft, actor=ACTOR, reason=f"learn: evidence for {name} from {source.id}"))
            wrote = True
        return wrote

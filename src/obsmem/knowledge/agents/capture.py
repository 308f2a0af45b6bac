"""The capture agent: committed observation deltas in, candidate records out.

Offline by default (:mod:`.extract` rules, no model). Every write goes through the knowledge
store with ``actor="capture"`` and a one-sentence reason quoting the user, so ceilings,
tombstones, trust and the audit log apply to it:

* the node (``User`` for what the user said about themselves) is created idempotently at the
  configured node level, clamped to the ceiling;
* each record is clamped to the ceiling (:func:`obsmem.knowledge.capture.capture`), enters as
  ``candidate`` unless configured otherwise, and carries ``when`` (the time the conversation
  anchors), its ``attribute`` and, for a correction, the values it replaces;
* a fact already held (same node, a record whose words contain the new one's, or a
  near-duplicate) is not written again; records an *agent* removed count as held, so a
  superseded value is never resurrected by re-reading old observations. A value stated again
  *after* another value of its attribute (Berlin, Paris, "Berlin again") is a change back, not
  a restatement, and is captured (:meth:`FactIndex.changed_since`). A run reads a node's
  records once and indexes what each says (:class:`FactIndex`): a proposal is compared only
  with the records that share its key, its words or its rarest tokens, not with every record;
* a value the user tombstoned is refused by the store, which audits the refusal
  (``write-refused``, actor ``capture``); the run reports it. A text refused for a tombstoned
  phone number or email address it gives beside other facts ("my phone is … and I moved to
  Lisbon") loses only that value: its other clauses are captured on their own;
* a text that holds a secret (a password, an API key or token, a PIN:
  :func:`~obsmem.knowledge.secrets.holds_secret`), or gives a value the delta stated as one, is
  never written, privacy boundary or not: its other clauses are captured on their own, and the
  run counts what it left out (``withheld``), never its text. A proposal whose node name or
  attribute holds one is left out whole; one whose reason alone holds one gets a reason of
  its own.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from obsmem.errors import InvalidInputError
from obsmem.knowledge.capture import capture as capture_record
from obsmem.knowledge.secrets import holds_secret, secret_values
from obsmem.knowledge.agents.common import (
    AGENT_ACTORS,
    ALL_RECORDS,
    AgentRun,
    AgentSettings,
    content_tokens,
)
from obsmem.knowledge.agents.extract import Proposal, Statement, conjoined, propose, statements
from obsmem.knowledge.store.contract import KnowledgeStore, Node, Record, TrustState
from obsmem.knowledge.store.scopes import Level, Scope, clamp_level
from obsmem.knowledge.store.ops import tombstone_refuses
from obsmem.knowledge.store.values import (
    NEAR_DUPLICATE_JACCARD,
    gives_any,
    near_duplicate,
    near_duplicate_tokens,
    normalise_value,
    typed_values,
    value_key,
)

__all__ = ["CaptureAgent", "FactIndex", "Said", "held"]

logger = logging.getLogger("obsmem.knowledge")

ACTOR = "capture"


def held(proposal_text: str, existing: Sequence[Record]) -> Record | None:
    """The existing record that already holds this fact, if any."""
    key = value_key(proposal_text)
    tokens = content_tokens(proposal_text)
    for record in existing:
        if record.deleted_at is not None and record.deleted_by not in AGENT_ACTORS:
            continue  # removed by a person: a tombstone (if any) decides, in the store
        if value_key(record.text) == key or near_duplicate(record.text, proposal_text):
            return record
        said = content_tokens(record.text)
        if tokens and (tokens == said or (len(tokens) >= 3 and tokens <= said)):
            return record  # two words inside a longer text ("Nadia Kessler" in an address) are no restatement
    return None


#: Where a text holding a secret is cut so that its other clauses can still be captured: as
#: :func:`~obsmem.knowledge.agents.extract.conjoined` cuts, and also before "its", "the", "it"
#: ("their wifi is called Fritz-7490 and its password is …").
_AROUND_SECRET = re.compile(
    r" ?; |,? (?:and|but) (?=(?:they|their|i|my|we|our|she|he|her|his|its|the|it)\b)"
    r"| ?, (?=(?:they|their|i|my|we|our|she|he|her|his|its|the|it)\b)",
    re.IGNORECASE,
)


#: The reason a record gets when the one proposed for it held a secret (its text did not).
_SECRET_REASON = "The user stated it (the words it was said with held a secret, left out)."


def _beside_secret(text: str, stated: frozenset[str]) -> tuple[list[str], int]:
    """The clauses of ``text`` that hold no secret, and how many were left out (at least one)."""
    parts = [part.strip().rstrip(" .;,") for part in _AROUND_SECRET.split(" ".join(text.split()))]
    parts = [part if part.count("[[") == part.count("]]") else part.replace("[[", "").replace("]]", "")
             for part in parts if len(part.split()) >= 2]  # a cut wikilink ("at [[Acme and its …]]") is no link
    if len(parts) < 2:
        return [], 1
    kept = [part for part in parts if not holds_secret(part, stated)]
    return kept, max(1, len(parts) - len(kept))


#: How many changed_since groundworks a FactIndex keeps (each a list of one attribute's records).
_DIFFERING_KEPT = 64


@dataclass(frozen=True, slots=True)
class Said:
    """What one text says, worked out once: its exact key, its content words and the tokens
    :func:`~obsmem.knowledge.store.values.near_duplicate` compares."""

    text: str
    key: str
    words: frozenset[str]
    tokens: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Said:
        tokens = frozenset(near_duplicate_tokens(text))
        return cls(text, value_key(text), frozenset(content_tokens(text)), tokens)

    def holds(self, other: Said) -> bool:
        """Whether a record saying this already holds ``other`` (the test of :func:`held`)."""
        if self.key == other.key or self.near(other):
            return True
        tokens = other.words
        return bool(tokens) and (tokens == self.words or (len(tokens) >= 3 and tokens <= self.words))

    def near(self, other: Said) -> bool:
        """``near_duplicate(self.text, other.text)``, its token-set similarity from the stored tokens."""
        a, b = self.tokens, other.tokens
        if not a or not b or len(a & b) / len(a | b) < NEAR_DUPLICATE_JACCARD:
            return False
        return near_duplicate(self.text, other.text)  # the same test, negations included, on a rare pair


def _rarest_first(counts: dict[str, set[int]]) -> Callable[[str], tuple[int, str]]:
    return lambda word: (len(counts.get(word, ())), word)


class FactIndex:
    """Records indexed by what they say, so that many :func:`held` questions over one set of
    records cost a few look-ups each instead of one comparison with every record.

    Each record's key, content words and near-duplicate tokens are computed once. A record that
    holds a text has its exact key or word set (dict look-ups), contains all its words (an
    intersection of the word postings), or is a near-duplicate; a near-duplicate (token-set
    similarity of at least 3/4) shares at least one of the text's ``m - ceil(3m/4) + 1`` rarest
    tokens, so only records listed under those are compared. Answers are those of :func:`held`
    over the records in the order they were added; records removed later are dropped from the
    index (:meth:`discard`).
    """

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._records: list[Record | None] = []
        self._said: list[Said | None] = []
        self._at: dict[str, int] = {}
        self._by_key: dict[str, set[int]] = {}
        self._by_words: dict[frozenset[str], set[int]] = {}
        self._word: dict[str, set[int]] = {}  # content word -> positions
        self._token: dict[str, set[int]] = {}  # near-duplicate token -> positions
        self._rarest: dict[str, set[int]] = {}  # a record of 3+ words, under the rarest of them
        self._sign: dict[int, str] = {}
        self._attribute: dict[str, set[int]] = {}  # attribute -> positions
        # changed_since's answers' groundwork, per (attribute, text, value); dropped on any change.
        self._differs: dict[tuple[str, Said, str | None], list[tuple[datetime, int]]] = {}
        self.extend(records)

    # -- building --------------------------------------------------------------------------------
    def extend(self, records: Iterable[Record]) -> None:
        """Add records in order (each signed under its rarest word among all of them)."""
        added = [self._index(record) for record in records]
        for position in added:
            if position is not None:
                self._signed(position)

    def add(self, record: Record) -> None:
        position = self._index(record)
        if position is not None:
            self._signed(position)

    def _index(self, record: Record) -> int | None:
        self._differs.clear()
        position = len(self._records)
        self._records.append(record)
        self._at[record.id] = position
        if record.deleted_at is not None and record.deleted_by not in AGENT_ACTORS:
            self._said.append(None)  # removed by a person: a tombstone (if any) decides, in the store
            return None
        said = Said.of(record.text)
        self._said.append(said)
        self._by_key.setdefault(said.key, set()).add(position)
        self._by_words.setdefault(said.words, set()).add(position)
        for word in said.words:
            self._word.setdefault(word, set()).add(position)
        for token in said.tokens:
            self._token.setdefault(token, set()).add(position)
        if record.attribute is not None:
            self._attribute.setdefault(record.attribute, set()).add(position)
        return position

    def _signed(self, position: int) -> None:
        said = self._said[position]
        if said is not None and len(said.words) >= 3:
            sign = min(said.words, key=_rarest_first(self._word))
            self._rarest.setdefault(sign, set()).add(position)
            self._sign[position] = sign

    def discard(self, record_id: str) -> None:
        """Forget a record (removed since it was read): it holds nothing any more."""
        position = self._at.pop(record_id, None)
        if position is None:
            return
        self._differs.clear()
        said, record = self._said[position], self._records[position]
        self._records[position] = self._said[position] = None
        if said is None:
            return
        if record is not None and record.attribute is not None:
            self._attribute[record.attribute].discard(position)
        self._by_key[said.key].discard(position)
        self._by_words[said.words].discard(position)
        for word in said.words:
            self._word[word].discard(position)
        for token in said.tokens:
            self._token[token].discard(position)
        sign = self._sign.pop(position, None)
        if sign is not None:
            self._rarest[sign].discard(position)

    # -- reading ---------------------------------------------------------------------------------
    def position(self, record_id: str) -> int | None:
        return self._at.get(record_id)

    def record(self, position: int) -> Record | None:
        return self._records[position]

    def said(self, position: int) -> Said | None:
        return self._said[position]

    def live(self) -> list[int]:
        """The positions of the records still indexed, in the order they were added."""
        return [position for position, said in enumerate(self._said) if said is not None]

    def holder(self, text: str | Said, accept: Callable[[Record], bool] | None = None) -> Record | None:
        """:func:`held`: the first record (in the order added, and ``accept``-ed) that holds ``text``."""
        wanted = text if isinstance(text, Said) else Said.of(text)
        found = set(self._by_key.get(wanted.key, ()))
        if wanted.words:
            found |= self._by_words.get(wanted.words, set())
            if len(wanted.words) >= 3:
                found |= self._containing(wanted.words)
        found |= self.near(wanted)
        for position in sorted(found):
            record, said = self._records[position], self._said[position]
            if record is None or said is None or (accept is not None and not accept(record)):
                continue
            if said.holds(wanted):
                return record
        return None

    def changed_since(self, record: Record, attribute: str | None, until: datetime | None,
                      wanted: Said, value: str | None = None) -> bool:
        """Whether the value of ``record``'s attribute changed after it and before ``until`` (a
        statement's time; None, unknown: nothing is taken to have changed, so a statement of
        unknown time never brings back a superseded value): another record of that attribute, saying something other
        than ``wanted`` (and, where both name one, another value), begins in between.

        Such a record no longer holds ``wanted``: "their home city is Berlin again", said after
        Paris superseded Berlin, is a new fact, not a restatement of the superseded record (the
        same statement read again, from its own time, still is one)."""
        key = attribute.strip().casefold() if attribute else None
        if key is None or until is None or record.attribute != key:
            return False
        # The records of the attribute saying something else, by start, worked out once per
        # question (a holder asks it of each record that may hold ``wanted``): each record then
        # costs a bisection, not a walk of all of them (linear per proposal, not quadratic).
        others = self._differing(key, wanted, value)
        start = record.valid_from
        for at in range(bisect.bisect_right(others, start, key=lambda entry: entry[0]), len(others)):
            begins, position = others[at]
            if not begins < until:
                return False
            other = self._records[position]
            if other is not None and other.id != record.id:
                return True
        return False

    def _differing(self, key: str, wanted: Said, value: str | None) -> list[tuple[datetime, int]]:
        """The live records of attribute ``key`` that say something other than ``wanted`` (where
        both name one, another ``value``), as (start, position), by start; kept until the index
        changes."""
        cache_key = (key, wanted, value)
        found = self._differs.get(cache_key)
        if found is not None:
            return found
        found = []
        for position in self._attribute.get(key, ()):
            other, said = self._records[position], self._said[position]
            if other is None or said is None:
                continue
            theirs = other.metadata.get("value")
            if value is not None and theirs is not None:
                if str(theirs) != value:
                    found.append((other.valid_from, position))
                continue
            if not (said.holds(wanted) or wanted.holds(said)):
                found.append((other.valid_from, position))
        found.sort(key=lambda entry: (entry[0], entry[1]))
        if len(self._differs) >= _DIFFERING_KEPT:
            self._differs.clear()
        self._differs[cache_key] = found
        return found

    def held_by(self, holder: Said) -> set[int]:
        """Positions of the records whose text ``holder`` holds (``held(text, [holder's record])``)."""
        found = set(self._by_key.get(holder.key, ())) | self.near(holder) | self.parts(holder.words)
        if holder.words:
            found |= self._by_words.get(holder.words, set())
        return {p for p in found if (said := self._said[p]) is not None and holder.holds(said)}

    def parts(self, words: frozenset[str]) -> set[int]:
        """Positions of the records of three or more content words, every one of them in ``words``."""
        found: set[int] = set()
        for word in words:
            for position in self._rarest.get(word, ()):
                said = self._said[position]
                if said is not None and said.words <= words:
                    found.add(position)
        return found

    def _containing(self, words: frozenset[str]) -> set[int]:
        postings = [self._word.get(word) for word in words]
        if not postings or any(p is None for p in postings):
            return set()
        ordered = sorted((p for p in postings if p is not None), key=len)
        return ordered[0].intersection(*ordered[1:])

    def near(self, wanted: Said) -> set[int]:
        """Positions that may be near-duplicates of ``wanted`` (all of them are among these)."""
        tokens = wanted.tokens
        if not tokens:
            return set()
        m = len(tokens)
        probes = sorted(tokens, key=_rarest_first(self._token))[: m - (3 * m + 3) // 4 + 1]
        return set().union(*(self._token.get(token, ()) for token in probes))


#: A delta at least this long is read for stated secrets on a worker thread.
_OFF_LOOP_CHARS = 16_384


class CaptureAgent:
    """Offline capture over one knowledge store."""

    name = ACTOR

    def __init__(self, store: KnowledgeStore, settings: AgentSettings) -> None:
        self.store = store
        self.settings = settings

    async def _node(self, name: str, kind: str, context: Scope,
                    fence: Callable[[], Awaitable[None]] | None = None) -> Node:
        level = clamp_level(self.settings.node_level, self.settings.ceiling)
        if name == self.settings.user_node:
            level = max(level, Level.RESOURCE)  # the speaker is one user: never one node for a whole org
        scope = context.at(level).key
        found = await self.store.resolve_node(name, context.key)
        if found is not None:
            return found
        if fence is not None:
            await fence()
        return await self.store.create_node(
            name, kind, scope, actor=ACTOR, reason=f"capture: first fact about {name}"
        )

    def _record_level(self, proposal: Proposal, node: Node) -> Level:
        """Where a record of ``proposal`` about ``node`` goes: the proposal's level, else the
        configured one, never broader than the scope that sees ``node`` (an org-wide record of a
        user's node could not be written), and never broader than one user for what the speaker
        says about themselves (``user_node``): with ``record_level="org"`` another user of the
        org asking for "my phone number" was reminded of this one's. The ceiling clamps after."""
        level = proposal.level if proposal.level is not None else self.settings.record_level
        level = max(level, Scope.parse(node.scope).level)
        if node.name == self.settings.user_node:
            level = max(level, Level.RESOURCE)
        return level

    async def _existing(self, node: Node, context: Scope) -> list[Record]:
        records: list[Record] = []
        after: str | None = None
        while True:
            page = await self.store.list_about(node.id, context.key, view=ALL_RECORDS, after=after, limit=500)
            records.extend(page.items)
            if page.next_cursor is None:
                return records
            after = page.next_cursor

    async def proposals(self, observations: str, context: Scope, report: AgentRun) -> list[Proposal]:
        """What to capture from one delta (the offline rules; the LLM agent overrides this)."""
        found: list[Proposal] = []
        for statement in statements(observations):
            found.extend(propose(statement, node=statement.subject or self.settings.user_node))
        return found

    async def _pin(self, record: Record, context: Scope, report: AgentRun) -> None:
        """``capture_pinning``: a standing rule ("always …", "never …") is also pinned; a pin the
        budget refuses is reported in the run, never silently dropped. Only a *trusted* record is
        pinned (a candidate waits for review: a pin is in every context, which reads leave
        candidates out of), at the record's own level (never broader: a thread's record is no
        sibling's pin), and the pin names its record, so it goes when the record is rejected,
        removed or erased (:mod:`obsmem.knowledge.repeats`)."""
        from obsmem.knowledge.agents.pins import PinBoard

        if record.trust is not TrustState.VERIFIED:
            return
        level = Scope.parse(record.scope).level
        if level < Level.RESOURCE:
            return  # an org-wide record: a pin is never broader than a resource
        text = record.text
        board = PinBoard(self.store, self.settings, lambda t: max(1, len(t) // 4))
        if any(pin.text == text for pin in await board.list(context)):
            return
        try:
            # In the record's own scope: a thread's rule is pinned for that thread (its siblings
            # never see it), and goes with the thread.
            report.written.append(await board.pin(text, context, actor=ACTOR, reason="capture: a standing rule",
                                                  level=level, source=record.id))
        except InvalidInputError as refused:
            note = f"Capture-time pin dropped: {refused}"
            report.detail = f"{report.detail}; {note}" if report.detail else note

    async def _beside_tombstoned(self, proposal: Proposal, node: Node,
                                 scope: str) -> tuple[list[Proposal], list[str]] | None:
        """After the store refused ``proposal`` as tombstoned at ``scope``: when what refused it is
        a tombstoned phone number or email address the text gives beside other facts in clauses
        of their own (:func:`~obsmem.knowledge.agents.extract.conjoined`: "my phone is … and I
        moved to Lisbon"), the proposals of the clauses to capture on their own (the store still
        refuses any that gives the value again) and the clauses left out (those the tombstoned
        text says itself, and those giving any of its values: a tombstone of two numbers refuses
        only a text giving both, so each in a clause of its own would pass). None, and the text
        stays refused whole, otherwise: one clause, a tombstoned plain text (its clauses are what
        the reviewer refused), a forgotten value."""
        clauses = conjoined(proposal.text)
        if len(clauses) < 2:
            return None
        text = normalise_value(proposal.text)
        tombstones = await self.store.list_tombstones(scope)
        refusing = [t for t in tombstones if tombstone_refuses(t, node.id, scope, text)]
        if not refusing or not all(typed_values(t.value) for t in refusing):
            return None
        kept: list[Proposal] = []
        dropped: list[str] = []
        # A tombstone giving several values refuses a text giving all of them: its values given
        # one per clause would each pass the store, so a clause giving any of them stays out.
        values = set().union(*(typed_values(t.value) for t in refusing))
        for clause in clauses:
            words = near_duplicate_tokens(clause)
            said = any(words <= near_duplicate_tokens(t.value) for t in refusing)
            if said or gives_any(typed_values(clause), values):
                dropped.append(clause)  # the tombstoned text says it, or gives its value: refused with it
                continue
            for part in propose(Statement(clause, proposal.when), node=proposal.node, kind=proposal.kind):
                kept.append(replace(part, level=proposal.level))
        return kept, dropped

    async def run(self, observations: str, context: Scope, *, source_thread_id: str,
                  fence: Callable[[], Awaitable[None]] | None = None) -> AgentRun:
        """Capture the user's stated facts in ``observations`` (one committed delta).

        ``fence``: awaited before each write; it raises when the run may no longer write (its
        lane was taken over by another worker, :meth:`~obsmem.knowledge.agents.lanes.Lanes.fence`),
        which stops the run there: the other worker captures this delta."""
        report = AgentRun("capture")
        proposals = await self.proposals(observations, context, report)
        if not proposals:
            report.status = "no-op"
            return report
        # a model may reword what a value is; the value stays. Its rules read a long delta for
        # about a second per 100 KB of tables: on a worker thread then, not the event loop's.
        long = len(observations) >= _OFF_LOOP_CHARS
        stated = await asyncio.to_thread(secret_values, observations) if long else secret_values(observations)
        nodes: dict[str, Node] = {}
        existing: dict[str, FactIndex] = {}  # each node's records, read once a run, with what this run adds
        # (proposal, whether it is a clause split off a refused text: never split again)
        queue = deque((proposal, False) for proposal in proposals)
        while queue:
            proposal, split = queue.popleft()
            in_text = holds_secret(proposal.text, stated)
            if in_text or any(holds_secret(part, stated) for part in (proposal.node, proposal.attribute or "")):
                # (a model may name a node or an attribute by the value, too)
                clauses, left_out = _beside_secret(proposal.text, stated) if in_text and not split else ([], 1)
                report.withheld += left_out
                parts = [replace(part, level=proposal.level) for clause in clauses
                         for part in propose(Statement(clause, proposal.when), node=proposal.node, kind=proposal.kind)]
                queue.extendleft((part, True) for part in reversed(parts))
                continue
            if holds_secret(proposal.reason, stated):  # the words around the fact held one: not the fact
                proposal = replace(proposal, reason=_SECRET_REASON)
            node = nodes.get(proposal.node)
            if node is None:
                node = nodes[proposal.node] = await self._node(proposal.node, proposal.kind, context, fence)
                existing[node.id] = FactIndex(await self._existing(node, context))
            index, wanted = existing[node.id], Said.of(proposal.text)
            if index.holder(wanted, accept=lambda record: not index.changed_since(
                    record, proposal.attribute, proposal.when, wanted, proposal.value)) is not None:
                report.skipped += 1
                continue
            metadata: dict[str, object] = {"agent": ACTOR}
            if proposal.replaces:
                metadata["replaces"] = list(proposal.replaces)
            if proposal.value is not None:
                metadata["value"] = proposal.value
            if fence is not None:
                await fence()
            outcome = await capture_record(
                self.store,
                node.id,
                proposal.text,
                context=context,
                proposed_level=self._record_level(proposal, node),
                ceiling=self.settings.ceiling,
                reason=proposal.reason,
                actor=ACTOR,
                source_thread_id=source_thread_id,
                when=proposal.when,
                attribute=proposal.attribute,
                trust=self.settings.trust,
                metadata=metadata,
            )
            if outcome.status == "refused-secret":
                report.withheld += 1
                continue
            if outcome.record is None:
                beside = None if split else await self._beside_tombstoned(proposal, node, outcome.scope)
                if beside is None:
                    report.refused.append(proposal.text)
                    continue
                kept, dropped = beside  # the other clauses are captured on their own, next
                report.refused.extend(dropped)
                queue.extendleft((part, True) for part in reversed(kept))
                continue
            report.written.append(outcome.record)
            existing[node.id].add(outcome.record)
            if proposal.pin and self.settings.capture_pinning:
                if fence is not None:
                    await fence()
                await self._pin(outcome.record, context, report)
        if report.withheld:
            note = f"left out {report.withheld} text(s) holding a secret (a password, key or PIN)"
            report.detail = f"{report.detail}; {note}" if report.detail else note
        if not report.written and not report.refused and not report.withheld:
            report.status = "no-op"
        return report

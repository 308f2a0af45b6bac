"""Fact-level measures of what the knowledge agents captured (the core of ``obsmem bench knowledge``).

Given the live records after a replay, the texts that hold the facts the benchmark asks about
(LoCoMo: the turns its QA evidence points at) and the agents' runs:

* **recall**: the share of evidence texts some live record covers;
* **precision**: the share of live records that cover some evidence text (a capture that is
  not asked about is not necessarily wrong, so this is a lower bound);
* **duplicates per fact**: live records beyond the first that cover the same evidence text (a
  LoCoMo turn often states several facts, so this counts distinct clauses of one turn too);
* **restated**: live records that state again what another live record on the same node says
  (:func:`~obsmem.knowledge.agents.curate.same_fact`): duplicates of one fact, whatever the
  evidence;
* **contradictions left live**: pairs of live records about the same node and attribute whose
  values differ (the timeline should have closed one, or curation superseded it);
* **tokens per agent**: model tokens each agent spent (0 for the offline rules).

A record *covers* a text when at least two of its content words are in the text and they are
at least half of its content words: a cheap, deterministic proxy a person can check by eye.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from obsmem.knowledge.agents.common import AgentRun, content_tokens
from obsmem.knowledge.agents.curate import same_fact
from obsmem.knowledge.store.contract import Record
from obsmem.knowledge.store.values import value_key

__all__ = ["KnowledgeScore", "covers", "score_knowledge"]


def covers(record_text: str, evidence_text: str) -> bool:
    said = content_tokens(record_text)
    shared = said & content_tokens(evidence_text)
    return len(shared) >= 2 and 2 * len(shared) >= len(said)


@dataclass(frozen=True, slots=True)
class KnowledgeScore:
    records: int
    facts: int
    recall: float
    precision: float
    duplicates_per_fact: float
    contradictions_live: int
    tokens: dict[str, int] = field(default_factory=dict)
    restated: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "records": self.records, "facts": self.facts, "recall": round(self.recall, 4),
            "precision": round(self.precision, 4), "duplicates_per_fact": round(self.duplicates_per_fact, 4),
            "contradictions_live": self.contradictions_live, "restated": self.restated, "tokens": dict(self.tokens),
        }


def score_knowledge(live: Sequence[Record], evidence: Sequence[str], runs: Sequence[AgentRun] = ()) -> KnowledgeScore:
    """Score the live records against the evidence texts (see the module docstring)."""
    matches = [[r for r in live if covers(r.text, text)] for text in evidence]
    covered = sum(1 for found in matches if found)
    useful = sum(1 for r in live if any(covers(r.text, text) for text in evidence))
    extra = [len(found) - 1 for found in matches if found]
    slots: dict[tuple[str, str], set[str]] = {}
    for record in live:
        if record.attribute is not None:
            slots.setdefault((record.node_id, record.attribute), set()).add(value_key(record.text))
    contradictions = sum(len(values) * (len(values) - 1) // 2 for values in slots.values())
    restated = sum(1 for index, record in enumerate(live) if any(same_fact(record, other) for other in live[:index]))
    tokens: Counter[str] = Counter()
    for run in runs:
        tokens[run.agent] += run.tokens
    return KnowledgeScore(
        records=len(live), facts=len(evidence),
        recall=covered / len(evidence) if evidence else 0.0,
        precision=useful / len(live) if live else 0.0,
        duplicates_per_fact=sum(extra) / len(extra) if extra else 0.0,
        contradictions_live=contradictions,
        restated=restated,
        tokens={agent: tokens.get(agent, 0) for agent in ("capture", "remind", "curate", "learn")},
    )

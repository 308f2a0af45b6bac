"""The fact-level measures behind a knowledge benchmark."""

from __future__ import annotations

from datetime import UTC, datetime

from obsmem.knowledge import Record
from obsmem.knowledge.agents import AgentRun
from obsmem.knowledge.agents.metrics import covers, score_knowledge

AT = datetime(2025, 3, 3, tzinfo=UTC)


def record(rid: str, text: str, attribute: str | None = None, node: str = "n1") -> Record:
    return Record(id=rid, node_id=node, text=text, scope="org:a/resource:b", captured_at=AT, attribute=attribute)


def test_scores_recall_precision_duplicates_contradictions_and_tokens() -> None:
    live = [
        record("1", "their dog is called Kiki", "dog name"),
        record("2", "the dog is called Kiki, a beagle", "dog name"),
        record("3", "they moved to Berlin in March", "home city"),
        record("4", "they live in Munich", "home city"),
        record("5", "the weather was nice"),
    ]
    evidence = ["I call my dog Kiki, she is a beagle", "We moved to Berlin last March", "My phone is 555"]
    score = score_knowledge(live, evidence, [AgentRun("capture", tokens=120), AgentRun("curate", tokens=30)])
    assert (score.records, score.facts) == (5, 3)
    assert score.recall == 2 / 3
    assert score.precision == 3 / 5
    assert score.duplicates_per_fact == 0.5  # two records for the dog, one for the move
    assert score.contradictions_live == 2  # dog name (two wordings) and home city
    assert score.tokens == {"capture": 120, "remind": 0, "curate": 30, "learn": 0}
    assert not covers("the weather was nice", "nice to meet you")

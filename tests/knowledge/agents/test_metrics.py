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


def test_restated_counts_one_fact_stated_twice_on_one_node_only() -> None:
    live = [
        record("1", "their dog is called Kiki", "dog name"),
        record("2", "the dog is called Kiki, a beagle", "dog name"),  # the first one's words and more
        record("3", "their dog is called Kiki", "dog name", node="n2"),  # another node: not a repeat
        record("4", "they rehearse with a small group of dancers after work"),  # another fact of one turn
        record("5", "they do all kinds of dances, from contemporary to hip-hop"),
    ]
    evidence = ["I rehearse with a small group of dancers after work; we do all kinds of dances, "
                "from contemporary to hip-hop"]
    score = score_knowledge(live, evidence)
    assert score.restated == 1
    assert score.duplicates_per_fact == 1.0  # two facts of one turn count here, not in `restated`
    assert score.as_dict()["restated"] == 1

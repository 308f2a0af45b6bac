"""One retention run over many cases: replay, score, summarise, and optionally answer.

The library function behind ``obsmem bench locomo`` and ``obsmem bench longmemeval``; the CLI
only parses options and draws the report.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from obsmem.bench.qa import QAResult, answer_and_judge
from obsmem.bench.retention import (
    SYSTEMS,
    CaseContexts,
    QuestionResult,
    RetentionCase,
    RetentionSettings,
    SummaryRow,
    build_contexts,
    score_case,
    summarise,
)
from obsmem.models.base import ChatModel
from obsmem.tokens import TokenCounter

__all__ = ["QASummary", "RetentionReport", "run_retention"]


@dataclass(frozen=True, slots=True)
class QASummary:
    system: str
    questions: int
    accuracy_pct: float
    actor_input_tokens: float
    actor_output_tokens: float
    actor_seconds: float
    judge_seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "system": self.system, "questions": self.questions, "accuracy_pct": round(self.accuracy_pct, 2),
            "mean_actor_input_tokens": round(self.actor_input_tokens, 1),
            "mean_actor_output_tokens": round(self.actor_output_tokens, 1),
            "median_actor_seconds": round(self.actor_seconds, 3),
            "median_judge_seconds": round(self.judge_seconds, 3),
        }


@dataclass(frozen=True, slots=True)
class RetentionReport:
    dataset: str
    settings: RetentionSettings
    built: list[CaseContexts]
    results: list[QuestionResult]
    rows: list[SummaryRow]
    seconds: float
    qa: list[QAResult] = field(default_factory=list)

    def qa_summary(self) -> list[QASummary]:
        """Accuracy and cost per system, over the questions the actor answered."""
        out: list[QASummary] = []
        for system in SYSTEMS:
            chosen = [r for r in self.qa if r.system == system]
            if not chosen:
                continue
            out.append(QASummary(
                system=system, questions=len(chosen),
                accuracy_pct=100.0 * sum(r.correct for r in chosen) / len(chosen),
                actor_input_tokens=statistics.fmean(r.actor_usage.input_tokens for r in chosen),
                actor_output_tokens=statistics.fmean(r.actor_usage.output_tokens for r in chosen),
                actor_seconds=statistics.median(r.actor_seconds for r in chosen),
                judge_seconds=statistics.median(r.judge_seconds for r in chosen),
            ))
        return out

    def to_json(self) -> dict[str, object]:
        settings = self.settings
        return {
            "dataset": self.dataset,
            "settings": {
                "message_tokens": settings.message_tokens, "observation_tokens": settings.observation_tokens,
                "memory_model": str(
                    getattr(settings.memory_model, "name", settings.memory_model) or "offline"
                ),
                "store": settings.store,
            },
            "seconds": round(self.seconds, 2),
            "cases": [
                {
                    "case": b.case.case_id, "messages": len(b.case.messages),
                    "observation_cycles": b.observation_cycles, "reflections": b.reflections,
                    "context_tokens": {name: ctx.tokens for name, ctx in b.contexts.items()},
                }
                for b in self.built
            ],
            "summary": [row.to_json() for row in self.rows],
            "questions": [result.to_json() for result in self.results],
            **({"qa_summary": [s.to_json() for s in self.qa_summary()],
                "qa": [r.to_json() for r in self.qa]} if self.qa else {}),  # fmt: skip
        }


async def run_retention(
    cases: Sequence[RetentionCase],
    settings: RetentionSettings,
    *,
    dataset: str,
    on_progress: Callable[[int, int], None] | None = None,
    actor: ChatModel | None = None,
    judge: ChatModel | None = None,
) -> RetentionReport:
    """Replay every case, score its questions, and with ``actor`` also answer and judge them.

    ``on_progress(done, total)`` counts replayed messages, then (with an actor) answered questions.
    """
    counter = TokenCounter()
    total = sum(len(case.messages) for case in cases)
    if actor is not None:
        total += sum(len(case.questions) for case in cases)
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(done, total)

    started = time.perf_counter()
    built: list[CaseContexts] = []
    results: list[QuestionResult] = []
    for case in cases:
        contexts = await build_contexts(case, settings, counter=counter, on_message=advance)
        built.append(contexts)
        results.extend(score_case(contexts))
    qa: list[QAResult] = []
    if actor is not None:
        for contexts in built:
            qa.extend(await answer_and_judge(
                contexts, actor, judge or actor, systems=SYSTEMS, on_question=lambda: advance(1)
            ))
    return RetentionReport(
        dataset=dataset, settings=settings, built=built, results=results,
        rows=summarise(built, results), seconds=time.perf_counter() - started, qa=qa,
    )

"""One retention run over many cases: replay, score, summarise, and optionally answer.

The library function behind ``obsmem bench locomo`` and ``obsmem bench longmemeval``; the CLI
only parses options and draws the report.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from obsmem.bench.qa import QAResult, answer_and_judge
from obsmem.bench.retention import (
    SYSTEMS,
    CaseContexts,
    ChanceRow,
    QuestionResult,
    RetentionCase,
    RetentionSettings,
    SummaryRow,
    build_contexts,
    chance_floor,
    score_case,
    summarise,
)
from obsmem.memory import ModelSpec
from obsmem.models.base import ChatModel
from obsmem.tokens import TokenCounter

#: Systems the actor answers over (an LLM call each); the extractive baseline is scored offline only.
QA_SYSTEMS = ("full", "truncate", "obsmem")

__all__ = ["CurvePoint", "QASummary", "RetentionCurve", "RetentionReport", "run_curve", "run_retention"]


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
    chance: list[ChanceRow] = field(default_factory=list)

    def overall(self, system: str) -> SummaryRow:
        return next(row for row in self.rows if row.category == "overall" and row.system == system)

    def qa_summary(self) -> list[QASummary]:
        """Accuracy and cost per system, over the questions the actor answered."""
        out: list[QASummary] = []
        for system in QA_SYSTEMS:
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
            "chance": [row.to_json() for row in self.chance],
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
                contexts, actor, judge or actor, systems=QA_SYSTEMS, on_question=lambda: advance(1)
            ))
    return RetentionReport(
        dataset=dataset, settings=settings, built=built, results=results,
        rows=summarise(built, results), seconds=time.perf_counter() - started, qa=qa,
        chance=chance_floor(built),
    )


@dataclass(frozen=True, slots=True)
class CurvePoint:
    message_tokens: int
    observation_tokens: int
    #: system → (compression, bag-of-words retained %, line-level retained %)
    systems: dict[str, tuple[float, float, float]]


@dataclass(frozen=True, slots=True)
class RetentionCurve:
    """Retention at several budgets, and the area under retention-vs-compression per system.

    The area is taken over log2(compression) between the smallest and largest compression the
    curve reached (trapezoids, points in order of compression) and divided by that width: a
    mean retention over the compression range, comparable between systems measured at the same
    budgets, and not flattered by one lucky point.
    """

    dataset: str
    points: list[CurvePoint]
    reports: list[RetentionReport]

    def area(self, system: str, level: str = "line") -> float:
        index = 2 if level == "line" else 1
        xy = sorted((math.log2(max(1.0, p.systems[system][0])), p.systems[system][index]) for p in self.points)
        if len(xy) < 2 or xy[-1][0] == xy[0][0]:
            return xy[0][1] if xy else 0.0
        area = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(xy, xy[1:], strict=False))
        return area / (xy[-1][0] - xy[0][0])

    def to_json(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "points": [
                {"message_tokens": p.message_tokens, "observation_tokens": p.observation_tokens,
                 "systems": {name: {"compression": round(c, 2), "retained_pct": round(bag, 2),
                                    "line_pct": round(line, 2)}
                             for name, (c, bag, line) in p.systems.items()}}
                for p in self.points
            ],
            "area": {name: {"bag": round(self.area(name, "bag"), 2), "line": round(self.area(name), 2)}
                     for name in SYSTEMS if name != "full"},
            # the chance floor depends on the contexts' size: one per budget, in the same order
            "chance": [[row.to_json() for row in report.chance] for report in self.reports],
        }  # fmt: skip


async def run_curve(
    cases: Sequence[RetentionCase],
    budgets: Sequence[tuple[int, int]],
    *,
    dataset: str,
    memory_model: ModelSpec = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> RetentionCurve:
    """:func:`run_retention` once per (message tokens, observation tokens) budget."""
    reports: list[RetentionReport] = []
    points: list[CurvePoint] = []
    for message_tokens, observation_tokens in budgets:
        settings = RetentionSettings(message_tokens=message_tokens, observation_tokens=observation_tokens,
                                     memory_model=memory_model)  # fmt: skip
        report = await run_retention(cases, settings, dataset=dataset, on_progress=on_progress)
        reports.append(report)
        points.append(CurvePoint(message_tokens, observation_tokens, {
            system: (row.compression, row.retained_pct, row.line_pct)
            for system in SYSTEMS if (row := report.overall(system))
        }))
    return RetentionCurve(dataset, points, reports)

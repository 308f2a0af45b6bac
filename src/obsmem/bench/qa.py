"""Question answering over each system's context, graded by an LLM judge.

This is the part of the harness that needs a real model and a key (``--model``); it never runs
in CI. The actor sees exactly the context a system produced — the same messages the retention
metric scored — followed by one question; the judge sees only the question, the gold answer
and the actor's answer. Tokens and latency are recorded per call, so a report can say what the
answers cost, not only how good they were.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from obsmem.bench.prompts import ACTOR_INSTRUCTIONS, JUDGE_INSTRUCTIONS, actor_question, judge_request
from obsmem.bench.retention import CaseContexts, RetentionQuestion
from obsmem.models.base import ChatModel, ModelRequest, Usage
from obsmem.types import Message

__all__ = ["QAResult", "answer_and_judge", "parse_verdict"]

ACTOR_MAX_TOKENS = 200
JUDGE_MAX_TOKENS = 100


@dataclass(frozen=True, slots=True)
class QAResult:
    case_id: str
    system: str
    question: RetentionQuestion
    answer: str
    correct: bool
    verdict: str
    actor: str
    judge: str
    actor_usage: Usage
    judge_usage: Usage
    actor_seconds: float
    judge_seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "case": self.case_id, "system": self.system, "question_id": self.question.question_id,
            "category": self.question.category, "question": self.question.question,
            "gold": self.question.answer, "answer": self.answer, "correct": self.correct,
            "verdict": self.verdict, "actor": self.actor, "judge": self.judge,
            "actor_input_tokens": self.actor_usage.input_tokens,
            "actor_output_tokens": self.actor_usage.output_tokens,
            "judge_input_tokens": self.judge_usage.input_tokens,
            "judge_output_tokens": self.judge_usage.output_tokens,
            "actor_seconds": round(self.actor_seconds, 3), "judge_seconds": round(self.judge_seconds, 3),
        }


def parse_verdict(text: str) -> bool:
    """True when the judge's first word is CORRECT (anything else, including WRONG, is False)."""
    words = text.strip().split()
    return bool(words) and words[0].strip("*:.").upper() == "CORRECT"


async def _timed(model: ChatModel, messages: list[Message], max_tokens: int) -> tuple[str, Usage, float]:
    started = time.perf_counter()
    response = await model.request(messages, ModelRequest(temperature=0.0, max_output_tokens=max_tokens))
    return response.text.strip(), response.usage, time.perf_counter() - started


async def answer_and_judge(
    built: CaseContexts,
    actor: ChatModel,
    judge: ChatModel,
    *,
    systems: Sequence[str],
    on_question: Callable[[], None] | None = None,
) -> list[QAResult]:
    """Ask every scorable question of a case once per system, and grade each answer."""
    results: list[QAResult] = []
    for question in built.case.questions:
        for system in systems:
            context = list(built.contexts[system].messages)
            prompt = [Message.system(ACTOR_INSTRUCTIONS), *context,
                      Message.user(actor_question(question.question, built.case.participants))]  # fmt: skip
            answer, actor_usage, actor_seconds = await _timed(actor, prompt, ACTOR_MAX_TOKENS)
            grading = [Message.system(JUDGE_INSTRUCTIONS),
                       Message.user(judge_request(question.question, question.answer, answer))]  # fmt: skip
            verdict, judge_usage, judge_seconds = await _timed(judge, grading, JUDGE_MAX_TOKENS)
            results.append(QAResult(
                case_id=built.case.case_id, system=system, question=question, answer=answer,
                correct=parse_verdict(verdict), verdict=verdict, actor=actor.name, judge=judge.name,
                actor_usage=actor_usage, judge_usage=judge_usage,
                actor_seconds=actor_seconds, judge_seconds=judge_seconds,
            ))
        if on_question is not None:
            on_question()
    return results

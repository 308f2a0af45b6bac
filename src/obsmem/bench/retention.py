"""The retention benchmark: does a gold answer survive in the context an actor would see?

Three systems see the same conversation:

* ``full`` — every raw message (the upper bound, and the cost obsmem avoids);
* ``obsmem`` — the final context of a :class:`~obsmem.memory.Memory` the conversation was
  replayed through with the Turn API: observations plus the raw tail;
* ``truncate`` — the most recent raw messages that fit in the same number of tokens as
  obsmem's context, the baseline any agent gets for free.

A question is *retained* by a system when every normalised token of its answer is in that
system's context (:mod:`obsmem.bench.normalize`); its *recall* is the share of answer tokens
present. Datasets that mark evidence turns (LongMemEval's ``has_answer``) are also scored on
*evidence recall*: the share of each evidence turn's content words still in the context.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from obsmem.bench.normalize import answer_tokens, context_tokens, token_recall
from obsmem.bench.replay import replay
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.memory import Memory, ModelSpec
from obsmem.tokens import TokenCounter
from obsmem.types import Message, TextPart

__all__ = [
    "SYSTEMS",
    "CaseContexts",
    "QuestionResult",
    "RetentionCase",
    "RetentionQuestion",
    "RetentionSettings",
    "SummaryRow",
    "build_contexts",
    "score_case",
    "summarise",
]

SYSTEMS = ("full", "truncate", "obsmem")


@dataclass(frozen=True, slots=True)
class RetentionQuestion:
    question: str
    answer: str
    category: str
    evidence_texts: tuple[str, ...] = ()
    question_id: str = ""


@dataclass(frozen=True, slots=True)
class RetentionCase:
    """One conversation and the questions asked about it."""

    case_id: str
    messages: tuple[Message, ...]
    questions: tuple[RetentionQuestion, ...]
    #: Who the two roles are ("user is Caroline"), for an actor answering questions.
    participants: str = ""


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    message_tokens: int = 2_000
    observation_tokens: int = 4_000
    #: Observer and Reflector model; None = the offline ones.
    memory_model: ModelSpec = None
    store: str = "memory://"

    def memory_config(self) -> MemoryConfig:
        # Synchronous observation: a replay has no idle time to hide work in, and sync keeps
        # the result independent of task scheduling, so two runs give the same numbers.
        return MemoryConfig(
            observation=ObservationConfig(message_tokens=self.message_tokens, buffer_tokens=False),
            reflection=ReflectionConfig(observation_tokens=self.observation_tokens),
        )


@dataclass(frozen=True, slots=True)
class SystemContext:
    system: str
    messages: tuple[Message, ...]
    tokens: int

    @property
    def text(self) -> str:
        return "\n".join(message.text for message in self.messages)


@dataclass(frozen=True, slots=True)
class CaseContexts:
    case: RetentionCase
    contexts: dict[str, SystemContext]
    observation_cycles: int = 0
    reflections: int = 0


@dataclass(frozen=True, slots=True)
class QuestionResult:
    case_id: str
    question: RetentionQuestion
    answer_tokens: tuple[str, ...]
    recall: dict[str, float]
    missing: dict[str, tuple[str, ...]]
    evidence_recall: dict[str, float] = field(default_factory=dict)

    def retained(self, system: str) -> bool:
        return not self.missing[system]

    def to_json(self) -> dict[str, object]:
        return {
            "case": self.case_id,
            "question_id": self.question.question_id,
            "category": self.question.category,
            "question": self.question.question,
            "answer": self.question.answer,
            "answer_tokens": list(self.answer_tokens),
            "systems": {
                system: {
                    "retained": self.retained(system),
                    "recall": round(self.recall[system], 4),
                    "missing": list(self.missing[system]),
                    **(
                        {"evidence_recall": round(self.evidence_recall[system], 4)}
                        if system in self.evidence_recall else {}
                    ),
                }
                for system in self.recall
            },
        }


def with_day_headers(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Raw messages as a fair baseline would show them: the first message of each day opens
    with its date ("[May 8, 2023] …"), as a chat log shows day separators, so the raw systems
    are not scored blind to time that obsmem's observations carry."""
    out: list[Message] = []
    last_day = None
    for message in messages:
        day = message.created_at.date()
        if day != last_day and message.text:
            stamp = f"[{day.strftime('%b')} {day.day}, {day.year}]"
            parts = list(message.parts)
            index = next(i for i, part in enumerate(parts) if isinstance(part, TextPart))
            parts[index] = TextPart(text=f"{stamp} {message.text}")
            message = message.model_copy(update={"parts": tuple(parts)})
            last_day = day
        out.append(message)
    return tuple(out)


def truncate_to(messages: Sequence[Message], budget: int, counter: TokenCounter) -> tuple[Message, ...]:
    """The longest suffix of ``messages`` that fits in ``budget`` tokens once shown with its day
    headers (:func:`with_day_headers`). A binary search: a longer suffix never costs less."""

    def cost(keep: int) -> int:
        return counter.count_messages(with_day_headers(messages[len(messages) - keep :])) if keep else 0

    low, high = 0, len(messages)  # cost(low) fits; find the largest such
    while low < high:
        middle = (low + high + 1) // 2
        if cost(middle) <= budget:
            low = middle
        else:
            high = middle - 1
    return with_day_headers(messages[len(messages) - low :]) if low else ()


async def build_contexts(
    case: RetentionCase,
    settings: RetentionSettings,
    *,
    counter: TokenCounter | None = None,
    on_message: Callable[[int], None] | None = None,
) -> CaseContexts:
    """Replay ``case`` through obsmem and build the three systems' contexts."""
    counter = counter or TokenCounter()
    messages = list(case.messages)
    clock = FakeClock(start=messages[0].created_at) if messages else FakeClock()
    events: list[str] = []
    memory = Memory(
        settings.store, config=settings.memory_config(), model=settings.memory_model, counter=counter,
        clock=clock, on_event=lambda event: events.append(event.kind),
    )
    thread_id = f"bench-{case.case_id}"
    async with memory:
        await memory.delete_thread(thread_id)
        await replay(memory, messages, thread_id=thread_id, resource_id=f"bench-{case.case_id}",
                     on_message=on_message, clock=clock)
        window = await memory.get_context(thread_id)
        stored = await memory.list_messages(thread_id)
    obsmem_messages = tuple(window.messages)
    obsmem_tokens = counter.count_messages(obsmem_messages)
    truncated = truncate_to(stored, obsmem_tokens, counter)
    stored = list(with_day_headers(stored))
    contexts = {
        "full": SystemContext("full", tuple(stored), counter.count_messages(stored)),
        "truncate": SystemContext("truncate", truncated, counter.count_messages(truncated)),
        "obsmem": SystemContext("obsmem", obsmem_messages, obsmem_tokens),
    }
    return CaseContexts(
        case, contexts,
        observation_cycles=events.count("observation-end"), reflections=events.count("reflection-end"),
    )


def score_case(built: CaseContexts) -> list[QuestionResult]:
    """Score every question of a case whose answer has at least one content token."""
    vocabularies = {name: context_tokens([ctx.text]) for name, ctx in built.contexts.items()}
    results: list[QuestionResult] = []
    for question in built.case.questions:
        tokens = answer_tokens(question.answer)
        if not tokens:
            continue  # "No", "Yes": nothing a context can be checked for
        evidence = [answer_tokens(text) for text in question.evidence_texts]
        evidence = [words for words in evidence if words]
        results.append(QuestionResult(
            case_id=built.case.case_id,
            question=question,
            answer_tokens=tuple(tokens),
            recall={name: token_recall(tokens, vocab) for name, vocab in vocabularies.items()},
            missing={
                name: tuple(t for t in tokens if t not in vocab) for name, vocab in vocabularies.items()
            },
            evidence_recall={
                name: statistics.fmean(token_recall(words, vocab) for words in evidence)
                for name, vocab in vocabularies.items()
            } if evidence else {},
        ))
    return results


@dataclass(frozen=True, slots=True)
class SummaryRow:
    category: str
    system: str
    questions: int
    retained_pct: float
    mean_recall: float
    context_tokens: float
    compression: float
    evidence_recall: float | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "category": self.category, "system": self.system, "questions": self.questions,
            "retained_pct": round(self.retained_pct, 2), "mean_recall": round(self.mean_recall, 4),
            "context_tokens": round(self.context_tokens, 1), "compression": round(self.compression, 2),
            **(
                {"evidence_recall": round(self.evidence_recall, 4)}
                if self.evidence_recall is not None else {}
            ),
        }


def summarise(built: Sequence[CaseContexts], results: Sequence[QuestionResult]) -> list[SummaryRow]:
    """One row per (category, system), categories in first-seen order, then ``overall``.

    Context tokens are the mean per conversation; compression is total ``full`` tokens over
    the system's total, so a long conversation weighs more, as it costs more.
    """
    totals = {name: sum(b.contexts[name].tokens for b in built) for name in SYSTEMS}
    means = {name: totals[name] / max(1, len(built)) for name in SYSTEMS}
    categories = list(dict.fromkeys(r.question.category for r in results))
    rows: list[SummaryRow] = []
    for category in [*categories, "overall"]:
        chosen = [r for r in results if category in ("overall", r.question.category)]
        if not chosen:
            continue
        for system in SYSTEMS:
            with_evidence = [r.evidence_recall[system] for r in chosen if system in r.evidence_recall]
            rows.append(SummaryRow(
                category=category, system=system, questions=len(chosen),
                retained_pct=100.0 * sum(r.retained(system) for r in chosen) / len(chosen),
                mean_recall=statistics.fmean(r.recall[system] for r in chosen),
                context_tokens=means[system],
                compression=totals["full"] / max(1, totals[system]),
                evidence_recall=statistics.fmean(with_evidence) if with_evidence else None,
            ))
    return rows

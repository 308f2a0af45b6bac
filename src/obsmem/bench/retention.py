"""The retention benchmark: does a gold answer survive in the context an actor would see?

Four systems see the same conversation:

* ``full`` — every raw message (the upper bound, and the cost obsmem avoids);
* ``obsmem`` — the final context of a :class:`~obsmem.memory.Memory` the conversation was
  replayed through with the Turn API: observations plus the raw tail;
* ``truncate`` — the most recent raw messages that fit in the same number of tokens as
  obsmem's context, the baseline any agent gets for free;
* ``rare`` — the rarest-word sentences that fit the same budget
  (:mod:`obsmem.bench.extractive`), the baseline a thirty-line script gets.

A question is *retained* by a system when every normalised token of its answer is in that
system's context (:mod:`obsmem.bench.normalize`); its *recall* is the share of answer tokens
present. It is *line-retained* when every token is inside one unit of the context: one
observation line with its date header, or one message (:mod:`obsmem.bench.lines`); the unit
that matched is recorded per question. Yes/no answers are scored but reported on their own
(``yes/no`` row), outside ``overall``. :func:`chance_floor` scores each conversation's
questions against the *other* conversations' contexts: what a system retains by luck. Datasets that mark evidence turns (LongMemEval's ``has_answer``) are also scored on
*evidence recall*: the share of each evidence turn's content words still in the context.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from obsmem.bench.extractive import rare_word_context
from obsmem.bench.lines import ContextUnit, context_units, find_unit
from obsmem.bench.normalize import answer_tokens, context_tokens, is_yes_no, token_present, token_recall
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
    "chance_floor",
    "score_case",
    "summarise",
]

SYSTEMS = ("full", "truncate", "rare", "obsmem")
YES_NO = "yes/no"


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
    units: dict[str, list[ContextUnit]] = field(default_factory=dict)

    def units_of(self, system: str) -> list[ContextUnit]:
        if system not in self.units:
            self.units[system] = context_units(self.contexts[system].messages)
        return self.units[system]


@dataclass(frozen=True, slots=True)
class QuestionResult:
    case_id: str
    question: RetentionQuestion
    answer_tokens: tuple[str, ...]
    recall: dict[str, float]
    missing: dict[str, tuple[str, ...]]
    evidence_recall: dict[str, float] = field(default_factory=dict)
    #: Per system, the unit ("message 3 line 12") holding every answer token, with its text.
    line_match: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    yes_no: bool = False

    def retained(self, system: str) -> bool:
        return not self.missing[system]

    def line_retained(self, system: str) -> bool:
        return self.line_match.get(system) is not None

    def to_json(self) -> dict[str, object]:
        return {
            "case": self.case_id,
            "question_id": self.question.question_id,
            "category": self.question.category,
            "yes_no": self.yes_no,
            "question": self.question.question,
            "answer": self.question.answer,
            "answer_tokens": list(self.answer_tokens),
            "systems": {
                system: {
                    "retained": self.retained(system),
                    "line_retained": self.line_retained(system),
                    "recall": round(self.recall[system], 4),
                    "missing": list(self.missing[system]),
                    "matched": (
                        {"unit": match[0], "text": match[1][:400]}
                        if (match := self.line_match.get(system)) else None
                    ),
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
    rare = rare_word_context(stored, obsmem_tokens, counter)
    stored = list(with_day_headers(stored))
    contexts = {
        "full": SystemContext("full", tuple(stored), counter.count_messages(stored)),
        "truncate": SystemContext("truncate", truncated, counter.count_messages(truncated)),
        "rare": SystemContext("rare", rare, counter.count_messages(rare)),
        "obsmem": SystemContext("obsmem", obsmem_messages, obsmem_tokens),
    }
    return CaseContexts(
        case, contexts,
        observation_cycles=events.count("observation-end"), reflections=events.count("reflection-end"),
    )


def score_case(built: CaseContexts, against: CaseContexts | None = None) -> list[QuestionResult]:
    """Score every question of a case whose answer has at least one content token.

    With ``against``, the questions of ``built`` are scored against the contexts of another
    case: the chance floor (:func:`chance_floor`).
    """
    source = against or built
    vocabularies = {name: context_tokens([ctx.text]) for name, ctx in source.contexts.items()}
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
                name: tuple(t for t in tokens if not token_present(t, vocab))
                for name, vocab in vocabularies.items()
            },
            evidence_recall={
                name: statistics.fmean(token_recall(words, vocab) for words in evidence)
                for name, vocab in vocabularies.items()
            } if evidence else {},
            line_match={
                name: (unit.label, unit.text) if (unit := find_unit(tokens, source.units_of(name))) else None
                for name in vocabularies
            },
            yes_no=is_yes_no(question.answer),
        ))
    return results


@dataclass(frozen=True, slots=True)
class ChanceRow:
    system: str
    pairs: int
    retained_pct: float
    line_pct: float

    def to_json(self) -> dict[str, object]:
        return {"system": self.system, "pairs": self.pairs, "retained_pct": round(self.retained_pct, 2),
                "line_pct": round(self.line_pct, 2)}  # fmt: skip


def chance_floor(built: Sequence[CaseContexts]) -> list[ChanceRow]:
    """Each case's non-yes/no questions scored against every *other* case's contexts.

    A memory that holds an answer to a question about a conversation it never saw holds it by
    luck (common words, the same dates); this is the floor every figure should be read against.
    Empty with fewer than two cases.
    """
    if len(built) < 2:
        return []
    scored: list[QuestionResult] = []
    for case in built:
        for other in built:
            if other is not case:
                scored.extend(r for r in score_case(case, against=other) if not r.yes_no)
    if not scored:
        return []
    return [
        ChanceRow(system, len(scored),
                  100.0 * sum(r.retained(system) for r in scored) / len(scored),
                  100.0 * sum(r.line_retained(system) for r in scored) / len(scored))
        for system in SYSTEMS
    ]  # fmt: skip


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
    line_pct: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "category": self.category, "system": self.system, "questions": self.questions,
            "retained_pct": round(self.retained_pct, 2), "line_pct": round(self.line_pct, 2),
            "mean_recall": round(self.mean_recall, 4),
            "context_tokens": round(self.context_tokens, 1), "compression": round(self.compression, 2),
            **(
                {"evidence_recall": round(self.evidence_recall, 4)}
                if self.evidence_recall is not None else {}
            ),
        }


def summarise(built: Sequence[CaseContexts], results: Sequence[QuestionResult]) -> list[SummaryRow]:
    """One row per (category, system), categories in first-seen order, then ``overall``, then
    ``yes/no`` (yes/no answers count in their category's row but not in ``overall``).

    Context tokens are the mean per conversation; compression is total ``full`` tokens over
    the system's total, so a long conversation weighs more, as it costs more.
    """
    totals = {name: sum(b.contexts[name].tokens for b in built) for name in SYSTEMS}
    means = {name: totals[name] / max(1, len(built)) for name in SYSTEMS}
    categories = list(dict.fromkeys(r.question.category for r in results))
    rows: list[SummaryRow] = []
    for category in [*categories, "overall", YES_NO]:
        if category == "overall":
            chosen = [r for r in results if not r.yes_no]
        elif category == YES_NO:
            chosen = [r for r in results if r.yes_no]
        else:
            chosen = [r for r in results if r.question.category == category]
        if not chosen:
            continue
        for system in SYSTEMS:
            with_evidence = [r.evidence_recall[system] for r in chosen if system in r.evidence_recall]
            rows.append(SummaryRow(
                category=category, system=system, questions=len(chosen),
                retained_pct=100.0 * sum(r.retained(system) for r in chosen) / len(chosen),
                line_pct=100.0 * sum(r.line_retained(system) for r in chosen) / len(chosen),
                mean_recall=statistics.fmean(r.recall[system] for r in chosen),
                context_tokens=means[system],
                compression=totals["full"] / max(1, totals[system]),
                evidence_recall=statistics.fmean(with_evidence) if with_evidence else None,
            ))
    return rows

"""Fact survival across reflections: how faithful memory stays when it is condensed again and again.

A synthetic conversation states N distinct durable facts about the user ("my cousin is called
Ilvana", "I'm allergic to cashews", "my favourite novel is …"), each with a made-up value no
other line contains, spread between ordinary questions and answers. Then the conversation goes
on with new questions only, and every reflection it triggers is one *generation*. After each
generation the benchmark checks which facts' values are still in the active observations.

Everything is generated from a seed, so a run is reproducible; the values are invented words,
so a fact counts as present only if memory kept it, never by coincidence.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.errors import InvalidInputError
from obsmem.memory import Memory, ModelSpec
from obsmem.om.protocols import Reflector
from obsmem.tokens import TokenCounter
from obsmem.types import Message

__all__ = ["SeededFact", "SurvivalPoint", "SurvivalReport", "filler_turn", "run_survival", "seeded_facts"]

_RELATIVES = ("sister", "brother", "cousin", "aunt", "uncle", "niece", "nephew", "grandmother",
              "godson", "stepfather")  # fmt: skip
_PETS = ("dog", "cat", "parrot", "tortoise", "hamster", "horse")
_FAVOURITES = ("band", "novel", "painter", "board game", "tea", "poet", "opera", "chess opening",
               "mountain", "cheese")  # fmt: skip
_SYLLABLES = ("bra", "ko", "vel", "mi", "ran", "tes", "lo", "quor", "zan", "dri", "ve", "nu", "ska",
              "pel", "ith", "mor", "gau", "tri", "bel", "xo", "fen", "dal", "ru", "sha")  # fmt: skip
_TASKS = ("roast", "braise", "grill", "steam", "poach", "bake", "smoke", "sear", "stew", "toast")
_FOODS = ("carrots", "salmon", "lentils", "chicken thighs", "aubergine", "tofu", "pork belly",
          "cauliflower", "sweet potatoes", "mackerel", "chickpeas", "beetroot")  # fmt: skip
_TIPS = ("Pat it dry first so it browns instead of steaming.",
         "Season it generously with salt about fifteen minutes ahead.",
         "Let it rest briefly before serving so the juices settle.",
         "A splash of acid at the end, like lemon or vinegar, brightens it.",
         "Use a heavy pan so the heat stays even.",
         "Cut the pieces to the same size so they cook evenly.")  # fmt: skip


@dataclass(frozen=True, slots=True)
class SeededFact:
    statement: str  # what the user says
    value: str  # the invented word that must survive


@dataclass(frozen=True, slots=True)
class SurvivalPoint:
    generation: int
    present: int
    total: int
    observation_tokens: int
    missing: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.present / self.total if self.total else 1.0


@dataclass(frozen=True, slots=True)
class SurvivalReport:
    reflector: str
    facts: list[SeededFact]
    points: list[SurvivalPoint] = field(default_factory=list)
    turns: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "reflector": self.reflector, "facts": len(self.facts), "turns": self.turns,
            "generations": [
                {"generation": p.generation, "present": p.present, "total": p.total,
                 "share": round(p.share, 4), "observation_tokens": p.observation_tokens,
                 "missing": list(p.missing)}
                for p in self.points
            ],
        }  # fmt: skip


def _invented(rng: random.Random, used: set[str]) -> str:
    while True:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
        if word not in used:
            used.add(word)
            return word


def seeded_facts(count: int, seed: int = 7) -> list[SeededFact]:
    """``count`` distinct facts, each about a different attribute, with invented values."""
    rng = random.Random(seed)
    used: set[str] = set()
    makers: list[Callable[[str], str]] = [
        *(lambda v, r=r: f"By the way, my {r} is called {v}." for r in _RELATIVES),
        *(lambda v, p=p: f"Oh, and my {p} is named {v}." for p in _PETS),
        *(lambda v, f=f: f"My favourite {f} is {v}." for f in _FAVOURITES),
        lambda v: f"I was born in {v}.",
        lambda v: f"I work at {v} Labs as an analyst.",
        lambda v: f"I'm allergic to {v.lower()} nuts.",
        lambda v: f"I drive a {v} hatchback.",
    ]
    if not 1 <= count <= len(makers):
        raise InvalidInputError(f"--facts must be between 1 and {len(makers)}, got {count}")
    chosen = rng.sample(makers, count)
    facts: list[SeededFact] = []
    for make in chosen:
        value = _invented(rng, used)
        statement = make(value)
        facts.append(SeededFact(statement, value.lower() if "nuts" in statement else value))
    return facts


def filler_turn(rng: random.Random, index: int) -> tuple[str, str]:
    """A question and answer that state no fact about the user, different every time."""
    task, food = rng.choice(_TASKS), rng.choice(_FOODS)
    minutes, degrees = rng.randrange(8, 90), rng.randrange(140, 240, 5)
    question = f"How long should I {task} {food} at {degrees} degrees? (question {index})"
    answer = (f"For {food}, {task} for about {minutes} minutes at {degrees}°C, turning once halfway. "
              f"{rng.choice(_TIPS)} {rng.choice(_TIPS)}")  # fmt: skip
    return question, answer


async def run_survival(
    *,
    facts: int = 30,
    generations: int = 5,
    seed: int = 7,
    reflector: Reflector | ModelSpec = None,
    message_tokens: int = 1_000,
    observation_tokens: int = 2_000,
    max_turns: int = 5_000,
    on_generation: Callable[[SurvivalPoint], None] | None = None,
) -> SurvivalReport:
    """Seed ``facts`` facts, then talk until ``generations`` reflections happened; measure each."""
    rng = random.Random(seed)
    seeded = seeded_facts(facts, seed)
    counter = TokenCounter()
    clock = FakeClock(start=datetime(2025, 1, 6, 9, 0, tzinfo=UTC))
    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
    )
    memory = Memory("memory://", config=config, reflector=reflector, counter=counter, clock=clock)
    name = getattr(memory.engine.reflector, "name", type(memory.engine.reflector).__name__)
    report = SurvivalReport(reflector=str(name), facts=seeded)
    thread_id = "survival"
    turns = 0

    async def say(text: str, answer: str) -> None:
        nonlocal turns
        clock.advance(timedelta(minutes=7).total_seconds())
        at = clock.now()
        turn = await memory.begin_turn(thread_id=thread_id, resource_id="survival-user",
                                       messages=[Message.user(text, created_at=at)])  # fmt: skip
        await turn.step([Message.assistant(answer, created_at=at + timedelta(seconds=30))])
        await turn.end()
        turns += 1

    async with memory:
        for index, fact in enumerate(seeded):  # facts first, each beside an ordinary question
            question, answer = filler_turn(rng, index)
            await say(f"{fact.statement} {question}", answer)
        seen = len(await memory.list_generations(thread_id))
        while len(report.points) < generations:
            if turns >= max_turns:
                raise InvalidInputError(
                    f"only {len(report.points)} of {generations} generations after {turns} turns; "
                    "lower --observation-tokens"
                )
            await say(*filler_turn(rng, turns))
            history = await memory.list_generations(thread_id)
            if len(history) > seen:
                seen = len(history)
                text = history[0].active_observations
                lowered = text.lower()
                missing = tuple(f.value for f in seeded if f.value.lower() not in lowered)
                point = SurvivalPoint(len(report.points) + 1, len(seeded) - len(missing), len(seeded),
                                      counter.count_text(text), missing)  # fmt: skip
                report.points.append(point)
                if on_generation is not None:
                    on_generation(point)
    return SurvivalReport(report.reflector, seeded, report.points, turns)

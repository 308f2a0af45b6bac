"""Shared pieces of the benchmark scripts: a deterministic conversation, a simulated memory model,
and small statistics helpers. Nothing here measures anything by itself.

The simulated memory model stands in for a real observer/reflector LLM: it waits for real
(``asyncio.sleep``) and then answers in the observation format, with roughly the output sizes a
real model produces, so that everything the engine does with the answer (parsing, storing,
counting, reflecting) costs what it would cost in production.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from obsmem.models.base import ModelRequest
from obsmem.types import Message

__all__ = [
    "HISTORY_HEADER",
    "REFLECT_HEADER",
    "Conversation",
    "SimulatedMemoryModel",
    "build_conversation",
    "percentile",
]

# --------------------------------------------------------------------------------------------
# A deterministic conversation: user messages of 150–250 tokens, short assistant replies
# --------------------------------------------------------------------------------------------

_NAMES = (
    "Margaret",
    "Tomasz",
    "Aisha",
    "Kenji",
    "Lucia",
    "Owen",
    "Priya",
    "Dmitri",
    "Fatima",
    "Hugo",
    "Ingrid",
    "Mateo",
    "Sven",
    "Chiara",
    "Nadia",
    "Rafael",
)
_PLACES = (
    "Lisbon",
    "the harbour office",
    "Kraków",
    "the north warehouse",
    "Osaka",
    "the Berlin studio",
    "the community garden",
    "Nairobi",
    "the old library",
    "Valparaíso",
    "the ferry terminal",
)
_NOUNS = (
    "invoice",
    "contract",
    "pipeline",
    "schedule",
    "budget",
    "manuscript",
    "recipe",
    "forecast",
    "migration",
    "dashboard",
    "itinerary",
    "prototype",
    "workshop",
    "lease",
    "quarterly report",
    "grant application",
    "test suite",
    "database index",
    "wedding playlist",
    "bicycle repair",
)
_VERBS = (
    "reviewed",
    "rescheduled",
    "cancelled",
    "approved",
    "rewrote",
    "shipped",
    "measured",
    "translated",
    "booked",
    "negotiated",
    "tested",
    "postponed",
    "finished",
    "started",
)
_ADJECTIVES = (
    "urgent",
    "tentative",
    "overdue",
    "expensive",
    "experimental",
    "quarterly",
    "fragile",
    "temporary",
    "ambitious",
    "delayed",
    "confidential",
    "seasonal",
)
_FEELINGS = (
    "I'm honestly a bit worried about",
    "I'm quite happy with",
    "I keep forgetting about",
    "my manager keeps asking about",
    "I'd like your opinion on",
    "I still haven't decided on",
)
_ASKS = (
    "Can you help me plan the next steps?",
    "What would you do in my place?",
    "Could you draft a short note about it?",
    "Remind me what we said about this last time.",
    "Is there anything I'm missing here?",
    "How should I prioritise this week?",
)
_REPLIES = (
    "Sure. Start with the {noun}; it blocks the rest. I'll keep {name}'s deadline in mind.",
    "Noted: the {noun} moves to {day}. Want me to draft the message to {name}?",
    "That makes sense. I'd confirm the {adj} {noun} with {name} before {day}.",
    "Got it. I'll track the {noun} and remind you on {day}.",
    "Here's a short plan: finish the {noun}, then call {name}, then review the {adj} items.",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next week", "the 14th", "the 28th")


def _sentence(rng: random.Random) -> str:
    kind = rng.random()
    name, noun, noun2 = rng.choice(_NAMES), rng.choice(_NOUNS), rng.choice(_NOUNS)
    if kind < 0.25:
        return (
            f"{name} {rng.choice(_VERBS)} the {rng.choice(_ADJECTIVES)} {noun} in {rng.choice(_PLACES)} "
            f"on {rng.choice(_DAYS)}, so the {noun2} now depends on it."
        )
    if kind < 0.45:
        return f"{rng.choice(_FEELINGS)} the {noun}, because {name} said the {noun2} might slip again."
    if kind < 0.60:
        amount = rng.randint(120, 98_000)
        return (
            f"The {noun} came to {amount:,} euros ({rng.randint(2, 40)} % over plan), and "
            f"{rng.choice(_NAMES)} wants a revised figure by {rng.choice(_DAYS)}."
        )
    if kind < 0.72:
        items = ", ".join(rng.sample(_NOUNS, 3))
        return f"On my list for {rng.choice(_DAYS)}: {items}, plus a call with {name}."
    if kind < 0.82:
        ident = f"{noun.split()[0]}_{rng.choice(('count', 'total', 'id', 'path'))}"
        return (
            f"The script fails at `{ident} = load_{noun2.split()[0]}({rng.randint(1, 99)})` with a "
            f"KeyError, which started after {name} {rng.choice(_VERBS)} the config."
        )
    if kind < 0.90:
        return (
            f"We moved from {rng.choice(_PLACES)} to {rng.choice(_PLACES)} in {rng.randint(2015, 2026)}, "
            f"and {name} still handles the {noun} from there."
        )
    return rng.choice(_ASKS)


@dataclass(frozen=True, slots=True)
class Conversation:
    """``turns`` pairs of (user text, assistant text), always the same for the same seed."""

    user: tuple[str, ...]
    assistant: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.user)


def build_conversation(
    turns: int,
    count_tokens: Callable[[str], int],
    *,
    seed: int = 11,
    user_tokens: tuple[int, int] = (150, 250),
) -> Conversation:
    """User messages of ``user_tokens`` (uniform) tokens of varied text, short assistant replies."""
    rng = random.Random(seed)
    users: list[str] = []
    replies: list[str] = []
    low, high = user_tokens
    for turn in range(turns):
        target = rng.randint(low, high)
        text = f"(turn {turn + 1})"
        while count_tokens(text) < target:
            for _ in range(8):  # a sentence that would overshoot the upper bound is redrawn
                candidate = f"{text} {_sentence(rng)}"
                if count_tokens(candidate) <= high:
                    text = candidate
                    break
            else:
                break
        users.append(text)
        reply = rng.choice(_REPLIES).format(
            noun=rng.choice(_NOUNS),
            name=rng.choice(_NAMES),
            day=rng.choice(_DAYS),
            adj=rng.choice(_ADJECTIVES),
        )
        replies.append(reply)
    return Conversation(tuple(users), tuple(replies))


# --------------------------------------------------------------------------------------------
# The simulated memory model
# --------------------------------------------------------------------------------------------

HISTORY_HEADER = "## New message history to observe"
REFLECT_HEADER = "## Observations to reflect on"
_TASK_HEADER = "## Your task"
_LABEL = re.compile(r"^(User|Assistant|System|Tool)(?: \((\d{1,2}):(\d{2}) (AM|PM)\))?:\s?(.*)$")
_DAY_HEADER = re.compile(r"^([A-Z][a-z]{2}) (\d{1,2}) (\d{4}):$")
_WORD = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]{2,}|\d[\d,.]*")


@dataclass(slots=True)
class SimulatedMemoryModel:
    """A memory model that takes ``delay_s`` per call, for real, and answers in the format.

    * As an **observer** (the prompt holds ``## New message history to observe``) it writes
      unique ``* 🔴 (HH:MM) …`` lines drawn from the transcript's own words, about
      ``observe_ratio`` of the transcript's tokens, under a ``Date:`` header.
    * As a **reflector** (``## Observations to reflect on``) it keeps a random ``keep_share``
      of the bullet lines (and the date headers they belong to), in order.

    Use one instance per role: ``calls`` and ``input_tokens`` are the role's totals.
    """

    delay_s: float
    count_tokens: Callable[[str], int]
    observe_ratio: float = 0.1
    keep_share: tuple[float, float] = (0.25, 0.40)
    seed: int = 3
    calls: int = 0
    input_tokens: int = 0
    _rng: random.Random = field(init=False)
    _serial: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    async def __call__(self, messages: Sequence[Message], settings: ModelRequest | None = None) -> str:
        self.calls += 1
        self.input_tokens += sum(self.count_tokens(m.text) for m in messages)
        await asyncio.sleep(self.delay_s)
        prompt = messages[-1].text
        if HISTORY_HEADER in prompt:
            return self.observe(prompt.split(HISTORY_HEADER, 1)[1])
        if REFLECT_HEADER in prompt:
            body = prompt.split(REFLECT_HEADER, 1)[1].split(_TASK_HEADER, 1)[0]
            return self.reflect(body)
        raise ValueError("the simulated memory model got a prompt it does not recognise")

    # -- observer ---------------------------------------------------------------------------
    def observe(self, history: str) -> str:
        target = max(12, math.ceil(self.observe_ratio * self.count_tokens(history)))
        day = "Jan 1, 2026"
        entries: list[tuple[str, str, list[str]]] = []  # (HH:MM, role, words)
        clock = "12:00"
        for raw in history.splitlines():
            line = raw.strip()
            if not line or line.startswith(("<", "The history is data")):
                continue
            header = _DAY_HEADER.match(line)
            if header:
                day = f"{header.group(1)} {header.group(2)}, {header.group(3)}"
                continue
            label = _LABEL.match(line)
            if label:
                role, hour, minute, half, rest = label.groups()
                if hour is not None:
                    clock = f"{int(hour) % 12 + (12 if half == 'PM' else 0):02d}:{minute}"
                entries.append((clock, role, _WORD.findall(rest)))
            elif entries:
                entries[-1][2].extend(_WORD.findall(line))
        entries = [e for e in entries if e[2]] or [(clock, "User", ["nothing", "to", "note"])]
        lines: list[str] = []
        used = 0
        index = 0
        while used < target:
            clock, role, words = entries[index % len(entries)]
            index += 1
            self._serial += 1
            size = min(len(words), self._rng.randint(8, 16))
            start = self._rng.randint(0, max(0, len(words) - size))
            gist = " ".join(words[start : start + size])
            priority = "🔴" if role == "User" else self._rng.choice(("🟡", "✅"))
            verb = "User said" if role == "User" else "Assistant replied"
            line = f"* {priority} ({clock}) {verb}: {gist} [obs {self._serial}]"
            lines.append(line)
            used += self.count_tokens(line) + 1
        return "<observations>\nDate: " + day + "\n" + "\n".join(lines) + "\n</observations>"

    # -- reflector --------------------------------------------------------------------------
    def reflect(self, observations: str) -> str:
        share = self._rng.uniform(*self.keep_share)
        kept: list[str] = []
        header: str | None = None
        for raw in observations.strip().splitlines():
            line = raw.rstrip()
            if line.lstrip().startswith("Date:"):
                header = line.strip()
                continue
            if not line.lstrip().startswith(("*", "-")):
                continue  # boundaries and blank lines do not survive a rewrite
            if self._rng.random() >= share:
                continue
            if header is not None:
                kept.append(header)
                header = None
            kept.append(line)
        if not any(line.lstrip().startswith("*") for line in kept):
            kept.append("* 🟡 (12:00) User has an ongoing conversation with the assistant.")
        return "<observations>\n" + "\n".join(kept) + "\n</observations>"


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100), linear between closest ranks; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))

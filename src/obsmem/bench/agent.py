"""``obsmem bench agent``: replay generated agent sessions and check what the context holds.

Each conversation of :mod:`obsmem.bench.agent_conversations` is replayed through the public
API the way an agent loop drives it — ``begin_turn`` with the user's message, one ``step`` per
model call (a tool call travels with its result), ``end`` — on a :class:`~obsmem.clock.FakeClock`
that follows the messages' timestamps. At every checkpoint the scorer takes the context an
agent would get (``Memory.get_context``) and checks the conversation's probes against it, and
against three baselines built from the same messages: ``full`` (every message so far),
``truncate`` (the newest messages within obsmem's token count) and ``latest`` (the last message).

What is checked, per probe kind (a *unit* is one observation line with its date header, or
one message with its tool calls and results, :mod:`obsmem.bench.lines`):

* ``fact`` — the latest value is in the context; each stale value is absent, or only in units
  that also hold the latest value or mark it superseded ("changed from", "no longer", "old" …);
* ``decision`` — the current choice is there, and no unit says a switched-away choice was taken
  (chose, go with, decided …) unless it also holds the current one or marks the change;
* ``task`` — an open task's name is there; a finished one is never in a unit that does not
  say it is done (the ``<current-task>`` section included);
* ``tool`` — the value the user is about to ask for (a code, an id, an amount) is there;
* ``date`` — every unit naming the event holds either the right date or no date: a wrong date
  (or any date for a recurring time) is *wrong*; no unit is *missing*.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from obsmem.bench.agent_conversations import AgentConversation, Probe
from obsmem.bench.lines import context_units
from obsmem.bench.normalize import normalise_dates
from obsmem.bench.retention import truncate_to
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.memory import Memory, ModelSpec
from obsmem.tokens import TokenCounter
from obsmem.types import Message

__all__ = [
    "AGENT_SYSTEMS",
    "AgentReport",
    "AgentRow",
    "AgentSettings",
    "ProbeResult",
    "run_agent_bench",
    "score_probes",
]

AGENT_SYSTEMS = ("full", "truncate", "latest", "obsmem")

_SUPERSEDED = re.compile(
    r"\b(superseded|no longer|previously|formerly|used to|changed from|changing from|changed to|"
    r"replac\w*|instead of|old|outdated|switched from|switching from|not anymore)\b", re.IGNORECASE
)
_CHOSEN = re.compile(
    r"\b(?:go(?:ing)? with|went with|take|took|chose|chosen|choice|decided|decision|pick(?:ed)?|it is|"
    r"settled on|selected|opted|switch(?:ed|ing)? to)\b", re.I
)
_DONE = re.compile(r"✅|\b(done|completed?|finished|closed|submitted|sent (?:it )?off|resolved)\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(?P<span>week of |weekend of )?(?P<day>\d{4}-\d{2}-\d{2})\b")


def _wrong_days(text: str, expect: Sequence[str]) -> bool:
    """Whether ``text`` names a day other than the expected one ("week of <Monday>" and
    "weekend of <Saturday>" name their span, right when the expected day lies in it)."""
    for match in _ISO_DAY.finditer(normalise_dates(text)):
        start = date.fromisoformat(match["day"])
        span = {"week of ": 6, "weekend of ": 1}.get(match["span"] or "", 0)
        if not any(start <= date.fromisoformat(day) <= start + timedelta(days=span) for day in expect):
            return True
    return False


def _squash(text: str) -> str:
    return re.sub(r"[\s,]+", "", text.lower())


@dataclass(frozen=True, slots=True)
class _Unit:
    label: str
    text: str  # without its date header: a header is when a line was written, not what it says
    squashed: str


def _units(messages: Sequence[Message]) -> list[_Unit]:
    out: list[_Unit] = []
    for unit in context_units(messages):
        body = "\n".join(line for line in unit.text.splitlines() if not line.startswith("Date: "))
        out.append(_Unit(unit.label, body, _squash(body)))
    return out


def _holding(value: str, units: Sequence[_Unit]) -> list[_Unit]:
    key = _squash(value)
    return [unit for unit in units if key in unit.squashed]


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe: Probe
    system: str
    #: "ok" | "missing" (expected value absent) | "leak" (stale value unmarked) |
    #: dates: "correct" | "as-said" | "wrong" | "missing"
    outcome: str
    unit: str = ""  # the unit that decided the outcome (its label and text), for reading failures

    @property
    def ok(self) -> bool:
        return self.outcome in ("ok", "correct", "as-said")

    def to_json(self) -> dict[str, object]:
        p = self.probe
        return {"kind": p.kind, "key": p.key, "at": p.at, "state": p.state, "expect": list(p.expect),
                "stale": list(p.stale), "said": p.said, "system": self.system, "outcome": self.outcome,
                "unit": self.unit[:400]}  # fmt: skip


def _show(unit: _Unit) -> str:
    return f"{unit.label}: {unit.text}"


def _leak(stale: str, current: Sequence[str], units: Sequence[_Unit], marker: re.Pattern[str]) -> _Unit | None:
    for unit in _holding(stale, units):
        if any(_squash(value) in unit.squashed for value in current) or marker.search(unit.text):
            continue
        return unit
    return None


def _score(probe: Probe, units: Sequence[_Unit], system: str) -> ProbeResult:
    if probe.kind == "date":
        holding = _holding(probe.anchor, units)
        if not holding:
            return ProbeResult(probe, system, "missing")
        for unit in holding:
            if _wrong_days(unit.text, probe.expect):
                return ProbeResult(probe, system, "wrong", _show(unit))
        right = [u for u in holding if probe.expect and probe.expect[0] in normalise_dates(u.text)]
        return ProbeResult(probe, system, "correct" if right else "as-said", _show((right or holding)[0]))
    if probe.kind == "task" and probe.state == "done":
        shown = _leak(probe.key, (), units, _DONE)
        return ProbeResult(probe, system, "leak" if shown else "ok", _show(shown) if shown else "")
    found = [unit for value in probe.expect for unit in _holding(value, units)]
    if probe.expect and not found:
        return ProbeResult(probe, system, "missing")
    for stale in probe.stale:
        # a decision leaks where a unit says the old choice was taken, not where it was offered
        candidates = [u for u in units if _CHOSEN.search(u.text)] if probe.kind == "decision" else units
        leaked = _leak(stale, probe.expect, candidates, _SUPERSEDED)
        if leaked is not None:
            return ProbeResult(probe, system, "leak", _show(leaked))
    return ProbeResult(probe, system, "ok", _show(found[0]) if found else "")


def score_probes(probes: Sequence[Probe], context: Sequence[Message], system: str) -> list[ProbeResult]:
    """Every probe checked against one context (all probes share its checkpoint)."""
    units = _units(context)
    return [_score(probe, units, system) for probe in probes]


@dataclass(frozen=True, slots=True)
class AgentSettings:
    message_tokens: int = 2_000
    observation_tokens: int = 4_000
    memory_model: ModelSpec = None
    store: str = "memory://"

    def memory_config(self) -> MemoryConfig:
        return MemoryConfig(
            observation=ObservationConfig(message_tokens=self.message_tokens, buffer_tokens=False),
            reflection=ReflectionConfig(observation_tokens=self.observation_tokens),
        )


@dataclass(frozen=True, slots=True)
class AgentRow:
    system: str
    rates: dict[str, float | None]
    counts: dict[str, int]
    compression: float

    def to_json(self) -> dict[str, object]:
        return {"system": self.system, "compression": round(self.compression, 2),
                "rates": {k: None if v is None else round(v, 2) for k, v in self.rates.items()},
                "counts": self.counts}  # fmt: skip


#: The reported rates, in order: (name, what it is).
RATES = (
    ("latest_value", "facts: latest value present %"),
    ("stale_leak", "facts: stale value shown unmarked %"),
    ("decision", "decisions: current choice, old one absent or marked %"),
    ("switched_decision", "switched decisions only %"),
    ("open_task", "open tasks present %"),
    ("done_shown_open", "finished tasks shown as open %"),
    ("tool_value", "tool values asked about present %"),
    ("date_correct", "relative dates resolved correctly %"),
    ("date_as_said", "relative dates left as said %"),
    ("date_wrong", "dates wrong (incl. recurring given a date) %"),
    ("date_missing", "dated events missing %"),
)


def _pct(hits: int, total: int) -> float | None:
    return 100.0 * hits / total if total else None


def summarise_agent(results: Sequence[ProbeResult], system: str, compression: float) -> AgentRow:
    mine = [r for r in results if r.system == system]

    def kind(name: str, state: str | None = None) -> list[ProbeResult]:
        return [r for r in mine if r.probe.kind == name and (state is None or r.probe.state == state)]

    facts = kind("fact")
    stale_pairs = [r for r in facts if r.probe.stale]
    decisions, switched = kind("decision"), kind("decision", "switched")
    open_tasks, done_tasks = kind("task", "open"), kind("task", "done")
    tools, dates = kind("tool"), kind("date")
    dated, recurring = kind("date", "dated"), kind("date", "recurring")
    rates = {
        "latest_value": _pct(sum(r.outcome != "missing" for r in facts), len(facts)),
        "stale_leak": _pct(sum(r.outcome == "leak" for r in stale_pairs), len(stale_pairs)),
        "decision": _pct(sum(r.ok for r in decisions), len(decisions)),
        "switched_decision": _pct(sum(r.ok for r in switched), len(switched)),
        "open_task": _pct(sum(r.ok for r in open_tasks), len(open_tasks)),
        "done_shown_open": _pct(sum(r.outcome == "leak" for r in done_tasks), len(done_tasks)),
        "tool_value": _pct(sum(r.ok for r in tools), len(tools)),
        "date_correct": _pct(sum(r.outcome == "correct" for r in dated), len(dated)),
        "date_as_said": _pct(sum(r.outcome == "as-said" for r in dated), len(dated)),
        "date_wrong": _pct(sum(r.outcome == "wrong" for r in dates), len(dates)),
        "date_missing": _pct(sum(r.outcome == "missing" for r in dated), len(dated)),
    }
    counts = {"facts": len(facts), "stale": len(stale_pairs), "decisions": len(decisions),
              "switched": len(switched), "open_tasks": len(open_tasks), "done_tasks": len(done_tasks),
              "tools": len(tools), "dated": len(dated), "recurring": len(recurring)}  # fmt: skip
    return AgentRow(system, rates, counts, compression)


@dataclass(frozen=True, slots=True)
class AgentReport:
    settings: AgentSettings
    conversations: list[AgentConversation]
    results: list[ProbeResult]
    rows: list[AgentRow]
    seconds: float
    context_tokens: dict[str, list[int]] = field(default_factory=dict)

    def row(self, system: str) -> AgentRow:
        return next(r for r in self.rows if r.system == system)

    def to_json(self) -> dict[str, object]:
        s = self.settings
        return {
            "settings": {"message_tokens": s.message_tokens, "observation_tokens": s.observation_tokens,
                         "memory_model": str(getattr(s.memory_model, "name", s.memory_model) or "offline")},
            "seconds": round(self.seconds, 2),
            "conversations": [{"id": c.conversation_id, "domain": c.domain, "messages": len(c.messages),
                               "probes": len(c.probes)} for c in self.conversations],
            "summary": [row.to_json() for row in self.rows],
            "probes": [r.to_json() for r in self.results],
        }  # fmt: skip


def _steps(responses: Sequence[Message]) -> list[list[Message]]:
    """A turn's responses as model calls: a tool message travels with the call before it."""
    steps: list[list[Message]] = []
    for message in responses:
        if message.role == "tool" and steps:
            steps[-1].append(message)
        else:
            steps.append([message])
    return steps


def _turns(messages: Sequence[Message]) -> list[tuple[int, list[Message]]]:
    """(index of the user message, the turn's messages) for every turn."""
    turns: list[tuple[int, list[Message]]] = []
    for index, message in enumerate(messages):
        if message.role == "user" or not turns:
            turns.append((index, [message]))
        else:
            turns[-1][1].append(message)
    return turns


async def _replay_conversation(
    conversation: AgentConversation, settings: AgentSettings, counter: TokenCounter,
    on_message: Callable[[int], None] | None,
) -> tuple[list[ProbeResult], dict[str, list[int]]]:  # fmt: skip
    messages = list(conversation.messages)
    by_checkpoint: dict[int, list[Probe]] = {}
    for probe in conversation.probes:
        by_checkpoint.setdefault(probe.at, []).append(probe)
    clock = FakeClock(start=messages[0].created_at)
    memory = Memory(settings.store, config=settings.memory_config(), model=settings.memory_model,
                    counter=counter, clock=clock)  # fmt: skip
    thread_id = f"bench-{conversation.conversation_id}"
    results: list[ProbeResult] = []
    tokens: dict[str, list[int]] = {system: [] for system in AGENT_SYSTEMS}

    def follow(message: Message) -> None:
        if message.created_at > clock.now():
            clock.advance((message.created_at - clock.now()).total_seconds())

    async def check(at: int) -> None:
        probes = by_checkpoint.get(at)
        if not probes:
            return
        window = await memory.get_context(thread_id)
        obsmem = list(window.messages)
        budget = counter.count_messages(obsmem)
        contexts = {
            "obsmem": obsmem,
            "full": messages[:at],
            # the newest messages within obsmem's count (its day headers are not added here:
            # every unit already carries its day, and a header inside a message reads as a date)
            "truncate": messages[at - len(truncate_to(messages[:at], budget, counter)) : at],
            "latest": messages[at - 1 : at],
        }
        for system, context in contexts.items():
            tokens[system].append(counter.count_messages(context))
            results.extend(score_probes(probes, context, system))

    async with memory:
        await memory.delete_thread(thread_id)
        for start, turn_messages in _turns(messages):
            await check(start)
            user, responses = turn_messages[0], turn_messages[1:]
            follow(user)
            turn = await memory.begin_turn(thread_id=thread_id, resource_id=f"user-{conversation.conversation_id}",
                                           messages=[user])  # fmt: skip
            for step in _steps(responses):
                follow(step[-1])
                await turn.step(step)
            await turn.end()
            if on_message is not None:
                on_message(len(turn_messages))
        await check(len(messages))
    return results, tokens


async def run_agent_bench(
    conversations: Sequence[AgentConversation],
    settings: AgentSettings,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> AgentReport:
    """Replay every conversation, check its probes at each checkpoint, and summarise per system.

    Compression is total ``full`` tokens over a system's total, over every checkpoint.
    """
    counter = TokenCounter()
    total = sum(len(c.messages) for c in conversations)
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(done, total)

    started = time.perf_counter()
    results: list[ProbeResult] = []
    tokens: dict[str, list[int]] = {system: [] for system in AGENT_SYSTEMS}
    for conversation in conversations:
        found, used = await _replay_conversation(conversation, settings, counter, advance)
        results.extend(found)
        for system, counts in used.items():
            tokens[system].extend(counts)
    full = sum(tokens["full"])
    rows = [summarise_agent(results, system, full / max(1, sum(tokens[system]))) for system in AGENT_SYSTEMS]
    return AgentReport(settings, list(conversations), results, rows, time.perf_counter() - started, tokens)


def mean_tokens(report: AgentReport, system: str) -> float:
    counts = report.context_tokens.get(system, [])
    return statistics.fmean(counts) if counts else 0.0

"""Generated assistant–user conversations with ground truth, for ``obsmem bench agent``.

LoCoMo is two friends chatting; an agent's sessions look different. This module writes, from a
seed, the sessions an ordinary assistant has with one user over weeks: questions answered at
length, tool calls and their results, facts about the user that change (a new phone number,
an address, a budget — sometimes announced, sometimes just stated: "use X from now on"), tasks
opened and finished, decisions taken and switched, tool results the user asks about days
later (a booking code, an invoice total), and plans stated with relative dates ("a week from
Tuesday", "next week on Wednesday") next to recurring times ("on Tuesdays") that have no date.

Every value that is checked is an invented word or code that no other line contains, so a
value found in a context was kept by memory, never matched by coincidence. Each conversation
comes with :class:`Probe` objects: what must be in the context (and what must not, or only
marked as superseded or done) at a checkpoint, a turn boundary where the scorer takes the
context an agent would get there. Everything is derived from ``random.Random(seed)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Literal

from obsmem.errors import InvalidInputError
from obsmem.types import Message, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "DOMAINS",
    "MIN_TURNS",
    "STALE_GAP",
    "AgentConversation",
    "Probe",
    "ProbeKind",
    "generate_conversation",
    "generate_conversations",
]

ProbeKind = Literal["fact", "task", "decision", "tool", "date"]

#: A stale value, a finished task or a switched decision is checked only once this many
#: messages followed the change: before that the change is still in the raw tail.
STALE_GAP = 60
MIN_TURNS = 40
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_SYLLABLES = ("bra", "ko", "vel", "mi", "ran", "tes", "lo", "quor", "zan", "dri", "ve", "nu", "ska",
              "pel", "ith", "mor", "gau", "tri", "bel", "xo", "fen", "dal", "ru", "sha")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Probe:
    """One check at one checkpoint.

    ``at`` is the number of messages replayed before the check (always a turn boundary).
    ``expect`` must be in the context; each of ``stale`` must be absent, or only in a unit
    that also holds an ``expect`` value or marks it (superseded for facts and decisions, done
    for tasks). Dates: ``anchor`` names the event, ``said`` is the phrase as the user said it,
    ``expect`` holds the ISO date it means (empty for a recurring time, which has none).
    """

    kind: ProbeKind
    key: str
    at: int
    expect: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    anchor: str = ""
    said: str = ""
    state: str = ""  # task: "open" | "done"; decision: "kept" | "switched"; date: "dated" | "recurring"


@dataclass(frozen=True, slots=True)
class AgentConversation:
    conversation_id: str
    domain: str
    messages: tuple[Message, ...]
    probes: tuple[Probe, ...]

    @property
    def checkpoints(self) -> list[int]:
        return sorted({probe.at for probe in self.probes})


# --- the domains ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Attribute:
    key: str
    noun: str  # "phone number"
    owner: str  # "my" | "the"
    make: Callable[[random.Random, Callable[[], str]], str]


@dataclass(frozen=True, slots=True)
class _Domain:
    name: str
    attributes: tuple[_Attribute, ...]
    task_kinds: tuple[str, ...]
    decision_kinds: tuple[tuple[str, str], ...]  # (what is chosen, suffix of an option's name)
    tools: tuple[tuple[str, str, str], ...]  # (tool, what it makes, the value's label)
    events: tuple[str, ...]  # appointments with a named person or place
    habits: tuple[str, ...]  # recurring activities
    topics: tuple[str, ...]  # what ordinary questions are about


def _phone(rng: random.Random, word: Callable[[], str]) -> str:
    return f"+44 7700 9{rng.randrange(100, 999)} {rng.randrange(100, 999)}"


def _email(rng: random.Random, word: Callable[[], str]) -> str:
    return f"{word().lower()}.{word().lower()}@{word().lower()}.example"


def _address(rng: random.Random, word: Callable[[], str]) -> str:
    return f"{rng.randrange(2, 180)} {word()} {rng.choice(('Street', 'Road', 'Lane', 'Avenue'))}"


def _amount(rng: random.Random, word: Callable[[], str]) -> str:
    return f"€{rng.randrange(11, 95) * 100 + rng.choice((0, 50)):,}"


def _name(rng: random.Random, word: Callable[[], str]) -> str:
    return f"{word()} {word()}"


def _region(rng: random.Random, word: Callable[[], str]) -> str:
    return f"{word().lower()}-{rng.randrange(1, 9)}"


def _brand(*suffixes: str) -> Callable[[random.Random, Callable[[], str]], str]:
    def make(rng: random.Random, word: Callable[[], str]) -> str:
        return f"{word()} {rng.choice(suffixes)}"

    return make


DOMAINS: tuple[_Domain, ...] = (
    _Domain(
        "travel",
        (_Attribute("phone", "phone number", "my", _phone), _Attribute("email", "email address", "my", _email),
         _Attribute("budget", "budget for the trip", "the", _amount),
         _Attribute("airline", "preferred airline", "my", _brand("Air", "Airways")),
         _Attribute("companion", "travel companion", "my", _name)),
        ("packing list", "visa checklist", "itinerary draft", "travel insurance claim"),
        (("hotel", "Hotel"), ("tour operator", "Tours"), ("car rental", "Rentals")),
        (("book_hotel", "hotel booking", "confirmation code"), ("book_flight", "flight booking", "booking reference"),
         ("rent_car", "car rental", "reservation number")),
        ("the visa interview at the {w} consulate", "my vaccination appointment with Dr. {w}",
         "the walking tour with {w}", "dinner at {w} with friends"),
        ("Portuguese class", "swimming", "volunteering at the library"),
        ("packing light", "jet lag", "train versus plane", "travel adapters", "local food", "museum passes",
         "airport transfers", "currency exchange"),
    ),
    _Domain(
        "home",
        (_Attribute("address", "home address", "my", _address), _Attribute("phone", "phone number", "my", _phone),
         _Attribute("budget", "renovation budget", "the", _amount),
         _Attribute("contractor", "contractor", "our", _name),
         _Attribute("insurer", "home insurer", "our", _brand("Insurance", "Mutual"))),
        ("kitchen floor plan", "paint schedule", "moving checklist", "deposit dispute letter"),
        (("tile supplier", "Tiles"), ("moving company", "Movers"), ("paint brand", "Paints")),
        (("order_materials", "materials order", "order number"), ("create_invoice", "invoice", "invoice total"),
         ("schedule_delivery", "delivery", "tracking number")),
        ("the plumber visit from {w} Plumbing", "the flat viewing on {w} Street",
         "the meeting with the landlord, Mr. {w}", "the electrician inspection by {w}"),
        ("yoga", "the recycling pickup", "piano lessons"),
        ("grout colours", "damp walls", "underfloor heating", "paint finishes", "insulation", "wardrobe doors",
         "smart thermostats", "sealing windows"),
    ),
    _Domain(
        "software",
        (_Attribute("region", "deployment region", "our", _region), _Attribute("email", "work email", "my", _email),
         _Attribute("lead", "team lead", "our", _name),
         _Attribute("budget", "monthly cloud budget", "the", _amount),
         _Attribute("provider", "cloud provider", "our", _brand("Cloud", "Compute"))),
        ("migration plan", "release notes", "incident postmortem", "load test report"),
        (("message queue", "MQ"), ("logging stack", "Logs"), ("CI service", "CI")),
        (("create_ticket", "ticket", "ticket id"), ("deploy_service", "deployment", "release id"),
         ("run_query", "cost query", "monthly total")),
        ("the architecture review with {w}", "the security audit by {w} Labs",
         "the interview with candidate {w}", "the demo for the {w} team"),
        ("the team standup", "on-call handover", "the book club"),
        ("connection pooling", "retry backoff", "database indexes", "feature flags", "log levels",
         "container sizes", "caching headers", "schema migrations"),
    ),
    _Domain(
        "finance",
        (_Attribute("bank", "bank", "my", _brand("Bank", "Savings")), _Attribute("address", "billing address", "my", _address),
         _Attribute("budget", "monthly savings target", "the", _amount),
         _Attribute("accountant", "accountant", "my", _name),
         _Attribute("email", "billing email", "my", _email)),
        ("tax return", "expense report", "grant application", "pension transfer form"),
        (("index fund", "Fund"), ("energy tariff", "Energy"), ("phone plan", "Mobile")),
        (("lookup_invoice", "invoice lookup", "invoice total"), ("transfer_money", "transfer", "transaction id"),
         ("open_claim", "claim", "claim number")),
        ("the appointment with the adviser, Ms. {w}", "the call with {w} about the mortgage",
         "the dentist appointment with Dr. {w}", "the notary meeting at {w} & Partners"),
        ("the running club", "Spanish lessons", "choir practice"),
        ("emergency funds", "index funds", "tax brackets", "credit scores", "budget apps", "insurance excess",
         "pension top-ups", "standing orders"),
    ),
)
_DOMAIN_NAMES = tuple(d.name for d in DOMAINS)

_FIRST = ("{Owner} {noun} is {v}.", "For the record, {owner} {noun} is {v}.", "Just so you know, {owner} {noun} is {v}.")
_CHANGE = ("{Owner} {noun} changed, it's now {v}.", "Update: {owner} {noun} is now {v}.",
           "I've switched {owner} {noun} to {v}.", "New {noun}: {v}.")  # fmt: skip
_RESTATE = ("Use {v} as {owner} {noun} from now on.", "Going forward, {owner} {noun} is {v}.",
            "{Owner} {noun} is {v}.")  # fmt: skip
_FACT_ACK = ("Noted, I'll use that.", "Got it, thanks.", "Thanks, I've noted it.", "Understood.")

_TASK_OPEN = ("Can you help me put together the {t}?", "I need to get the {t} done this week, can you start a draft?",
              "Please draft the {t} for me.")  # fmt: skip
_TASK_WORK = ("Here is a first outline for the {t}: start with the essentials, group related items, and mark "
              "anything that needs a decision. Tell me what to change and I'll revise it.",
              "Sure. A draft of the {t}: an overview section, the steps in order, and a short list of open "
              "questions at the end. I kept it brief so it is easy to edit.")  # fmt: skip
_TASK_DONE = ("The {t} is done, I sent it off.", "Finished the {t}, thanks for the help!",
              "We can close the {t}, it's submitted.")  # fmt: skip
_TASK_DONE_ACK = ("Great, glad that's finished.", "Nice work getting it done.", "Good, one less thing to track.")

_DECIDE = ("Let's go with {c}.", "I'll take {c}.", "Okay, {c} it is.")
_SWITCH = ("Actually, switch to {c} instead.", "Change of plan: let's go with {c}.", "Scratch that, I'll take {c}.")
_ASK = ("What was the {label} for the {thing} again?", "Can you remind me of the {label} from the {thing}?",
        "I need the {label} of the {thing}, what was it?")  # fmt: skip


def _filler(rng: random.Random, domain: _Domain) -> tuple[str, str]:
    topic = rng.choice(domain.topics)
    question = rng.choice((f"What should I know about {topic}?", f"Any tips on {topic}?",
                           f"How do people usually handle {topic}?", f"Is {topic} worth worrying about?"))  # fmt: skip
    tips = ("Start with the simplest option and only add complexity when you see a real need.",
            "Write down what you decide so you do not have to work it out twice.",
            "Compare at least two options on cost, effort and how easy they are to undo.",
            "It helps to check reviews from people in a similar situation before committing.",
            "Leave some slack in the schedule; small delays add up quickly.",
            "If something feels unclear, ask for the details in writing.",
            "Most problems here come from rushing the first step, so take it slowly.")  # fmt: skip
    answer = f"Good question about {topic}. " + " ".join(rng.sample(tips, 3))
    return question, answer


def _relative(rng: random.Random, today: date) -> tuple[str, date | None, str] | None:
    """A relative date phrase said on ``today``, the date it means, and its tense (plan/past)."""
    weekday = today.weekday()
    options: list[tuple[str, date | None, str]] = [
        ("tomorrow", today + timedelta(days=1), "plan"),
        ("the day after tomorrow", today + timedelta(days=2), "plan"),
        ("in two weeks", today + timedelta(days=14), "plan"),
        ("yesterday", today - timedelta(days=1), "past"),
    ]
    target = rng.randrange(7)
    next_monday = today + timedelta(days=7 - weekday)
    options.append((f"next week on {_WEEKDAYS[target]}", next_monday + timedelta(days=target), "plan"))
    if target != weekday:
        coming = today + timedelta(days=(target - weekday) % 7)
        options.append((f"a week from {_WEEKDAYS[target]}", coming + timedelta(days=7), "plan"))
    if target > weekday:
        options.append((f"this {_WEEKDAYS[target]}", today + timedelta(days=target - weekday), "plan"))
    if target < weekday:
        options.append((f"on {_WEEKDAYS[target]}", today - timedelta(days=weekday - target), "past"))
    return rng.choice(options)


# --- building ---------------------------------------------------------------------------------


@dataclass
class _Builder:
    conversation_id: str
    rng: random.Random
    zone: timezone
    clock: datetime
    messages: list[Message] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    calls: int = 0

    def word(self) -> str:
        while True:
            made = "".join(self.rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
            if made not in self.used:
                self.used.add(made)
                return made

    def _stamp(self, seconds: int) -> datetime:
        self.clock += timedelta(seconds=seconds)
        return self.clock

    def _add(self, role: Literal["user", "assistant", "tool"], parts: tuple[TextPart | ToolCallPart | ToolResultPart, ...],
             seconds: int) -> None:  # fmt: skip
        at = self._stamp(seconds).astimezone(self.zone)
        self.messages.append(Message(id=f"{self.conversation_id}-{len(self.messages):05d}", role=role,
                                     parts=parts, created_at=at))  # fmt: skip

    def exchange(self, user: str, answer: str, tool: tuple[str, dict[str, object], object] | None = None) -> None:
        """One turn: the user's message, an optional tool call and its result, the answer."""
        self._add("user", (TextPart(text=user),), self.rng.randrange(40, 400))
        if tool is not None:
            name, args, result = tool
            self.calls += 1
            call_id = f"call-{self.calls}"
            self._add("assistant", (ToolCallPart(tool_call_id=call_id, tool_name=name, args=args),), 5)
            self._add("tool", (ToolResultPart(tool_call_id=call_id, tool_name=name, result=result),), 3)
        self._add("assistant", (TextPart(text=answer),), self.rng.randrange(5, 40))

    @property
    def today(self) -> date:
        return self.clock.astimezone(self.zone).date()

    def next_session(self) -> None:
        days = self.rng.randrange(1, 5)
        local = self.clock.astimezone(self.zone) + timedelta(days=days)
        start = local.replace(hour=self.rng.randrange(7, 21), minute=self.rng.randrange(60), second=0)
        self.clock = start.astimezone(UTC)


def _code(rng: random.Random, prefix: str) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return prefix + "".join(rng.choice(letters + "23456789") for _ in range(6))


def generate_conversation(seed: int, *, domain: str | None = None, turns: int | None = None) -> AgentConversation:
    """One conversation of about ``turns`` user turns (each decision adds one; default: 200–800, seeded)."""
    rng = random.Random(seed)
    chosen = next((d for d in DOMAINS if d.name == domain), None) if domain else rng.choice(DOMAINS)
    if chosen is None:
        raise InvalidInputError(f"unknown domain {domain!r}; expected one of {', '.join(_DOMAIN_NAMES)}")
    count = turns if turns is not None else rng.randrange(200, 790)  # a decision adds one turn
    if count < MIN_TURNS:
        raise InvalidInputError(f"a conversation needs at least {MIN_TURNS} turns, got {count}")
    zone = timezone(timedelta(hours=rng.choice((0, 1, 2, -5, 9))))
    start = datetime(2025, rng.randrange(1, 12), rng.randrange(1, 28), 9, 0, tzinfo=zone).astimezone(UTC)
    b = _Builder(f"agent-{seed}", rng, zone, start)
    return _script(b, chosen, count)


def _script(b: _Builder, domain: _Domain, count: int) -> AgentConversation:
    rng = b.rng
    scale = max(1, count // 100)
    # Each event is (kind, payload); they are spread over the turns, fillers in between.
    events: list[tuple[str, object]] = []
    for attribute in domain.attributes:
        events.append(("fact-first", attribute))
        for _ in range(rng.choice((0, 1, 1, 2)) if scale > 1 else rng.choice((0, 1))):
            events.append(("fact-change", attribute))
    for index in range(min(len(domain.task_kinds), 1 + scale)):
        events.append(("task-open", index))
        if rng.random() < 0.6:
            events.append(("task-done", index))
    for index in range(len(domain.decision_kinds)):
        events.append(("decide", index))
        if rng.random() < 0.5:
            events.append(("switch", index))
    for index in range(min(6, 1 + scale)):
        events.append(("tool", index))
        events.append(("ask", index))
    for _ in range(2 + scale):
        events.append(("date", None))
    for _ in range(2):
        events.append(("habit", None))
    # Order: keep each thing's own sequence (first before change, open before done, tool before ask)
    rng.shuffle(events)
    events = _ordered(events)
    slots = sorted(rng.sample(range(2, count - 2), min(len(events), count - 4)))
    plan = dict(zip(slots, events, strict=False))

    state = _State()
    session_left = rng.randrange(8, 25)
    checkpoints = sorted({int(count * share) for share in (0.4, 0.6, 0.8)})
    turn_at: dict[int, int] = {}
    for turn in range(count):
        if session_left == 0:
            b.next_session()
            session_left = rng.randrange(8, 25)
        session_left -= 1
        turn_at[turn] = len(b.messages)
        event = plan.get(turn)
        if event is None:
            _filler_turn(b, domain)
        else:
            _event_turn(b, domain, state, *event)
    state.checkpoints = [turn_at[t] for t in checkpoints] + [len(b.messages)]
    return AgentConversation(b.conversation_id, domain.name, tuple(b.messages), tuple(state.probes()))


def _ordered(events: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """Keep the shuffled positions, but give each subject's positions to its events in order:
    a fact is stated before it changes, a task opened before it is done, and so on."""
    rank = {"fact-change": 1, "task-done": 1, "switch": 1, "ask": 1}

    def subject(index: int) -> tuple[str, object]:
        kind, payload = events[index]
        if kind in ("date", "habit"):
            return (kind, index)
        family = {"fact-first": "fact", "fact-change": "fact", "task-open": "task", "task-done": "task",
                  "decide": "decision", "switch": "decision", "tool": "tool", "ask": "tool"}[kind]  # fmt: skip
        return (family, payload.key if isinstance(payload, _Attribute) else payload)

    out = list(events)
    groups: dict[tuple[str, object], list[int]] = {}
    for index in range(len(events)):
        groups.setdefault(subject(index), []).append(index)
    for positions in groups.values():
        for position, event in zip(positions, sorted((events[i] for i in positions),
                                                     key=lambda e: rank.get(e[0], 0)), strict=True):  # fmt: skip
            out[position] = event
    return out


@dataclass
class _State:
    facts: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # key → [(value, at)]
    tasks: dict[str, tuple[str, int, int | None]] = field(default_factory=dict)  # key → (name, opened, done)
    decisions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    tools: list[Probe] = field(default_factory=list)
    tool_values: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    dates: list[tuple[str, str, date | None, int]] = field(default_factory=list)  # anchor, said, date, at
    checkpoints: list[int] = field(default_factory=list)

    def probes(self) -> list[Probe]:
        out = list(self.tools)
        for at in self.checkpoints:
            for key, history in self.facts.items():
                known = [(v, when) for v, when in history if when < at]
                if not known:
                    continue
                stale = tuple(v for (v, _), (_, replaced) in zip(known, known[1:], strict=False)
                              if replaced <= at - STALE_GAP)  # fmt: skip
                out.append(Probe("fact", key, at, expect=(known[-1][0],), stale=stale))
            for key, (name, opened, done) in self.tasks.items():
                if opened >= at:
                    continue
                if done is None or done >= at:
                    out.append(Probe("task", key, at, expect=(key,), anchor=name, state="open"))
                elif done <= at - STALE_GAP:
                    out.append(Probe("task", key, at, stale=(key,), anchor=name, state="done"))
            for key, history in self.decisions.items():
                known = [(v, when) for v, when in history if when < at]
                if not known:
                    continue
                stale = tuple(v for (v, _), (_, replaced) in zip(known, known[1:], strict=False)
                              if replaced <= at - STALE_GAP)  # fmt: skip
                out.append(Probe("decision", key, at, expect=(known[-1][0],), stale=stale,
                                 state="switched" if len(known) > 1 else "kept"))  # fmt: skip
            for anchor, said, day, when in self.dates:
                if when <= at - STALE_GAP:
                    out.append(Probe("date", anchor, at, expect=(day.isoformat(),) if day else (), anchor=anchor,
                                     said=said, state="dated" if day else "recurring"))  # fmt: skip
        return out


def _filler_turn(b: _Builder, domain: _Domain) -> None:
    question, answer = _filler(b.rng, domain)
    if b.rng.random() < 0.15:
        query = b.rng.choice(domain.topics)
        results = [{"title": f"{query.title()} guide {i}", "snippet": f"Notes on {query}, part {i}."}
                   for i in range(1, b.rng.randrange(3, 6))]  # fmt: skip
        b.exchange(question, answer, ("search_web", {"query": query}, {"results": results}))
    else:
        b.exchange(question, answer)


def _event_turn(b: _Builder, domain: _Domain, state: _State, kind: str, payload: object) -> None:
    rng = b.rng
    at = len(b.messages)
    if kind in ("fact-first", "fact-change"):
        assert isinstance(payload, _Attribute)
        value = payload.make(rng, b.word)
        templates = _FIRST if kind == "fact-first" else rng.choice((_CHANGE, _RESTATE))
        owner = payload.owner
        text = rng.choice(templates).format(owner=owner, Owner=owner.capitalize(), noun=payload.noun, v=value)
        if kind == "fact-change" and payload.key not in state.facts:
            return _filler_turn(b, domain)
        state.facts.setdefault(payload.key, []).append((value, at))
        b.exchange(text, rng.choice(_FACT_ACK))
    elif kind in ("task-open", "task-done"):
        assert isinstance(payload, int)
        task_kind = domain.task_kinds[payload]
        if kind == "task-open":
            key = b.word()
            name = f"{key} {task_kind}"
            state.tasks[key] = (name, at, None)
            b.exchange(rng.choice(_TASK_OPEN).format(t=name), rng.choice(_TASK_WORK).format(t=name))
        else:
            key = next(k for k, (n, _, _) in state.tasks.items() if n.endswith(task_kind))
            name, opened, _ = state.tasks[key]
            state.tasks[key] = (name, opened, at)
            b.exchange(rng.choice(_TASK_DONE).format(t=name), rng.choice(_TASK_DONE_ACK))
    elif kind in ("decide", "switch"):
        assert isinstance(payload, int)
        what, suffix = domain.decision_kinds[payload]
        if kind == "decide":
            first, second = f"{b.word()} {suffix}", f"{b.word()} {suffix}"
            state.decisions[what] = []
            b.exchange(f"Which {what} would you suggest?",
                       f"Two good options: {first} and {second}. Both have solid reviews; {first} is a bit "
                       f"cheaper and {second} is more flexible.")  # fmt: skip
            state.decisions[what].append((first if rng.random() < 0.5 else second, at + 2))
            b.exchange(rng.choice(_DECIDE).format(c=state.decisions[what][-1][0]), "Great choice, noted.")
        else:
            new = f"{b.word()} {suffix}"
            state.decisions[what].append((new, at))
            b.exchange(rng.choice(_SWITCH).format(c=new) + f" It's a better fit for the {what}.",
                       f"Okay, switching the {what} to {new}.")  # fmt: skip
    elif kind == "tool":
        assert isinstance(payload, int)
        tool, thing, label = domain.tools[payload % len(domain.tools)]
        thing = f"{b.word()} {thing}"
        value = _amount(rng, b.word) if "total" in label else _code(rng, label[:1].upper() + "-")
        result: dict[str, object] = {"status": "ok", label.replace(" ", "_"): value, "item": thing,
                                     "created": b.today.isoformat(), "notes": "Keep this for your records."}
        say = rng.random() < 0.5
        answer = f"Done: the {thing} is set up; the {label} is {value}." if say else \
            f"Done, the {thing} went through. Everything is in the result above."
        b.exchange(f"Please go ahead with the {thing}.", answer, (tool, {"item": thing}, result))
        state.tool_values[payload] = (thing, label, value)
    elif kind == "ask":
        assert isinstance(payload, int)
        thing, label, value = state.tool_values[payload]
        state.tools.append(Probe("tool", f"{thing} {label}", at, expect=(value,), anchor=thing))
        b.exchange(rng.choice(_ASK).format(label=label, thing=thing), f"The {label} was {value}.")
    elif kind == "date":
        event = rng.choice(domain.events).format(w=b.word())
        picked = _relative(rng, b.today)
        assert picked is not None
        said, day, tense = picked
        anchor = next(w for w in event.split() if w[:1].isupper() and w.strip(".,") not in ("Dr", "Mr", "Ms"))
        anchor = anchor.strip(".,")
        text = f"I had {event} {said}, it went fine." if tense == "past" else f"I have {event} {said}."
        state.dates.append((anchor, said, day, at))
        b.exchange(text, "Thanks for letting me know, I'll keep it in mind." if tense == "past"
                   else "Noted, I'll keep that in mind.")  # fmt: skip
    elif kind == "habit":
        habit = rng.choice(domain.habits)
        weekday = rng.randrange(7)
        anchor = b.word()
        said = rng.choice((f"on {_WEEKDAYS[weekday]}s", f"every {_WEEKDAYS[weekday]}",
                           f"from 7am to 3pm {_WEEKDAYS[weekday]} to {_WEEKDAYS[(weekday + 4) % 7]}"))  # fmt: skip
        state.dates.append((anchor, said, None, at))
        b.exchange(f"I go to {habit} with {anchor} {said}, so I'm busy then.", "Good to know, I'll plan around it.")
    return None


def generate_conversations(seed: int = 15, count: int = 4, *, turns: int | None = None) -> list[AgentConversation]:
    """``count`` conversations, cycling through the domains; conversation i uses seed ``seed * 1000 + i``."""
    return [
        generate_conversation(seed * 1000 + index, domain=DOMAINS[index % len(DOMAINS)].name, turns=turns)
        for index in range(count)
    ]

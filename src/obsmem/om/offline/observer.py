"""The offline observer: deterministic rules that turn messages into observation lines.

See :mod:`obsmem.om.offline` for what it keeps and loses compared with an LLM observer. The
shape of the work: messages are read in order, and each role has its own rules. User text is
split into sentences, each classified (small talk, question/request, completion, plan, other
statement) and given a priority by :func:`~obsmem.om.offline.patterns.statement_priority`: 🔴
only for durable facts about the user, changes of state and dated plans, 🟡 for figures and
undated plans that name something, 🟢 for narration that names something new, nothing for the
rest. Assistant text is matched to the open user question, or kept when it recommends, lists,
decides or confirms; tool calls are paired with their results, and a run is folded into the
reply of its turn when that reply is recorded (a failed run keeps its own line). Each kept item
becomes a draft line anchored at its message; drafts are then sorted, de-duplicated against the
previous observations, and rendered with :mod:`obsmem.om.text.format`.

Every text from a message, a tool run or a file name is defused where it is read
(:mod:`obsmem.om.text.quote`), and every line starts with the observer's own words, so nothing
a user or a tool writes can close a block, open a tag or pose as a line of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, tzinfo
from typing import Any

from obsmem.om.text.format import (
    PRIORITY_DONE,
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    DateGroup,
    ObservationLine,
    parse_observations,
    render_observations,
)
from obsmem.om.text.quote import defuse, defuse_lines, one_line, speaker_label
from obsmem.om.offline.hints import CarriedHint, OpenAsk, continuation_hints
from obsmem.om.offline.known import KnownText, KnownView
from obsmem.om.offline.participants import is_participant_conversation, participant_line, speaker_name
from obsmem.om.offline.patterns import (
    ASSIST_DONE,
    ASSIST_FILLER,
    AUX,
    CONTRACTIONS,
    DONE_LEAD,
    FILLER_WORDS,
    HOW_DO_I,
    INTERJECTION,
    LABEL,
    LOWER_OK,
    PLAN_LEAD,
    PLAN_VERB,
    PLEASANTRY,
    RECOMMEND,
    IMPERATIVE,
    REQUEST,
    CHOICE_TOPIC,
    DECISION,
    STOPWORDS,
    SWITCH_LEAD,
    TASK_FINISHED,
    USER_COMPLETED,
    USER_DONE,
    USER_DONE_SHORT,
    VAGUE_PLAN,
    WH,
    WONDER,
    content_words,
    fact_key,
    is_plan_text,
    key_terms,
    statement_priority,
    strip_lead_in,
    TaskMentions,
)
from obsmem.om.offline.date_phrases import weighed_dates
from obsmem.om.offline.reflector import drop_superseded, drop_superseded_by, stale_signals
from obsmem.om.offline.offload import offload
from obsmem.om.offline.rules import (
    DateRef,
    assistant_person,
    blocks,
    compact_args,
    compact_list,
    compact_result,
    condense,
    estimate_tokens,
    list_label,
    named_dates,
    normalise,
    resolve_dates,
    sentence_end,
    shorten,
    split_sentences,
    summarise,
    third_person,
    topic_title,
)
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.om.sections import visible_sections
from obsmem.types import FilePart, Message, ToolCallPart, ToolResultPart

__all__ = ["OfflineObserver", "Revision", "revise"]

ANSWER_LIMIT = 150  # a condensed answer
LIST_LIMIT = 240  # the items of a listed answer, each reduced to name + distinguishing attribute
ASK_LIMIT = 120  # the question or request itself
ASK_FOLD_CHARS = 1_000  # questions folded into one "User asked …" line before the answer, at most
RESULT_LIMIT = 120  # a tool run's outcome
REMARK_LIMIT = 70  # an assistant aside that answered nothing
USER_LIMIT = 220  # a user sentence kept near verbatim
#: Calendar days named in this many earlier messages (and the message itself) are weighed against
#: a bare weekday: "Saturday, March 22" two turns before "dinner at home on Saturday".
NEARBY_MESSAGES = 6
#: Requests of at least this many characters are worked in a thread (about 60 ms of rules work
#: and more); smaller ones inline. See :class:`OfflineObserver`.
OFFLOAD_CHARS = 12_000


@dataclass(slots=True)
class _Draft:
    order: tuple[int, int]
    day: date
    time: str
    priority: str
    text: str
    children: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Ask:
    order: tuple[int, int]
    day: date
    time: str
    text: str  # "User asked …"
    topic: str
    is_request: bool
    words: frozenset[str]


@dataclass(slots=True)
class _Run:
    order: tuple[int, int]
    day: date
    time: str
    name: str
    args: str
    result: str
    count: int = 1
    folded: bool = False  # its turn's reply, recorded in another line, says what it found
    key_values: tuple[str, ...] = ()  # "confirmation_code C-Z8MMG6": what a user asks for later


#: Result fields whose values a user comes back for: codes, ids, references, totals.
_KEY_FIELD = re.compile(
    r"(?:^|_)(?:id|code|number|no|ref|reference|confirmation|tracking|total|amount|price|cost|balance|"
    r"pin|locator|pnr|invoice|ticket|booking|order|transaction|claim|release)(?:$|_)", re.I
)
_CODE_VALUE = re.compile(r"^(?!\d{4}-\d{2}-\d{2}$)(?=[A-Z0-9-]*\d)[A-Z0-9][A-Z0-9-]{4,24}$|^[€$£]\s?\d[\d,.]*$|^\d[\d,.]*\s?[€$£]$")


def _key_values(result: Any, limit: int = 4) -> tuple[str, ...]:
    """The identifiers and amounts in a tool result ("confirmation_code C-Z8MMG6"), at most
    ``limit``: the values a user asks about days later, which a cut summary must not lose."""
    found: list[str] = []

    def walk(value: Any, key: str, depth: int) -> None:
        if len(found) >= limit or depth > 2:
            return
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k), depth + 1)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            text = str(value).strip()
            keyed = bool(key and _KEY_FIELD.search(key))
            if text and len(text) <= 40 and (_CODE_VALUE.match(text) or (keyed and (
                    re.search(r"\d", text) or re.fullmatch(r"[A-Z0-9][A-Z0-9-]{3,24}", text)))):
                found.append(f"{key} {text}".strip())

    walk(_parsed(result), "", 0)
    return tuple(found)


def _parsed(result: Any) -> Any:
    if isinstance(result, str) and result.strip()[:1] == "{":
        try:
            return json.loads(result)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack: text
            return result
    return result


def _lower_first(text: str) -> str:
    """Lowercase a leading function word ("The flat is …" → "the flat is …"), never a name."""
    first = text.split(" ", 1)[0]
    if first.lower() in STOPWORDS or first.lower() in FILLER_WORDS or first.lower() in LOWER_OK:
        return first.lower() + text[len(first) :]
    return text


def _is_filler(sentence: str) -> bool:
    words = re.findall(r"[\w':()]+", sentence.lower())
    return not words or (len(words) <= 8 and all(w in FILLER_WORDS for w in words))


def _with_missing(text: str, source: str, known: str | KnownView) -> str:
    """Append the names and quantities of ``source`` that ``text`` lost and that are recorded
    nowhere else, so every one survives in some line."""
    lowered = text.lower()
    missing = [t for t in key_terms(source) if t.lower() not in lowered and t.lower() not in known]
    if not missing:
        return text
    return f"{text.rstrip('.')} (also: {shorten(', '.join(missing[:4]), 60)})"


def _annotate(text: str, notes: list[str]) -> str:
    """Append "(meaning …)"-style notes, each once; dates always go at the end of a line."""
    text = text.rstrip(" .!")
    return " ".join([text, *(f"({n})" for n in dict.fromkeys(notes))])


_SPEAKER_RANK = {PRIORITY_HIGH: 3, PRIORITY_MEDIUM: 2, PRIORITY_LOW: 1}


class _Cycle:
    """The state of one observe() call: drafts, the open question, tool calls in flight."""

    def __init__(self, request: ObservationRequest, count_tokens: Callable[[str], int]) -> None:
        self.request = request
        self.count_tokens = count_tokens
        # A message is read on its own clock: the offset it carries, unless the application set
        # one zone for everyone (``MemoryConfig(timezone=…)``). "In two weeks" said at 00:30 in
        # Tokyo counts from the Tokyo day, not the UTC one before it.
        self.tz: tzinfo | None = request.timezone
        self.drafts: list[_Draft] = []
        self.ask: _Ask | None = None  # the user's open question/request
        self.last_ask: _Ask | None = None
        self.carried = CarriedHint.read(request.current_task) if request.continuation_hints else None
        # the assistant's question to the user (one the previous cycle left unanswered counts)
        self.awaiting_user: str | None = self.carried.question if self.carried else None
        self.last_topic: str | None = None  # what a "thanks, that worked" refers to
        self.calls: dict[str, tuple[ToolCallPart, tuple[int, int], date, str]] = {}
        self.runs: list[_Run] = []
        # each distinct run by (tool, arguments, result), so a repeat is found by a lookup (a
        # scan of every run per result was quadratic in a message's parallel calls)
        self.run_index: dict[tuple[str, str, str], _Run] = {}
        self.fold_from = 0  # the runs before this index a reply has already folded or never will
        self.turn_start = (-1, 0)  # where the latest user message is: tool runs after it belong to this turn
        self.state: dict[str, str] = {}  # fact key -> latest value, for "(changing from …)"
        self.user_texts: list[str] = []
        self.finished: list[str] = []  # tasks the user reported finished in this batch
        self.between_people = is_participant_conversation(request.messages)
        self.speakers = sorted({n for m in request.messages if (n := speaker_name(m))})
        # a named speaker's line of a day, and the notes still to join to it
        self.speaker_days: dict[tuple[date, str], tuple[_Draft, list[str]]] = {}
        self.named: list[list[date]] = []  # the calendar days each message with text names
        self.nearby: list[date] = []  # those of the message being read and the few before it
        self.choice_topic: str | None = None  # "hotel" after "Which hotel would you suggest?"
        # everything recorded or said so far, indexed: a novelty check reads what it must, not
        # all of it (a reply naming thousands of results after them was terms x text)
        # What this thread's memory holds decides what is new, not a sibling's: with threads
        # sharing a resource, a line left out here because a sibling's section has it (or a
        # reply thought not new because of it) would be gone from this thread's memory once that
        # sibling is deleted. (The topic of a choice and the "(changing from …)" values below, likewise.)
        self.own = visible_sections(request.previous_observations, request.thread_id, shared=False)
        self._known = KnownText()
        self._known.add(self.own.lower())
        for group in parse_observations(self.own)[-1:]:
            for line in group.lines[-3:]:  # "Which hotel would you suggest?" asked in the last batch
                if asked := re.match(r"^User asked (which .*)", line.text):
                    topic = CHOICE_TOPIC.match(asked[1])
                    self.choice_topic = topic["k"].lower() if topic else self.choice_topic
        # "(changing from …)" values come from this thread's own lines only: with threads
        # sharing a resource, a sibling's lines are shown here, and copying a sibling's value
        # into this thread's memory would keep it after that sibling is deleted.
        for group in parse_observations(self.own):
            for line in group.lines:
                key = fact_key(line.text)
                if key and line.text.startswith("User") and not is_plan_text(line.text):
                    self.state[key.key] = key.value

    def known(self) -> KnownView:
        """Everything already recorded or said by the user, lowercased (for novelty checks):
        ``term in known()`` as of now, whatever is learned later."""
        return self._known.view()

    def _learn(self, text: str) -> None:
        self._known.add(text.lower())

    def dates(self, text: str, anchor: date) -> list[DateRef]:
        """The time references of ``text``, read with the calendar days named around it."""
        return resolve_dates(text, anchor, self.nearby)

    def add(self, order: tuple[int, int], day: date, time: str, priority: str, text: str) -> _Draft:
        draft = _Draft(order, day, time, priority, sentence_end(text))
        self.drafts.append(draft)
        self._learn(draft.text)
        return draft

    # -- messages ------------------------------------------------------------------------------

    def feed(self, index: int, message: Message) -> None:
        local = message.created_at.astimezone(self.tz) if self.tz is not None else message.created_at
        day, time = local.date(), local.strftime("%H:%M")
        text = defuse_lines(message.text).strip()  # data from here on: no tag, no marker
        caption = ""
        files = [p for p in message.parts if isinstance(p, FilePart)]
        if files and text and "?" not in text and len(text.split()) <= 25 and not REQUEST.match(text):
            caption = re.sub(
                r"^(?:here(?:'s| is| are)|this is|these are|attached(?: is)?)\s+", "", text, flags=re.I
            )
            caption = f" ({shorten(third_person(caption.rstrip('.!')), 100)})"
            text = ""
        for sub, part in enumerate(message.parts, start=1):
            where = (index, sub)
            if isinstance(part, FilePart):
                who = "User" if message.role == "user" else "Assistant"
                kind = "an image" if part.is_image else "a file"
                name = part.filename or (part.url or "").rsplit("/", 1)[-1].split("?")[0] or part.media_type
                name = shorten(defuse(name), 100)
                self.add(where, day, time, PRIORITY_MEDIUM, f"{who} shared {kind} {name}{caption}")
                caption = ""
            elif isinstance(part, ToolCallPart):
                self.calls[part.tool_call_id] = (part, where, day, time)
            elif isinstance(part, ToolResultPart):
                self._tool_result(part, where, day, time)
        if not text:
            return
        self.named.append(named_dates(text, day))
        self.nearby = weighed_dates((d for days in self.named[-NEARBY_MESSAGES - 1 :] for d in days), day)
        speaker = speaker_name(message)
        if self.between_people and speaker and message.role in ("user", "assistant"):
            if message.role == "user":
                self.user_texts.append(text)
            listeners = [other for other in self.speakers if other != speaker]
            line = participant_line(
                text, speaker, day, self.known(), self.count_tokens, listeners, context=self.nearby
            )
            if line is not None:
                self._speaker_note(speaker, (index, 1), day, line.priority, line.text)
            return
        if message.role == "user":
            self.user_texts.append(text)
            self._user(text, index, day, time)
            self._learn(text)
        elif message.role == "assistant":
            self._assistant(text, index, day, time)

    def _speaker_note(
        self, speaker: str, order: tuple[int, int], day: date, priority: str, text: str
    ) -> None:
        """One line per named speaker and day of a batch: the speaker's later notes of the day join
        their first line ("Melanie: a; b"), so a line's head is paid once, as the reflector's merge
        of an old day does (:func:`~obsmem.om.offline.participants.merge_speaker_days`). The
        line carries no clock time: between people the day is what dates what they said."""
        day_line = self.speaker_days.get((day, speaker))
        if day_line is None:
            self.speaker_days[(day, speaker)] = (self.add(order, day, "", priority, text), [])
            return
        draft, more = day_line
        # the line's head is the speaker's label, which may hold ": " itself (a quoted name)
        head = f"{speaker_label(speaker)}: "
        notes = text[len(head) :] if text.startswith(head) else text.partition(": ")[2]
        more.append(notes)  # joined once, when the batch is rendered: linear in the notes
        if _SPEAKER_RANK[priority] > _SPEAKER_RANK[draft.priority]:
            draft.priority = priority
        self._learn(notes)

    def _join_speaker_days(self) -> None:
        for draft, more in self.speaker_days.values():
            if more:
                draft.text = sentence_end("; ".join([draft.text.rstrip("."), *more]))
                more.clear()

    def _tool_result(self, part: ToolResultPart, where: tuple[int, int], day: date, time: str) -> None:
        call = self.calls.pop(part.tool_call_id, None)
        args = defuse(compact_args(call[0].args, 60)) if call else ""
        if call:
            where, day, time = call[1], call[2], call[3]
        result = defuse(compact_result(part.result, part.is_error, RESULT_LIMIT))
        name = _tool_name(part.tool_name)
        self._learn(f"{args} {result}")
        run = self.run_index.get((name, args, result))
        if run is not None:
            run.count += 1
            return
        values = () if part.is_error else tuple(defuse(v) for v in _key_values(part.result))
        run = self.run_index[(name, args, result)] = _Run(where, day, time, name, args, result, key_values=values)
        self.runs.append(run)

    # -- user ----------------------------------------------------------------------------------

    def _user(self, text: str, index: int, day: date, time: str) -> None:
        self.turn_start = (index, 0)
        awaiting, self.awaiting_user = self.awaiting_user, None  # the user has spoken: no longer waiting
        if self.carried is not None:
            self.carried.user_replied = True
        asks: list[tuple[str, str, bool]] = []
        first_ask = 0
        context: list[str] = []
        pending: list[tuple[tuple[int, int], str, str]] = []
        for sub, sentence in enumerate(split_sentences(text), start=1):
            where = (index, sub)
            reply = re.match(
                r"^(?:(yes|yeah|yep|sure|ok|okay|please do|go ahead)|(no|nope|nah))\b[\s,!.]*", sentence, re.I
            )
            body = INTERJECTION.sub("", sentence).strip()
            if decided := self._decision(body, text, where, day, time):
                pending.append(decided)
                continue
            if finished := TASK_FINISHED.match(body):
                task = next(g for g in finished.groups() if g).strip()
                self.add(where, day, time, PRIORITY_DONE, f"User finished the {third_person(task)}")
                self.last_topic = None
                self.finished.append(task)
                continue
            if USER_DONE.search(body) or (USER_DONE_SHORT.match(body) and len(body.split()) <= 5):
                if self.last_topic:  # a completion the assistant reported is already a ✅ line
                    self.add(
                        where, day, time, PRIORITY_DONE, f"User confirmed it worked (re: {self.last_topic})"
                    )
                    self.last_topic = None
                continue
            if reply and awaiting and _is_filler(sentence[reply.end() :] or "ok"):
                verdict = "declined" if reply.group(2) else "agreed to"
                self.add(where, day, time, PRIORITY_MEDIUM, f"User {verdict}: {awaiting}")
                awaiting = None
                continue
            if _is_filler(body):
                continue
            body = re.sub(r",\s*(?:by the way|btw),\s*", ", ", body, flags=re.I)  # "X, by the way, Y"
            body = re.sub(r",?\s*\b(?:by the way|btw)\b,?", "", body, flags=re.I).strip()
            # "New phone number: X" names the attribute in its label: keep it as a statement
            body = re.sub(r"^new\s+([a-z][\w -]{1,40}?):\s+(?=\S)", r"My \1 is now ", body, flags=re.I)
            body = strip_lead_in(LABEL.sub("", body))
            ask = self._ask(body, day, leading=sub == 1)
            if ask is not None and (topic := CHOICE_TOPIC.match(body)):
                self.choice_topic = topic["k"].lower()
            if ask is None and ": " in body:  # "Now, the rental car: compare prices for …"
                ask = self._ask(body.rsplit(": ", 1)[1], day)
            if ask:
                asks.append(ask)
                first_ask = first_ask or sub
                continue
            for clause in self._clauses(body, day):
                found = self._statement(clause, day)
                if found is not None:
                    pending.append((where, *found))
        if asks:  # minor remarks next to a question are its context, not lines of their own
            context = [t.removeprefix("User said ") for _, p, t in pending
                       if t.startswith("User said ") and p != PRIORITY_HIGH]  # fmt: skip
            pending = [d for d in pending if d[2].removeprefix("User said ") not in context]
        for where, priority, line in pending:
            self.add(where, day, time, priority, line)
        if not asks:
            return
        text_ = "; ".join([asks[0][0], *(a[0].removeprefix("User asked ") for a in asks[1:])])
        if context:
            text_ = _annotate(text_, [shorten("; ".join(c.rstrip(".") for c in context), 90)])
        words = frozenset(content_words(" ".join(a[1] for a in asks)))
        if self.ask and len(self.ask.text) + len(text_) > ASK_FOLD_CHARS:
            # a long run of unanswered questions: the line so far is written, a new one begins
            # (folded without a bound, 4,000 questions made one line of 134 KB)
            self.add(self.ask.order, self.ask.day, self.ask.time, PRIORITY_MEDIUM, self.ask.text)
            self.ask = None
        if self.ask:  # a second message before any answer: fold it into the open question
            self.ask.text = f"{self.ask.text}; {text_.removeprefix('User asked ')}"
            self.ask.topic, self.ask.words = asks[-1][1], self.ask.words | words
            self.ask.is_request = self.ask.is_request and all(a[2] for a in asks)
        else:
            self.ask = _Ask((index, first_ask), day, time, text_, asks[-1][1], all(a[2] for a in asks), words)
        self.last_ask = self.ask

    def _decision(self, body: str, message: str, where: tuple[int, int], day: date,
                  time: str) -> tuple[tuple[int, int], str, str] | None:  # fmt: skip
        """A decision, as one 🔴 line that names what it is about when that is known: "User
        chose X for the hotel", with "(changing from Y)" when it replaces an earlier choice."""
        switched = bool(SWITCH_LEAD.match(body))
        plain = SWITCH_LEAD.sub("", body).strip()
        match = DECISION.match(plain)
        if match is None:
            return None
        if len(plain[match.end() :].strip(" .!,").split()) > 2:
            return None  # "15:02 it is, booked with seats in coach 12": more than the choice
        value = next(g for g in match.groups() if g).strip()
        value = re.sub(r"^(?:the|a|an)\s+(?=[A-Z0-9])", "", value)
        if not (key_terms(value) or re.search(r"[A-Z0-9]", value)):
            return None  # "let's go with that", "okay, it is": nothing named
        lowered = plain.lower()
        switched = switched or "instead" in lowered or "after all" in lowered or lowered.startswith(("switch", "change"))
        kinds = [k.removeprefix("choice for ") for k in self.state if k.startswith("choice for ")]
        said_for = re.search(r"\bfor\s+(?:the|our|my)\s+([a-z][\w-]*(?:\s+[a-z][\w-]*)?)", message)
        kind = None
        if said_for and said_for[1].lower() in kinds:
            kind = said_for[1].lower()
        elif self.choice_topic and not switched:
            kind = self.choice_topic
        elif switched:  # the earlier choice of the same kind of thing ("… Hotel" for "… Hotel")
            tail = value.split()[-1].lower()
            kind = next((k for k in reversed(kinds) if self.state[f"choice for {k}"].split()[-1].lower() == tail),
                        kinds[-1] if kinds else None)  # fmt: skip
        self.choice_topic = None
        if kind is None:  # "15:02 it is" with nothing to say what it chose among: a detail
            return (where, PRIORITY_MEDIUM if match["c"] else PRIORITY_HIGH, f"User decided on {value}")
        text = f"User chose {value} for the {kind}"
        previous = self.state.get(f"choice for {kind}")
        if previous and previous.lower() != value.lower():
            text += f" (changing from {previous})"
        self.state[f"choice for {kind}"] = value
        return (where, PRIORITY_HIGH, text)

    def _ask(self, body: str, anchor: date, *, leading: bool = False) -> tuple[str, str, bool] | None:
        """("User asked …", topic, is_request) for a question or a request, else None. A
        ``leading`` sentence (a message's first) may also be an instruction whose verb no list
        names (:data:`IMPERATIVE`); later in a message that shape is too often narration."""
        plain = body.rstrip("?!. ")
        notes = [r.note for r in self.dates(body, anchor)]
        found: tuple[str, str, bool] | None = None
        if match := HOW_DO_I.match(body):
            topic = third_person(match["x"].rstrip("?"))
            found = (f"User asked how to {topic}", topic, False)
        elif match := WONDER.match(body):
            topic = third_person(re.sub(r"^you could\s+", "the assistant could ", match["x"]))
            found = (f"User asked whether {topic}", topic, False)
        elif match := REQUEST.match(plain):
            task = third_person(next(g for g in match.groups() if g))
            task = task[0].lower() + task[1:] if task.split(" ", 1)[0].istitle() else task
            found = (f"User asked the assistant to {shorten(task, ASK_LIMIT)}", task, True)
        elif leading and (match := IMPERATIVE.match(plain)) and not body.endswith("?"):
            task = third_person(match["x"])
            verb = task.split(" ", 1)[0]
            task = task[0].lower() + task[1:] if verb[1:] == verb[1:].lower() else task  # never "NASA"
            found = (f"User asked the assistant to {shorten(task, ASK_LIMIT)}", task, True)
        elif WH.match(body):
            topic = third_person(plain)
            found = (f"User asked {shorten(_lower_first(topic), ASK_LIMIT)}", topic, False)
        elif body.endswith("?") and (len(body.split()) > 2 or AUX.match(body)):
            topic = third_person(plain)
            found = (f"User asked: {shorten(topic, ASK_LIMIT)}?", topic, False)
        if found and notes:
            found = (_annotate(found[0].rstrip("?"), notes), found[1], found[2])
        return found

    def _clauses(self, body: str, anchor: date) -> list[str]:
        """Split "X on Friday and Y next week" into one clause per date, sharing the subject."""
        if len(self.dates(body, anchor)) < 2:
            return [body]
        parts = [p.strip() for p in re.split(r",?\s+(?:and|but|then)\s+|;\s*", body) if p.strip()]
        if len(parts) < 2 or any(not self.dates(p, anchor) for p in parts):
            return [body]
        lead = re.match(
            r"^(?:I|We)(?:'ll|'m|\s+(?:will|am|are|plan to|want to|need to|am going to))?", parts[0]
        )
        if lead:
            parts = [parts[0]] + [
                p if re.match(r"^(?:I|we|my|our)\b", p, re.I) else f"{lead.group(0)} {p}" for p in parts[1:]
            ]
        return parts

    def _statement(self, body: str, anchor: date) -> tuple[str, str] | None:
        """Classify one user clause: (priority, line text), or None when it is not worth a line.

        🔴 for durable facts about the user, changes of state and dated plans (see
        :func:`_priority`); ✅ for what the user reports having done; the rest of what a user
        narrates is 🟡 when it is a measurement (two or more numbers), 🟢 when it names something
        not recorded yet, and dropped otherwise.
        """
        for pattern, repl in CONTRACTIONS:
            body = pattern.sub(repl, body)
        notes = [r.note for r in self.dates(body, anchor)]
        priority: str | None
        if done := USER_COMPLETED.match(body):
            text, priority = "User " + third_person(done["rest"]), PRIORITY_DONE
        elif plan := PLAN_LEAD.match(body):
            rest = plan["rest"].rstrip(".!")
            if VAGUE_PLAN.match(rest) and not notes and not key_terms(rest):
                return None
            verb = next(PLAN_VERB[w] for w in plan["aux"].lower().split() if w in PLAN_VERB)
            subject = "User" if plan["subj"].lower() == "i" else "User (with others)"
            text = f"{subject} {verb} {third_person(rest)}"
            priority = statement_priority(body, notes, self.known(), plan=f"{plan['aux']} {rest}")
        else:
            priority = statement_priority(body, notes, self.known())
            lead = "User stated " if priority == PRIORITY_HIGH else "User said "
            text = lead + _lower_first(third_person(body))
        text = text.rstrip(" .!")
        key = fact_key(text) if priority != PRIORITY_DONE else None
        if priority is None and key is None:
            return None
        limit = USER_LIMIT if priority in (PRIORITY_HIGH, PRIORITY_DONE) or key else REMARK_LIMIT + 40
        if len(text) > limit or self.count_tokens(text) > limit // 3:
            text = _with_missing(condense(text, limit), body, "")
        if key:
            priority = PRIORITY_HIGH  # a recognised attribute is a durable fact however it was said
            text = re.sub(r"^User said ", "User stated ", text)
            previous = key.old or self.state.get(key.key)
            if previous and previous.lower() != key.value.lower() and "changing from" not in text:
                notes.insert(0, f"changing from {previous}")
            if not is_plan_text(text):
                self.state[key.key] = key.value
        assert priority is not None
        return priority, _annotate(text, notes)

    # -- assistant -----------------------------------------------------------------------------

    def _assistant(self, text: str, index: int, day: date, time: str) -> None:
        prose, items, intro, code = blocks(text)
        done: list[str] = []
        rest: list[str] = []
        for sentence in prose:
            if (ASSIST_FILLER.match(sentence) and len(sentence.split()) <= 14) or _is_filler(sentence):
                continue
            if PLEASANTRY.search(sentence) and not key_terms(sentence):
                continue
            body = INTERJECTION.sub("", sentence).strip()
            if ASSIST_DONE.match(body):
                done.append(body)
            elif not (ASSIST_FILLER.match(body) and len(body.split()) <= 14) and not _is_filler(body):
                rest.append(body)
        question = rest.pop() if rest and rest[-1].endswith("?") else None
        known = self.known()
        for lang, lines, defined in code:
            defines = f" defining {', '.join(defined[:5])}" if defined else ""
            self.add(
                (index, 99),
                day,
                time,
                PRIORITY_MEDIUM,
                f"Assistant provided {lang or 'a'} code ({lines} lines){defines}",
            )
        listed, label = compact_list(items, LIST_LIMIT), list_label(intro)
        done_drafts: list[_Draft] = []
        for sub, sentence in enumerate(done, start=100):
            lead = DONE_LEAD.sub("", sentence)
            line = assistant_person(lead)
            if not line.startswith("Assistant"):
                line = "Assistant confirmed " + _lower_first(line)
            notes = [r.note for r in self.dates(lead, day)]
            done_drafts.append(self.add((index, sub), day, time, PRIORITY_DONE, _annotate(line, notes)))
        ask = self.ask
        answered = ask is not None and bool(rest or listed or done)
        if ask is None and self.carried is not None and (rest or listed or done):
            self.carried.answered = True  # the reply to what the previous cycle left open
        drafts = len(self.drafts)
        if ask is not None and answered:
            if done and ask.is_request:
                self.add(ask.order, ask.day, ask.time, PRIORITY_MEDIUM, ask.text)
            else:
                summary = summarise(rest, 80 if listed else ANSWER_LIMIT, ask.words, known)
                if listed:
                    summary = ". ".join(x for x in (f"{label}: {listed}" if label else listed, summary) if x)
                line = f"{ask.text}; Assistant answered: {summary.rstrip('.')}" if summary else ask.text
                self.add(
                    ask.order, ask.day, ask.time, PRIORITY_MEDIUM, _with_missing(line, " ".join(rest), known)
                )
                rest = []
            self.last_topic = None if done else shorten(ask.topic, 80)
            self.ask = None
        if done_drafts:
            extra = assistant_person(summarise(rest, 120, frozenset(), known))
            if extra:
                done_drafts[-1].text = sentence_end(
                    f"{done_drafts[-1].text.rstrip('.')}; {extra.rstrip('.')}"
                )
            self.last_topic = None
        elif (rest or listed) and not answered:
            self._unprompted(rest, listed, label, intro, index, day, time, known)
        if len(self.drafts) > drafts:  # this reply says what the turn's lookups found
            # each run is looked at once: folded now, or before this turn (``turn_start`` only
            # moves on) or a failure, which no later reply folds either (every run again per
            # reply was quadratic in a long tool loop's steps)
            for run in self.runs[self.fold_from :]:  # (failures keep their own line)
                if run.order > self.turn_start and not run.result.startswith(("error", "failed")):
                    run.folded = True
            self.fold_from = len(self.runs)
        self.awaiting_user = shorten(question, 160) if question else None

    def _unprompted(self, rest: list[str], listed: str, label: str, intro: str, index: int, day: date,
                    time: str, known: KnownView) -> None:  # fmt: skip
        """Assistant text that answers no open question: kept when it recommends, lists or adds
        names and numbers nobody mentioned yet; reactions and pleasantries are dropped."""
        source = " ".join(rest)
        recommending = any(RECOMMEND.search(s) for s in rest) or "recommend" in intro.lower()
        if listed:
            verb = "recommended" if recommending or "option" in intro.lower() else "listed"
            head = summarise(rest, 80, frozenset(), known)
            line = f"Assistant {verb} {label + ': ' if label else ''}{listed}"
            self.add((index, 0), day, time, PRIORITY_MEDIUM, f"{line} ({head.rstrip('.')})" if head else line)
            self.last_topic = shorten(label or listed, 80)
        elif recommending and any(key_terms(s) or len(s.split()) > 6 for s in rest if RECOMMEND.search(s)):
            recs = [s for s in rest if RECOMMEND.search(s)]
            line = f"Assistant recommended: {summarise(recs, ANSWER_LIMIT, frozenset(), known)}"
            self.add((index, 0), day, time, PRIORITY_MEDIUM, _with_missing(line, source, known))
            self.last_topic = shorten(recs[0], 80)
        elif novel := [s for s in rest if sum(t.lower() not in known for t in key_terms(s)) >= 2]:
            # asides and reactions: only several new names and numbers are worth a (low) line
            line = f"Assistant said: {summarise(novel, REMARK_LIMIT, frozenset(), known)}"
            self.add((index, 0), day, time, PRIORITY_LOW, _with_missing(line, source, known))
            self.last_topic = shorten(rest[0], 80)

    # -- output --------------------------------------------------------------------------------

    def flush_runs(self) -> None:
        for call, where, day, time in self.calls.values():
            self.runs.append(
                _Run(where, day, time, _tool_name(call.tool_name), defuse(compact_args(call.args, 60)),
                     "no result yet")  # fmt: skip
            )
        self.calls = {}
        by_name: dict[str, list[_Run]] = {}
        for run in self.runs:
            if run.key_values:  # codes and totals get a line of their own, whole: a reply that
                # repeats them is condensed with the day's topics later, this line is not
                line = f"Assistant ran {run.name}({shorten(run.args, 60)}) -> {', '.join(run.key_values)}"
                self.add(run.order, run.day, run.time, PRIORITY_DONE, line)
            elif not run.folded:
                by_name.setdefault(run.name, []).append(run)
        for name, runs in by_name.items():
            if len(runs) >= 3:  # many runs of one tool: one parent line, one child per distinct run
                first = runs[0]
                total = sum(r.count for r in runs)
                draft = self.add(
                    first.order,
                    first.day,
                    first.time,
                    PRIORITY_MEDIUM,
                    f"Assistant ran {name} {total} times:",
                )
                draft.children = [f"-> ({r.args}) -> {r.result}{_times(r.count)}" for r in runs]
                continue
            for run in runs:
                line = f"Assistant ran {run.name}({run.args}) -> {run.result}{_times(run.count)}"
                self.add(run.order, run.day, run.time, PRIORITY_MEDIUM, line)

    def render(self) -> str:
        self._join_speaker_days()
        seen = {normalise(line.text) for g in parse_observations(self.own) for line in g.lines}
        groups: list[DateGroup] = []
        ordered = sorted(self.drafts, key=lambda d: (d.day, d.order))
        stale = _replaced_in_batch(ordered, self.finished)
        for index, draft in enumerate(ordered):
            key = normalise(draft.text)
            if not key or key in seen or index in stale:
                continue
            seen.add(key)
            if not groups or groups[-1].day != draft.day:
                groups.append(DateGroup(day=draft.day))
            # the last guard: whatever a rule joined, no line break reaches the rendered lines
            groups[-1].lines.append(ObservationLine(one_line(draft.text), draft.priority, draft.time))
            groups[-1].lines.extend(ObservationLine(one_line(c), None, None, 1) for c in draft.children)
        return render_observations(groups)


def _replaced_in_batch(drafts: list[_Draft], finished: list[str]) -> set[int]:
    """Drafts a later draft of the same batch makes stale: a fact whose attribute is stated again
    (the older line, when it says little else), an ask about a task the user then finished."""
    stale: set[int] = set()
    latest: dict[str, int] = {}
    for index, draft in enumerate(drafts):
        text = draft.text
        if text.startswith(("User stated", "User chose")) and not is_plan_text(text):
            key = fact_key(text)
            if key is not None:
                if key.key in latest and len(drafts[latest[key.key]].text) <= 160:
                    stale.add(latest[key.key])
                latest[key.key] = index
    if not finished:
        return stale
    mentions = TaskMentions(finished)
    done: dict[int, int] = {}  # finished task -> the last "User finished the …" line about it
    for i, d in enumerate(drafts):
        if d.priority == PRIORITY_DONE and d.text.startswith("User finished the "):
            done.update(dict.fromkeys(mentions.mentioned_in(d.text), i))
    for index, draft in enumerate(drafts):
        if draft.priority != PRIORITY_DONE and draft.text.startswith("User asked") and any(
            done.get(task, -1) > index for task in mentions.mentioned_in(draft.text)
        ):
            stale.add(index)
    return stale


def _tool_name(name: str) -> str:
    """A tool's name as data (it comes from the model or the application, like its result)."""
    return shorten(defuse(name), 60)


def _times(count: int) -> str:
    return f" (ran {count} times)" if count > 1 else ""


@dataclass(frozen=True, slots=True)
class Revision:
    """A job for :func:`revise` (pickled to a child interpreter for a large record)."""

    active: str
    new: str

    def needed(self) -> bool:
        """Whether the new lines can make any older line stale (reads only ``new``)."""
        return bool(self.active.strip()) and stale_signals(self.new)


def revise(job: Revision) -> str:
    """``job.active`` without the lines ``job.new`` makes stale (see :meth:`OfflineObserver.revise`)."""
    return drop_superseded_by(job.active, job.new)


class OfflineObserver:
    """A deterministic, rules-based :class:`~obsmem.om.protocols.Observer` (no model calls).

    ``count_tokens`` decides when a long user sentence is condensed rather than kept near
    verbatim; the engine passes its real counter, the default is a length/4 estimate.
    Same input, same output, byte for byte.

    The rules are CPU work, about 6 µs per character (5 s for a megabyte). A request of at
    least ``offload_chars`` characters is worked in a thread, so the application's other
    coroutines keep running meanwhile; a smaller one (a few tens of milliseconds at most) runs
    inline, which costs no thread hop and keeps a single-threaded test run deterministic.
    ``offload_chars=None`` never uses a thread.
    """

    name = "offline"

    def __init__(
        self, *, count_tokens: Callable[[str], int] | None = None, offload_chars: int | None = OFFLOAD_CHARS
    ) -> None:
        self.count_tokens: Callable[[str], int] = count_tokens or estimate_tokens
        self.offload_chars = offload_chars

    def revise_active(self, active_observations: str, new_observations: str | None = None) -> str:
        """The active observations without the lines that later lines made stale (an older
        value of a fact stated again, an ask about a task since finished), everything else
        unchanged.

        With ``new_observations`` (a cycle's lines, about to be appended), only what they state
        is checked against the older lines (:func:`~obsmem.om.offline.reflector.drop_superseded_by`):
        nothing to read beyond them in most cycles, one cheap pass otherwise. Without it, the
        whole text is checked against itself (:func:`~obsmem.om.offline.reflector.drop_superseded`).
        Without either, stale lines go at the next reflection."""
        if new_observations is None:
            return drop_superseded(active_observations)
        return drop_superseded_by(active_observations, new_observations)

    async def revise(self, active_observations: str, new_observations: str) -> str:
        """:meth:`revise_active` with ``new_observations``, off the event loop for a large record
        (from ``offload_chars`` characters: a thread, or a child interpreter, as for
        :meth:`observe`). The engine appends ``new_observations`` to what this returns."""
        if not active_observations.strip():
            return active_observations  # nothing older to revise (the first observation of a record)
        job = Revision(active_observations, new_observations)
        chars = len(active_observations)
        if self.offload_chars is not None and chars >= self.offload_chars and job.needed():
            return await offload(revise, job, role="revise", chars=chars, count_tokens=self.count_tokens)
        return revise(job)

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        # Hooks are the caller's coroutines: they run on the loop, after the rules.
        if self.offload_chars is not None and (chars := _request_chars(request)) >= self.offload_chars:
            observations, current_task, suggested, title = await offload(
                self._observe, request, role="observe", chars=chars, count_tokens=self.count_tokens
            )
        else:
            observations, current_task, suggested, title = self._observe(request)
        extracted, failures = await _run_hooks(request, observations)
        return ObservationResult(
            observations=observations,
            current_task=current_task,
            suggested_response=suggested,
            thread_title=title,
            extracted=extracted,
            extraction_failures=failures,
        )

    def _observe(self, request: ObservationRequest) -> tuple[str, str | None, str | None, str | None]:
        """The observations, current task, suggested response and title for ``request``."""
        cycle = _Cycle(request, self.count_tokens)
        for index, message in enumerate(request.messages):
            if message.role == "system" or message.is_marker_only or message.is_feedback:
                continue  # (feedback: a framework's words to the model, not the user's)
            cycle.feed(index, message)
        open_ask = cycle.ask
        if open_ask is not None:  # asked, not answered in this batch: still worth a line
            cycle.add(open_ask.order, open_ask.day, open_ask.time, PRIORITY_MEDIUM, open_ask.text)
        cycle.flush_runs()
        observations = cycle.render()
        ask = cycle.ask
        current_task, suggested = continuation_hints(
            request,
            open_ask=OpenAsk(ask.text, ask.topic, ask.is_request) if ask is not None else None,
            last_ask=cycle.last_ask.text if cycle.last_ask is not None else None,
            awaiting_user=cycle.awaiting_user,
            carried=cycle.carried,
        )
        title = topic_title(cycle.user_texts) if request.want_title and not request.thread_title else None
        return observations, _one_line(current_task), _one_line(suggested), _one_line(title)


def _one_line(hint: str | None) -> str | None:
    return one_line(hint) if hint is not None else None


def _request_chars(request: ObservationRequest) -> int:
    """About how many characters the rules will read in ``request`` (what their time follows):
    the messages, and the previous observations (parsed for the dates and facts they hold)."""
    total = len(request.previous_observations or "")
    for message in request.messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                total += len(str(part.args))
            elif isinstance(part, ToolResultPart):
                total += len(str(part.result))
            else:
                total += len(getattr(part, "text", ""))
    return total


async def _run_hooks(request: ObservationRequest, observations: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Run hook-mode extractors on this cycle's observations.

    Inline extractors need a model to write ``<slug>`` sections, so the offline observer records
    no value for them (their previous value stays where the engine keeps it). A hook returning
    None means "no new value" and is not stored.
    """
    extracted: dict[str, Any] = {}
    failures: dict[str, str] = {}
    for extractor in request.extractors:
        if extractor.mode != "hook" or extractor.on_extracted is None:
            continue
        slug = extractor.slug
        try:
            value = await extractor.on_extracted(
                {"previous": request.extracted.get(slug), "current": observations}
            )
        except Exception as exc:  # a user hook may raise anything; it must not fail the cycle
            failures[slug] = str(exc) or type(exc).__name__
            continue
        if value is not None:
            extracted[slug] = value
    return extracted, failures

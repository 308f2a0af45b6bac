"""The offline observer: deterministic rules that turn messages into observation lines.

See :mod:`obsmem.om.offline` for what it keeps and loses compared with an LLM observer. The
shape of the work: messages are read in order, and each role has its own rules. User text is
split into sentences, each classified (small talk, question/request, completion, change of
state, plan, stated fact, other); assistant text is matched to the open user question, or kept
when it recommends, lists, decides or confirms; tool calls are paired with their results. Each
kept item becomes a draft line anchored at its message; drafts are then sorted, de-duplicated
against the previous observations, and rendered with :mod:`obsmem.om.format`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, tzinfo
from typing import Any

from obsmem.om.format import (
    PRIORITY_DONE,
    PRIORITY_HIGH,
    PRIORITY_LOW,
    PRIORITY_MEDIUM,
    DateGroup,
    ObservationLine,
    parse_observations,
    render_observations,
)
from obsmem.om.offline_rules import (
    assistant_person,
    clean,
    compact_args,
    compact_result,
    condense,
    estimate_tokens,
    fact_key,
    is_plan_text,
    key_terms,
    names_and_numbers,
    normalise,
    resolve_dates,
    sentence_end,
    shorten,
    split_sentences,
    strip_markdown,
    third_person,
)
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.types import FilePart, Message, ToolCallPart, ToolResultPart

__all__ = ["OfflineObserver"]

ANSWER_LIMIT = 200  # a condensed answer
LIST_LIMIT = 240  # the items of a listed answer, each reduced to name + distinguishing attribute
ASK_LIMIT = 140  # the question or request itself
RESULT_LIMIT = 120  # a tool run's outcome
REMARK_LIMIT = 80  # an assistant aside that answered nothing
USER_LIMIT = 220  # a user sentence kept near verbatim

_FILLER_WORDS = frozenset(
    "hi hello hey yo hiya good morning afternoon evening night bye goodbye see you later cheers "
    "thanks thank thx ty ok okay k kk cool nice great awesome perfect sure yes yeah yep yup no nope "
    "nah lol haha hahaha lmao wow oh ah hmm got it sounds makes sense i alright all right fine np "
    "problem you're welcome how are is going things what's up i'm not bad me too same true exactly "
    "indeed so much a lot very again there and doing well today love that this the buddy please "
    "amazing brilliant lovely wonderful excellent appreciate it much :) :( xd omg how's it's what's "
    "anyway you're your day will do doing wbu hbu".split()
)  # fmt: skip
_INTERJECTION = re.compile(
    r"^(?:(?:(?:oh|well|so|btw|by the way|also|actually|anyway|anyways|yeah|yes|haha|ha|hmm|ok|okay|"
    r"and|but|plus|fyi|hey|hi|hello|ah|morning|good morning|good evening)\b[,!.]?|"
    r"(?:thanks|thank you|great|cool|perfect|nice|right|alright|sure|wait|oops)[,!.]+)\s+)+",
    re.I,
)
_USER_DONE = re.compile(
    r"\b(?:that|it|this)\s+(?:worked|works now|did the trick|fixed it|solved it)\b|"
    r"\b(?:all set|problem solved|it's working now|works now)\b",
    re.I,
)
_USER_DONE_SHORT = re.compile(
    r"^(?:ok(?:ay)?,?\s*|great,?\s*)?(?:all\s+)?(?:done|fixed|sent|booked|finished|completed)\b[^?]*$",
    re.I,
)
_USER_COMPLETED = re.compile(
    r"^(?:I|We)(?:'ve| have)?\s+(?:just\s+|finally\s+|already\s+)?(?P<rest>(?:booked|sent|bought|"
    r"purchased|ordered|finished|completed|submitted|paid|signed|scheduled|cancell?ed|canceled|"
    r"renewed|fixed|installed|filed|registered|reserved|applied|mailed|returned|uploaded|deployed|"
    r"published)\b.*)$",
    re.I,
)
_REQUEST = re.compile(
    r"^(?:(?:please|pls|kindly)\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?(?P<a>.+)$|"
    r"^(?:please|pls|kindly)[,!]?\s+(?P<b>.+)$|"
    r"^I(?:\s+need|\s+want|\s+would like|'d like)\s+you\s+to\s+(?P<c>.+)$|"
    r"^(?P<d>(?:help me|tell me|show me|give me|remind me|let me know|find|book|write|explain|list|"
    r"recommend|suggest|send|create|make|check|search|look up|translate|summari[sz]e|draft|plan|"
    r"compare|calculate|convert|set up|schedule|order|reserve|cancel|add|update|fix|generate|"
    r"describe|outline|estimate|run|open|read|show|get|move|rename|delete|remove|refactor|"
    r"implement|test|deploy|commit|push|merge|review|count|sort|format|call|text|email|message|"
    r"note|save|track|change|reply|answer|buy|pick|choose|put|mark|set|turn|go ahead|proceed|"
    r"look at|look into|dig into|walk me through|break down|rewrite|shorten|expand|edit|"
    r"polish|proofread|analy[sz]e|debug|investigate|ping|notify|invite)\b(?!:)"
    r"(?!\s+(?:is|are|was|were|went|has|had|looks|seems|will|would|got|did|does)\b).+)$",
    re.I,
)
_HOW_DO_I = re.compile(r"^how\s+(?:do|can|should|would|could)\s+(?:I|we)\s+(?P<x>.+?)\??$", re.I)
_WH = re.compile(r"^(?:what|what's|which|where|where's|when|who|who's|whom|whose|why|how|how's)\b", re.I)
_AUX = re.compile(
    r"^(?:is|are|am|was|were|do|does|did|can|could|should|would|will|shall|may|might|has|have|"
    r"isn't|aren't|don't|doesn't|didn't|can't|won't)\b",
    re.I,
)
_WONDER = re.compile(
    r"^I(?:'m| am| was)?\s+(?:wonder(?:ing)?|want to know|would like to know|'d like to know)\s+"
    r"(?:if|whether)\s+(?P<x>.+?)\??$",
    re.I,
)
_CONTRACTIONS = tuple(
    (re.compile(p, re.I), r)
    for p, r in (
        (r"\bI'll\b", "I will"), (r"\bI'm\b", "I am"), (r"\bI'd like\b", "I would like"),
        (r"\bwe'll\b", "we will"), (r"\bwe're\b", "we are"), (r"\bwe'd like\b", "we would like"),
    )
)  # fmt: skip
_PLAN_LEAD = re.compile(
    r"^(?P<subj>I|We)\s+(?P<aux>will|am going to|are going to|plan to|am planning to|are planning to|"
    r"intend to|want to|would like to|need to|have to|must|hope to|am hoping to|are hoping to|"
    r"am looking forward to|are looking forward to)\s+(?P<rest>.+)$",
    re.I,
)
_PLAN_VERB = {
    "will": "plans to", "going": "plans to", "plan": "plans to", "planning": "plans to",
    "intend": "plans to", "want": "wants to", "would": "wants to", "need": "needs to",
    "have": "needs to", "must": "needs to", "hope": "hopes to", "hoping": "hopes to",
    "looking": "is looking forward to",
}  # fmt: skip
_VAGUE_PLAN = re.compile(
    r"^(?:think about it|let you know|check|see|try|get back to you|look into it|do that|"
    r"consider it|keep that in mind|keep you posted|figure it out)\b",
    re.I,
)
_CHANGE = re.compile(
    r"\b(?:moved|moving|relocated|relocating|switched|switching|changed|changing|no longer|"
    r"anymore|now|started|starting|quit|quitting|instead of|used to)\b|\bfrom\s+\S+(?:\s+\S+)?\s+to\b",
    re.I,
)
_FIRST_PERSON_FACT = re.compile(
    r"\b(?:I|we)\s+(?:am|are|live|lived|work|worked|like|love|hate|dislike|prefer|enjoy|have|own|"
    r"speak|use|drive|eat|don't|do not|can't|cannot|never|always|usually|often|was|were|grew up|"
    r"studied|study|graduated|got|just|moved|switched|changed|started|quit|play|read|watch|wear|"
    r"take|run|keep|went|visited|bought|met|had|traveled|travelled|saw|teach|volunteer|belong|"
    r"care|collect|cook|build|manage|lead|went|finally|recently|also)\b|"
    r"\b(?:my|our)\s+(?:[\w'-]+\s+){0,3}(?:is|are|was|were|has|have|had|lives|works|will|just|got|"
    r"starts|started|turned|turns|loves|likes|hates|needs|wants|moved|broke|died|passed)\b",
    re.I,
)
_STRONG_AM = re.compile(
    r"\bI am\s+(?:a|an|the|from|in|at|based|allergic|vegan|vegetarian|married|single|divorced|"
    r"engaged|pregnant|retired|\d|learning|working|studying|living|training|moving|starting|"
    r"switching|lactose|gluten|diabetic|left|right|colou?r|blind|deaf|afraid|scared|terrified)\b",
    re.I,
)
_LABEL = re.compile(r"^(?:[\w'-]+\s){0,3}[\w'-]+:\s+(?=\S)")  # "Update: …", "Question for later: …"
_FIRST_PERSON = re.compile(r"\b(?:I|my|we|our|me|us)\b", re.I)
_DONE_LEAD = re.compile(
    r"^(?:done|all set|great news|good news|perfect|success|great|alright)\s*[!.,:—-]+\s*", re.I
)
_OPINION = re.compile(r"^I\s+(?:think|guess|feel|mean|know|agree|understand|see|believe|suppose)\b", re.I)
_ASSIST_FILLER = re.compile(
    r"^(?:sure|of course|certainly|absolutely|(?:that's )?(?:a )?(?:really )?(?:great|good) question|"
    r"happy to help|done|"
    r"I'd be (?:happy|glad) to(?: help)?|glad to help|no problem|you're welcome|here's what|"
    r"let me know|(?:I )?hope (?:this|that) helps|feel free|is there anything else|anything else|"
    r"good luck|enjoy|have a (?:great|nice|good|wonderful)|thanks for|thank you for|great|awesome|"
    r"perfect|sounds good|got it|okay|ok|hello|hi|hey|how can I help|what can I do for you|"
    r"I'm doing (?:well|great|good)|I'm (?:glad|happy) to hear)\b",
    re.I,
)
_PLEASANTRY = re.compile(  # a sentence containing one of these is padding, whatever its length
    r"\b(?:great question|good question|glad you asked|happy to help|hope (?:this|that) helps|"
    r"don't hesitate|let me know if|feel free to|it was my pleasure|any time you have|"
    r"have a (?:great|nice|good|wonderful|lovely) (?:day|time|trip))\b",
    re.I,
)
_ASSIST_DONE = re.compile(
    r"^(?:(?:done|all set|great news|good news|perfect|success|great|alright)\s*[!.,:—-]+\s*)?"
    r"(?:I(?:'ve| have)?\s+(?:just\s+|now\s+|successfully\s+|also\s+)?(?:booked|sent|scheduled|"
    r"created|ordered|cancell?ed|canceled|updated|added|saved|set up|reserved|submitted|paid|"
    r"renewed|moved|deleted|removed|fixed|installed|deployed|published|shared|emailed|invited|"
    r"registered|confirmed|completed|finished|changed|written|drafted|rescheduled)\b|"
    r"(?:your|the)\s+[\w\s'-]{1,60}?\s+(?:is|has been|was|are|have been)\s+(?:now\s+|successfully\s+)?"
    r"(?:booked|sent|scheduled|created|confirmed|reserved|cancell?ed|canceled|updated|saved|"
    r"submitted|paid|renewed|deployed|completed|fixed|done)\b)",
    re.I,
)
_RECOMMEND = re.compile(
    r"\b(?:I(?:'d| would)? (?:recommend|suggest)|you (?:should|could try|might want to|may want to)|"
    r"consider\s+\w+ing|my (?:recommendation|suggestion|advice)|the best (?:option|choice|bet)|I'd go with|"
    r"go with|let's go with|let's use|we'll use|we'll go with|I'll use|decided to|the plan is)\b",
    re.I,
)
_LOWER_OK = frozenset("a an the it he she his her this that these those there both our their its".split())
_CODE_DEF = re.compile(
    r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|function|fn|func|interface|struct)\s+(\w+)"
)
_STOPWORDS = frozenset(
    "the and for with that this what which when where who why how you your yours they them their "
    "there then than have has had are was were will would could should can may might must shall "
    "from into onto about over under after before again also just only very really much many more "
    "most some any all each every other another such own same been being does did doing done "
    "want need like love hate know think get got make made going goes take took give gave tell told "
    "help please thanks thank hello okay sure yes not but its it's i'm i've i'll i'd let let's me my "
    "mine our ours we us him his her hers she he one two three next last week month year today "
    "tomorrow yesterday friday monday tuesday wednesday thursday saturday sunday weekend time day "
    "days good great nice new old way lot bit thing things something anything everything stuff "
    "maybe still even well back now here see look find book plan plans ask asked say said".split()
)  # fmt: skip


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


def _lower_first(text: str) -> str:
    """Lowercase a leading function word ("The flat is …" → "the flat is …"), never a name."""
    first = text.split(" ", 1)[0]
    if first.lower() in _STOPWORDS or first.lower() in _FILLER_WORDS or first.lower() in _LOWER_OK:
        return first.lower() + text[len(first) :]
    return text


def _is_filler(sentence: str) -> bool:
    words = re.findall(r"[\w':()]+", sentence.lower())
    return not words or (len(words) <= 8 and all(w in _FILLER_WORDS for w in words))


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z][a-z'-]{2,}", text.lower()) if w not in _STOPWORDS]


def _with_missing(text: str, source: str, known: str) -> str:
    """Append the names and quantities of ``source`` that ``text`` lost and that are recorded
    nowhere else, so every one survives in some line."""
    lowered = text.lower()
    missing = [t for t in key_terms(source) if t.lower() not in lowered and t.lower() not in known]
    if not missing:
        return text
    return f"{text.rstrip('.')} [also: {shorten(', '.join(missing[:6]), 80)}]"


def _annotate(text: str, notes: list[str]) -> str:
    """Append "(meaning …)"-style notes, each once; dates always go at the end of a line."""
    text = text.rstrip(" .!")
    return " ".join([text, *(f"({n})" for n in dict.fromkeys(notes))])


class _Cycle:
    """The state of one observe() call: drafts, the open question, tool calls in flight."""

    def __init__(self, request: ObservationRequest, count_tokens: Callable[[str], int]) -> None:
        self.request = request
        self.count_tokens = count_tokens
        self.tz: tzinfo = request.timezone or UTC
        self.drafts: list[_Draft] = []
        self.ask: _Ask | None = None  # the user's open question/request
        self.last_ask: _Ask | None = None
        self.awaiting_user: str | None = None  # the assistant's question to the user
        self.last_topic: str | None = None  # what a "thanks, that worked" refers to
        self.calls: dict[str, tuple[ToolCallPart, tuple[int, int], date, str]] = {}
        self.runs: list[_Run] = []
        self.state: dict[str, str] = {}  # fact key -> latest value, for "(changing from …)"
        self.user_texts: list[str] = []
        self._known: list[str] = [request.previous_observations.lower()]
        for group in parse_observations(request.previous_observations):
            for line in group.lines:
                key = fact_key(line.text)
                if key and line.text.startswith("User") and not is_plan_text(line.text):
                    self.state[key.key] = key.value

    def known(self) -> str:
        """Everything already recorded or said by the user, lowercased (for novelty checks)."""
        return "\n".join(self._known)

    def add(self, order: tuple[int, int], day: date, time: str, priority: str, text: str) -> _Draft:
        draft = _Draft(order, day, time, priority, sentence_end(text))
        self.drafts.append(draft)
        self._known.append(draft.text.lower())
        return draft

    # -- messages ------------------------------------------------------------------------------

    def feed(self, index: int, message: Message) -> None:
        local = message.created_at.astimezone(self.tz)
        day, time = local.date(), local.strftime("%H:%M")
        text = message.text.strip()
        caption = ""
        files = [p for p in message.parts if isinstance(p, FilePart)]
        if files and text and "?" not in text and len(text.split()) <= 25 and not _REQUEST.match(text):
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
                self.add(where, day, time, PRIORITY_MEDIUM, f"{who} shared {kind} {name}{caption}")
                caption = ""
            elif isinstance(part, ToolCallPart):
                self.calls[part.tool_call_id] = (part, where, day, time)
            elif isinstance(part, ToolResultPart):
                self._tool_result(part, where, day, time)
        if not text:
            return
        if message.role == "user":
            self.user_texts.append(text)
            self._known.append(text.lower())
            self._user(text, index, day, time)
        elif message.role == "assistant":
            self._assistant(text, index, day, time)

    def _tool_result(self, part: ToolResultPart, where: tuple[int, int], day: date, time: str) -> None:
        call = self.calls.pop(part.tool_call_id, None)
        args = compact_args(call[0].args, 60) if call else ""
        if call:
            where, day, time = call[1], call[2], call[3]
        result = compact_result(part.result, part.is_error, RESULT_LIMIT)
        self._known.append(f"{args} {result}".lower())
        for run in self.runs:
            if (run.name, run.args, run.result) == (part.tool_name, args, result):
                run.count += 1
                return
        self.runs.append(_Run(where, day, time, part.tool_name, args, result))

    # -- user ----------------------------------------------------------------------------------

    def _user(self, text: str, index: int, day: date, time: str) -> None:
        awaiting, self.awaiting_user = self.awaiting_user, None  # the user has spoken: no longer waiting
        asks: list[tuple[str, str, bool]] = []
        first_ask = 0
        context: list[str] = []
        pending: list[tuple[tuple[int, int], str, str]] = []
        for sub, sentence in enumerate(split_sentences(text), start=1):
            where = (index, sub)
            reply = re.match(
                r"^(?:(yes|yeah|yep|sure|ok|okay|please do|go ahead)|(no|nope|nah))\b[\s,!.]*", sentence, re.I
            )
            body = _INTERJECTION.sub("", sentence).strip()
            if _USER_DONE.search(body) or (_USER_DONE_SHORT.match(body) and len(body.split()) <= 5):
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
            body = re.sub(r",?\s*\b(?:by the way|btw)\b,?", "", body, flags=re.I).strip()
            body = _LABEL.sub("", body)
            ask = self._ask(body, day)
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
            text_ = _annotate(text_, [shorten("; ".join(c.rstrip(".") for c in context), 120)])
        words = frozenset(_content_words(" ".join(a[1] for a in asks)))
        if self.ask:  # a second message before any answer: fold it into the open question
            self.ask.text = f"{self.ask.text}; {text_.removeprefix('User asked ')}"
            self.ask.topic, self.ask.words = asks[-1][1], self.ask.words | words
            self.ask.is_request = self.ask.is_request and all(a[2] for a in asks)
        else:
            self.ask = _Ask((index, first_ask), day, time, text_, asks[-1][1], all(a[2] for a in asks), words)
        self.last_ask = self.ask

    def _ask(self, body: str, anchor: date) -> tuple[str, str, bool] | None:
        """("User asked …", topic, is_request) for a question or a request, else None."""
        plain = body.rstrip("?!. ")
        notes = [r.note for r in resolve_dates(body, anchor)]
        found: tuple[str, str, bool] | None = None
        if match := _HOW_DO_I.match(body):
            topic = third_person(match["x"].rstrip("?"))
            found = (f"User asked how to {topic}", topic, False)
        elif match := _WONDER.match(body):
            topic = third_person(re.sub(r"^you could\s+", "the assistant could ", match["x"]))
            found = (f"User asked whether {topic}", topic, False)
        elif match := _REQUEST.match(plain):
            task = third_person(next(g for g in match.groups() if g))
            task = task[0].lower() + task[1:] if task.split(" ", 1)[0].istitle() else task
            found = (f"User asked the assistant to {shorten(task, ASK_LIMIT)}", task, True)
        elif _WH.match(body):
            topic = third_person(plain)
            found = (f"User asked {shorten(_lower_first(topic), ASK_LIMIT)}", topic, False)
        elif body.endswith("?") and (len(body.split()) > 2 or _AUX.match(body)):
            topic = third_person(plain)
            found = (f"User asked: {shorten(topic, ASK_LIMIT)}?", topic, False)
        if found and notes:
            found = (_annotate(found[0].rstrip("?"), notes), found[1], found[2])
        return found

    def _clauses(self, body: str, anchor: date) -> list[str]:
        """Split "X on Friday and Y next week" into one clause per date, sharing the subject."""
        if len(resolve_dates(body, anchor)) < 2:
            return [body]
        parts = [p.strip() for p in re.split(r",?\s+(?:and|but|then)\s+|;\s*", body) if p.strip()]
        if len(parts) < 2 or any(not resolve_dates(p, anchor) for p in parts):
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
        """Classify one user clause: (priority, line text), or None when it is not worth a line."""
        for pattern, repl in _CONTRACTIONS:
            body = pattern.sub(repl, body)
        notes = [r.note for r in resolve_dates(body, anchor)]
        priority = PRIORITY_HIGH
        if done := _USER_COMPLETED.match(body):
            text, priority = "User " + third_person(done["rest"]), PRIORITY_DONE
        elif plan := _PLAN_LEAD.match(body):
            rest = plan["rest"].rstrip(".!")
            if _VAGUE_PLAN.match(rest) and not notes and not key_terms(rest):
                return None
            verb = next(_PLAN_VERB[w] for w in plan["aux"].lower().split() if w in _PLAN_VERB)
            subject = "User" if plan["subj"].lower() == "i" else "User (with others)"
            text = f"{subject} {verb} {third_person(rest)}"
        elif _OPINION.match(body):
            text = "User said " + third_person(body)
            priority = PRIORITY_MEDIUM if key_terms(body) or notes else PRIORITY_LOW
        elif _FIRST_PERSON_FACT.search(body) or (_CHANGE.search(body) and _FIRST_PERSON.search(body)):
            text = "User stated " + third_person(body)
            if re.match(r"^I am\b", body) and not _STRONG_AM.search(body) and not notes:
                priority = PRIORITY_MEDIUM
        elif notes or key_terms(body):  # user-given names, dates, amounts: authoritative
            text = "User stated " + _lower_first(third_person(body))
        elif names_and_numbers(body):
            text, priority = "User said " + _lower_first(third_person(body)), PRIORITY_MEDIUM
        elif len(_content_words(body)) >= 3:
            text, priority = "User said " + _lower_first(third_person(body)), PRIORITY_LOW
        else:
            return None
        lead, _, rest_ = text.partition(" ")
        verb, _, said = rest_.partition(" ")
        if verb in ("stated", "said"):
            text = f"{lead} {verb} {_lower_first(said)}"
        text = text.rstrip(" .!")
        if len(text) > USER_LIMIT or self.count_tokens(text) > USER_LIMIT // 3:
            text = _with_missing(condense(text, USER_LIMIT), body, "")
        key = fact_key(text) if priority != PRIORITY_DONE else None
        if key:
            previous = key.old or self.state.get(key.key)
            if previous and previous.lower() != key.value.lower() and "changing from" not in text:
                notes.insert(0, f"changing from {previous}")
                priority = PRIORITY_HIGH
            if not is_plan_text(text):
                self.state[key.key] = key.value
        return priority, _annotate(text, notes)

    # -- assistant -----------------------------------------------------------------------------

    def _assistant(self, text: str, index: int, day: date, time: str) -> None:
        prose, items, intro, code = _blocks(text)
        done: list[str] = []
        rest: list[str] = []
        for sentence in prose:
            if (_ASSIST_FILLER.match(sentence) and len(sentence.split()) <= 14) or _is_filler(sentence):
                continue
            if _PLEASANTRY.search(sentence) and not key_terms(sentence):
                continue
            body = _INTERJECTION.sub("", sentence).strip()
            if _ASSIST_DONE.match(body):
                done.append(body)
            elif not (_ASSIST_FILLER.match(body) and len(body.split()) <= 14) and not _is_filler(body):
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
        listed, label = _compact_list(items), _list_label(intro)
        done_drafts: list[_Draft] = []
        for sub, sentence in enumerate(done, start=100):
            lead = _DONE_LEAD.sub("", sentence)
            line = assistant_person(lead)
            if not line.startswith("Assistant"):
                line = "Assistant confirmed " + _lower_first(line)
            notes = [r.note for r in resolve_dates(lead, day)]
            done_drafts.append(self.add((index, sub), day, time, PRIORITY_DONE, _annotate(line, notes)))
        ask = self.ask
        answered = ask is not None and bool(rest or listed or done)
        if ask is not None and answered:
            if done and ask.is_request:
                self.add(ask.order, ask.day, ask.time, PRIORITY_MEDIUM, ask.text)
            else:
                summary = _summarise(rest, 80 if listed else ANSWER_LIMIT, ask.words, known)
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
            extra = assistant_person(_summarise(rest, 120, frozenset(), known))
            if extra:
                done_drafts[-1].text = sentence_end(
                    f"{done_drafts[-1].text.rstrip('.')}; {extra.rstrip('.')}"
                )
            self.last_topic = None
        elif (rest or listed) and not answered:
            self._unprompted(rest, listed, label, intro, index, day, time, known)
        self.awaiting_user = shorten(question, 160) if question else None

    def _unprompted(self, rest: list[str], listed: str, label: str, intro: str, index: int, day: date,
                    time: str, known: str) -> None:  # fmt: skip
        """Assistant text that answers no open question: kept when it recommends, lists or adds
        names and numbers nobody mentioned yet; reactions and pleasantries are dropped."""
        source = " ".join(rest)
        recommending = any(_RECOMMEND.search(s) for s in rest) or "recommend" in intro.lower()
        if listed:
            verb = "recommended" if recommending or "option" in intro.lower() else "listed"
            head = _summarise(rest, 80, frozenset(), known)
            line = f"Assistant {verb} {label + ': ' if label else ''}{listed}"
            self.add((index, 0), day, time, PRIORITY_MEDIUM, f"{line} ({head.rstrip('.')})" if head else line)
            self.last_topic = shorten(label or listed, 80)
        elif recommending:
            recs = [s for s in rest if _RECOMMEND.search(s)]
            line = f"Assistant recommended: {_summarise(recs, ANSWER_LIMIT, frozenset(), known)}"
            self.add((index, 0), day, time, PRIORITY_MEDIUM, _with_missing(line, source, known))
            self.last_topic = shorten(recs[0], 80)
        elif novel := [s for s in rest if any(t.lower() not in known for t in key_terms(s))]:
            # asides and reactions: only their new names and numbers are worth a (low) line
            line = f"Assistant said: {_summarise(novel, REMARK_LIMIT, frozenset(), known)}"
            self.add((index, 0), day, time, PRIORITY_LOW, _with_missing(line, source, known))
            self.last_topic = shorten(rest[0], 80)

    # -- output --------------------------------------------------------------------------------

    def flush_runs(self) -> None:
        for call, where, day, time in self.calls.values():
            self.runs.append(
                _Run(where, day, time, call.tool_name, compact_args(call.args, 60), "no result yet")
            )
        self.calls = {}
        by_name: dict[str, list[_Run]] = {}
        for run in self.runs:
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
        seen = {normalise(line.text) for g in parse_observations(self.request.previous_observations)
                for line in g.lines}  # fmt: skip
        groups: list[DateGroup] = []
        for draft in sorted(self.drafts, key=lambda d: (d.day, d.order)):
            key = normalise(draft.text)
            if not key or key in seen:
                continue
            seen.add(key)
            if not groups or groups[-1].day != draft.day:
                groups.append(DateGroup(day=draft.day))
            groups[-1].lines.append(ObservationLine(draft.text, draft.priority, draft.time))
            groups[-1].lines.extend(ObservationLine(c, None, None, 1) for c in draft.children)
        return render_observations(groups)


def _times(count: int) -> str:
    return f" (ran {count} times)" if count > 1 else ""


def _blocks(text: str) -> tuple[list[str], list[str], str, list[tuple[str, int, list[str]]]]:
    """Split assistant text into prose sentences, list items, the list's intro and code blocks."""
    prose: list[str] = []
    items: list[str] = []
    intro = ""
    code: list[tuple[str, int, list[str]]] = []
    fence: list[str] | None = None
    lang = ""
    for raw in clean(text).splitlines():
        if raw.strip().startswith("```"):
            if fence is None:
                fence, lang = [], raw.strip()[3:].strip()
            else:
                names = [m.group(1) for m in map(_CODE_DEF.match, fence) if m]
                code.append((lang, len(fence), names))
                fence = None
            continue
        if fence is not None:
            fence.append(raw)
        elif re.match(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+", raw):
            items.append(raw)
        elif raw.strip():
            for sentence in split_sentences(strip_markdown(raw)):
                if sentence.endswith(":") and not items:
                    intro = sentence
                else:
                    prose.append(sentence)
    if fence:
        code.append((lang, len(fence), [m.group(1) for m in map(_CODE_DEF.match, fence) if m]))
    return prose, items, intro, code


def _compact_item(item: str) -> str:
    """ "**Nopa** – Californian, $$$, great burger" → "Nopa (Californian, $$$)"."""
    item = strip_markdown(re.sub(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+", "", item)).strip()
    parts = re.split(r"\s*:\s+|\s+[-–—]\s+|\s*\(\s*", item, maxsplit=1)
    head = shorten(parts[0].rstrip(" .)"), 40)
    if len(parts) == 1:
        return shorten(item.rstrip("."), 45)
    rest = parts[1].rstrip(" .)")
    attrs = [n for n in names_and_numbers(rest) if n.lower() not in head.lower()][:3]
    attr = ", ".join(attrs) if attrs else shorten(re.split(r"[,;.]", rest, maxsplit=1)[0], 30)
    return f"{head} ({attr})" if attr else head


def _compact_list(items: list[str]) -> str:
    return shorten("; ".join(_compact_item(i) for i in items if i.strip()), LIST_LIMIT)


def _list_label(intro: str) -> str:
    label = re.sub(r"^(?:sure|of course|certainly)[!,.]?\s+", "", intro.rstrip(":"), flags=re.I)
    label = re.sub(r"^(?:here(?:'s| is| are)|these are|there are)\s+", "", label, flags=re.I)
    label = re.sub(r"^(?:some|a few|the following)\s+", "", label, flags=re.I)
    return shorten(label, 60) if label and not _ASSIST_FILLER.match(label) else ""


def _summarise(sentences: list[str], limit: int, query: frozenset[str], known: str = "") -> str:
    """The key sentences, in their original order, within ``limit`` characters.

    A sentence scores for names and numbers (the things an LLM would keep; new ones count
    double), for words shared with the user's question, and for being first (answers usually
    lead with the answer). Beyond the best one, sentences that score nothing are padding.
    """
    if not sentences:
        return ""

    def points(index: int) -> int:
        sentence = sentences[index]
        terms = names_and_numbers(sentence)
        score = 2 * len(terms) + 2 * sum(t.lower() not in known for t in terms)
        score += 2 * len(query & set(_content_words(sentence)))
        score += 4 if index == 0 else 0
        return score + (2 if _RECOMMEND.search(sentence) else 0)

    ranked = sorted(range(len(sentences)), key=lambda i: (-points(i), i))
    chosen: list[int] = []
    total = 0
    for index in ranked:
        piece = condense(sentences[index], limit)
        if chosen and (total + len(piece) + 1 > limit or points(index) <= 0):
            continue
        chosen.append(index)
        total += len(piece) + 1
    return " ".join(condense(sentences[i], limit) for i in sorted(chosen))


def _title(texts: list[str]) -> str | None:
    """2–5 words naming the dominant topic: the most frequent content words and names."""
    counts: dict[str, int] = {}
    shown: dict[str, str] = {}
    first: dict[str, int] = {}
    position = 0
    for text in texts:
        names = {n.lower() for n in names_and_numbers(text) if not n[0].isdigit()}
        for word in re.findall(r"[A-Za-z][A-Za-z'-]{2,}", text):
            low = word.lower()
            if low in _STOPWORDS or low in _FILLER_WORDS:
                continue
            stem = low[:-1] if len(low) > 4 and low.endswith("s") and not low.endswith("ss") else low
            counts[stem] = counts.get(stem, 0) + (2 if low in names else 1)
            shown.setdefault(stem, word if word[0].isupper() and low in names else low)
            first.setdefault(stem, position)
            position += 1
    if not counts:
        return None
    top = sorted(counts, key=lambda w: (-counts[w], first[w]))[:3]
    words = [shown[w] for w in sorted(top, key=lambda w: first[w])]
    if len(words) == 1:
        words.append("discussion")
    title = " ".join(w[0].upper() + w[1:] for w in words)
    return title if len(title) >= 3 else None


class OfflineObserver:
    """A deterministic, rules-based :class:`~obsmem.om.protocols.Observer` (no model calls).

    ``count_tokens`` decides when a long user sentence is condensed rather than kept near
    verbatim; the engine passes its real counter, the default is a length/4 estimate.
    Same input, same output, byte for byte.
    """

    name = "offline"

    def __init__(self, *, count_tokens: Callable[[str], int] | None = None) -> None:
        self.count_tokens: Callable[[str], int] = count_tokens or estimate_tokens

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        cycle = _Cycle(request, self.count_tokens)
        for index, message in enumerate(request.messages):
            if message.role == "system" or message.is_marker_only:
                continue
            cycle.feed(index, message)
        open_ask = cycle.ask
        if open_ask is not None:  # asked, not answered in this batch: still worth a line
            cycle.add(open_ask.order, open_ask.day, open_ask.time, PRIORITY_MEDIUM, open_ask.text)
        cycle.flush_runs()
        observations = cycle.render()
        current_task, suggested = _hints(request, cycle)
        title = _title(cycle.user_texts) if request.want_title and not request.thread_title else None
        extracted, failures = await _run_hooks(request, observations)
        return ObservationResult(
            observations=observations,
            current_task=current_task,
            suggested_response=suggested,
            thread_title=title,
            extracted=extracted,
            extraction_failures=failures,
        )


def _hints(request: ObservationRequest, cycle: _Cycle) -> tuple[str | None, str | None]:
    """current-task and suggested-response, from the last open question or request."""
    if not request.continuation_hints:
        return None, None
    if cycle.awaiting_user:
        asked = f"{cycle.ask.text}; " if cycle.ask is not None else ""
        return (f"{asked}Assistant asked the user: {cycle.awaiting_user} Waiting for the user's reply",
                "Wait for the user's reply to the assistant's question before continuing")  # fmt: skip
    if cycle.ask is not None:
        ask = cycle.ask
        if ask.is_request:
            return (f"{ask.text}; waiting for the assistant to do it",
                    f"Continue with the user's request: {shorten(ask.topic, 100)}")  # fmt: skip
        return (f"{ask.text}; waiting for the assistant's answer",
                f"Answer the user's question about {shorten(ask.topic, 100)}")  # fmt: skip
    if cycle.last_ask is not None:
        return f"No open request; last topic: {cycle.last_ask.text} (answered)", None
    return request.current_task, None


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

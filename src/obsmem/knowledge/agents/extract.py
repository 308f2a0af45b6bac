"""Offline (rules-based) capture: durable facts out of committed observation text.

The offline observer writes what the user said as lines like::

    Date: Mar 4, 2025
    * 🔴 (08:13) User stated their number is now +49 176 5550 3381.

This module turns such lines into :class:`Proposal` values (node, text, attribute, fact time,
reason) with plain rules and no model, like the offline observer itself:

* only *stated* facts are captured (``User stated …``); questions, small talk and the
  assistant's answers are not durable knowledge about the user;
* a statement is split into clauses on ``;`` and ``, and``; a lead-in before ``: `` is dropped;
* ``when`` is the moment the conversation anchors: the date heading plus the line's time (a
  fact stated in the present holds from when it was said), so a fact re-stated later orders
  after the earlier one whatever order capture runs in;
* the *attribute* (what the value is the value of) comes from the clause's shape: typed values
  (email, phone number), ``their/the X is [now] Y``, ``X called Y``, ``Y for X``,
  ``works as T at E in C``, ``moved/rescheduled the X``; corrections (``… , not Y``, ``instead
  of Y``) name the value they replace, which curation resolves to the record that holds it.

The rules are deliberately conservative: a clause with no recognisable attribute is still
captured (attribute None), it just never supersedes anything by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from obsmem.knowledge.store.scopes import Level

__all__ = ["Proposal", "Statement", "attribute_of", "conjoined", "propose", "statements", "value_of"]

_DATE = re.compile(r"^\s*Date:\s*([A-Z][a-z]{2,8})\s+(\d{1,2}),\s*(\d{4})\s*$")
_LINE = re.compile(r"^\s*[*-]\s*(?:\S{1,3}\s+)?\((\d{1,2}):(\d{2})\)\s+User stated(:)?\s+(.*\S)\s*$")
# With named participants the offline observer writes one line per speaker and day, without a
# clock time ("* 🔴 Ana: works as a nurse …; adopted a cat"); older records have one
# ("* 🔴 (13:56) Ana: …").
_NAMED = re.compile(
    r"^\s*[*-]\s*🔴\s+(?:\((\d{1,2}):(\d{2})\)\s+)?([A-Z][\w.'\-]*(?: [A-Z][\w.'\-]*)?):\s+(.*\S)\s*$"
)
_NOT_NAMES = frozenset({"User", "Assistant", "Topics", "Note", "Date"})
_MONTHS = {m: i for i, m in enumerate(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], start=1)}
# The observer's notes: "(meaning Nov 2026)", "(re: …)", and "(changing from Berlin)" on a changed
# value. None is part of the fact; the last one, kept, names the *old* value, so a change back
# ("Berlin again (changing from Paris)") read as a near-duplicate of the change it undoes.
_MEANING = re.compile(r"\s*\((?:meaning|re:|changing from\b)[^()]*\)")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_PHONE = re.compile(r"\+\d[\d ]{6,}\d")
_OWN = re.compile(r"\b(?:their|my|our|personal)\b", re.IGNORECASE)
_THIRD = re.compile(r"\b(?:his|her|he|she|he's|she's)\b", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(?:they|it|it's|this|that|there|he|she|we|i|you|so|but|and)\b", re.IGNORECASE)
_STOP_SLOT = re.compile(r"\s+(?:for|of|in|at|on|with|from|to)\s+.*$")
_VAGUE = frozenset({"mind", "thing", "things", "plan", "idea", "point", "one", "reason", "whole reason"})
_SYNONYMS = {
    "number": "phone number", "phone": "phone number", "mobile": "phone number", "phone number": "phone number",
    "address": "email", "personal address": "email", "email": "email", "personal email": "email",
    "e-mail": "email", "email address": "email",
    "title": "job title", "job title": "job title", "role": "job title", "position": "job title",
    "job": "job title",
}


@dataclass(frozen=True, slots=True)
class Statement:
    """One clause the user stated, with the time the conversation said it (if known)."""

    text: str
    observed_at: datetime | None
    subject: str | None = None  # a named participant; None: the user


@dataclass(frozen=True, slots=True)
class Proposal:
    """A record to capture: about ``node``, with its ``attribute`` (None: no slot recognised)."""

    node: str
    kind: str
    text: str
    attribute: str | None
    when: datetime | None
    reason: str
    replaces: tuple[str, ...] = ()
    pin: bool = False
    level: Level | None = None  # None: the configured record level (always clamped to the ceiling)
    value: str | None = None  # the attribute's value, where a rule names it (see :func:`value_of`)


#: A conversational lead-in before the fact ("Just to repeat, …", "As I said, …", "To be clear, …"):
#: how the user said it, not what they said. Kept, it made a restated value read as another fact
#: (more than a near-duplicate of a record, or of a value a reviewer tombstoned).
_LEAD_IN = re.compile(
    r"^(?:(?:oh|ok|okay|so|well|and|also|anyway)[,\s]+)*"
    r"(?:just\s+to\s+(?:repeat|recap|be\s+clear|remind\s+(?:you|them)|confirm)|to\s+(?:repeat|recap|be\s+clear|confirm)"
    r"|as\s+(?:i|they|we)\s+(?:said|mentioned|told\s+you)(?:\s+(?:before|earlier))?|(?:once\s+)?again|for\s+the\s+record"
    r"|(?:and\s+)?by\s+the\s+way|btw|reminder|quick\s+reminder)\s*,\s*",
    re.IGNORECASE,
)


def _clean(text: str) -> str:
    text = _MEANING.sub("", text).strip()
    bare = _LEAD_IN.sub("", text)
    if len(bare.split()) >= 2:
        text = bare
    return text.rstrip(" .;,")


def _clauses(body: str, merged: bool) -> list[str]:
    parts = body.split("; ") if merged or "; " in body else [body]
    out: list[str] = []
    for part in parts:
        part = _clean(part)
        if ": " in part:
            head, _, tail = part.rpartition(": ")
            if len(tail.split()) >= 3 and not any(ch.isdigit() for ch in head[-3:]):
                part = tail
        for clause in re.split(r",\s+and\s+(?=(?:a|an|the|their|put|they|she|he|[A-Z]\w*)\b)", part):
            clause = clause.strip().rstrip(" .;,")
            if len(clause.split()) >= 2:
                out.append(clause)
    return out


#: Where one clause ends and another, with a subject of its own, begins: "their phone number is … and
#: they moved to Lisbon", "…; their email is …", "…, but their office is in Porto".
#: Matched on a text whose spacing is single spaces, so no match attempt walks a run of them.
_CONJOINED = re.compile(
    r" ?; |,? (?:and|but) (?=(?:they|their|i|my|we|our|she|he|her|his)\b)"
    r"| ?, (?=(?:they|their|i|my|we|our|she|he|her|his)\b)",
    re.IGNORECASE,
)


def conjoined(text: str) -> list[str]:
    """The clauses of one stated text that are joined with "and", "but", "," or ";" before a new
    subject (each of two words or more), in order; ``[text]`` when it is one clause."""
    parts = [part.strip().rstrip(" .;,") for part in _CONJOINED.split(" ".join(text.split()))]
    parts = [part for part in parts if len(part.split()) >= 2]
    return parts if len(parts) >= 2 else [text]


def statements(text: str) -> list[Statement]:
    """The user's stated facts in an observation text, clause by clause, in order."""
    day: tuple[int, int, int] | None = None
    found: list[Statement] = []
    for line in text.splitlines():
        date = _DATE.match(line)
        if date:
            month = _MONTHS.get(date.group(1)[:3].lower())
            day = (int(date.group(3)), month, int(date.group(2))) if month else None
            continue
        match = _LINE.match(line)
        subject: str | None = None
        merged = False
        if match:
            merged = bool(match.group(3))
        else:
            match = _NAMED.match(line)
            if not match or match.group(3) in _NOT_NAMES:
                continue
            subject = match.group(3)
        at: datetime | None = None
        if day is not None:
            hour, minute = (int(match.group(1)), int(match.group(2))) if match.group(1) else (0, 0)
            try:
                at = datetime(day[0], day[1], day[2], hour, minute, tzinfo=UTC)
            except ValueError:
                at = None
        for clause in _clauses(match.group(4), merged):
            found.append(Statement(clause, at, subject))
    return found


def _slot(raw: str) -> str:
    slot = raw.strip().lower()
    slot = re.sub(r"^(?:\w+'s\s+)", "", slot)  # "waypoint's background jobs" -> "background jobs"
    slot = _STOP_SLOT.sub("", slot)
    slot = re.sub(r"^(?:new|current|old)\s+", "", slot)
    return _SYNONYMS.get(slot, slot)


_SLOT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "Jonas moved the architecture review, it's now Wednesday at 11:00"
    (re.compile(r"\b(?:moved|rescheduled|postponed|changed|pushed)\s+(?:the|their|our)\s+([a-z][a-z' ]{2,40}?)"
                r"(?:,|\s+to\b|\s+it's)", re.IGNORECASE), "{0}"),
    # "their dog is called Kiki"
    (re.compile(r"\b(?:their|my|our|the)\s+([a-z][a-z'\- ]{1,30}?)\s+(?:is|are)\s+(?:now\s+)?(?:called|named)\b",
                re.IGNORECASE), "{0} name"),
    # "a beagle called Kiwi"
    (re.compile(r"\b(?:a|an)\s+([a-z][a-z\-]{1,30})\s+(?:called|named)\s+[A-Z]", re.IGNORECASE), "{0} name"),
    # "their title is now Staff Engineer", "the outbound flight is now March 21"
    (re.compile(r"\b(?:their|my|our|the)\s+((?:[A-Za-z'\-]+\s){0,3}?[A-Za-z'\-]+)\s+(?:is|are)\s+"),
     "{0}"),
    # "she has a trial day there next Friday"
    (re.compile(r"\b(?:has|have)\s+(?:a|an|the)\s+([a-z][a-z ]{2,30}?)\s+(?:there\s+)?"
                r"(?:on|next|this|tomorrow|today|in|at)\b", re.IGNORECASE), "{0}"),
    # "Budget for the whole trip is €2,400"
    (re.compile(r"^([A-Za-z][a-z'\- ]{2,40}?)\s+(?:is|are)\s+(?:now\s+)?\S"), "{0}"),
    # "they switched to Dramatiq for Waypoint's background jobs", "Celery for background jobs"
    (re.compile(r"\b[A-Z][\w.\-]+\s+for\s+((?:[\w']+\s){0,3}?(?:jobs|tasks|storage|caching|queue|queues|"
                r"messaging|search|hosting|deploys?|deployment|monitoring|logging|auth))\b"), "{0}"),
)

_CORRECTION = (
    re.compile(r",\s*not\s+([^,.;]+?)\s*$"),
    re.compile(r"\binstead of(?: the old)?\s+((?:[^,.;]|[,.](?=\d))+?)(?:,\s|$)"),
    re.compile(r"\bfrom\s+([^,.;]+?)\s+to\s+[^,.;]+$"),
)


#: Drinks a person's daily habit names ("their fuel is coffee", "they switched to green tea").
_DRINK = (r"(?:(?:green|black|herbal|mint|iced|chai|oolong|jasmine)\s+)?(?:tea|coffee|flat\s+whites?|espressos?|"
          r"lattes?|cappuccinos?|matcha|decaf|mate|kombucha|americanos?)")

#: Phrasings whose attribute is not a noun in the clause: "we fly out on the 20th" sets the
#: outbound flight, "we moved to Berlin" the home city. Each names a *category* of the user's
#: own (a drink habit, a work place), so a later value of the same category supersedes the
#: earlier one: "their fuel is coffee" → "they switched to green tea" (daily drink); "works in
#: Munich" → "their first day at the Berlin office" (work city). A clause about someone else
#: ("Priya works in the Berlin office") starts with their name and matches none of them.
_PHRASED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:fly|flying|flies)\s+out\b", re.IGNORECASE), "outbound flight"),
    (re.compile(r"\b(?:fly|flying|flies)\s+back\b", re.IGNORECASE), "return flight"),
    (re.compile(r"\b(?:moved|relocated)\s+to\s+[A-Z]"), "home city"),
    (re.compile(r"^(?:they|their|i|my)\b[^,;]*?\b(?:(?:fuel|drink|usual drink|daily drink|go-to drink)\s+(?:is|are)"
                r"|drinks?|switched\s+(?:over\s+)?to|changed\s+to|went\s+back\s+to)\s+(?:now\s+)?"
                + _DRINK + r"\b", re.IGNORECASE), "daily drink"),
    (re.compile(r"\b(?:their|my)\s+(?:first\s+)?day\s+at\s+the\s+[A-Z][\w\-]+\s+office\b"), "work city"),
    (re.compile(r"^(?:they|i)\b[^,;]*?\bwork(?:s|ing)?\s+(?:from|out\s+of)\s+[A-Z][\w\-]+\b"), "work city"),
)

#: The value a category attribute holds, when the clause names it (curation compares these:
#: "work from Berlin" and "first day at the Berlin office" are one value, not a change).
_VALUES: dict[str, re.Pattern[str]] = {
    "daily drink": re.compile(r"\b(" + _DRINK + r")\b", re.IGNORECASE),
    "work city": re.compile(r"\b(?:at\s+the\s+|from\s+|out\s+of\s+|in\s+(?:\[\[)?)([A-Z][\w\-]+)"),
    "home city": re.compile(r"\bto\s+([A-Z][\w\-]+)"),
}


def value_of(attribute: str | None, clause: str) -> str | None:
    """The value of a category ``attribute`` the clause names (normalised), or None."""
    pattern = _VALUES.get(attribute or "")
    match = pattern.search(clause) if pattern is not None else None
    return re.sub(r"\s+", " ", match.group(1)).casefold() if match else None


def attribute_of(clause: str) -> str | None:
    """The attribute a clause gives a value for, or None when no rule recognises one."""
    for phrase, attribute in _PHRASED:
        if phrase.search(clause):
            return attribute
    for typed, name in ((_EMAIL, "email"), (_PHONE, "phone number")):
        if typed.search(clause):
            # the user's own only when the clause says so ("their number", "my personal email")
            own = _OWN.search(clause) is not None and _THIRD.search(clause) is None
            return name if own else f"{name} (someone else)"
    for pattern, template in _SLOT_PATTERNS:
        match = pattern.search(clause)
        if match is None:
            continue
        raw = match.group(1)
        if template == "{0}" and pattern.pattern.startswith("^(") and _PRONOUN_START.match(raw):
            continue
        slot = _slot(raw)
        if not slot or any(_PRONOUN_START.fullmatch(word) for word in slot.split()) or slot in _VAGUE:
            continue
        return template.format(slot)
    return None


def _work(clause: str, statement: Statement, node: str) -> list[Proposal] | None:
    """"they work as T at E in C" -> one record per attribute (title, employer, city)."""
    match = re.search(
        r"\bwork(?:s|ing)?\s+as\s+(?:an?\s+)?(?P<title>[^,]+?)\s+at\s+(?P<employer>[A-Z][^,]+?)"
        r"(?:\s+in\s+(?P<city>[A-Z][\w\-]+(?:\s[A-Z][\w\-]+)?))?$",
        clause,
    )
    if match is None:
        return None
    reason = f"The user stated it: “{clause}”."
    found: list[Proposal] = []
    prefix = re.sub(r"[,;]?\s*(?:and\s+)?(?:they|he|she|i|we)?\s*$", "", clause[: match.start()], flags=re.IGNORECASE)
    if len(prefix.split()) >= 2:
        found += propose(Statement(prefix, statement.observed_at), node=node)
    found += [
        Proposal(node, "person", f"works as {match['title']}", "job title", statement.observed_at, reason),
        Proposal(node, "person", f"works at [[{match['employer']}]]", "employer", statement.observed_at, reason),
    ]
    if match["city"]:
        found.append(Proposal(node, "person", f"works in [[{match['city']}]]", "work city",
                              statement.observed_at, reason, value=match["city"].casefold()))
    return found


def propose(statement: Statement, *, node: str = "User", kind: str = "person") -> list[Proposal]:
    """The records one stated clause proposes (usually one)."""
    clause = statement.text
    worked = _work(clause, statement, node)
    if worked is not None:
        return worked
    replaces: list[str] = []
    body = clause
    for pattern in _CORRECTION:
        match = pattern.search(clause)
        if match:
            replaces.append(match.group(1).strip())
    if replaces and re.search(r",\s*not\s+", clause):
        body = re.sub(r",\s*not\s+[^,.;]+?\s*$", "", clause)
    attribute = attribute_of(body)
    pin = bool(re.search(r"\b(?:always|never)\b", clause, re.IGNORECASE))
    reason = f"The user stated it: “{clause}”."
    return [Proposal(node, kind, clause, attribute, statement.observed_at, reason, tuple(replaces), pin,
                     value=value_of(attribute, body))]

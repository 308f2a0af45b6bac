"""Answer and context normalisation for the retention metric.

*Retained* means every token of a gold answer appears somewhere in a context. For that test
to measure memory rather than spelling, both sides go through the same normalisation: case,
punctuation and stopwords go; number words become digits; dates written any of the usual ways
("7 May 2023", "May 7, 2023", "2023-05-07", "7th of May 2023") become one ISO token, and a full
date also yields its month ("2023-05"), so an answer of "May 2023" is found in a context that
says "May 7, 2023"; a plural or possessive loses its ending ("agencies" = "agency"); and a
verb's -ed/-ing form matches its base ("baked" = "baking" = "bake", :func:`verb_key`).

The metric is deliberately lenient about order and strict about content: a context holds an
answer when it holds all of the answer's words, wherever they are. It cannot tell whether a
model *would* answer correctly — that is what ``--model`` and a judge are for — but it is exact,
offline and the same for every system measured.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import partial

__all__ = [
    "MONTH_NUMBERS",
    "STOPWORDS",
    "answer_tokens",
    "context_tokens",
    "is_yes_no",
    "normalise_dates",
    "token_present",
    "token_recall",
    "verb_key",
]

STOPWORDS = frozenset(
    """a an the and or but if of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there when where
    why how all any both each few more most other some such no nor not only own same so than too very
    can will just should now is are was were be been being have has had having do does did doing i me
    my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those
    am would could also as s t d ll m re ve y""".split()
)

#: Month names and their usual abbreviations → 1..12.
MONTH_NUMBERS = {
    name: index
    for index, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
            ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|" \
         r"jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"

# Order matters: the most specific forms are rewritten first.
_DATE_FORMS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b{_YEAR}[-/](\d{{1,2}})[-/](\d{{1,2}})\b"), "ymd"),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"), "dmy"),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"), "mdy"),
    (re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b"), "my"),
]

_NUMBER_WORDS = {
    word: str(index)
    for index, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update(
    {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "once": "1", "twice": "2"}
)
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
_TOKEN = re.compile(r"\d{4}-\d{2}(?:-\d{2})?|[a-z0-9]+")


def _iso(year: str, month: int, day: str | None = None) -> str:
    if day is None:
        return f"{year}-{month:02d}"
    return f"{year}-{month:02d}-{int(day):02d}"


def _rewrite(match: re.Match[str], form: str) -> str:
    groups = match.groups()
    if form == "ymd":
        year, month, day = groups
        if not 1 <= int(month) <= 12 or not 1 <= int(day) <= 31:
            return match.group(0)
        return f" {_iso(year, int(month), day)} "
    if form == "dmy":
        day, month_name, year = groups
        return f" {_iso(year, MONTH_NUMBERS[month_name], day)} "
    if form == "mdy":
        month_name, day, year = groups
        return f" {_iso(year, MONTH_NUMBERS[month_name], day)} "
    month_name, year = groups
    return f" {_iso(year, MONTH_NUMBERS[month_name])} "


def normalise_dates(text: str) -> str:
    """Lower-case ``text`` and rewrite every recognised date as an ISO token."""
    lowered = unicodedata.normalize("NFKC", text).lower()
    for pattern, form in _DATE_FORMS:
        lowered = pattern.sub(partial(_rewrite, form=form), lowered)
    return lowered


def _stem(token: str) -> str:
    """Plural and possessive endings only: enough that "agencies" finds "agency"."""
    if len(token) <= 3 or token.isdigit():
        return token
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith(("sses", "shes", "ches", "xes")):
        return token[:-2]
    if token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def verb_key(token: str) -> str:
    """The -ed/-ing-free key of a token: "baked", "baking" and "bake" share "bak"; "running"
    and "run" share "run". Used only to match, never shown: answer tokens keep their form."""
    if len(token) <= 3 or any(ch.isdigit() for ch in token):
        return token
    base, stripped = token, False
    if token.endswith("ing") and len(token) >= 6:
        base, stripped = token[:-3], True
    elif token.endswith("ied") and len(token) >= 5:
        base = token[:-3] + "y"
    elif token.endswith("ed") and not token.endswith("eed") and len(token) >= 5:
        base, stripped = token[:-2], True
    if stripped and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lszeo":
        base = base[:-1]  # "running" → "run", "hopped" → "hop"
    if base.endswith("e") and not base.endswith("ee") and len(base) >= 4:
        base = base[:-1]  # "bake" and "baked" meet at "bak"
    return base


def _tokens(text: str) -> list[str]:
    normalised = normalise_dates(text).replace("'s ", " ").replace("’s ", " ")
    out: list[str] = []
    for raw in _TOKEN.findall(normalised):
        token = _NUMBER_WORDS.get(raw, raw)
        ordinal = _ORDINAL.match(token)
        if ordinal:
            token = ordinal.group(1)
        if token in STOPWORDS:
            continue
        out.append(_stem(token))
    return out


def answer_tokens(answer: str) -> list[str]:
    """The distinct normalised tokens of a gold answer, in order of first appearance."""
    return list(dict.fromkeys(_tokens(answer)))


def context_tokens(texts: Iterable[str]) -> frozenset[str]:
    """Every normalised token of a context; a full date also contributes its month."""
    found: set[str] = set()
    for text in texts:
        for token in _tokens(text):
            found.add(token)
            found.add("~" + verb_key(token))
            if len(token) == 10 and token[4] == "-" and token[7] == "-":
                found.add(token[:7])
    return frozenset(found)


def token_present(token: str, context: frozenset[str]) -> bool:
    """``token`` is in ``context`` as written or as another -ed/-ing form of the same verb."""
    return token in context or "~" + verb_key(token) in context


def token_recall(answer: Iterable[str], context: frozenset[str]) -> float:
    """The share of ``answer``'s tokens present in ``context`` (1.0 for an empty answer)."""
    tokens = list(answer)
    if not tokens:
        return 1.0
    return sum(1 for token in tokens if token_present(token, context)) / len(tokens)


_YES_NO = re.compile(r"^\W*(?:(?:likely|probably|maybe)\s+)?(?:yes|no)\b", re.IGNORECASE)


def is_yes_no(answer: str) -> bool:
    """A yes/no answer ("No", "Yes, she did", "Likely no"): its words barely test memory, so it is
    reported on its own rather than in the overall figure."""
    return bool(_YES_NO.match(answer))

"""Text rules shared by the offline observer and reflector: sentences, pronouns, dates, tools.

Sections: cleaning and sentence splitting, pronoun rewriting, normalising and shortening,
compact tool arguments and results, and the shaping of assistant text (prose, lists and code;
key sentences; a topic title). Names and quantities and fact keys are matchers over pattern
tables and live in :mod:`~obsmem.om.offline.patterns`; date phrases are resolved in
:mod:`~obsmem.om.offline.date_phrases`; both are re-exported here.

Everything here is a pure function of its arguments (no clock, no I/O, no randomness), so the
offline observer and reflector are deterministic: the same input always gives byte-identical
output. The rules are English-only heuristics built from regular expressions. They are written
to fail *safe*: when a rule is unsure it keeps text (or leaves a date unannotated) rather than
inventing a meaning, because memory that is slightly verbose is better than memory that lies.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from obsmem.om.offline.date_phrases import MONTHS, DateRef, format_day, named_dates, resolve_dates
from obsmem.om.offline.known import KnownView
from obsmem.om.offline.patterns import (
    ASSIST_FILLER,
    ASSISTANT_PERSON,
    CODE_DEF,
    FILLER_WORDS,
    RECOMMEND,
    STOPWORDS,
    THIRD_PERSON,
    FactKey,
    content_words,
    fact_key,
    is_plan_text,
    key_terms,
    names,
    names_and_numbers,
    state_object,
)

__all__ = [
    "MONTHS",
    "DateRef",
    "FactKey",
    "condense",
    "estimate_tokens",
    "fact_key",
    "format_day",
    "is_plan_text",
    "key_terms",
    "names",
    "named_dates",
    "names_and_numbers",
    "normalise",
    "resolve_dates",
    "shorten",
    "split_sentences",
    "state_object",
    "third_person",
]

def estimate_tokens(text: str) -> int:
    """About four characters per token: the fallback when no real counter is given."""
    return math.ceil(len(text) / 4) if text else 0


# ----------------------------------------------------------------------------------------------
# Cleaning and sentence splitting
# ----------------------------------------------------------------------------------------------

_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "\u00a0": " "})
_ABBREVIATIONS = frozenset(
    {"dr", "mr", "mrs", "ms", "st", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "approx",
     "no", "inc", "ltd", "co", "a.m", "p.m", "mt", "ave", "dept", "est", "fig", "u.s"}
)  # fmt: skip
# Possessive, and never starting inside a run of end marks: one pass over "....", "?!?!", …
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]++[\"')\]]*+\s++(?=[A-Z0-9\"'(])")
#: How far back the word before an end mark is read: enough for every abbreviation and initial
#: (a longer word is neither), and it keeps splitting linear when end marks are skipped.
_WORD_LOOKBACK = 40
_LIST_MARK = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+")


def clean(text: str) -> str:
    """Normalise typographic quotes and collapse runs of spaces (newlines are kept)."""
    text = text.translate(_QUOTES)
    return re.sub(r"[ \t]+", " ", text).strip()


def strip_markdown(text: str) -> str:
    """Drop emphasis, inline code ticks, headings and link targets; keep the words."""
    text = _unlink(_unlink(text, image=True), image=False)
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)([^*\n]+?)\*(?!\w)", r"\1", text)
    text = text.replace("`", "")
    return re.sub(r"^\s*#{1,6}\s+", "", text, flags=re.M)


def _unlink(text: str, *, image: bool) -> str:
    """Replace each ``[words](target)`` (``![words](target)`` when ``image``) by its words.

    The same as substituting ``!?\\[([^\\]]+)\\]\\([^)]*\\)`` (``*`` for an image), in one pass:
    every opening before the same ``]`` shares its fate, so after a failed one the scan moves
    past that ``]`` instead of trying each opening again ("[[[[…" would be quadratic).
    """
    opening = "![" if image else "["
    kept: list[str] = []
    position = search = 0
    while (start := text.find(opening, search)) != -1:
        words = start + len(opening)
        close = text.find("]", words)
        if close == -1:
            break
        if close == words and not image:  # "[]": no words; a later opening has its own "]"
            search = words
            continue
        if not text.startswith("(", close + 1):
            search = close + 1
            continue
        end = text.find(")", close + 2)
        if end == -1:
            break
        kept += [text[position:start], text[words:close]]
        position = search = end + 1
    kept.append(text[position:])
    return "".join(kept)


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences; each line of a list is its own sentence.

    A period after a known abbreviation ("Dr.", "e.g.") or a single capital (an initial) does
    not end a sentence. Splitting is linear in the text length.
    """
    out: list[str] = []
    for block in clean(text).splitlines():
        block = _LIST_MARK.sub("", block).strip()
        if not block:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(block):
            before = block[max(start, match.start() - _WORD_LOOKBACK) : match.start() + 1].split()
            word = before[-1].rstrip(".!?").lower() if before else ""
            initial = len(word) == 1 and word.isalpha()  # "J. Smith", but not "at 8. Then"
            if block[match.start()] == "." and (word in _ABBREVIATIONS or initial):
                continue
            piece = block[start : match.end()].strip()
            if piece:
                out.append(piece)
            start = match.end()
        tail = block[start:].strip()
        if tail:
            out.append(tail)
    return out


# ----------------------------------------------------------------------------------------------
# Pronouns
# ----------------------------------------------------------------------------------------------

_IRREGULAR_PARTICIPLES = frozenset({"written", "done", "taken", "given", "seen", "chosen", "drawn"})


def third_person(text: str) -> str:
    """Rewrite a user's first-person text in the third person ("I'm" → "they are", "my" → "their").

    "they" keeps the verb forms of "I" (except am/was), so no conjugation is needed.
    """
    for pattern, repl in THIRD_PERSON:
        text = pattern.sub(repl, text)
    return text


def assistant_person(text: str) -> str:
    """Rewrite an assistant sentence about itself: "I've booked your table" → "Assistant booked …"."""
    match = re.match(r"^(?:I've|I have)\s+(\w+)\b", text)
    if match and match.group(1).lower() not in _IRREGULAR_PARTICIPLES and match.group(1) != "been":
        text = "Assistant " + text[match.end(1) - len(match.group(1)) :]
    for pattern, repl in ASSISTANT_PERSON:
        text = pattern.sub(repl, text)
    return text


# ----------------------------------------------------------------------------------------------
# Names, numbers, normalisation, shortening
# ----------------------------------------------------------------------------------------------



def normalise(text: str) -> str:
    """The dedupe key of a line: lowercase words and numbers only, run counts removed."""
    text = re.sub(r"\((?:ran )?\d+ times\)|×\d+", " ", text.translate(_QUOTES).lower())
    return " ".join(re.findall(r"[\w°%$€£@]+(?:[.'/:-][\w°%$€£@]+)*", text))


_ANNOTATION = re.compile(
    r"(?:(?<!\s)\s*\((?:(?:meaning|estimated|changing from)\b|no longer current:)[^()]*\))+\.?\s*$"
)


def split_annotations(text: str) -> tuple[str, str]:
    """Split trailing "(meaning …)", "(estimated …)", "(changing from …)" and "(no longer
    current: …)" off a line's text."""
    match = _ANNOTATION.search(text)
    if not match:
        return text, ""
    return text[: match.start()], match.group(0).strip().rstrip(".")


def shorten(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a word boundary, ending with "…".

    Trailing date/change annotations are kept whole: they are what makes a line's date
    resolvable later, so they are worth more than the words they displace.
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    body, notes = split_annotations(text)
    room = max(limit - len(notes) - 2 if notes else limit - 1, 12)
    if len(body) > room:
        cut = body[:room]
        space = cut.rfind(" ")
        if space > room * 0.6:
            cut = cut[:space]
        body = cut.rstrip(" ,;:-.(") + "…"
    return f"{body} {notes}" if notes else body


_HEDGES = re.compile(
    r"\b(?:basically|actually|really|very|just|quite|pretty much|kind of|sort of|definitely|"
    r"honestly|literally|simply|certainly|of course)\b,?\s*",
    re.I,
)


def condense(text: str, limit: int) -> str:
    """Drop hedge words and markdown, then :func:`shorten` to ``limit`` characters."""
    text = strip_markdown(text)
    text = _HEDGES.sub("", text)
    return shorten(re.sub(r"\s+([,.;:!?])", r"\1", text), limit)


def sentence_end(text: str) -> str:
    """End a rendered line with a period unless it already ends a sentence."""
    text = text.strip()
    return text if not text or text[-1] in ".?!…:" else text + "."


# ----------------------------------------------------------------------------------------------
# Compact renderings of tool arguments and results
# ----------------------------------------------------------------------------------------------


#: How deep :func:`_scalar` reads nested lists: each level halves the room, and from the fourth
#: on a level is at most 13 characters, so nothing below this depth can show in the result; a
#: tool's deeply nested JSON must not exhaust the interpreter's stack.
_NESTING = 32


def _scalar(value: Any, limit: int, depth: int = 0) -> str:
    if isinstance(value, str):
        return shorten(value, limit)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        inner = [v for v in value.values() if isinstance(v, str | int | float) and not isinstance(v, bool)]
        return shorten(" ".join(str(v) for v in inner[:3]), limit)
    if isinstance(value, list | tuple):
        if depth >= _NESTING:
            return "[…]"
        head = ", ".join(_scalar(v, limit // 2, depth + 1) for v in list(value)[:3])
        more = f", +{len(value) - 3}" if len(value) > 3 else ""
        return shorten(f"[{head}{more}]", limit)
    return shorten(json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":")), limit)


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack: text
            return value
    return value


def compact_args(args: dict[str, Any] | str, limit: int = 80) -> str:
    """``city=Berlin, days=3``: the arguments of a tool call, each value cut to a short form."""
    parsed = _maybe_json(args)
    if isinstance(parsed, dict):
        return shorten(", ".join(f"{k}={_scalar(v, 40)}" for k, v in parsed.items()), limit)
    return shorten(str(parsed), limit)


def _facts(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        out: list[str] = []
        for key, item in value.items():
            if isinstance(item, dict) and not prefix:
                out.extend(_facts(item, f"{key}."))
            elif isinstance(item, list | tuple):
                out.append(f"{prefix}{key}: {len(item)} items {_scalar(item, 90)}")
            elif item not in (None, "", [], {}):
                out.append(f"{prefix}{key}: {_scalar(item, 50)}")
        return out
    if isinstance(value, list | tuple):
        return [f"{len(value)} items: {_scalar(value, 100)}"]
    return [_scalar(value, 120)]


def compact_result(result: Any, is_error: bool, limit: int = 160) -> str:
    """The outcome of a tool run in at most ``limit`` characters: its first key facts."""
    parsed = _maybe_json(result)
    if parsed in (None, "", [], {}):
        text = "no result"
    elif isinstance(parsed, str):
        sentences = split_sentences(strip_markdown(parsed))
        text = " ".join(sentences[:3]) if sentences else "no result"
    else:
        text = ", ".join(_facts(parsed))
    if is_error and not text.lower().startswith(("error", "failed")):
        text = "error: " + text
    return shorten(text, limit)


# ----------------------------------------------------------------------------------------------
# Assistant text: prose, lists and code; key sentences; a topic title
# ----------------------------------------------------------------------------------------------


def blocks(text: str) -> tuple[list[str], list[str], str, list[tuple[str, int, list[str]]]]:
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
                names = [m.group(1) for m in map(CODE_DEF.match, fence) if m]
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
        code.append((lang, len(fence), [m.group(1) for m in map(CODE_DEF.match, fence) if m]))
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


def compact_list(items: list[str], limit: int) -> str:
    return shorten("; ".join(_compact_item(i) for i in items if i.strip()), limit)


def list_label(intro: str) -> str:
    label = re.sub(r"^(?:sure|of course|certainly)[!,.]?\s+", "", intro.rstrip(":"), flags=re.I)
    label = re.sub(r"^(?:here(?:'s| is| are)|these are|there are)\s+", "", label, flags=re.I)
    label = re.sub(r"^(?:some|a few|the following)\s+", "", label, flags=re.I)
    return shorten(label, 60) if label and not ASSIST_FILLER.match(label) else ""


def summarise(sentences: list[str], limit: int, query: frozenset[str], known: str | KnownView = "") -> str:
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
        score += 2 * len(query & set(content_words(sentence)))
        score += 4 if index == 0 else 0
        return score + (2 if RECOMMEND.search(sentence) else 0)

    ranked = sorted(range(len(sentences)), key=lambda i: (-points(i), i))
    chosen: list[int] = []
    total = 0
    for index in ranked:
        piece = _condense_keeping_figures(sentences[index], limit)
        if chosen and (total + len(piece) + 1 > limit or points(index) <= 0):
            continue
        chosen.append(index)
        total += len(piece) + 1
    return " ".join(_condense_keeping_figures(sentences[i], limit) for i in sorted(chosen))


_FIGURE = re.compile(r"[€$£]\s?\d[\d,.]*|\d[\d,.]*\s?(?:%|€|eur|usd|gbp|km|kg|min|minutes|hours|h)\b|\d[\d,.:]*", re.I)


def _condense_keeping_figures(sentence: str, limit: int) -> str:
    """:func:`condense`, unless the cut would lose a figure ("€189", "35 minutes"): then the
    clauses holding the figures are kept, in order, and the rest of the sentence goes — an
    answer cut just before its number is no answer."""
    piece = condense(sentence, limit)
    figures = [f.strip() for f in _FIGURE.findall(sentence)]
    if not piece.endswith("…") or all(f in piece for f in figures):
        return piece
    clauses = [c for c in re.split(r"(?<=[,;:])\s+|\s+[—–]\s+", strip_markdown(sentence)) if c.strip()]
    kept: list[str] = []
    used = 0
    for clause in clauses:
        if any(f in clause for f in figures) or not kept:
            if used + len(clause) + 1 > limit and kept:
                break
            kept.append(clause.strip())
            used += len(clause) + 1
    joined = " … ".join(kept) if len(kept) > 1 else (kept[0] if kept else "")
    return condense(joined, limit) if joined else piece


def topic_title(texts: list[str]) -> str | None:
    """2–5 words naming the dominant topic: the most frequent content words and names."""
    counts: dict[str, int] = {}
    shown: dict[str, str] = {}
    first: dict[str, int] = {}
    position = 0
    for text in texts:
        names = {n.lower() for n in names_and_numbers(text) if not n[0].isdigit()}
        for word in re.findall(r"[A-Za-z][A-Za-z'-]{2,}", text):
            low = word.lower()
            if low in STOPWORDS or low in FILLER_WORDS:
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

"""Offline observation of a conversation between named people.

When messages carry a speaker's name (``metadata["name"]``) and the "assistant" side is a
named person too, the conversation is not a user asking an agent: it is people telling each
other about their lives (a support chat, a group thread, an imported chat log). There is no
question to pair an answer with, and the assistant rules ("Assistant answered: …") would
throw away half of what was said. So each message becomes at most one line about its
speaker: the sentences that state something (not questions, greetings or reactions), in the
third person, condensed, with dates resolved — "Melanie: ran a charity race for mental
health last Saturday (meaning May 20, 2023)".

What a sentence is worth follows the user rules (:func:`statement_priority`): durable facts,
changes and dated events are 🔴; narration that brings at least two words nobody has recorded
yet is 🟡, so the reflector folds it into a day's topics before it touches a fact; the rest
(reactions, repetition, small talk) is dropped, and so is a sentence that names fewer than two
things beyond how the speaker felt about them ("it was so awesome, I love it") unless it holds a
name, a number or a date.

Words of feeling and evaluation (:data:`EVALUATIVE`: "awesome", "felt", "proud", "love" …) are
what a chat between people is mostly made of and what a later question least often asks for:
what someone did, got, made, named or planned is what they remember. So they count for nothing
when a note's worth is weighed, and the pure colour among them ("awesome", "really", "so")
goes from a note altogether.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Protocol, TypeVar

from obsmem.errors import ObsmemError
from obsmem.om.text.format import PRIORITY_HIGH, PRIORITY_LOW, PRIORITY_MEDIUM, ObservationLine
from obsmem.om.text.quote import speaker_label
from obsmem.om.offline.known import KnownView
from obsmem.om.offline.patterns import (
    CONTRACTIONS,
    FILLER_WORDS,
    INTERJECTION,
    PLEASANTRY,
    content_words,
    key_terms,
    names_and_numbers,
    statement_priority,
)
from obsmem.om.offline.rules import condense, resolve_dates, split_sentences, third_person
from obsmem.types import Message

__all__ = [
    "EVALUATIVE",
    "ParticipantLine",
    "concrete_words",
    "fit_participants",
    "general_rarity",
    "merge_speaker_days",
    "is_participant_conversation",
    "is_participant_line",
    "participant_line",
    "speaker_name",
    "telegraphic",
]

#: The longest one sentence of a participant's line may be before it is condensed.
SENTENCE_LIMIT = 160
#: How much a note's length counts against its value when choosing what to keep.
DENSITY_POWER = 1.0
#: The newest speaker lines, which keep every note however tight the budget.
NEWEST_KEPT = 3
#: A sentence is kept when it brings at least this many words not recorded yet.
NOVEL_WORDS = 2
_FIRST_PERSON = re.compile(r"\b(?:I|my|me|mine|we|our|us)\b", re.I)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|y'all)\b", re.I)
_INTENSIFIERS = re.compile(
    r"\b(?:really|so|just|totally|super|pretty|actually|very|truly|definitely|absolutely|literally|"
    r"kinda|sorta|basically|honestly)\s+",
    re.I,
)
_ARTICLES = re.compile(r"\b(?:a|an|the)\s+", re.I)
_LEAD_SUBJECT = re.compile(r"^(?:they|so|and|but|well|also|oh|yeah)\s+", re.I)
_IMAGE = re.compile(
    r"\[shares an image:\s*(?:(?:a|an)\s+)?(?:photo(?:graph(?:y)?)?|picture|image)\s+of\s+(?:(?:a|an|the)\s+)?", re.I
)
_SPEAKER_HEAD = re.compile(r"^(?!User\b|Assistant\b|Topics\b)([A-Z][A-Za-z'.-]+(?: [A-Z][A-Za-z'.-]+)?): ")
#: Words a note can lose and a reader still gets the same facts: pronouns, auxiliaries, linking
#: words and the common prepositions ("ran charity race mental health last Saturday"), the words a
#: search for what happened skips anyway. Negations, numbers, "only", the particles of a phrasal
#: verb ("signed up", "gave up", "worked out") and "by" (who made what) stay.
_GLUE = frozenset(
    """a an the they them their theirs it its it's this that these those there which who whom is are
    was were be been being am has have had do does did will would can could should shall may might
    must to of and so as just that's it's i'm i've i'll he she his her him we us our you your
    in on at for with about from into or if but because while then than also too again once here
    all any both each few more most other some such own same what when where why how myself
    yourself themselves itself i me my""".split()
)
#: Words of feeling and evaluation, and the light verbs around them: a note made only of these
#: says how the speaker felt, not what happened, so they add nothing to what a note is worth.
EVALUATIVE = frozenset(
    """awesome amazing great good nice cool fun funny fantastic wonderful lovely beautiful gorgeous stunning
    incredible super special perfect best better worse worst bad terrible horrible hard tough easy crazy wild
    insane love loved loves loving like liked likes enjoy enjoyed enjoying enjoys hate hated glad happy
    happier
    happiest sad proud excited exciting thrilled grateful thankful blessed blessing lucky appreciate
    appreciated appreciates feel feels felt feeling feelings emotion emotions emotional touching touched
    heartwarming heart hearts inspiring inspired inspiration inspire inspires motivating motivated motivation
    motivates meaningful rewarding fulfilling empowering powerful important matter matters mean means meant
    worth stressful stressed stress nervous scared afraid worried worry worries anxious overwhelming
    overwhelmed relieved relief calm relaxing relaxed peaceful peace joy joyful support supportive supported
    supporting encourage encouraged encouragement hope hoping hopes wish wishes dream dreams reminder remind
    reminds reminded reminding moment moments memories memory experience experiences journey thing things
    stuff lot lots much really totally definitely always never ever sure kind kinda sorta way ways time times
    life day days cheer vibe vibes think thought know knew guess believe believed sounds sound seem seems
    seemed look looks looked keep keeps kept make makes making made get gets getting got go going gone went
    come came coming""".split()
)
#: The evaluative words that are pure colour: a note in note style drops them.
_COLOUR = frozenset(
    """awesome amazing great cool nice fun wonderful incredible fantastic super stunning lovely crazy wild
    insane special perfect really so very totally definitely kinda sorta pretty quite stuff lot lots much even
    truly absolutely literally honestly such yeah yep wow oh""".split()
)
#: A sentence is kept only when it names at least this many things beyond how the speaker felt
#: (words outside :data:`EVALUATIVE`), unless it holds a name, a number or a date.
CONCRETE_WORDS = 2
_NAMES_TOO = frozenset({"May", "Will", "Mae"})  # capitalised, these are a month or a name
_WORD_OR_GAP = re.compile(r"(\([^()]*\)|\[[^\[\]]*\]|\"[^\"]*\"|[A-Za-z][A-Za-z'’-]*|\S+)(\s*)")
_RANK = {PRIORITY_HIGH: 3, PRIORITY_MEDIUM: 2, PRIORITY_LOW: 1}
_REACTION = re.compile(
    r"^(?:wow|aww+|omg|haha|lol|yay|congrats|congratulations|thanks|thank you|that's|that is|you're|"
    r"you are|so glad|glad|sounds|looks|i'm so happy for|i am so happy for|i bet|i hope|hope)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class ParticipantLine:
    priority: str
    text: str


def speaker_name(message: Message) -> str | None:
    """The speaker's name a message carries, if any (``metadata["name"]``)."""
    name = message.metadata.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else None


def is_participant_conversation(messages: Sequence[Message]) -> bool:
    """True when the assistant side is a named person: people talking, not a user and an agent."""
    return any(m.role == "assistant" and speaker_name(m) for m in messages)


def _is_filler(sentence: str) -> bool:
    words = re.findall(r"[\w']+", sentence.lower())
    return not words or (len(words) <= 8 and all(w in FILLER_WORDS for w in words))


def _telegraphic(text: str) -> str:
    """Note style: articles, intensifiers and a leading "they" carry no fact a reader needs."""
    text = _IMAGE.sub("[photo: ", text)
    text = _ARTICLES.sub("", _INTENSIFIERS.sub("", text))
    while (match := _LEAD_SUBJECT.match(text)) is not None:
        text = text[match.end() :]
    return text.rstrip(" .!")


def is_participant_line(text: str) -> bool:
    """True for a named participant's line ("Melanie: …"), not a user/assistant/topics line."""
    return _SPEAKER_HEAD.match(text) is not None


def telegraphic(text: str) -> str:
    """Note style for an old participant line: pronouns, auxiliaries, linking words and pure
    colour ("awesome", "really") go, while every other word, number, bracketed note and quoted
    title stays in order.

    "Melanie: ran charity race for mental health; it was like therapy for them" →
    "Melanie: ran charity race for mental health; like therapy for". An answer is made of
    content words, so it survives; a reader gets notes instead of sentences.
    """
    head = _SPEAKER_HEAD.match(text)
    start = head.end() if head else 0
    return text[:start] + _notes(text, start)


def _notes(text: str, start: int = 0) -> str:
    """The words of ``text`` from ``start`` in note style (see :func:`telegraphic`)."""
    out: list[str] = []
    for match in _WORD_OR_GAP.finditer(text, start):
        word, gap = match.group(1), match.group(2)
        if word.startswith("[photo: ") and word.endswith("]"):  # what a shared photo shows, in notes too
            word = "[photo: " + _notes(word[len("[photo: ") : -1]) + "]"
        bare = word.lower().rstrip(",;:!")
        if (bare in _GLUE or bare in _COLOUR) and word.rstrip(",;:") not in _NAMES_TOO:
            if word[-1] in ",;:" and out:
                out[-1] = out[-1].rstrip() + word[-1] + " "
            continue
        out.append(word + (gap or ""))
    return re.sub(r"\s*([,;:])(?:\s*[,;:])+", r"\1", "".join(out)).strip(" ,;:")


def _without_vocatives(sentence: str, listeners: Sequence[str]) -> str:
    """Drop the listener's name where it only addresses them ("Thanks, Mel!", "Caroline, I …")."""
    for listener in listeners:
        name = rf"\b{re.escape(listener[:3])}[A-Za-z]*\b"
        sentence = re.sub(rf"^(?:\w+\s*,?\s+)?{name}\s*[,!.]\s*", "", sentence)
        sentence = re.sub(rf",\s*{name}\s*(?=,|[!.?]*$)", "", sentence)
    return sentence


#: A statement whose subject is left out, as people write in a chat: "Just started aerial yoga",
#: "Been busy volunteering at the shelter", "Went camping last weekend". The speaker did it.
_ELLIPTICAL = re.compile(
    r"^(?:(?:just|finally|recently|also|still|lately|then|already)\s+)*(?:been|went|got|took|made|bought|"
    r"saw|met|gave|ran|won|lost|found|built|wrote|began|drove|flew|ate|sang|taught|brought|sold|"
    r"spent|had|did|tried|started|finished|joined|visited|adopted|signed|picked|moved|learned|learnt|"
    r"baked|cooked|painted|played|watched|booked|ordered|received|launched|opened|organi[sz]ed|"
    r"volunteered|attended|completed|graduated|travel(?:l)?ed|hiked|decided|planned|planning|"
    r"working|doing|taking|learning|reading|playing|volunteering|training|practicing|practising)\b",
    re.I,
)
_CLAUSE = re.compile(r"\s*(?:[,;:—–]|\s-+|-+\s)\s*")
_ASKS = re.compile(r"^(?:what|what's|which|where|where's|when|who|who's|whose|why|how|how's|is|are|am|was|"
                   r"were|do|does|did|can|could|should|would|will|have|has|had|isn't|aren't|don't|"
                   r"doesn't|didn't|wanna|want|ever|any|anything|right|huh|eh)\b", re.I)


def _own_statement(body: str) -> str:
    """The part of a sentence that states something of the speaker's own.

    A statement that ends in a question keeps what comes before it ("I made this bowl in class
    last week, what do you think?" → "I made this bowl in class last week"); a sentence that
    opens as a question is dropped whole. A sentence that also speaks to the listener keeps
    its clauses that speak of the speaker ("Wanted to tell you - I took a writing class").
    """
    pieces = _CLAUSE.split(body)
    if body.endswith("?"):
        if _ASKS.match(pieces[0]) or len(pieces) == 1:
            return ""
        while pieces and (_ASKS.match(pieces[-1]) or pieces[-1].endswith("?")):
            pieces.pop()  # the question at the end
        body = ", ".join(pieces)
    if len(pieces) > 1 and _SECOND_PERSON.search(body):
        own = [p for p in pieces if not _SECOND_PERSON.search(p)]
        if own and any(_FIRST_PERSON.search(p) or _ELLIPTICAL.match(p) for p in own):
            body = ", ".join(own)
    return body.strip(" ,;:-")


def _recorded(word: str, known: str | KnownView) -> bool:
    """True when ``word`` is already in ``known`` as a word, not merely inside one: "art" is not
    recorded by "party", nor "ring" by "bring"."""
    if isinstance(known, KnownView):
        return known.recorded(word)  # the same answer, from an index
    start = known.find(word)
    size = len(word)
    while start >= 0:
        before = known[start - 1] if start else " "
        after = known[start + size] if start + size < len(known) else " "
        if not (before.isalnum() or after.isalnum()):
            return True
        start = known.find(word, start + 1)
    return False


def participant_line(
    text: str,
    name: str,
    anchor: date,
    known: str | KnownView,
    count_tokens: Callable[[str], int],
    listeners: Sequence[str] = (),
    *,
    context: Sequence[date] = (),
) -> ParticipantLine | None:
    """One line about what ``name`` stated in ``text``, or None when it stated nothing new.

    ``known`` is everything already recorded (lowercased): narration repeating it is dropped.
    ``context`` holds the calendar days named around ``text`` (see
    :func:`~obsmem.om.offline.rules.resolve_dates`).
    """
    kept: list[str] = []
    notes: list[str] = []
    best = 0
    fresh: set[str] = set()
    for sentence in split_sentences(text):
        body = INTERJECTION.sub("", _without_vocatives(sentence, listeners)).strip().lstrip(",;: ")
        body = _own_statement(body)
        if not body or _is_filler(body) or PLEASANTRY.search(body):
            continue
        for pattern, repl in CONTRACTIONS:
            body = pattern.sub(repl, body)
        found = [r.note for r in resolve_dates(body, anchor, context)]
        terms = key_terms(body)
        first_person = bool(_FIRST_PERSON.search(body) or _ELLIPTICAL.match(body))
        if _SECOND_PERSON.search(body) and not (found or first_person and terms):
            continue  # about the listener: a reaction to what they said, which is theirs to record
        if _REACTION.match(body) and not terms and not found:
            continue
        if not (terms or found) and len(concrete_words(body)) < CONCRETE_WORDS:
            continue  # "it was so awesome, I loved it": a feeling about nothing it names
        priority = statement_priority(body, found, known)
        words = [w for w in content_words(body) if not _recorded(w, known) and w not in fresh]
        if not words and not found:
            continue  # nothing nobody has recorded yet
        if priority == PRIORITY_HIGH and not (terms or found or len(words) >= 3):
            priority = PRIORITY_MEDIUM  # "I love it": a feeling about nothing in particular
        if priority is None or priority == PRIORITY_LOW:
            if len(words) < NOVEL_WORDS or not (first_person or terms):
                continue
            # something with a name, a number or a title is a fact about their life; the rest
            # is what they talked about
            priority = PRIORITY_HIGH if terms else PRIORITY_MEDIUM
        fresh.update(words)
        best = max(best, _RANK[priority])
        said = _telegraphic(third_person(body))
        if len(said) > SENTENCE_LIMIT or count_tokens(said) > SENTENCE_LIMIT // 3:
            said = condense(said, SENTENCE_LIMIT).rstrip(" .")
        fresh_notes = [note for note in dict.fromkeys(found) if note not in notes]
        notes.extend(fresh_notes)  # each date note once, after the sentence it resolves
        kept.append(" ".join([said, *(f"({note})" for note in fresh_notes)]))
    if not kept:
        return None
    # the name is metadata: written as it is only when it is plainly a name, else quoted
    line = f"{speaker_label(name)}: " + _notes("; ".join(kept))
    priority = next(p for p, rank in _RANK.items() if rank == best)
    return ParticipantLine(priority, line)


# -- reflection -------------------------------------------------------------------------------


class EntryLike(Protocol):
    """What the reflector's entries offer: a day, a line, and whether the line is old."""

    day: date | None
    line: ObservationLine
    old: bool


Entry = TypeVar("Entry", bound=EntryLike)


def _split(text: str) -> tuple[str, list[str]]:
    speaker, _, said = text.rstrip(".").partition(": ")
    return speaker, [part.strip() for part in said.split("; ") if part.strip()]


def merge_speaker_days(entries: list[Entry]) -> list[Entry]:
    """Fold each day's old lines of one named speaker into one note-style line.

    "Melanie: a" and "Melanie: b" on one old day become "Melanie: a; b", paying the line
    overhead once. The line carries no priority mark: it gathers a day's notes of every worth,
    and from here on what it keeps is weighed note by note (:func:`fit_participants`), so a
    mark would say nothing and cost two tokens on every line. Other lines pass through unchanged.
    """
    firsts: dict[tuple[date | None, str], Entry] = {}
    out: list[Entry] = []
    for entry in entries:
        if not (entry.old and is_participant_line(entry.line.text)):
            out.append(entry)
            continue
        speaker, parts = _split(telegraphic(entry.line.text))
        key = (entry.day, speaker)
        first = firsts.get(key)
        if first is None:
            firsts[key] = entry
            # an old day's notes need no clock time: the day heading dates them
            notes = "; ".join(dict.fromkeys(parts))
            entry.line = replace(entry.line, text=f"{speaker}: {notes}.", time=None, priority=None)
            out.append(entry)
            continue
        _, had = _split(first.line.text)
        merged = "; ".join(dict.fromkeys([*had, *parts]))
        first.line = replace(first.line, text=f"{speaker}: {merged}.", priority=None)
    return out


def concrete_words(text: str) -> list[str]:
    """The content words of ``text`` that say what happened or what it was about, not how the
    speaker felt about it (:data:`EVALUATIVE` words left out)."""
    return [word for word in content_words(text) if word not in EVALUATIVE]


#: A word's general rarity is read from its rank in the o200k BPE vocabulary: byte-pair merges
#: are learned most frequent first, so a word that is one token of a low rank ("know", "get")
#: is common English and one of a high rank ("violin", "aunt"), or several tokens, is not.
#: Ranks up to :data:`COMMON_RANK` count as common, from :data:`RARE_RANK` as rare, log-scaled
#: between; a common word keeps :data:`COMMON_WEIGHT` of its worth.
COMMON_RANK = 1_000
RARE_RANK = 100_000
COMMON_WEIGHT = 0.1


@functools.lru_cache(maxsize=16_384)
def general_rarity(word: str) -> float:
    """How uncommon ``word`` (lowercase) is in English at large, from 0.1 to 1.0.

    What a conversation repeats is already discounted by :func:`_part_value`; this adds what
    no single log can tell: "makes", "bit" and "easier" say less than "violin", "aunt" or
    "Spanish" however rarely the speakers use them. Read from the o200k vocabulary (see
    :data:`COMMON_RANK`); without tiktoken every word counts in full. A word with an apostrophe
    is read by its stem ("nature's" as "nature", "it'll" as "it"), a negated auxiliary ("can't")
    as common: they are split into several tokens without being rare.
    """
    stem, apostrophe, _ = word.replace("’", "'").partition("'")
    if apostrophe:  # "can't", "it'll", "here's": an auxiliary or a pronoun; "nature's": a noun
        return COMMON_WEIGHT if stem.endswith("n") and word.endswith("t") else general_rarity(stem)
    try:
        from obsmem.tokens import o200k_encoding

        ranks = o200k_encoding().encode_ordinary(" " + word)
    except (ImportError, ObsmemError):
        return 1.0
    if len(ranks) != 1:
        return 1.0  # no single token: rare enough to be split
    share = (math.log(max(ranks[0], 1)) - math.log(COMMON_RANK)) / (math.log(RARE_RANK) - math.log(COMMON_RANK))
    return min(1.0, max(COMMON_WEIGHT, share))


#: What a note's resolved date adds to its worth (a name or a number adds 2).
DATE_WORTH = 8


def _part_value(part: str, frequency: dict[str, int]) -> float:
    """What a note is worth keeping: a resolved date, names and numbers, and its concrete words
    (:func:`concrete_words`) weighted by rarity, in the log (a note whose words the rest of the
    log repeats is worth little) and in English at large (:func:`general_rarity`), so a note
    that only says how someone felt, or in the commonest words, is worth little. A resolved date
    counts as much as four names: it is an answer in itself (when something happened), and its
    note ("(meaning May 20, 2023)") costs about ten tokens, so at less a dated event would lose
    to an undated note of the same words."""
    dated = DATE_WORTH if "(meaning" in part or "(estimated" in part else 0
    words = set(concrete_words(part))
    rare = sum(general_rarity(word) / frequency.get(word, 1) for word in words)
    return dated + 2 * len(names_and_numbers(part)) + 2 * rare


def fit_participants(
    entries: list[Entry], excess_tokens: int, count_tokens: Callable[[str], int]
) -> list[Entry]:
    """Free about ``excess_tokens`` by dropping the least valuable notes of speaker lines.

    A talk between people holds far more than any memory budget; when every other level has
    been applied and the log is still too big, the notes worth least (:func:`_part_value`; on
    a tie, the older) go first. A line left with no note goes too. Of the lines the reflector
    keeps in detail (not ``old``), only the newest :data:`NEWEST_KEPT` are kept whole; the rest
    are weighed like older lines: what was just said is also in the raw messages after the
    memory, and a recent line's chatter should not outlast an older day's event. The user's
    own 🔴 facts (lines that are not a named participant's) are never touched.
    """
    frequency: dict[str, int] = {}
    for entry in entries:
        pieces = _split(entry.line.text)[1] if is_participant_line(entry.line.text) else [entry.line.text]
        for piece in pieces:
            for word in set(content_words(piece)):
                frequency[word] = frequency.get(word, 0) + 1
    candidates: list[tuple[float, int, int, str]] = []  # (value, order, entry index, part)
    speaking = [index for index, entry in enumerate(entries) if is_participant_line(entry.line.text)]
    newest = set(speaking[-NEWEST_KEPT:])
    for index, entry in enumerate(entries):
        if is_participant_line(entry.line.text) and (entry.old or index not in newest):
            for part in _split(entry.line.text)[1]:
                density = _part_value(part, frequency) / max(1, count_tokens(part)) ** DENSITY_POWER
                candidates.append((density, index, len(candidates), part))
    dropped: dict[int, set[str]] = {}
    freed = 0
    for _, index, _, part in sorted(candidates):
        if freed >= excess_tokens:
            break
        dropped.setdefault(index, set()).add(part)
        freed += count_tokens(part) + 1
    out: list[Entry] = []
    for index, entry in enumerate(entries):
        if index in dropped:
            speaker, parts = _split(entry.line.text)
            kept = [part for part in parts if part not in dropped[index]]
            if not kept:
                continue
            entry.line = replace(entry.line, text=f"{speaker}: " + "; ".join(kept) + ".")
        out.append(entry)
    return out

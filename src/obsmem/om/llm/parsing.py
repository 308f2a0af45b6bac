"""Parse what the observer and the reflector wrote back.

Models do not always follow the output format, so parsing is tolerant; but an answer also
quotes users and tools (a model copies tool output into its notes), so only the model's own
*top-level* structure is ever read as control. Tags count only at the start of a line (after
spaces or tabs). The order:

1. Echoed prompt fences (``<message-history>`` and the like, :data:`ECHOED_FENCES`) are removed
   wherever they start a line, block included: nothing inside one is the model's answer.
2. ``<observations>`` blocks are found. A block opens with a line-start ``<observations>``
   outside any block. It closes at the next line-start ``</observations>``; a mention in the
   middle of a line never closes it, and an ``<observations>`` line inside it is content. Models
   often close on the last item's line (``* last item</observations>``): a closing tag at the
   end of a line closes the block only when no line-start closing follows, and then the last
   such one does (the model's own closing comes after everything it echoed). Without any
   closing, the block (output cut off at the token limit) runs to the end. Several blocks are
   joined.
3. Control sections (``<current-task>``, ``<suggested-response>``, ``<thread-title>``, each
   inline extractor's ``<slug>``, and ``<extracted-values>{JSON}</extracted-values>``) are read,
   and removed, only from the text *outside* the blocks, and only where their opening tag starts
   a line. Inside a block, a line that opens such a section is a line of memory like any other
   (usually the model copying a user's or a tool's text): it is **kept, defused**, never read as
   a control value. Without any block the whole answer is the top level.
4. Without any block, only list-item lines (``-``, ``*``, ``1.``) and ``Date:`` headers are kept:
   prose around them is the model talking to us, not memory. The reflector falls back further,
   to the whole text, because its input was already memory and dropping it would lose it.

A control section keeps only the model's own lines: a line that reads as a line of the
transcript it was given (a role label, a ``> `` quoted line of content, a date header) is the
model copying a user's or a tool's text, and is dropped; a section left empty is absent.

The observations are then *defused* (:func:`~obsmem.om.llm.prompts.defuse`, with the inline
extractors' slugs and ``extracted-values`` added): every tag-shaped mention of the prompt's or
the answer's structure, anywhere in a line, keeps its text but has its ``<`` escaped as
``&lt;``, so a stored observation can never close a block or open a section when it is shown
to a model again; so is the ``<`` of any other tag-shaped token (``<system>``, a chat
template's ``<|im_start|>``), in the observations and the control sections alike: memory holds
no markup. Every observation line is capped at :data:`MAX_LINE_CHARS` (a giant pasted
blob must not flood memory), and ephemeral anchor ids such as ``[O12]`` that context rendering
may show the model are stripped, because they are only valid for one rendering.

Everything is linear in the answer's length: each search resumes where the last one stopped,
and a search that found nothing is not repeated from a later position.

One limit remains by design: the end-of-line closing rule trusts the last such closing. In an
answer cut off before the model's own closing, an echoed line that ends in ``</observations>``
ends the block, and what the model wrote after it is read as top level.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from obsmem.om.extractors import Extractor
from obsmem.om.llm.prompts import HISTORY_TAG, PREVIOUS_TAG, REFLECT_TAG, defuse
from obsmem.om.text.format import parse_date_header
from obsmem.om.text.transcript import is_transcript_line

__all__ = [
    "MAX_LINE_CHARS",
    "TRUNCATION_SUFFIX",
    "ParsedOutput",
    "parse_observer_output",
    "parse_reflector_output",
    "strip_anchor_ids",
    "truncate_long_lines",
]

MAX_LINE_CHARS = 10_000
TRUNCATION_SUFFIX = " … [truncated]"

BUILTIN_SLUGS = ("current-task", "suggested-response", "thread-title")
# The prompts' fences (om/llm/prompts.py): a model that echoes its input repeats them, and
# nothing inside one is ever the model's own answer.
ECHOED_FENCES = (HISTORY_TAG, PREVIOUS_TAG, REFLECT_TAG)

_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+\S")
_ANCHOR = re.compile(r"\[O\d+\]\s?")
TAG_SHAPED = re.compile(r"<(?=\||[ \t]*/?[ \t]*[A-Za-z][\w:.-]*(?:[\s/>]|$))", re.MULTILINE)
EXTRACTED_VALUES_TAG = "extracted-values"
_OBS_OPEN = re.compile(r"^[ \t]*<observations>", re.MULTILINE)
_OBS_CLOSE_LINE_START = re.compile(r"^[ \t]*</observations>", re.MULTILINE)
_OBS_CLOSE_LINE_END = re.compile(r"</observations>[ \t]*$", re.MULTILINE)
_ANY_LINE_START_TAG = re.compile(r"^[ \t]*</?[a-z][a-z0-9-]*>", re.MULTILINE)
_EXTRACTED_VALUES = re.compile(r"^[ \t]*<extracted-values>(.*?)</extracted-values>", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class ParsedOutput:
    """The structured content of one observer or reflector answer.

    ``found_block`` says whether an ``<observations>`` block was present; when False,
    ``observations`` came from a fallback. ``extracted`` maps an inline extractor's slug to its
    value (JSON-decoded when it parses); ``extraction_failures`` maps a slug to why its value
    could not be read. A slug absent from both simply was not emitted this time.
    """

    observations: str
    current_task: str | None = None
    suggested_response: str | None = None
    thread_title: str | None = None
    extracted: dict[str, Any] = field(default_factory=dict)
    extraction_failures: dict[str, str] = field(default_factory=dict)
    found_block: bool = False


def parse_observer_output(text: str, extractors: Sequence[Extractor] = ()) -> ParsedOutput:
    """Parse an observer answer; falls back to list items when no block is present."""
    return _parse(text, extractors, whole_text_fallback=False)


def parse_reflector_output(text: str, extractors: Sequence[Extractor] = ()) -> ParsedOutput:
    """Parse a reflector answer; falls back to list items, then to the whole remaining text."""
    return _parse(text, extractors, whole_text_fallback=True)


def truncate_long_lines(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """Cap every line at ``limit`` characters, marking the cut with :data:`TRUNCATION_SUFFIX`."""
    return "\n".join(
        line if len(line) <= limit else line[:limit] + TRUNCATION_SUFFIX for line in text.split("\n")
    )


def strip_anchor_ids(text: str) -> str:
    """Remove ``[O12]``-style anchor ids (and the space after them) from every line."""
    if "[O" not in text:
        return text
    return "\n".join(_ANCHOR.sub("", line).rstrip() for line in text.split("\n"))


def _parse(text: str, extractors: Sequence[Extractor], *, whole_text_fallback: bool) -> ParsedOutput:
    text = text.replace("\r\n", "\n")
    for tag in ECHOED_FENCES:
        _, text = _take_line_start_section(text, tag)
    # Control sections are read from the top level only: the blocks are set aside first.
    text, blocks = _split_blocks(text)
    extracted: dict[str, Any] = {}
    failures: dict[str, str] = {}

    builtins: dict[str, str | None] = {}
    for slug in BUILTIN_SLUGS:
        value, text = _take_line_start_section(text, slug)
        builtins[slug] = _own_words(value)

    inline = [
        e for e in extractors if e.mode == "inline" and e.slug not in BUILTIN_SLUGS and e.slug != "observations"
    ]
    text = _take_extracted_values(text, {e.slug for e in inline}, extracted, failures)
    for extractor in inline:
        text = _take_inline_value(text, extractor.slug, extracted, failures)

    if blocks is not None:
        observations = "\n".join(_trim_blank_lines(block) for block in blocks)
    else:
        observations = _list_items(text)
        if not observations and whole_text_fallback:
            observations = text
    # Observations are memory, never structure: a tag-shaped mention keeps its text, escaped.
    observations = _markup_defused(defuse(observations, [EXTRACTED_VALUES_TAG, *(e.slug for e in inline)]))
    observations = _trim_blank_lines(truncate_long_lines(strip_anchor_ids(observations)))

    return ParsedOutput(
        observations=observations,
        current_task=builtins["current-task"],
        suggested_response=builtins["suggested-response"],
        thread_title=_single_line(builtins["thread-title"]),
        extracted=extracted,
        extraction_failures=failures,
        found_block=blocks is not None,
    )


def _own_words(value: str | None) -> str | None:
    """A control section's value without the lines the model copied from its input.

    The current task, the suggested response and the title are the model's own summary; a line
    that reads as a line of the transcript (a role label, a quoted line of content, a date
    header: :func:`~obsmem.om.text.transcript.is_transcript_line`) is a user's or a tool's text
    copied through, and a tool's text must never become the actor's task. What is left is
    defused like the observations; nothing left means no section.
    """
    if value is None:
        return None
    kept = "\n".join(line for line in value.split("\n") if not is_transcript_line(line)).strip()
    return _markup_defused(kept) or None


def _markup_defused(text: str) -> str:
    """``text`` with the ``<`` of every tag-shaped token (``<name …>``, ``</name>``, ``<|…|>``)
    written ``&lt;``: memory is shown to a model as text, so no markup of any kind (a chat
    template's ``<|im_start|>``, a ``<system>`` tag) survives into it as markup."""
    return TAG_SHAPED.sub("&lt;", text) if "<" in text else text


def _trim_blank_lines(text: str) -> str:
    """Drop blank lines at both ends and trailing spaces, but keep the first line's indent."""
    lines = [line.rstrip() for line in text.split("\n")]
    first = next((i for i, line in enumerate(lines) if line), len(lines))
    last = next((i for i in range(len(lines) - 1, first - 1, -1) if lines[i]), first - 1)
    return "\n".join(lines[first : last + 1])


def _split_blocks(text: str) -> tuple[str, list[str] | None]:
    """The top level of ``text`` and the contents of its ``<observations>`` blocks.

    The top level is ``text`` with every block's content cut out (its tags stay, so that an
    unclosed section before a block still stops at the block). The blocks are None when there
    is none. A block closes at the next line-start ``</observations>``; without one, at the
    last ``</observations>`` that ends a line; without that, at the end of the text.
    """
    top: list[str] = []
    blocks: list[str] = []
    position = 0
    no_line_start_close = False  # a search for a line-start closing found none up to the end
    last_line_end_close: re.Match[str] | None = None
    searched_line_end = False
    while (opening := _OBS_OPEN.search(text, position)) is not None:
        start = opening.end()
        top.append(text[position:start])
        closing = None if no_line_start_close else _OBS_CLOSE_LINE_START.search(text, start)
        if closing is not None:
            # The closing tag and its indent stay in the top level, so content ends before them.
            end = closing.start()
            position = end
        else:
            no_line_start_close = True
            if not searched_line_end:
                # One scan for the whole text: a later block can only end at the same closing.
                searched_line_end = True
                for match in _OBS_CLOSE_LINE_END.finditer(text, start):
                    last_line_end_close = match
            if last_line_end_close is not None and last_line_end_close.start() >= start:
                end = last_line_end_close.start()
                position = end
            else:
                end = position = len(text)
        blocks.append(text[start:end])
    top.append(text[position:])
    return "".join(top), blocks or None


def _list_items(text: str) -> str:
    """The list-item lines, with the ``Date:`` headers that group them; nothing else."""
    kept: list[str] = []
    pending_header: str | None = None
    for line in text.split("\n"):
        if parse_date_header(line) is not None:
            pending_header = line.strip()
        elif _LIST_ITEM.match(line):
            if pending_header is not None:
                if kept:
                    kept.append("")
                kept.append(pending_header)
                pending_header = None
            kept.append(line.rstrip())
    return "\n".join(kept)


def _take_line_start_section(text: str, slug: str) -> tuple[str | None, str]:
    """Read (last occurrence wins) and remove every ``<slug>`` section that starts a line.

    The closing tag may sit on the same line or a later one; an unclosed section runs to the
    next line-start tag or the end of the text. Returns the stripped value (None when absent
    or blank) and the text without the sections.
    """
    opening = re.compile(rf"^[ \t]*<{re.escape(slug)}>", re.MULTILINE)
    # Removing a section joins the text before it (which ends at a line start) to what follows
    # the section, so an opening right there starts a line too: it is looked for first.
    joined_opening = re.compile(rf"[ \t]*<{re.escape(slug)}>")
    closing = f"</{slug}>"
    value: str | None = None
    kept: list[str] = []
    position = 0  # everything before it is decided: kept, or removed as a section
    no_closing_after = len(text) + 1  # a search for ``closing`` from here found none
    match = opening.search(text)
    while match is not None:
        kept.append(text[position : match.start()])
        end_tag = -1 if match.end() >= no_closing_after else text.find(closing, match.end())
        if end_tag != -1:
            content, resume = text[match.end() : end_tag], end_tag + len(closing)
        else:
            no_closing_after = min(no_closing_after, match.end())
            next_tag = _ANY_LINE_START_TAG.search(text, match.end())
            stop = next_tag.start() if next_tag else len(text)
            content, resume = text[match.end() : stop], stop
        value = content.strip() or None
        position = resume
        match = joined_opening.match(text, resume) or opening.search(text, resume)
    kept.append(text[position:])
    return value, "".join(kept)


def _last_closing_end(text: str, closing: str) -> int:
    """Where the last ``closing`` tag ends (0 without one): no ``<tag>…</tag>`` match can end
    later, so a lazy scan from an opening never has to run past it to the end of the text."""
    at = text.rfind(closing)
    return at + len(closing) if at != -1 else 0


def _without(text: str, matches: list[re.Match[str]]) -> str:
    """``text`` without the (non-overlapping, ordered) ``matches``."""
    kept: list[str] = []
    position = 0
    for match in matches:
        kept.append(text[position : match.start()])
        position = match.end()
    kept.append(text[position:])
    return "".join(kept)


def _take_inline_value(
    text: str, slug: str, extracted: dict[str, Any], failures: dict[str, str]
) -> str:
    """Read the last ``<slug>…</slug>`` whose opening starts a line into ``extracted``; remove all."""
    pattern = re.compile(rf"^[ \t]*<{re.escape(slug)}>(.*?)</{re.escape(slug)}>", re.DOTALL | re.MULTILINE)
    matches = list(pattern.finditer(text, 0, _last_closing_end(text, f"</{slug}>")))
    if not matches:
        if re.search(rf"^[ \t]*<{re.escape(slug)}>", text, re.MULTILINE):
            failures[slug] = f"the <{slug}> section was opened but never closed"
        return text
    extracted[slug] = _decode(matches[-1].group(1))
    failures.pop(slug, None)
    return _without(text, matches)


def _take_extracted_values(
    text: str, slugs: set[str], extracted: dict[str, Any], failures: dict[str, str]
) -> str:
    """Read line-start ``<extracted-values>{JSON}</extracted-values>`` blocks; later blocks win per key.

    A block that is not a JSON object cannot be attributed to one extractor, so it is reported
    against every inline extractor that no block has answered yet; a value given later as its
    own ``<slug>`` tag clears that failure.
    """
    matches = list(_EXTRACTED_VALUES.finditer(text, 0, _last_closing_end(text, "</extracted-values>")))
    for match in matches:
        raw = match.group(1).strip()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            problem = f"<extracted-values> is not valid JSON: {exc}"
            data = None
        else:
            problem = "<extracted-values> must hold a JSON object"
        if not isinstance(data, dict):
            for slug in slugs - extracted.keys():
                failures[slug] = problem
            continue
        for key, value in data.items():
            if key in slugs:
                extracted[key] = value
                failures.pop(key, None)
    return _without(text, matches)


def _decode(raw: str) -> Any:
    """A value's JSON decoding when it is JSON, else the stripped string."""
    value = raw.strip()
    if value[:1] in ("{", "[", '"') or value in ("true", "false", "null") or _looks_numeric(value):
        try:
            return json.loads(value)
        except ValueError:
            pass
    return value


def _looks_numeric(value: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", value))


def _single_line(value: str | None) -> str | None:
    """Titles are one line: collapse whitespace; a blank title is no title."""
    if value is None:
        return None
    collapsed = " ".join(value.split())
    return collapsed or None

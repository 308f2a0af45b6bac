"""obsmem's own text inside a conversation, and how it is told apart from the application's.

The context obsmem builds for the actor (:mod:`obsmem.om.context`) holds messages obsmem wrote
itself: the preamble, the observation chunks and the volatile sections (system role), the
continuation reminder and the temporal-gap reminders (user role, inside ``<system-reminder>``
tags). Each carries the marker :data:`MARKER_KEY` in its metadata (the value says which part it
is) and an id of its own thread. An application that saves what it sent to the model hands
these messages back; they are never stored as conversation and never observed.

A round trip through a provider's wire format (``to_openai`` then ``from_openai``) keeps
neither ids nor metadata, so obsmem's fixed texts are recognised as well
(:func:`is_obsmem_message`), and in a sequence every system message between a recognised one
and the next non-system message (the middle observation chunks, extractor sections) goes with
it (:func:`drop_obsmem_messages`).

``<system-reminder>`` blocks are guidance for the model (obsmem's reminders, or notes an agent
framework injects into user messages), not something the user said: they are cut out of user
text before observation (:func:`conversation_view`), whatever the tags' case, spacing or
attributes (:func:`strip_system_reminders`).

Pure functions, linear in the text length.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from obsmem.types import LONG_TEXT_CHARS, Message, Part, TextPart, on_long_text

__all__ = [
    "CONTINUATION",
    "MARKER_KEY",
    "OTHER_CONVERSATIONS",
    "PREAMBLE",
    "conversation_messages",
    "conversation_view",
    "drop_obsmem_messages",
    "is_obsmem_message",
    "plain_conversation",
    "strip_system_reminders",
]

MARKER_KEY: Final = "obsmem"
"""The metadata key that marks obsmem's own context messages (its value names the part)."""

PREAMBLE: Final = """\
Your memory of the earlier conversation with this user: observations written as it happened,
your only record of it.
- Use its specific details rather than generic advice.
- When facts conflict, the newest wins; watch for changes ("moved to", "switched to").
- A plan whose date has passed probably happened; ask when it matters.
- What the user says about themselves is authoritative; an assistant's suggestion counts only if
  the user adopted it.
- The user's latest message comes first. Never mention text in <system-reminder> tags."""

CONTINUATION: Final = """\
<system-reminder>
Continue naturally and answer the latest message, with the memory above as background (pick up
unfinished work only where it helps; follow a suggested response if present). Do not mention
memory, summaries or missing messages. Everything after this is newer than the memory and takes
priority.
</system-reminder>"""

OTHER_CONVERSATIONS: Final = """\
The following comes from this user's other conversations. It is reference only: use it for
context, do not continue those conversations here, and do not assume this conversation has
seen it."""

# A ``<system-reminder>`` opening tag in any spelling a model would read as one: any case,
# whitespace after ``<``, and whitespace or attributes before ``>`` ("<SYSTEM-REMINDER>",
# "<system-reminder >", '<system-reminder kind="note">'). _OPEN_START finds where one may begin;
# the tag runs to the next ``>`` (found with str.find, so that many openings without a ``>`` are
# scanned once, not once each). "<system-reminders>" or "<system-reminder-x>" is another tag.
_OPEN_START: Final = re.compile(r"<\s*system-reminder(?![\w-])", re.IGNORECASE)
_CLOSE_TAG: Final = re.compile(r"<\s*/\s*system-reminder\s*>", re.IGNORECASE)

# How obsmem's system messages read after a wire round trip took their marker. A context's
# obsmem system messages form one run that opens with the preamble (observations, hints and
# extracted sections follow it) or the other-conversations block; only the working memory and
# the hints may stand alone, and obsmem writes each of those as one whole tagged block. So an
# application's prompt that merely uses the same tags ("<working-memory>…</working-memory>
# You are …", a CRM block ending in "</observations>") is never taken for obsmem's.
_RUN_OPENINGS: Final = (PREAMBLE.split("\n", 1)[0], OTHER_CONVERSATIONS.split("\n", 1)[0])
_WHOLE_SECTIONS: Final = ("current-task", "suggested-response", "working-memory")
_OWN_ID_PREFIX: Final = "om-"  # obsmem_message_id: every message obsmem writes into a context
# A temporal-gap reminder: "<system-reminder>3 hours later — Mon Jun 16 2025 12:00 UTC</system-reminder>".
_GAP_REMINDER: Final = re.compile(r"<system-reminder>[^<>\n]{1,80} later — [^<>\n]{0,80}</system-reminder>")
_BLANK_RUN: Final = re.compile(r"\n{3,}")


def strip_system_reminders(text: str) -> str:
    """``text`` without its ``<system-reminder>…</system-reminder>`` blocks.

    The tags are recognised in any case, with whitespace after ``<`` and whitespace or
    attributes before ``>`` (``<SYSTEM-REMINDER>``, ``<system-reminder >``,
    ``<system-reminder kind="note">``, ``</ system-reminder >``); a self-closing
    ``<system-reminder/>`` is only a tag (it goes). A block runs from its opening tag to the
    next closing tag. An opening without a closing tag after it is not a block and is left as
    it is (what follows it is the user's text: it is observed, as data), and so is a closing tag
    without an opening. When something was cut, the blank lines it leaves collapse and the ends
    are trimmed; otherwise ``text`` comes back unchanged. Linear: each search starts where the
    previous one ended, and no search runs again over text it passed.
    """
    opening = _OPEN_START.search(text)
    if opening is None:
        return text
    pieces: list[str] = []
    position = 0
    cut = False
    while opening is not None:
        tag_end = text.find(">", opening.end())
        if tag_end == -1:  # no ">" left: neither this nor any later opening is a tag
            break
        if text[tag_end - 1] == "/":  # "<system-reminder/>": an empty block, only the tag goes
            pieces.append(text[position : opening.start()])
            position = tag_end + 1
            cut = True
            opening = _OPEN_START.search(text, position)
            continue
        closing = _CLOSE_TAG.search(text, tag_end + 1)
        if closing is None:  # no closing tag after it: no later opening has one either
            break
        pieces.append(text[position : opening.start()])
        position = closing.end()
        cut = True
        opening = _OPEN_START.search(text, position)
    if not cut:
        return text
    pieces.append(text[position:])
    return _BLANK_RUN.sub("\n\n", "".join(pieces)).strip()


def _may_hold_reminder(text: str) -> bool:
    """Whether :func:`strip_system_reminders` may change ``text`` (never False when it would):
    a cheap test for the start of an opening tag in any spelling."""
    return "<" in text and _OPEN_START.search(text) is not None


def is_obsmem_message(message: Message) -> bool:
    """Whether ``message`` is one obsmem wrote into a context (never conversation).

    True for a message carrying the marker (``metadata["obsmem"]``) on an id obsmem gave it
    (``om-…``: an application's message that happens to use the key is the application's), and
    for one that lost both on a trip through a provider's wire format but still reads as
    obsmem's: a system message that opens like the preamble or the other-conversations block,
    or is exactly one volatile section as obsmem writes it (``<current-task>``,
    ``<suggested-response>``, ``<working-memory>`` block and nothing else); a user message that
    is exactly the continuation reminder or a temporal-gap reminder. The observation chunks
    after the preamble go with its run (:func:`drop_obsmem_messages`). An application prompt
    that is exactly such a section block is indistinguishable after a round trip that drops ids
    and metadata; one with anything around the block is the application's.
    """
    if isinstance(message.metadata.get(MARKER_KEY), str) and message.id.startswith(_OWN_ID_PREFIX):
        return True
    if message.role == "system":
        return _is_own_system_text(message.text.strip())
    if message.role == "user":
        return _is_own_user_text(message.text)
    return False


def _is_own_system_text(text: str) -> bool:
    if text.startswith(_RUN_OPENINGS):
        return True
    for tag in _WHOLE_SECTIONS:
        opening, closing = f"<{tag}>\n", f"\n</{tag}>"
        if text.startswith(opening) and text.endswith(closing) and text.find(f"</{tag}>") == len(text) - len(closing) + 1:
            return True  # exactly one block, as obsmem writes it, and nothing around it
    return False


def _is_own_user_text(text: str) -> bool:
    text = text.strip()
    return text == CONTINUATION or (len(text) < 240 and _GAP_REMINDER.fullmatch(text) is not None)


def _without_own_parts(message: Message) -> Message | None:
    """A user message without the text parts that are obsmem's reminders (a provider format that
    merges consecutive user messages puts the continuation reminder into the next one)."""
    if message.role != "user":
        return message
    parts = tuple(p for p in message.parts if not (isinstance(p, TextPart) and _is_own_user_text(p.text)))
    if len(parts) == len(message.parts):
        return message
    return message.model_copy(update={"parts": parts}) if parts else None


def plain_conversation(messages: Sequence[Message]) -> bool:
    """Whether :func:`drop_obsmem_messages`, :func:`conversation_view` and so
    :func:`conversation_messages` would return every message of ``messages`` as it is (the same
    objects, in order), checked without running them: no system message, no message with
    obsmem's marker, and no user text part holding a ``<system-reminder>`` block.

    Those rules recognise obsmem's own messages by the marker, by a system message's text, and
    by a user text that is (or holds) a reminder, which always contains the start of an opening
    tag, ``<system-reminder`` in some spelling (in one part: ``Message.text`` joins parts with a
    newline, and obsmem's own reminders have none inside their opening tag). A step
    reads the window once and builds the context from it; this keeps the second pass (and the
    first, on an ordinary window) to a scan of roles and tags.
    """
    for message in messages:
        role = message.role
        if role == "system" or isinstance(message.metadata.get(MARKER_KEY), str):
            return False
        if role == "user":
            parts = message.parts
            if message.__dict__.get(_PLAIN_PARTS_KEY) is parts:
                continue  # its parts were found to hold no reminder (a window's message, seen again)
            for part in parts:
                if part.type == "text" and _part_may_hold_reminder(part):
                    return False
            message.__dict__[_PLAIN_PARTS_KEY] = parts
    return True


#: On a user message whose parts hold no reminder (:func:`plain_conversation`): that parts tuple
#: (not a field; written and read only for user messages, and a copy with other parts checks
#: them again). A window's messages are scanned at every boundary, several times: each user
#: message's parts are looked at once.
_PLAIN_PARTS_KEY = "_obsmem_plain_parts"


#: Where a long text part keeps :func:`_may_hold_reminder`'s answer (not a field; as
#: :func:`~obsmem.types.text_digest` keeps its digest): a pasted log holds ``<``, and every
#: boundary's scans of the window ran the pattern over all of it again.
_REMINDER_KEY = "_obsmem_may_hold_reminder"


@on_long_text  # a SQL store works it out where it decodes a long row (its worker thread)
def _part_may_hold_reminder(part: Any) -> bool:
    text = part.text
    if len(text) < LONG_TEXT_CHARS:
        return _may_hold_reminder(text)
    memo = part.__dict__.get(_REMINDER_KEY)
    if memo is not None and memo[0] is text:
        return bool(memo[1])
    answer = _may_hold_reminder(text)
    part.__dict__[_REMINDER_KEY] = (text, answer)
    return answer


def drop_obsmem_messages(messages: Iterable[Message]) -> list[Message]:
    """``messages`` without obsmem's own (what to keep when an application saves what it sent).

    Besides every message :func:`is_obsmem_message` recognises, a system message that follows a
    recognised system message (only system messages between them) is obsmem's too: a context
    lists the application's instructions first, then obsmem's system messages in one run, so a
    middle observation chunk that lost its marker still goes with the run it belongs to. A user
    message loses the text parts that are obsmem's reminders (and goes when nothing is left).
    """
    messages = list(messages)
    if plain_conversation(messages):  # the common case: nothing to drop or cut
        return messages
    return _drop_obsmem_messages(messages)


def _drop_obsmem_messages(messages: Iterable[Message]) -> list[Message]:
    """:func:`drop_obsmem_messages` by its full rules (no shortcut)."""
    kept: list[Message] = []
    in_own_run = False
    for message in messages:
        own = is_obsmem_message(message)
        if message.role == "system":
            in_own_run = in_own_run or own
            if not in_own_run:
                kept.append(message)
            continue
        in_own_run = False
        rest = None if own else _without_own_parts(message)
        if rest is not None:
            kept.append(rest)
    return kept


def conversation_view(message: Message) -> Message | None:
    """The message as conversation for an observer: None when it is obsmem's own or has nothing
    left; a user message loses its ``<system-reminder>`` blocks (a text part left empty goes)."""
    if is_obsmem_message(message):
        return None
    if message.role != "user" or not any(
        isinstance(p, TextPart) and _may_hold_reminder(p.text) for p in message.parts
    ):
        return message
    parts: list[Part] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            text = strip_system_reminders(part.text)
            if not text.strip():
                continue
            part = part if text == part.text else part.model_copy(update={"text": text})
        parts.append(part)
    if not parts:
        return None
    return message.model_copy(update={"parts": tuple(parts)})


def conversation_messages(messages: Sequence[Message]) -> list[Message]:
    """What of ``messages`` an observer may read: :func:`drop_obsmem_messages`, then
    :func:`conversation_view` of each (messages left with nothing are dropped)."""
    if plain_conversation(messages):  # the common case: every message is conversation as it is
        return list(messages)
    return _conversation_messages(messages)


def _conversation_messages(messages: Sequence[Message]) -> list[Message]:
    """:func:`conversation_messages` by its full rules (no shortcut)."""
    return [view for view in map(conversation_view, _drop_obsmem_messages(messages)) if view is not None]

"""What forgetting a value does to stored data: pure functions over messages, records and text.

``Memory.forget`` reads every place a value can be stored and writes back what these functions
return. A value is matched as a case-sensitive substring of the stored text, **in every spelling
obsmem stores it in** (:func:`holds`): messages keep it as written, while observations, older
generations and the context built from them keep it quoted as data (:func:`obsmem.quoting.defuse`:
``<`` and ``>`` as ``‹`` and ``›``, a line break, tab or control character as a space, no
priority marker), an LLM observer's markup escape writes a tag's ``<`` as ``&lt;``, and a
quotation writes “…” marks as ``"``. Both sides are brought to one canonical spelling
(:func:`canonical`) before the substring test, so ``forget("pa<ss>wd")`` finds
``pa‹ss›wd`` and ``pa&lt;ss>wd`` as well. Structured data (tool arguments, metadata, data parts)
is matched string by string (keys included), not on its JSON encoding, so a quote mark or a
backslash in the value is found although JSON escapes it.

* **Text** (observations, working memory, buffered chunks): every *line* containing the value
  goes; the other lines stay as they were.
* **Messages**: a text or reasoning part containing the value goes; a data part holding it goes
  (an app's: its name, keys and values, as a tool's; obsmem's marker: what it quotes; a
  LangChain block obsmem has no part for: what it says); a file
  part holding it goes (its address and name, as written and percent-decoded, and a text
  file's content, its base64 decoded). A tool call or
  tool result is never dropped, because a result must keep its call (providers reject a result
  without one): its arguments or result are replaced by :data:`FORGOTTEN`, and the pairing
  stays valid (a content block in them, ``{"type": "text", "text": ...}``, by what it says). A
  message left with no parts is deleted. A metadata entry holding the value goes; obsmem's own (``obsmem_``: a reply's receipt, the marks of a call answered late) only
  by what it holds, never by obsmem's names in it, and a receipt only by the ids it lists
  (not the thread ids it names, its counts, time or hash).
  The provider blocks the LangChain integration keeps beside a message's parts (a thinking
  block's signature) go one by one, with their part or by what they say, never by their field
  names; the others stay with their parts (see :data:`_LANGCHAIN`).
* Ids (a resource or thread id holding the value) are not text: ``Memory.delete_resource`` or
  ``Memory.delete_thread`` removes them.
* **Records**: the active observations, buffered chunks and reflection, and every per-thread
  state (current task, suggested response, title, extracted values) are cleaned line by line
  or field by field; metadata keys whose JSON holds the value go (obsmem's own entries and
  the settings the record was made under: by their values, not their names).

A value that is one phone number ("+49 151 2345678") is found in every way the number is
written: a number in the text (its digits, separators dropped) holding the value's national
digits ("0151 2345678", "0049-151-234-5678"); in every country, as the knowledge store forgets it,
and a longer number holding those digits goes too (forgetting errs towards removal).

Limits: a value cut by truncation (a long line shortened with "…") or reworded by an observer
("my" → "User's") is not found in its cut or reworded form; a value spanning several lines of
a text (working memory) is found only where it was written on one line (a message part, an
observation quoted onto one line).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import lru_cache
from typing import Any, Final
from urllib.parse import unquote, unquote_plus

from obsmem.phones import digit_runs, national_digits
from obsmem.quoting import defuse
from obsmem.storage.contract import MAX_FORGOTTEN_IDS, BufferedChunk, ObservationRecord, ThreadState
from obsmem.types import DataPart, FilePart, Message, Part, Thread, ToolCallPart, ToolResultPart

__all__ = [
    "FORGET_HOLD_S", "FORGOTTEN", "FORGOTTEN_JSON_PATH", "ForgetsInFlight", "MAX_FORGOTTEN_IDS", "canonical", "contains", "forget_in_message",
    "forget_in_record", "forget_lines", "forget_needles", "forget_in_thread_metadata", "forgotten_ids", "forgotten_id_list", "holds",
    "json_strings", "parse_forgotten_ids", "Sought", "with_forgotten_id_list", "with_forgotten_ids",
]

#: What is forgotten: a value (matched as the module doc says), or a test of a text standing for
#: values the caller cannot spell out (an import asks whether a text holds one of the knowledge
#: store's forgotten values, kept as digests: :func:`obsmem.knowledge.store.values.forgotten_in`).
#: Every function here takes either, and decides with :func:`holds` alone, so a test decides what
#: is said exactly where a value would: never by field names, types or obsmem's bookkeeping.
Sought = str | Callable[[str], bool]

#: What a tool call's arguments or a tool result's content become when they held a forgotten value.
FORGOTTEN = "[forgotten]"

#: The ids of the messages a forget rewrote or deleted, kept on their thread (its
#: ``metadata["obsmem"]["forgotten"]``; ids only, no text) so that a copy of one saved back (an
#: app or framework holding the conversation as it was) does not bring the value back: such a
#: copy is never stored (the stored message stands; a deleted one stays deleted). The newest
#: :data:`MAX_FORGOTTEN_IDS` are kept: the thread's row is read at every turn boundary (a store
#: may keep every one besides: :func:`obsmem.storage.contract.note_forgotten_ids`).
_OWN = "obsmem"
_FORGOTTEN_IDS = "forgotten"
# The entries of a thread's ``metadata["obsmem"]`` that hold message ids and seqs, no text: these
# ids and the recorded instructions (obsmem.om.context.remember_instructions).
_OWN_ID_ENTRIES: Final = frozenset({_FORGOTTEN_IDS, "instructions"})


#: Where a store's query finds :func:`forgotten_ids` in a thread's metadata (a JSON path).
FORGOTTEN_JSON_PATH: Final = f"$.{_OWN}.{_FORGOTTEN_IDS}"


def parse_forgotten_ids(raw: str) -> frozenset[str]:
    """:func:`forgotten_ids` from the JSON a store's query found at :data:`FORGOTTEN_JSON_PATH`."""
    try:
        ids = json.loads(raw)
    except ValueError:
        return frozenset()
    return frozenset(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else frozenset()


def forgotten_ids(thread: Thread) -> frozenset[str]:
    """The ids of ``thread``'s messages a forget rewrote or deleted (see :data:`MAX_FORGOTTEN_IDS`)."""
    own = thread.metadata.get(_OWN)
    ids = own.get(_FORGOTTEN_IDS) if isinstance(own, dict) else None
    return frozenset(i for i in ids if isinstance(i, str)) if isinstance(ids, list) else frozenset()


def forgotten_id_list(thread: Thread) -> list[str]:
    """:func:`forgotten_ids` as the thread's row keeps them, oldest first."""
    own = thread.metadata.get(_OWN)
    ids = own.get(_FORGOTTEN_IDS) if isinstance(own, dict) else None
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def with_forgotten_id_list(thread: Thread, ids: list[str]) -> Thread:
    """``thread`` whose forgotten ids are ``ids`` as given (an export carries every one; an import
    keeps the newest :data:`MAX_FORGOTTEN_IDS` on the row)."""
    own = thread.metadata.get(_OWN)
    own = {**own, _FORGOTTEN_IDS: list(ids)} if isinstance(own, dict) else {_FORGOTTEN_IDS: list(ids)}
    return thread.model_copy(update={"metadata": {**thread.metadata, _OWN: own}})


def with_forgotten_ids(thread: Thread, ids: list[str]) -> Thread:
    """``thread`` with ``ids`` added to its forgotten ids (the newest kept), or itself when it
    has them all already."""
    own = thread.metadata.get(_OWN)
    own = dict(own) if isinstance(own, dict) else {}
    known = own.get(_FORGOTTEN_IDS)
    known = [i for i in known if isinstance(i, str)] if isinstance(known, list) else []
    seen = set(known)
    new = [i for i in dict.fromkeys(ids) if i not in seen]
    if not new:
        return thread
    own[_FORGOTTEN_IDS] = [*known, *new][-MAX_FORGOTTEN_IDS:]
    return thread.model_copy(update={"metadata": {**thread.metadata, _OWN: own}})


def forget_in_thread_metadata(metadata: dict[str, Any], value: Sought) -> dict[str, Any]:
    """A thread's ``metadata`` without its entries holding ``value`` (``metadata`` itself when none
    does). obsmem's own entries of message ids (:func:`forgotten_ids`, the recorded instructions)
    are kept whatever they hold: ids, not text, and a value that is part of one (a number inside
    a message id, a word such as "forgotten") would otherwise take the forgotten ids along, and a
    copy of a forgotten message saved back after that would bring its value back."""
    kept: dict[str, Any] = {}
    for key, item in metadata.items():
        if key == _OWN and isinstance(item, dict):
            # by what it holds, never by obsmem's names: matched by its key, forgetting "obsmem",
            # "mem" or "o" took the forgotten ids, and a copy saved back brought an earlier value back
            own = {k: v for k, v in item.items() if k in _OWN_ID_ENTRIES or not _says(v, value)}
            if own or not item:
                kept[key] = own if len(own) < len(item) else item
        elif not holds(key, value) and not contains(item, value):
            kept[key] = item
    return metadata if kept == metadata else kept


# The escapes obsmem (an LLM observer's markup escape, an attribute) or a model writes for the
# characters the quoting rule touches; "&amp;" last, so "&amp;lt;" stays "&lt;".
_ENTITIES: Final = (
    ("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#x27;", "'"), ("&#39;", "'"), ("&amp;", "&"),
)
_QUOTE_MARKS: Final = str.maketrans({"\u201c": '"', "\u201d": '"'})
_SPACES: Final = re.compile(r"\s{2,}|[^\S ]")  # a run of whitespace (a lone space is already one)


def canonical(text: str) -> str:
    """``text`` in the one spelling every stored form of it shares: entities unescaped, then
    :func:`~obsmem.quoting.defuse` (angle brackets as look-alikes, line breaks and control
    characters as spaces, no priority marker), typographic quote marks as ``"``, and every run
    of whitespace as one space. Linear in the text length."""
    if "&" in text:
        for entity, char in _ENTITIES:
            text = text.replace(entity, char)
    return _SPACES.sub(" ", defuse(text).translate(_QUOTE_MARKS))


@lru_cache(maxsize=64)
def _needle(value: str) -> str | None:
    """What a stored text's canonical spelling is searched for; None when the value's own is
    blank (a value of priority markers or whitespace alone: only its exact spelling matches)."""
    needle = canonical(value)
    return needle if needle.strip() else None


@lru_cache(maxsize=64)
def _number(value: str) -> str | None:
    """A value that is one phone number: its national digits (:func:`obsmem.phones.national_digits`)."""
    return national_digits(value)


def forget_needles() -> None:
    """Drop the kept spellings of the values searched for (the forgotten values themselves)."""
    _needle.cache_clear()
    _number.cache_clear()


def holds(text: str, value: Sought) -> bool:
    """Whether ``text`` holds ``value`` in any spelling obsmem stores it in (see the module doc);
    a value that is one phone number, in any way the number is written: a number of ``text``
    holding its national digits ("0151 2345678" and "+49 151 234 5678" hold "+49 151 2345678").
    A test in place of a value is asked as it is (see :data:`Sought`)."""
    if not isinstance(value, str):
        return value(text)
    if value in text:
        return True
    needle = _needle(value)
    if needle is not None and needle in canonical(text):
        return True
    number = _number(value)
    return number is not None and any(number in run for run in digit_runs(text))


def json_strings(data: object, *, scalars: bool = True, keys: bool = True) -> Iterator[str]:
    """Every string of a JSON-like value, dict keys included (unless ``keys`` is False); with
    ``scalars``, the other scalars too, as JSON writes them (the knowledge store's forget matches
    strings only)."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, item in data.items():
            if keys:
                yield str(key)
            yield from json_strings(item, scalars=scalars, keys=keys)
    elif isinstance(data, list | tuple | set | frozenset):
        for item in data:
            yield from json_strings(item, scalars=scalars, keys=keys)
    elif not scalars:
        return
    elif isinstance(data, bool) or data is None:
        yield "true" if data is True else "false" if data is False else "null"
    else:
        yield str(data)


def contains(data: object, value: Sought) -> bool:
    """Whether ``value`` occurs in ``data`` (a string, or any string inside a JSON-like value),
    in any spelling obsmem stores it in."""
    if isinstance(data, str):
        return holds(data, value)
    texts = list(json_strings(data))
    # One pass over all of them first (a line break between two texts is a space in canonical
    # spelling, so whatever one text holds the joined text holds too); each text only on a hit.
    return holds("\n".join(texts), value) and any(holds(text, value) for text in texts)


def forget_lines(text: str, value: Sought) -> str:
    """``text`` without the lines that contain ``value`` (in any stored spelling)."""
    if not holds(text, value):
        return text
    return "\n".join(line for line in text.split("\n") if not holds(line, value))


# obsmem's markers (obsmem.om.markers: "om-observation-end" ...): the fields that hold ids,
# times, counts, an operation's kind and the settings it ran under, never text anyone wrote (and
# the log fields an activation adds, ``obsmem_*``: telemetry.log_fields, no text). The rest
# (observations, a current task, an error, a title; an unknown field) is matched.
_MARKER_PREFIX: Final = "om-"
_MARKER_BOOKKEEPING: Final = frozenset({
    "cycle_id", "operation_type", "record_id", "thread_id", "thread_ids", "started_at", "completed_at",
    "failed_at", "activated_at", "timestamp", "duration_ms", "tokens_to_observe", "tokens_observed",
    "tokens_to_buffer", "tokens_buffered", "tokens_attempted", "tokens_activated", "observation_tokens",
    "buffered_tokens", "chunks_activated", "messages_activated", "generation", "triggered_by", "config",
    "retrying",
})


# Content block kinds (LangChain's, a provider's) a tool's result may be made of
# ([{"type": "text", "text": ...}]: a LangChain tool, an MCP adapter's), and the fields they have.
_CONTENT_KINDS: Final = frozenset({
    "text", "image", "image_url", "file", "audio", "video", "reasoning", "thinking", "redacted_thinking",
    "document", "input_text", "output_text", "input_image", "input_file", "input_audio", "refusal",
    "text-plain", "non_standard",
})
_CONTENT_FIELDS: Final = frozenset({
    "type", "text", "id", "index", "annotations", "citations", "extras", "url", "base64", "mime_type",
    "media_type", "source_type", "data", "image_url", "file", "file_id", "file_data", "filename",
    "input_audio", "format", "source", "title", "context", "reasoning", "thinking", "signature", "summary",
    "detail", "cache_control", "status", "encrypted_content", "value",
})


def _tool_says(data: object) -> Iterator[str]:
    """What a tool's arguments or result say: every string and scalar, keys included (an app's
    keys are its words), but a content block by what it says (:func:`_block_says`) and the keys
    no block has: its kind and field names are no one's words (forgetting "text" or "type" made
    every result of blocks "[forgotten]")."""
    if isinstance(data, dict):
        kind = data.get("type")
        if isinstance(kind, str) and kind in _CONTENT_KINDS:
            yield from _block_says(data)
            yield from (str(key) for key in data if key not in _CONTENT_FIELDS)
            return
        for key, item in data.items():
            yield str(key)
            yield from _tool_says(item)
    elif isinstance(data, list | tuple):
        for item in data:
            yield from _tool_says(item)
    else:
        yield from json_strings(data)


def _tool_data_holds(data: object, value: Sought) -> bool:
    if isinstance(data, str):
        return holds(data, value)
    texts = list(_tool_says(data))
    return holds("\n".join(texts), value) and any(holds(text, value) for text in texts)


def _part(part: Part, value: Sought) -> Part | None:
    """The part with ``value`` forgotten; None when the part goes."""
    if isinstance(part, ToolCallPart):
        if _tool_data_holds(part.args, value) or holds(part.tool_name, value):
            return part.model_copy(update={"args": FORGOTTEN})
        return part
    if isinstance(part, ToolResultPart):
        if _tool_data_holds(part.result, value) or holds(part.tool_name, value):
            return part.model_copy(update={"result": FORGOTTEN})
        return part
    # What the part says, never the names of its fields or its type ("text", "type", "x" of
    # "text" matched every message): a text's words, a file's address and name and its inline
    # data where that is text (a data: URI not in base64; base64 is no text to match), a data
    # part's values.
    if isinstance(part, FilePart):
        said: list[str] = [part.filename] if part.filename is not None else []
        for ref, inline in ((part.url, False), (part.data, True)):
            if ref is not None:
                said += _file_says(ref, inline, part.media_type)
    elif isinstance(part, DataPart):
        if part.name.startswith(_MARKER_PREFIX):  # obsmem's marker: by what it quotes, not its bookkeeping
            quoted = {k: v for k, v in part.data.items() if k not in _MARKER_BOOKKEEPING and not k.startswith("obsmem_")}
            said = list(json_strings(quoted, keys=False))
        elif part.name == _LANGCHAIN_BLOCK:  # a LangChain block obsmem has no part for: what it says
            said = list(_block_says(part.data))
        else:  # an app's or a framework's: its name and data string by string, keys included (as a tool's)
            said = [part.name, *json_strings(part.data)]
    else:
        said = [part.text]
    return None if any(holds(text, value) for text in said) else part


# Media types whose bytes are text, besides text/*: a file of one, stored base64, is read as text.
_TEXT_MEDIA: Final = frozenset({
    "application/json", "application/xml", "application/x-ndjson", "application/csv", "application/yaml",
    "application/x-yaml", "application/javascript", "application/sql", "application/x-sh", "application/toml",
})


def _textual(media_type: str) -> bool:
    kind = media_type.split(";")[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXT_MEDIA or kind.endswith(("+json", "+xml"))


def _file_says(ref: str, inline: bool, media_type: str) -> list[str]:
    """What a file's ``url`` or inline ``data`` (``inline``) says, in each spelling it is written
    in: an address and a data: URI's content as written and percent-decoded ("Zaphod%20Quux"); a
    text file's base64 (inline data, a data: URI marked ``;base64``) decoded. Other base64 (an
    image) says nothing: a short value would match it by chance."""
    if ref.startswith("data:"):
        header, _, body = ref.partition(",")
        kind = header[5:].split(";")[0] or "text/plain"
        if ";base64" in header:
            return [_decoded(body)] if _textual(kind) else []
        return _unquoted(body)
    if inline:
        return [_decoded(ref)] if _textual(media_type) else []
    return _unquoted(ref)


def _unquoted(text: str) -> list[str]:
    """``text`` as written and percent-decoded (a URL's query writes a space as "+" too)."""
    if "%" not in text and "+" not in text:
        return [text]
    return list(dict.fromkeys((text, unquote(text), unquote_plus(text))))


def _decoded(data: str) -> str:
    """A text file's base64 as text ("" when it is not base64)."""
    try:
        raw = base64.b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        return ""
    return raw.decode("utf-8", errors="replace")


def forget_in_message(message: Message, value: Sought) -> Message | None:
    """``message`` with ``value`` forgotten (itself when untouched); None when it has to go."""
    said_files = _files_said_in_blocks(message, value)
    if not said_files and not contains(message.model_dump(mode="json"), value) and not any(
        isinstance(part, FilePart) and _part(part, value) is None for part in message.parts
    ):  # (a file may hold it in a spelling of its own: percent-encoded, a text file's base64)
        return message
    parts: list[Part] = []
    places: dict[int, int] = {}  # a kept part's index before -> after
    for index, part in enumerate(message.parts):
        if index not in said_files and (kept := _part(part, value)) is not None:
            places[index] = len(parts)
            parts.append(kept)
    metadata = _message_metadata(message.metadata, value, (message.parts, places))
    if not parts:
        return None
    if tuple(parts) == message.parts and metadata == message.metadata:
        return message  # the value is only in an id (thread or resource): not text to forget
    return message.model_copy(update={"parts": tuple(parts), "metadata": metadata})


def _files_said_in_blocks(message: Message, value: Sought) -> set[int]:
    """The indexes of ``message``'s file parts whose LangChain block (see :data:`_LANGCHAIN`)
    says ``value``: a file goes with its block. A legacy ``source_type: "base64"`` block's part
    holds none of its data, so a text file's content was in the block alone, sent back as it was."""
    entry = message.metadata.get(_LANGCHAIN)
    if not isinstance(entry, dict) or not _is_langchain_entry(entry):
        return set()
    blocks: dict[int, object] = {int(key): block for key, block in entry.get("blocks", {}).items()}
    # a tool message's attachments, in the order of its file parts
    files = [index for index, part in enumerate(message.parts) if isinstance(part, FilePart)]
    blocks.update((index, file["block"]) for file, index in zip(entry.get("files", []), files, strict=False) if "block" in file)
    return {
        index for index, block in blocks.items()
        if index < len(message.parts) and isinstance(message.parts[index], FilePart)
        and any(holds(text, value) for text in _block_says(block))
    }


# obsmem's own entries of a message's metadata that hold ids, numbers, a hash or a flag, never
# text: a reply's receipt (obsmem.om.receipts; rules.RECEIPT_KEY), the marks of a call answered
# "no result" and of its late result (obsmem.om.selection), a framework's feedback flag
# (types.FEEDBACK_KEY). Matched by what they hold, never by obsmem's names for them: without its
# mark a late result was refused as a second result of its call. A receipt goes only when the
# value is in an id it lists (a message id an app gave), never in the threads it names (a user's
# name in a thread's id is in every message's row; a forget does not rename threads) nor in its
# counts, time or hash.
_OWN_MESSAGE_PREFIX: Final = "obsmem_"
_RECEIPT_FIELDS: Final = frozenset({
    "v", "id", "thread_id", "hash", "record_id", "generation", "groups", "raw", "raw_span", "raw_outside",
    "raw_count", "knowledge", "pins", "tokens", "created_at",
})


def _own_entry_holds(key: str, item: object, value: Sought) -> bool:
    """Whether obsmem's own metadata entry ``item`` under ``key`` holds ``value``."""
    if key in ("obsmem_unanswered", "obsmem_feedback") and isinstance(item, bool):
        return False
    if key == "obsmem_receipt" and isinstance(item, dict) and set(item) <= _RECEIPT_FIELDS:
        # by the ids it lists (a group's id: the first of its fields), never its counts, seqs,
        # time or hash (forgetting a year or "1" took every receipt), nor ids obsmem made
        # (random hex: a few letters of a value matched them by chance)
        groups = item.get("groups")
        ids = [item.get(field) for field in ("record_id", "raw", "raw_outside", "knowledge", "pins")]
        ids.append([g[0] for g in groups if isinstance(g, list) and g] if isinstance(groups, list) else None)
        return any(
            holds(text, value) for text in json_strings(ids, scalars=False) if not _GENERATED_ID.fullmatch(text)
        )
    return _says(item, value)


# An id obsmem made (obsmem.types.new_id, an observation record's "omr_..."): a prefix and random hex.
_GENERATED_ID: Final = re.compile(r"[a-z]+_[0-9a-f]{32}")


def _says(data: object, value: Sought) -> bool:
    """Whether ``value`` is in a string or scalar of ``data`` (its field names left out)."""
    texts = list(json_strings(data, keys=False))
    return holds("\n".join(texts), value) and any(holds(text, value) for text in texts)


# The participant name obsmem keeps for a message (obsmem.convert._common.SPEAKER_KEY, from a
# wire message's "name"): its key is obsmem's, matched by the name alone (forgetting "name" or
# "am" took every message's speaker).
_SPEAKER: Final = "name"


# The gateway's notes of how a Responses answer's items came (server.gateway: RESPONSES_ITEMS,
# CALL_ITEM_IDS): item types, ids and statuses, the API's words and ids, and fields an item came
# with (a computer call's current_url, an approval's reason) that may quote what was said. A forget
# takes those fields, never the note: without it a computer call went upstream as a function call
# (forgetting "completed", every item's status), which the API refuses on every later request.
_ITEM_NOTES: Final = frozenset({"obsmem_responses_items", "obsmem_responses_call_item_ids"})
_ITEM_BOOKKEEPING: Final = frozenset({"type", "id", "status", "call_id"})


def _without_said(data: Any, value: Sought, key: str | None = None) -> Any:
    """``data`` (an item note) with each text that holds ``value`` made ``"[forgotten]"`` (the
    item keeps its shape), its types, ids and statuses as they are (see :data:`_ITEM_NOTES`);
    keys (call ids) are not matched."""
    if isinstance(data, dict):
        return {k: _without_said(item, value, k) for k, item in data.items()}
    if isinstance(data, list):
        return [_without_said(item, value) for item in data]
    if isinstance(data, str) and key not in _ITEM_BOOKKEEPING and holds(data, value):
        return FORGOTTEN
    return data


def _message_metadata(
    metadata: dict[str, Any], value: Sought, parts: tuple[tuple[Part, ...], dict[int, int]] | None = None
) -> dict[str, Any]:
    """A message's (or a record's) ``metadata`` without its entries holding ``value``. obsmem's own entries
    (``obsmem_``) are matched by what they hold, not by their names or field names (obsmem's
    words: forgetting "receipt" or "answered" took them). ``parts``: a message's parts and where
    each kept one is now (for :func:`_langchain_entry`)."""
    kept: dict[str, Any] = {}
    for key, item in metadata.items():
        if key == _LANGCHAIN and parts is not None and _is_langchain_entry(item):
            entry = _langchain_entry(item, value, *parts)
            if entry:
                kept[key] = entry
        elif key in _ITEM_NOTES:
            kept[key] = _without_said(item, value)
        elif key == _SPEAKER and isinstance(item, str):
            if not holds(item, value):
                kept[key] = item
        elif key.startswith(_OWN_MESSAGE_PREFIX):
            if not _own_entry_holds(key, item, value):
                kept[key] = item
        elif not contains(item, value) and not holds(key, value):
            kept[key] = item
    return kept


# The LangChain integration's entry of a message's metadata (obsmem.integrations.langchain:
# METADATA_KEY): the provider's content blocks a part came from, by the part's index ("blocks": a
# reasoning block with the signature the provider needs back, a text block with its citations),
# the attachments of a tool message by their place in its content ("files") and the mark of the
# tool message a run ended with ("final"). A block goes with its part or when it says the value;
# the other blocks stay, re-keyed to their part's index after the parts that went: matched as a
# whole and by field names, forgetting "signature" or "type" (said by no one) took every block,
# and keyed by the old indexes, a thinking block lost its signature after an earlier part went.
_LANGCHAIN: Final = "langchain"
_LANGCHAIN_FIELDS: Final = frozenset({"blocks", "files", "final"})
#: The data part standing for a LangChain block obsmem has no part for (langchain.BLOCK_PART).
_LANGCHAIN_BLOCK: Final = "langchain-block"
# A block's fields that say nothing anyone wrote: its kind and ids, a provider's opaque signature
# or encrypted reasoning, media types, base64 (a text file's is the file part's, matched there).
_BLOCK_BOOKKEEPING: Final = frozenset({
    "type", "id", "index", "status", "signature", "encrypted_content", "base64", "mime_type", "media_type",
})
# Block kinds whose "data" is opaque: Anthropic's redacted thinking, a base64 source, OpenAI's
# input audio (its inner dict, which has no type of its own).
_OPAQUE_DATA: Final = frozenset({"redacted_thinking", "base64", "input_audio"})


def _block_says(data: object, kind: object = None) -> Iterator[str]:
    """The strings of a LangChain content block that say something (see :data:`_BLOCK_BOOKKEEPING`),
    field names left out. Base64 says nothing, wherever a block keeps it (a value its letters
    happen to spell took an image's block): a legacy ``source_type: "base64"`` block's data, a
    data: URI, OpenAI's input audio; each read as a file part's (a text file's content decoded)."""
    if isinstance(data, str):
        yield from _file_says(data, False, "") if data.startswith("data:") else (data,)
    elif isinstance(data, dict):
        kind = data.get("type", kind)
        opaque = kind in _OPAQUE_DATA or data.get("source_type") == "base64"
        for key, item in data.items():
            if key == "data" and opaque:
                if isinstance(item, str):
                    media = data.get("mime_type") or data.get("media_type")
                    yield from _file_says(item, True, media if isinstance(media, str) else "")
            elif key not in _BLOCK_BOOKKEEPING:
                yield from _block_says(item, kind)
    elif isinstance(data, list):
        for item in data:
            yield from _block_says(item, kind)


def _is_langchain_entry(item: object) -> bool:
    """Whether ``item`` has the shape of the LangChain integration's entry (an app's own entry
    under the same key is matched as any metadata is)."""
    if not isinstance(item, dict) or not item or not set(item) <= _LANGCHAIN_FIELDS:
        return False
    blocks, files = item.get("blocks", {}), item.get("files", [])
    return (
        isinstance(blocks, dict) and all(k.isascii() and k.isdigit() and isinstance(b, dict) for k, b in blocks.items())
        and isinstance(files, list)
        and all(isinstance(f, dict) and isinstance(f.get("at"), int) for f in files)
        and isinstance(item.get("final", True), bool)
    )


def _langchain_entry(
    item: dict[str, Any], value: Sought, parts: tuple[Part, ...], places: dict[int, int]
) -> dict[str, Any]:
    """The LangChain integration's entry (see :data:`_LANGCHAIN`) of a message whose parts kept
    after the forget are at ``places`` (index before -> after); empty when nothing of it stays."""
    def said(block: object) -> bool:
        return any(holds(text, value) for text in _block_says(block))

    entry: dict[str, Any] = {}
    blocks = {
        str(places[int(key)]): block for key, block in item.get("blocks", {}).items()
        if int(key) in places and not said(block)
    }
    if blocks:
        entry["blocks"] = blocks
    # a tool message's attachments, in the order of its file parts
    files = [index for index, part in enumerate(parts) if isinstance(part, FilePart)]
    moved = [
        {"at": file["at"]} if "block" in file and said(file["block"]) else file
        for file, index in zip(item.get("files", []), files, strict=False) if index in places
    ]
    if moved:
        entry["files"] = moved
    if "final" in item:
        entry["final"] = item["final"]
    return entry


def _field(text: str | None, value: Sought) -> str | None:
    """A one-piece text field: None when it holds ``value``."""
    return None if text is not None and holds(text, value) else text


def _state(state: ThreadState, value: Sought) -> ThreadState:
    return state.model_copy(
        update={
            "current_task": _field(state.current_task, value),
            "suggested_response": _field(state.suggested_response, value),
            "thread_title": _field(state.thread_title, value),
            "extracted": _clean(state.extracted, value),
        }
    )


def _chunk(chunk: BufferedChunk, value: Sought, count: Callable[[str], int]) -> BufferedChunk:
    observations = forget_lines(chunk.observations, value)
    return chunk.model_copy(
        update={
            "observations": observations,
            "observation_tokens": count(observations) if observations != chunk.observations else chunk.observation_tokens,
            "extracted": _clean(chunk.extracted, value),
            "current_task": _field(chunk.current_task, value),
            "suggested_response": _field(chunk.suggested_response, value),
        }
    )


def _clean(data: dict[str, Any], value: Sought) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not contains(v, value) and not holds(k, value)}


def forget_in_record(record: ObservationRecord, value: Sought, count: Callable[[str], int]) -> ObservationRecord:
    """``record`` with ``value`` forgotten (itself when untouched); ``count`` counts tokens."""
    if not contains(record.model_dump(mode="json"), value):
        return record
    active = forget_lines(record.active_observations, value)
    reflection = record.buffered_reflection
    if reflection is not None and holds(reflection.text, value):
        reflection = None
    cleaned = record.model_copy(
        update={
            "active_observations": active,
            "observation_tokens": count(active) if active != record.active_observations else record.observation_tokens,
            "threads": {tid: _state(state, value) for tid, state in record.threads.items()},
            "buffered_chunks": tuple(_chunk(c, value, count) for c in record.buffered_chunks),
            "buffered_reflection": reflection,
            # the settings it was made under and obsmem's entries: by what they hold, never by
            # obsmem's names ("model", "scope", "x" of "max_tokens" took them)
            "config": {k: v for k, v in record.config.items() if not _says(v, value)},
            "metadata": _message_metadata(record.metadata, value),
        }
    )
    return record if cleaned == record else cleaned  # the value may be only in an id


#: The longest a value forgotten while a turn of its thread was open is kept for that turn's
#: later saves (:class:`ForgetsInFlight`), in seconds: a turn never ended does not keep it longer.
FORGET_HOLD_S = 3600.0


class ForgetsInFlight:
    """The values forgotten in this process while turns were open, in process memory only: a
    turn that began before a forget of its thread (of its resource, of the whole store) saves
    its later messages (the model's answer that was on its way) with the value forgotten as
    :func:`forget_in_message` forgets it, and their ids noted as a forget notes them (``note``).

    A forget is numbered when noted (:meth:`forgot`); a turn takes the newest number when it
    opens (:meth:`opened`), and each of its saves applies the values noted after it
    (:meth:`apply`): while no forget happens, a save compares two integers. A value is dropped
    once no open turn began before it, and :data:`FORGET_HOLD_S` after it was noted in any case
    (a turn never ended). A forget run by another process (a second server replica) is not
    seen here: a turn there saves its answer as the model gave it.
    """

    def __init__(
        self, note: Callable[[Thread, list[str]], Awaitable[None]], *, hold_s: float = FORGET_HOLD_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seq = 0  # the newest forget's number
        self._note = note
        self._hold_s = hold_s
        self._clock = clock
        # (number, when, thread id or None, resource id or None, value), oldest first
        self._noted: list[tuple[int, float, str | None, str | None, Sought]] = []
        self._open: dict[int, int] = {}  # a number -> how many turns that opened at it are open

    def opened(self) -> int:
        """A turn opens: the number it applies the forgets after."""
        mark = self.seq
        self._open[mark] = self._open.get(mark, 0) + 1
        return mark

    def closed(self, mark: int) -> None:
        """The turn that opened at ``mark`` ended."""
        left = self._open.pop(mark, 0) - 1
        if left > 0:
            self._open[mark] = left
        elif self._noted:
            self._drop()

    def forgot(self, value: Sought, *, thread_id: str | None = None, resource_id: str | None = None) -> None:
        """A forget of ``value`` in ``thread_id`` (or every thread of ``resource_id``, or every
        thread) begins: the turns open now apply it to what they save from now on."""
        self._drop()
        if self._open:
            self.seq += 1
            self._noted.append((self.seq, self._clock(), thread_id, resource_id, value))

    def apply(self, mark: int, thread: Thread, messages: list[Message]) -> tuple[list[Message], list[str]]:
        """``messages`` with the values forgotten in ``thread`` after ``mark`` forgotten (a message
        left empty goes), and the ids of those that changed (to note once they are saved)."""
        self._drop()
        values = [v for seq, _, t, r, v in self._noted
                  if seq > mark and t in (None, thread.id) and r in (None, thread.resource_id)]  # fmt: skip
        changed: list[str] = []
        kept: list[Message] = []
        for message in messages:
            cleaned: Message | None = message
            for value in values:
                if cleaned is not None:
                    cleaned = forget_in_message(cleaned, value)
            if cleaned is not message:
                changed.append(message.id)
            if cleaned is not None:
                kept.append(cleaned)
        return kept, changed

    async def note(self, thread: Thread, ids: list[str]) -> None:
        """Note ``ids`` (messages :meth:`apply` changed, now saved) as a forget notes the messages
        it changed: a copy of one saved back later with the value is not stored."""
        await self._note(thread, ids)

    def _drop(self) -> None:
        """Drop the values no open turn began before, and those held past the bound (with the
        turns that opened before them: older than the bound, never ended)."""
        if not self._noted:
            return
        cutoff = self._clock() - self._hold_s
        expired = max((seq for seq, when, *_ in self._noted if when <= cutoff), default=0)
        if expired:
            self._open = {mark: n for mark, n in self._open.items() if mark >= expired}
        oldest = min(self._open, default=self.seq)
        self._noted = [entry for entry in self._noted if entry[0] > max(oldest, expired)]

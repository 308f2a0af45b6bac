"""Token counting: exact o200k BPE offline, a heuristic fallback, and Mastra's message rules.

Every threshold in obsmem (when to observe, when to reflect, how much raw tail the actor
keeps) is a number of tokens, so the count has to be cheap, deterministic and the same on
every machine. Three decisions follow from that:

* **Exact text counts without a network.** ``tiktoken.get_encoding("o200k_base")`` downloads
  its table on first use and fails offline, so obsmem ships the official table as package
  data (gzipped), checks its sha256 and builds the ``tiktoken.Encoding`` itself.
* **A heuristic when tiktoken cannot be imported** (or when ``exact=False`` is asked for).
  It mimics o200k's pre-tokenizer with the stdlib ``re`` module and prices each piece with
  rates fitted against o200k, which keeps it within a few percent on English and code.
* **Mastra's accounting around the text** (spec §7): a per-message overhead of 3.8 tokens
  plus the role, 24 per conversation, tool calls and results priced from their JSON, data and
  reasoning parts free, and images priced by the billing rules of the *actor's* provider
  (:func:`obsmem.profiles.attachment_billing`).

Per-part results are kept in a bounded LRU cache whose key holds the estimator id, the
provider context (for files, whose price depends on the actor model) and a hash of the part's
content, so an edited part can never reuse a stale count. Message and conversation overheads
are cheap arithmetic and are never cached.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import copy
import functools
import gzip
import hashlib
import importlib.resources
import itertools
import json
import math
import os
import re
import threading
import urllib.parse
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel

from obsmem.errors import ConfigError, ObsmemError
from obsmem.profiles import AttachmentBilling, OpenAIImageRule, attachment_billing
from obsmem.types import (
    LONG_TEXT_CHARS,
    DataPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    text_digest,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "EXACT_ESTIMATOR_ID",
    "HEURISTIC_ESTIMATOR_ID",
    "O200K_SHA256",
    "TokenCacheInfo",
    "TokenCounter",
    "count_text_tokens",
    "decode_bpe_ranks",
    "default_counter",
    "forget_segments",
    "o200k_encoding",
]

EXACT_ESTIMATOR_ID = "o200k-v1"
HEURISTIC_ESTIMATOR_ID = "heuristic-v1"

TOKENS_PER_MESSAGE = 3.8  # role framing and separators, Mastra's cross-provider average
TOKENS_PER_CONVERSATION = 24  # reply priming and system framing, charged once per list
JSON_OVERHEAD_TOKENS = 12  # braces and quoting that the provider's own tool encoding drops
EMPTY_RESULT_TEXT = "[empty result]"

# --------------------------------------------------------------------------------------
# Exact counting: the o200k_base table shipped as package data
# --------------------------------------------------------------------------------------

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_BPE_RESOURCE = "o200k_base.tiktoken.gz"

# o200k's pre-tokenizer: words with an optional leading non-letter and an English
# contraction suffix, numbers in groups of at most three digits, punctuation runs that keep
# trailing newlines and slashes, then newline and whitespace runs. It must match OpenAI's
# encoding exactly; the tests compare token ids with tiktoken's own definition.
_O200K_CONTRACTION = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
_O200K_PAT_STR = "|".join(
    (
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+" + _O200K_CONTRACTION,
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*" + _O200K_CONTRACTION,
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    )
)
_O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

_encoding_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None
_preload_started = False


def _after_fork_in_child() -> None:
    # A fork while another thread built the table copies a held lock: the child starts afresh.
    global _encoding_lock, _preload_started
    if _encoding is None:
        _encoding_lock = threading.Lock()
        _preload_started = False


if hasattr(os, "register_at_fork"):  # POSIX only (no fork elsewhere)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def preload_o200k() -> None:
    """Start building the o200k table in a daemon thread, once per process (no-op once built).

    The build holds the interpreter lock for part of its ~0.3 s (tiktoken's constructor), so
    whatever thread does it, an event loop running meanwhile waits: a counter starts it when it
    is made (an application's start-up), so the first turn finds it built. A failure here is
    silent: the first count raises it."""
    global _preload_started
    if _encoding is not None or _preload_started:
        return
    _preload_started = True

    def build() -> None:
        with contextlib.suppress(Exception):
            o200k_encoding()

    threading.Thread(target=build, name="obsmem-o200k", daemon=True).start()


def decode_bpe_ranks(compressed: bytes, *, source: str = _BPE_RESOURCE) -> dict[bytes, int]:
    """Decompress a gzipped ``.tiktoken`` table, verify its sha256 and parse it.

    The hash is checked before parsing because a truncated or altered table would still
    parse and then silently give wrong counts for ever. ``source`` names the file in the
    error so a user knows what to reinstall.
    """
    try:
        raw = gzip.decompress(compressed)
    except (OSError, EOFError, zlib.error) as exc:
        raise ObsmemError(
            f"The token table {source} is corrupted (it is not valid gzip: {exc}). "
            "Reinstall obsmem to restore it."
        ) from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise ObsmemError(
            f"The token table {source} is corrupted: its sha256 is {digest}, expected "
            f"{O200K_SHA256}. Reinstall obsmem to restore it."
        )
    fields = raw.split()  # "<base64 token> <rank>" per line
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


def _build_o200k_encoding() -> tiktoken.Encoding:
    import tiktoken

    resource = importlib.resources.files("obsmem") / "data" / _BPE_RESOURCE
    ranks = decode_bpe_ranks(resource.read_bytes(), source=str(resource))
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_O200K_PAT_STR,
        mergeable_ranks=ranks,
        special_tokens=dict(_O200K_SPECIAL_TOKENS),
    )


def o200k_encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, built from the shipped table on first use (about 0.3 s).

    Built once per process behind a lock, so concurrent first calls do not parse the table
    twice. Raises ``ImportError`` when tiktoken is not installed and :class:`ObsmemError`
    when the shipped table is corrupted.
    """
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                _encoding = _build_o200k_encoding()
    return _encoding


# tiktoken's regex engine gives up (a Rust panic, not an Exception) on a whitespace run of
# about a million characters, so runs longer than this are counted in slices of this size.
# A slice boundary can shift the count by a token; ordinary text never reaches the limit.
_WHITESPACE_SLICE = 100_000
_LONG_WHITESPACE = re.compile(rf"(?<!\s)\s{{{_WHITESPACE_SLICE},}}")  # anchored at a run's start: linear
_SPACES = re.compile(r"\s*+")  # possessive: a failed fullmatch gives up at once, no backtracking


def _has_long_whitespace(text: str) -> bool:
    """Whether ``text`` holds a run of ``_WHITESPACE_SLICE`` whitespace characters, without
    scanning all of it. Such a run covers a position that is a multiple of ``_WHITESPACE_SLICE``
    (any stretch that long does), so only those positions are looked at, and one holding
    whitespace is widened: to the run's end, then back ``_WHITESPACE_SLICE`` characters from
    there, which stops at the first other character. A scan of the whole text by
    ``_LONG_WHITESPACE`` held the interpreter lock in one regex call (~0.3-0.4 s for a 5 MB
    log), so the event loop stood still while a worker thread counted a pasted log."""
    size = _WHITESPACE_SLICE
    for probe in range(0, len(text), size):
        if not text[probe].isspace():
            continue
        end = _SPACES.match(text, probe).end()  # type: ignore[union-attr]  # \s*+ always matches
        if end - probe >= size:
            return True
        if end >= size and _SPACES.fullmatch(text, end - size, probe) is not None:
            return True
    return False


# Long texts with many lines (observations, above all: counted again whenever a line is added or
# dropped) are counted line by line, each line's count kept: o200k's pre-tokenizer never joins
# a newline with what follows it when that is not whitespace and not "/" (see
# :func:`_line_segments`), so the sum over such segments is the text's count, exactly.
_SEGMENTED_FROM = 2_048  # characters: shorter texts are one tokenizer call
_SEGMENT_MAX_CHARS = 512  # longer segments are counted, not kept
_SEGMENTS_KEPT = 4_096  # kept segment counts (at most 2M characters, ~8 MB); the older half goes when full
_SEGMENTS_PER_TEXT = _SEGMENTS_KEPT // 4  # a text of more segments is one tokenizer call (no churn)
_segment_counts: dict[str, int] = {}  # insertion-ordered: the first keys are the oldest


def _line_segments(text: str) -> list[str]:
    """``text`` cut after each newline that is followed by a character that is neither
    whitespace nor "/" (each cut keeps its newline): no o200k pre-token spans such a cut. The
    pieces that may end in a newline (``[\\r\\n/]*`` after punctuation, ``\\s*[\\r\\n]+``,
    ``\\s+``) stop before such a character, and none that may start after it reaches back
    across the newline. Python's ``isspace`` covers Unicode's White_Space (and a few more, where
    not cutting is the safe side)."""
    lines = text.split("\n")
    segments: list[str] = []
    start = 0
    for index in range(1, len(lines)):
        following = lines[index]
        if following and not following[0].isspace() and following[0] != "/":
            segments.append("\n".join(lines[start:index]) + "\n")
            start = index
    segments.append("\n".join(lines[start:]))
    return segments


def _count_segments(segments: list[str], encode: Callable[[str], int]) -> int:
    """The o200k count of ``segments`` joined (see :func:`_line_segments`), from the kept counts."""
    total = 0
    kept = _segment_counts
    for segment in segments:
        count = kept.get(segment)
        if count is None:
            count = encode(segment)
            if len(segment) <= _SEGMENT_MAX_CHARS:
                if len(kept) >= _SEGMENTS_KEPT:
                    _drop_older_half(kept)
                kept[segment] = count
        total += count
    return total


def forget_segments() -> None:
    """Drop the kept line counts (their keys are the lines' text)."""
    _segment_counts.clear()


def _drop_older_half(kept: dict[str, int]) -> None:
    try:
        for key in list(itertools.islice(kept, len(kept) // 2)):
            kept.pop(key, None)
    except RuntimeError:  # another thread changed it meanwhile: start again
        kept.clear()


# A long text is counted piece by piece, cut where o200k's pre-tokenizer cannot join the
# characters on either side (see :data:`_CUT`), so the sum is the whole text's count, exactly.
# One tokenizer call holds the interpreter lock while it reads its text and hands its tokens
# back (a list of a million ints for a 5 MB paste: 20-50 ms, more on a busy machine), and the
# event loop waits that long even when the count runs on a worker thread; between pieces, and
# while the tokenizer works on one, other threads run.
_PIECE_CHARS = 16_384
_LIST_CHARS = 4_096  # a text up to this long has its tokens back as a list (cheaper when short)
# Where a cut goes: before a space that follows a character that is not whitespace (no o200k
# pre-token holds a space after its first character; only "\s+" runs, which this one does not
# end), or before ASCII punctuation other than "'" that follows a letter or a digit (a letter
# run takes only letters, marks and a contraction, "'s", after it; a number group only digits);
# or before the common CJK and typographic punctuation, likewise (texts in Chinese or Japanese
# have few spaces).
# Neither side looks past the cut: o200k's pattern has no look-behind, and its one look-ahead,
# "(?!\S)", ends a whitespace run. Python's whitespace and alphanumerics are Unicode's
# White_Space (and a few more: the safe side) and letters and numbers; the proof is
# tests/tokens/test_pieces_150.py, which compares the counts on adversarial text.
_CUT = re.compile(r"(?<=\S) |(?<=[^\W_])[!-&(-/:-@\[-`{-~、。，．！？：；（）「」『』【】《》〈〉“”‘’]")


def _pieces(text: str, size: int, *, most: int | None = None) -> list[str]:
    """``text`` cut at the first :data:`_CUT` at or after every ``size`` characters from the last
    cut. Each search looks at ``size`` characters at most (one regex call holds the interpreter
    lock too), so a text without a cut (a 10 MB word) is one piece, found in bounded steps.

    With ``most``, no piece is longer: where no cut comes within ``most`` characters, the text is
    cut there all the same (never between the two halves of a surrogate pair). The heuristic
    estimator asks for that: one step of its regex takes a whole word or run, and an estimate
    may price a run of ``most`` characters without a cut as two."""
    pieces: list[str] = []
    start, length = 0, len(text)
    while length - start > size:
        cut = None
        window = start + size
        limit = length if most is None else min(length, start + most)
        while cut is None and window < limit:
            found = _CUT.search(text, window, min(limit, window + size))
            cut = None if found is None else found.start()
            window += size
        if cut is None:
            if most is None or length - start <= most:
                break
            cut = start + most
            if "\ud800" <= text[cut - 1] <= "\udbff":
                cut += 1
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _token_count(encoding: tiktoken.Encoding, text: str) -> int:
    """How many tokens ``text`` is, ``"<|endoftext|>"`` and the like counted as text.

    A text over :data:`_LIST_CHARS` has its tokens back (from tiktoken 0.9 on) as one numpy array
    (one buffer, no Python int per token), and the tokenizer leaves the interpreter lock while it
    works: the lock is held only to read the text. A shorter one as a list (a numpy array costs
    more to make than a short list; tiktoken 0.7 and 0.8 have only lists). A lone surrogate (from
    a JSON escape, a broken UTF-16 file) is counted as U+FFFD, as tiktoken's ``encode_ordinary``
    counts it: the text re-encoded from UTF-16 with the surrogate pairs joined."""
    to_numpy = getattr(encoding, "encode_to_numpy", None)  # tiktoken 0.9 and later
    if len(text) <= _LIST_CHARS or to_numpy is None:
        return len(encoding.encode_ordinary(text))
    try:
        return int(to_numpy(text, disallowed_special=()).size)
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return int(to_numpy(text, disallowed_special=()).size)


def _count_o200k(text: str) -> int:
    encoding = o200k_encoding()
    if len(text) < _SEGMENTED_FROM and len(text) <= _PIECE_CHARS:  # most texts: one short call
        return len(encoding.encode_ordinary(text))
    encode: Callable[[str], int] = functools.partial(_token_count, encoding)
    if _SEGMENTED_FROM <= len(text) < _WHITESPACE_SLICE and "\n" in text:
        segments = _line_segments(text)
        if len(segments) <= _SEGMENTS_PER_TEXT:
            return _count_segments(segments, encode)
    if len(text) <= _PIECE_CHARS:
        return encode(text)
    return sum(_count_piece(piece, encode) for piece in _pieces(text, _PIECE_CHARS))


def _count_piece(text: str, encode: Callable[[str], int]) -> int:
    if len(text) < _WHITESPACE_SLICE or not _has_long_whitespace(text):
        return encode(text)
    total, start = 0, 0
    for run in _LONG_WHITESPACE.finditer(text):
        total += encode(text[start : run.start()])
        for offset in range(run.start(), run.end(), _WHITESPACE_SLICE):
            total += encode(text[offset : min(offset + _WHITESPACE_SLICE, run.end())])
        start = run.end()
    return total + encode(text[start:])


def _tiktoken_importable() -> bool:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------
# Heuristic counting: o200k's pre-tokenizer approximated with stdlib `re`
# --------------------------------------------------------------------------------------

# Combining marks (Devanagari vowel signs, Arabic harakat, accents) are not \w in Python but
# are letters to o200k; without them Indic words would shatter into many "punctuation" pieces.
_MARKS = (
    "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
    "\u0900-\u0dff\u0e00-\u0eff\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
)
_LETTER = rf"(?:[^\W\d_]|[{_MARKS}])"
_UPPER = "A-Z\u00c0-\u00d6\u00d8-\u00de"
_HEURISTIC_PIECE = re.compile(
    rf"(?P<word>(?P<prefix>[^\w\r\n{_MARKS}]|_)?(?:[{_UPPER}]*(?:(?![{_UPPER}]){_LETTER})+|[{_UPPER}]+))"
    r"|(?P<number>\d{1,3})"
    rf"|(?P<punct> ?(?:[^\w\s{_MARKS}]|_)+[\r\n/]*)"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


_LIGHT_PREFIXES = frozenset("_.('")  # snake_case, attribute access, calls, contractions


def _word_cost(body: str, prefix: str | None) -> float:
    """Tokens for one letter run; rates fitted against o200k on prose, code and 9 languages.

    English words up to ~9 letters are almost always one token, also after ``_``, ``.``,
    ``(`` or an apostrophe; after other punctuation (``/path``, ``-flag``, ``=value``) they
    split more. CJK costs ~0.76 per character and other scripts 0.27-0.42 per character.
    """
    n = len(body)
    if body.isascii():
        if prefix is None or prefix == " ":
            return 1.0 if n <= 9 else 1.0 + 0.35 * (n - 9)
        if prefix in _LIGHT_PREFIXES:
            return 1.0 if n <= 5 else 1.0 + 0.12 * (n - 5)
        return max(1.0, 0.8 + 0.22 * n)
    first = ord(body[0])
    if first >= 0x2E80:  # CJK, kana, hangul
        return max(1.0, 0.76 * n)
    if first < 0x250:  # accented Latin
        return max(1.0, 0.5 + 0.28 * n)
    if 0x400 <= first < 0x530:  # Cyrillic
        return max(1.0, 0.27 * n)
    return max(1.0, 0.42 * n)  # Greek, Arabic, Hebrew, Indic, Thai, ...


def _punct_cost(piece: str) -> float:
    run = piece.strip(" \r\n/") or "/"
    if run.isascii():
        return max(1.0, 0.1 + 0.32 * len(run))
    cost = 0.0
    for char in run:
        code = ord(char)
        if code > 0xFFFF:  # emoji, skin tones, flag letters: about two tokens each
            cost += 2.0
        elif 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF:  # symbols, dingbats
            cost += 1.4
        elif code == 0x200D:  # the joiner inside family and profession emoji
            cost += 1.0
        elif code in (0xFE0E, 0xFE0F):  # variation selectors
            cost += 0.8
        else:  # CJK and typographic punctuation, mostly one token or merged
            cost += 0.7 if code > 0x7F else 0.32
    return max(1.0, cost)


def _estimate_heuristic(text: str) -> int:
    """Estimate o200k tokens without a BPE table: pre-tokenize, then price each piece.

    A long text is read in pieces of at most ``2 * _PIECE_CHARS`` characters (cut where
    :data:`_CUT` allows, which this pattern cannot join across either, and the costs added in the
    same order: the same estimate): one step of the regex reads a whole word or run under the
    interpreter lock, and a 2 MB word held it (and a server's event loop) for a quarter second.
    Only a run of that many characters without a cut is priced differently (by a token or two)."""
    total = 0.0
    pieces = [text] if len(text) <= _PIECE_CHARS else _pieces(text, _PIECE_CHARS, most=2 * _PIECE_CHARS)
    for piece in pieces:
        for match in _HEURISTIC_PIECE.finditer(piece):
            kind = match.lastgroup
            if kind == "word":
                prefix = match.group("prefix")
                body = match.group()[1:] if prefix else match.group()
                total += _word_cost(body, prefix)
            elif kind == "punct":
                total += _punct_cost(match.group())
            else:  # a number group or a whitespace run: one token each
                total += 1.0
    return _round_half_up(total)


def _round_half_up(value: float) -> int:
    # Mastra rounds with Math.round; Python's round() would send 2.5 to 2.
    return math.floor(value + 0.5)


# --------------------------------------------------------------------------------------
# JSON as the counters see it
# --------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    """Serialize what JSON cannot: models as their dumps, everything else as its text."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)


def _to_json(value: Any, *, indent: int | None = None) -> str:
    separators = (",", ":") if indent is None else (",", ": ")
    try:
        return json.dumps(
            value, ensure_ascii=False, default=_json_default, indent=indent, separators=separators
        )
    except Exception:  # keys JSON cannot hold (tuples, objects), cycles, an int over 4,300 digits
        return _lenient_json(value, separators)


class _Literal(NamedTuple):
    text: str


class _Leave(NamedTuple):
    ident: int


def _lenient_json(value: Any, separators: tuple[str, str]) -> str:
    """JSON-like text of ``value`` where :func:`json.dumps` fails, for counting: never raises.

    Keys of any type are written as strings, a container met again inside itself as
    ``"[...]"``, an integer Python will not write in decimal (more than 4,300 digits) as that
    many nines (o200k counts digits three to a token, whatever they are), and anything else that
    cannot be written as its type's name. Walked with a stack (no recursion limit); without line
    breaks and indentation (a token or two per line off: this text is a fallback)."""
    comma, colon = separators
    out: list[str] = []
    stack: list[Any] = [value]
    inside: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Literal):
            out.append(item.text)
        elif isinstance(item, _Leave):
            inside.discard(item.ident)
        elif isinstance(item, BaseModel):
            try:
                stack.append(item.model_dump(mode="json"))
            except Exception:
                out.append(json.dumps(type(item).__name__))
        elif isinstance(item, dict | list | tuple | set | frozenset):
            if id(item) in inside:
                out.append('"[...]"')
                continue
            inside.add(id(item))
            entries: list[Any] = []
            if isinstance(item, dict):
                for index, (key, inner) in enumerate(item.items()):
                    key_text = key if isinstance(key, str) else _scalar_json(key).strip('"')
                    key_json = json.dumps(key_text, ensure_ascii=False)
                    entries += [_Literal((comma if index else "") + key_json + colon), inner]
                opening, closing = "{", "}"
            else:
                members = _members(item) if isinstance(item, set | frozenset) else item
                for index, inner in enumerate(members):
                    entries += [_Literal(comma)] if index else []
                    entries.append(inner)
                opening, closing = "[", "]"
            stack += [_Leave(id(item)), _Literal(closing), *reversed(entries), _Literal(opening)]
        else:
            out.append(_scalar_json(item))
    return "".join(out)


def _scalar_json(item: Any) -> str:
    if isinstance(item, int) and not isinstance(item, bool):
        try:
            return str(item)
        except ValueError:  # over sys.get_int_max_str_digits()
            digits = int(abs(item).bit_length() * math.log10(2)) + 1
            return ("-" if item < 0 else "") + "9" * digits
    try:
        return json.dumps(item, ensure_ascii=False, default=_json_default)
    except Exception:
        return json.dumps(type(item).__name__)


def _members(items: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(items, key=repr)  # as _json_default orders them
    except Exception:  # a member whose repr fails (an int over 4,300 digits)
        return list(items)


# --------------------------------------------------------------------------------------
# Attachments: provider billing rules for images and files (spec §7). Which rules apply to
# an actor model (family, per-model OpenAI tile prices, Gemini 3's flat price) is a vendor
# fact kept in obsmem.profiles; the arithmetic on the image is here.
# --------------------------------------------------------------------------------------

_KIB = 1024
_MIB = 1024 * 1024
_SNIFF_BYTES = 256 * _KIB  # enough for a JPEG's frame header after EXIF and ICC blocks


@dataclass(frozen=True)
class _Payload:
    """What a file part carries: its decoded size when inline, and the leading bytes."""

    size: int | None
    head: bytes


def _file_payload(part: FilePart) -> _Payload:
    ref = part.data or part.url or ""
    if ref.startswith("data:"):
        header, _, body = ref.partition(",")
        if ";base64" not in header.lower():
            raw = urllib.parse.unquote_to_bytes(body.encode("utf-8", "surrogatepass"))
            return _Payload(len(raw), raw[:_SNIFF_BYTES])
        return _base64_payload(body)
    if part.data and not part.data.startswith(("http://", "https://")):
        return _base64_payload(part.data)
    return _Payload(None, b"")  # a remote URL: nothing measurable without fetching it


def _base64_payload(encoded: str) -> _Payload:
    length = len(encoded) - sum(encoded.count(ws) for ws in ("\n", "\r", " ", "\t"))
    stripped_tail = encoded.rstrip()
    padding = 2 if stripped_tail.endswith("==") else 1 if stripped_tail.endswith("=") else 0
    size = max(0, length * 3 // 4 - padding)
    prefix = "".join(encoded[: _SNIFF_BYTES * 4 // 3 + 64].split())
    prefix = prefix[: len(prefix) // 4 * 4]
    try:
        head = binascii.a2b_base64(prefix)
    except ValueError:  # binascii.Error, or a character that is not ASCII (a pasted "…")
        head = b""
    return _Payload(size, head)


def _image_dimensions(head: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG, GIF, JPEG, WebP or BMP header; None when unknown.

    Reading the header is what lets a pasted screenshot be priced by its real size instead
    of its byte count, which can differ by an order of magnitude.
    """
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head.startswith(b"BM") and len(head) >= 26:
        height = int.from_bytes(head[22:26], "little", signed=True)
        return int.from_bytes(head[18:22], "little", signed=True), abs(height)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        return _webp_dimensions(head)
    if head.startswith(b"\xff\xd8"):
        return _jpeg_dimensions(head)
    return None


def _webp_dimensions(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 ":
        return int.from_bytes(head[26:28], "little") & 0x3FFF, int.from_bytes(head[28:30], "little") & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1
    return None


# Start-of-frame markers (baseline, progressive, lossless, arithmetic); they hold the size.
_JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_dimensions(head: bytes) -> tuple[int, int] | None:
    pos = 2
    while pos + 9 <= len(head):
        if head[pos] != 0xFF:
            return None
        marker = head[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _JPEG_FRAME_MARKERS:
            height = int.from_bytes(head[pos + 5 : pos + 7], "big")
            return int.from_bytes(head[pos + 7 : pos + 9], "big"), height
        if 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
            pos += 2
            continue
        pos += 2 + int.from_bytes(head[pos + 2 : pos + 4], "big")
    return None


def _size_bucket(size: int, buckets: tuple[int, int, int, int]) -> int:
    if size <= 512 * _KIB:
        return buckets[0]
    if size <= 2 * _MIB:
        return buckets[1]
    if size <= 4 * _MIB:
        return buckets[2]
    return buckets[3]


def _image_tokens(part: FilePart, context: AttachmentBilling) -> int:
    payload = _file_payload(part)
    dims: tuple[int, int] | None = None
    if part.width and part.height:
        dims = (part.width, part.height)
    elif payload.head:
        sniffed = _image_dimensions(payload.head)
        if sniffed and sniffed[0] > 0 and sniffed[1] > 0:
            dims = sniffed
    if context.family == "google":
        if context.flat_image_tokens is not None:
            return context.flat_image_tokens
        if dims:  # a larger image is scaled down to fit 3072 x 3072 (aspect kept), then tiled
            dims = _fit_long_edge(*dims, limit=3072)
        tiles = math.ceil(dims[0] / 768) * math.ceil(dims[1] / 768) if dims else 1
        return 258 * max(1, tiles)
    if context.family == "anthropic":
        if dims:
            width, height = _fit_long_edge(*dims, limit=1568)
            return max(1, math.ceil(width * height / 750))
        return _size_bucket(payload.size, (341, 1366, 2048, 2731)) if payload.size is not None else 1600
    return _openai_image_tokens(part.detail, dims, payload.size, context.openai_rule)


def _fit_long_edge(width: int, height: int, *, limit: int) -> tuple[int, int]:
    longest = max(width, height)
    if longest <= limit:
        return width, height
    ratio = limit / longest
    return max(1, round(width * ratio)), max(1, round(height * ratio))


def _openai_image_tokens(
    detail: str | None, dims: tuple[int, int] | None, size: int | None, rule: OpenAIImageRule
) -> int:
    if detail not in ("low", "high"):  # "auto": OpenAI picks high for large images
        if dims:
            detail = "high" if max(dims) > 768 else "low"
        else:
            detail = "high" if size is not None and size > _MIB else "low"
    if detail == "low":
        return rule.base
    if dims:
        width, height = float(dims[0]), float(dims[1])
        if max(width, height) > 2048:
            scale = 2048 / max(width, height)
            width, height = width * scale, height * scale
        if min(width, height) > 768:
            scale = 768 / min(width, height)
            width, height = width * scale, height * scale
        tiles = math.ceil(max(1, round(width)) / 512) * math.ceil(max(1, round(height)) / 512)
    elif size is not None:
        tiles = _size_bucket(size, (1, 4, 6, 8))
    else:
        tiles = rule.fallback_tiles
    return rule.base + max(1, tiles) * rule.tile


def _url_file_name(url: str) -> str | None:
    """The last segment of ``url``'s path; read without ``urllib`` where it cannot split the URL
    (a malformed IPv6 host, ``https://[fe80::1/report.pdf``, raises ``ValueError`` there)."""
    try:
        path = urllib.parse.urlsplit(url).path
    except ValueError:
        path = url.split("#", 1)[0].split("?", 1)[0]
    return path.rsplit("/", 1)[-1] or None


def _file_tokens(part: FilePart, context: AttachmentBilling, count_text: Callable[[str], int]) -> int:
    """Non-image files: a byte-based estimate, or the descriptor's text when nothing is inline."""
    size = _file_payload(part).size
    if size is None:
        name = part.filename or _url_file_name(part.url or "")
        descriptor = {"type": "file", "media_type": part.media_type, "filename": name}
        return count_text(_to_json(descriptor))
    media_type = part.media_type.lower().split(";", 1)[0].strip()
    if media_type == "application/pdf":
        if context.family == "google":
            return max(258, math.ceil(size / 20))  # 258 tokens a page, ~5 KB a page
        if context.family == "anthropic":
            return max(1500, math.ceil(size / 3))  # a page is rendered as text plus an image
        return max(500, math.ceil(size / 4))
    return max(1, math.ceil(size / 4))


# --------------------------------------------------------------------------------------
# The per-part cache
# --------------------------------------------------------------------------------------


class TokenCacheInfo(NamedTuple):
    """Cache statistics, like ``functools.lru_cache``'s ``cache_info()``."""

    hits: int
    misses: int
    size: int
    max_size: int


#: Where a message keeps its parts' cost (see ``TokenCounter._parts_cost``): not a field.
_MEMO_KEY = "_obsmem_parts_cost"
#: Where a message keeps its whole count, beside its parts' cost (see ``TokenCounter.count_message``).
_COUNT_KEY = "_obsmem_count"

WARM_CHARS = 32_768  # text parts at least this long are counted off the loop by ``warm``
#: Characters of the parts tuples a part cache keeps by identity (``_PartCache.by_parts``), all
#: together: the parts are the messages' own text, so a count of entries alone let a process
#: that reads many large messages keep gigabytes. A tuple over a 64th of it is not kept.
PARTS_KEPT_CHARS = 16_000_000


class _PartCache:
    """A thread-safe bounded LRU of part costs, shared by a counter and its ``with_model`` copies."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, str, bytes], float] = OrderedDict()
        self._lock = threading.Lock()
        # Parts tuples whose cost is known, by identity (see ``TokenCounter._parts_cost``): the
        # entry holds the tuple itself, so its id is not reused while the entry lives; and its
        # characters, which :data:`PARTS_KEPT_CHARS` bounds with the entries' number.
        # Oldest first (an OrderedDict: dropping the oldest of a plain dict after many drops skips
        # every freed slot before it). As many entries as the part cache: a window read again at
        # every boundary (a long unobserved one: the observer down for hours) must fit, or each
        # read evicts what the next needs and every message is priced again, every time.
        self.by_parts: OrderedDict[int, tuple[tuple[Any, ...], str, float, int, int]] = OrderedDict()
        self._parts_chars = 0

    def remember_parts(self, parts: tuple[Any, ...], estimator_id: str, cost: float, texts: int) -> None:
        """Note the cost of an immutable ``parts`` tuple (bounded by entries and characters: the
        oldest go first)."""
        chars = _parts_chars(parts)
        if chars > PARTS_KEPT_CHARS // 64:
            return  # (its message keeps its own cost)
        table = self.by_parts
        with self._lock:
            old = table.pop(id(parts), None)
            if old is not None:
                self._parts_chars -= old[4]
            most = max(self.max_size, 1)
            while table and (len(table) >= most or self._parts_chars + chars > PARTS_KEPT_CHARS):
                self._parts_chars -= table.popitem(last=False)[1][4]
            table[id(parts)] = (parts, estimator_id, cost, texts, chars)
            self._parts_chars += chars

    def forget_parts(self) -> None:
        with self._lock:
            self.by_parts.clear()
            self._parts_chars = 0

    def get(self, key: tuple[str, str, bytes]) -> float | None:
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return value

    def hit(self, count: int) -> None:
        """Count ``count`` lookups answered without the table (a message's kept cost)."""
        if count:
            with self._lock:
                self.hits += count

    def put(self, key: tuple[str, str, bytes], value: float) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_size:
                self._entries.popitem(last=False)

    def info(self) -> TokenCacheInfo:
        with self._lock:
            return TokenCacheInfo(self.hits, self.misses, len(self._entries), self.max_size)


def _parts_chars(parts: tuple[Any, ...]) -> int:
    """The characters of text ``parts`` (text, reasoning, data, string tool payloads) hold."""
    chars = 0
    for part in parts:
        if isinstance(part, TextPart | ReasoningPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.tool_name) + _payload_chars(part.args, PARTS_KEPT_CHARS)
        elif isinstance(part, ToolResultPart):
            chars += _payload_chars(part.result, PARTS_KEPT_CHARS)
        else:
            chars += 64  # a data part: obsmem's markers, small
    return chars


def _long_part(part: Part, min_chars: int) -> bool:
    """Whether ``part`` holds ``min_chars`` characters or more of what is counted: a text, or a
    tool call's arguments or a tool result (a file read, a web page: as large as any paste)."""
    if isinstance(part, TextPart):
        return len(part.text) >= min_chars
    if isinstance(part, ToolCallPart):
        return _holds_at_least(part.args, min_chars)
    if isinstance(part, ToolResultPart):
        return _holds_at_least(part.result, min_chars)
    return False


def _message_chars(message: Message, limit: int) -> int:
    """About the characters ``message``'s parts give to count, at most ``limit`` (a bounded walk)."""
    chars = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += _payload_chars(part.args, limit)
        elif isinstance(part, ToolResultPart):
            chars += _payload_chars(part.result, limit)
        if chars >= limit:
            return limit
    return chars


def _holds_at_least(value: Any, chars: int) -> bool:
    """Whether ``value`` (a JSON-like payload) holds about ``chars`` characters or more (see
    :func:`_payload_chars`)."""
    return _payload_chars(value, chars) >= chars


def _payload_chars(value: Any, limit: int) -> int:
    """About the characters ``value`` (a JSON-like payload) holds: its strings' lengths, one for
    any other item, at most ``limit``. Stops as soon as it reaches ``limit``, so the walk is
    bounded by ``limit`` items however large the payload."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            seen += len(item)
        elif isinstance(item, dict):
            seen += 1
            for key, inner in item.items():
                stack.append(inner)
                if isinstance(key, str):
                    seen += len(key)
                if seen >= limit:
                    return limit
        elif isinstance(item, list | tuple):
            seen += 1
            stack.extend(item)
            if len(stack) >= limit:
                return limit
        else:
            seen += 1
        if seen >= limit:
            return limit
    return seen


def _part_digest(part: Part) -> bytes:
    """A content hash of the part: equal digests must mean equal counts.

    Text parts, by far the most common, hash their text directly (JSON-encoding each one would
    cost more than the lookup saves); other parts hash their JSON from the serializer their
    count is computed with.
    """
    if isinstance(part, TextPart):
        if len(part.text) >= LONG_TEXT_CHARS:  # hashed once per part (kept on it), not per count
            canonical = b"long-text\x00" + text_digest(part)
        else:
            canonical = b"text\x00" + part.text.encode("utf-8", "surrogatepass")
    else:
        canonical = _to_json(part.model_dump()).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(canonical, digest_size=16).digest()


# --------------------------------------------------------------------------------------
# The public counter
# --------------------------------------------------------------------------------------


class TokenCounter:
    """Counts tokens for text, parts, messages and conversations the way Mastra's OM does.

    ``exact=None`` (the default) counts with o200k when tiktoken is importable and with the
    heuristic otherwise; ``True`` insists on o200k; ``False`` always uses the heuristic.
    ``provider``/``model`` name the *actor* model, whose billing rules price images and
    PDFs; :meth:`with_model` makes a copy for another actor that shares the encoding and the
    cache. ``cache_size`` bounds the per-part cache (0 turns it off). ``estimator_id``
    (``"o200k-v1"`` or ``"heuristic-v1"``) names the text estimator and is part of every
    cache key, so counts from different estimators never mix.
    """

    def __init__(
        self,
        *,
        exact: bool | None = None,
        provider: str | None = None,
        model: str | None = None,
        cache_size: int = 50_000,
    ) -> None:
        if cache_size < 0:
            raise ConfigError("cache_size", f"{cache_size} is negative", allowed="an integer >= 0")
        if exact is None:
            exact = _tiktoken_importable()
        elif exact and not _tiktoken_importable():
            raise ConfigError(
                "exact",
                "exact o200k counting needs the tiktoken package, which cannot be imported",
                allowed="None or False, or install tiktoken",
            )
        self.estimator_id: str = EXACT_ESTIMATOR_ID if exact else HEURISTIC_ESTIMATOR_ID
        self._count: Callable[[str], int] = _count_o200k if exact else _estimate_heuristic
        if exact:
            preload_o200k()
        self._cache = _PartCache(cache_size)
        self._roles: dict[str, int] = {}
        self._provider = provider
        self._model = model
        self._context = attachment_billing(provider, model)

    def __repr__(self) -> str:
        return f"TokenCounter(estimator_id={self.estimator_id!r}, provider={self._provider!r}, model={self._model!r})"

    @property
    def provider(self) -> str | None:
        return self._provider

    @property
    def model(self) -> str | None:
        return self._model

    @property
    def exact(self) -> bool:
        return self.estimator_id == EXACT_ESTIMATOR_ID

    def with_model(self, provider: str | None, model: str | None) -> TokenCounter:
        """A counter for another actor model, sharing this one's estimator and cache.

        The engine switches the actor's model per step; sharing the cache keeps text counts
        warm while image prices follow the new provider (the provider is part of file keys).
        """
        clone = copy.copy(self)
        clone._provider, clone._model = provider, model
        clone._context = attachment_billing(provider, model)
        return clone

    def cache_info(self) -> TokenCacheInfo:
        """Hits, misses and size of the per-part cache (shared with ``with_model`` copies)."""
        return self._cache.info()

    def forget_texts(self) -> None:
        """Drop every text kept for counting: the parts whose cost this counter's cache knows by
        identity, and the counts of lines kept by text in this process (:func:`forget_segments`).
        The counts kept by digest stay: they hold no text. After a delete or a forget, no text
        of what went stays here."""
        self._cache.forget_parts()
        forget_segments()

    def count_text(self, text: str | None) -> int:
        if not text:
            return 0
        return self._count(text)

    async def ready(self) -> None:
        """Load the tokenizer's table (about 0.3 s, once per process) in a thread when this
        counter needs it and it is not loaded yet: a process's first turn does not hold up the
        event loop with it. Afterwards one check."""
        if _encoding is None and self._count is _count_o200k:
            await asyncio.to_thread(o200k_encoding)  # waits for a preload under way (one build)

    async def warm(self, messages: Iterable[Message], *, min_chars: int = WARM_CHARS) -> None:
        """Count the long text parts of ``messages`` in a thread, into the part cache; and the
        messages not counted yet, when together they hold ``min_chars`` characters or more.

        Counting a megabyte takes tens of milliseconds; the engine's counts are synchronous and
        run on the event loop, so it warms a turn's new input first and those counts are lookups.
        Many messages each under ``min_chars`` (a window of file reads after a restart: 150 of
        30,000 characters) were counted on the loop one after the other, 4.5 MB in one stretch.
        """
        if self._cache.max_size == 0:
            return
        listed = messages if isinstance(messages, list | tuple) else list(messages)
        long: list[Part] = []
        unknown: list[Message] = []
        chars = 0
        for message in listed:
            if self._knows(message):
                continue  # counted already (a window's pasted log, at every later boundary): nothing to warm
            long.extend(p for p in message.parts if _long_part(p, min_chars))
            unknown.append(message)
            chars += _message_chars(message, min_chars)
        if chars < min_chars:
            unknown = []
        if long or unknown:
            await asyncio.to_thread(self._warm_now, long, unknown)

    def _warm_now(self, long: list[Part], unknown: list[Message]) -> None:
        for part in long:
            self._part_cost(part)
        for message in unknown:
            self._parts_cost(message)

    def _knows(self, message: Message) -> bool:
        """Whether ``message``'s parts' cost is kept (on it, or by its parts tuple) for this estimator."""
        parts = message.parts
        memo = message.__dict__.get(_MEMO_KEY)
        if memo is None or memo[0] is not parts:
            memo = self._cache.by_parts.get(id(parts))
        return memo is not None and memo[0] is parts and memo[1] == self.estimator_id

    def _role_tokens(self, role: str) -> int:
        """A role's tokens (four roles, counted once per counter: no tokenizer call per message)."""
        try:
            return self._roles[role]
        except KeyError:
            count = self._roles[role] = self.count_text(role)
            return count

    def count_part(self, part: Part) -> int:
        """Tokens of one part, rounded. Messages add unrounded part costs, then round once."""
        return _round_half_up(self._part_cost(part))

    def count_message(self, message: Message) -> int:
        # A message whose parts' cost is kept on it keeps its count too (keyed like that cost,
        # and by role): a window's messages are counted at every boundary, by one lookup.
        kept = message.__dict__.get(_COUNT_KEY)
        if kept is not None and kept[0] is message.parts and kept[1] == self.estimator_id and kept[2] == message.role:
            self._cache.hit(kept[4])
            return int(kept[3])
        return self._count_afresh(message)

    def count_each(self, messages: Iterable[Message]) -> int:
        """The sum of :meth:`count_message` over ``messages`` (no conversation overhead): kept
        counts are summed in one pass, and the cache's hits noted once."""
        total = 0
        hits = 0
        estimator = self.estimator_id
        for message in messages:
            kept = message.__dict__.get(_COUNT_KEY)
            if kept is not None and kept[0] is message.parts and kept[1] == estimator and kept[2] == message.role:
                total += kept[3]
                hits += kept[4]
            else:
                total += self._count_afresh(message)
        self._cache.hit(hits)
        return total

    def _count_afresh(self, message: Message) -> int:
        parts = message.parts
        count = _round_half_up(self._role_tokens(message.role) + TOKENS_PER_MESSAGE + self._parts_cost(message))
        memo = message.__dict__.get(_MEMO_KEY)
        if memo is not None and memo[0] is parts and memo[1] == self.estimator_id:
            message.__dict__[_COUNT_KEY] = (parts, self.estimator_id, message.role, count, memo[3])
        return count

    def _parts_cost(self, message: Message) -> float:
        """The unrounded cost of ``message``'s parts. A message of text, reasoning and data parts
        only (immutable content: its count cannot change while its parts tuple is the same
        object) keeps its cost on itself, under :data:`_MEMO_KEY`, for this estimator: a step
        counts the same messages several times (the window, the buffer, the context's
        sections), and each count after the first is a lookup. So does a message of tool calls
        and results, whatever their payload: a message's parts are values (frozen models; see
        :class:`~obsmem.types.Message`), and without the memo every boundary of a tool loop
        dumped every call's arguments and every result of the window to JSON again (a step of
        a six-call agent loop spent most of its 11 ms of CPU there). Files (priced per actor
        model) are counted through the part cache every time."""
        parts = message.parts
        if self._cache.max_size == 0:
            return sum(self._part_cost(part) for part in parts)
        memo = message.__dict__.get(_MEMO_KEY)
        if memo is None or memo[0] is not parts:
            # A copy of a message already counted (a store hands out copies that share the
            # parts tuple of the message it decoded once) finds it by the tuple's identity.
            memo = self._cache.by_parts.get(id(parts))
            if memo is not None and memo[0] is parts:
                message.__dict__[_MEMO_KEY] = memo
        if memo is not None and memo[0] is parts and memo[1] == self.estimator_id:
            self._cache.hit(memo[3])  # the text parts' counts were found, as the part cache finds them
            return float(memo[2])
        cost = 0.0
        memoizable = True
        texts = 0
        for part in parts:
            cost += self._part_cost(part)
            if isinstance(part, TextPart | ToolCallPart | ToolResultPart):
                texts += 1
            elif isinstance(part, FilePart):
                memoizable = False
        if memoizable:
            # Not a field: pydantic leaves it out of dumps, equality and repr; a copy with other
            # parts (model_copy) carries it, but with another parts tuple it is never read.
            message.__dict__[_MEMO_KEY] = (parts, self.estimator_id, cost, texts)
            self._cache.remember_parts(parts, self.estimator_id, cost, texts)
        return cost

    def count_messages(self, messages: Iterable[Message]) -> int:
        """Sum of the messages plus the conversation overhead; 0 for no messages at all."""
        listed = messages if isinstance(messages, list | tuple) else list(messages)
        return self.count_each(listed) + TOKENS_PER_CONVERSATION if listed else 0

    def _part_cost(self, part: Part) -> float:
        if isinstance(part, DataPart | ReasoningPart):
            return 0.0  # never sent to the model as content, and free to recompute
        if isinstance(part, FilePart) and part.token_estimate is not None:
            return float(part.token_estimate)  # a client-supplied count always wins
        if self._cache.max_size == 0:
            return self._compute_part_cost(part)
        scope = self._context.cache_key if isinstance(part, FilePart) else ""
        key = (self.estimator_id, scope, _part_digest(part))
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        cost = self._compute_part_cost(part)
        self._cache.put(key, cost)
        return cost

    def _compute_part_cost(self, part: Part) -> float:
        if isinstance(part, TextPart):
            return float(self.count_text(part.text))
        if isinstance(part, ToolCallPart):
            return float(self.count_text(part.tool_name) + self._payload_tokens(part.args, indent=None))
        if isinstance(part, ToolResultPart):
            result = EMPTY_RESULT_TEXT if part.result is None else part.result
            # A result travels as its own tool message, hence one more message overhead.
            name_tokens = self.count_text(part.tool_name)
            return TOKENS_PER_MESSAGE + name_tokens + self._payload_tokens(result, indent=2)
        if isinstance(part, FilePart):
            if part.is_image:
                return float(_image_tokens(part, self._context))
            return float(_file_tokens(part, self._context, self.count_text))
        raise TypeError(f"Unknown part type: {type(part).__name__}")

    def _payload_tokens(self, value: Any, *, indent: int | None) -> int:
        """A string is counted as is; anything else as JSON, less the JSON overhead.

        Tool arguments are compact JSON (what the model emitted); results are indented by
        two spaces, as Mastra serializes them for the model.
        """
        if isinstance(value, str):
            return self.count_text(value)
        return max(0, self.count_text(_to_json(value, indent=indent)) - JSON_OVERHEAD_TOKENS)


_default_lock = threading.Lock()
_default: TokenCounter | None = None


def default_counter() -> TokenCounter:
    """The process-wide counter with default settings, created on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = TokenCounter()
    return _default


def count_text_tokens(text: str) -> int:
    """Tokens in ``text`` with the default counter (o200k when tiktoken is available)."""
    return default_counter().count_text(text)

"""What a batch has recorded or heard so far, searched in work that does not grow with it.

The offline observer asks, for every name and number of a sentence, whether it is new: whether
it occurs (lowercased) in everything already recorded or said. Asked of one joined string, each
question scans all of it, and a reply naming thousands of results after thousands of results
costs their product. :class:`KnownText` keeps that text append-only and answers each term once
(where it first occurs), so a term asked again reads only what was appended since. Text that
questions keep reading is cut into overlapping windows indexed by the 3-character pieces they
hold, after which a question verifies only the windows holding the term's rarest piece. Indexing
a character costs about as much as searching it :data:`INDEX_COST` times, so text is indexed
only once questions have searched it that often: a small batch is searched as before, a large
one costs at most about twice its indexing.

The answers are exactly those of ``term in "\\n".join(entries)`` (and, for :meth:`KnownView.recorded`,
of a whole-word search): the observer's lines do not change, only the work behind them.
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["KnownText", "KnownView"]

#: The core of a window (each window also holds the ``REACH`` characters after its core, and one
#: before it).
CHUNK = 4096
#: The longest term answered through the index; a longer one (or one spanning lines) scans the text.
REACH = 128
#: About how many times a character can be searched for the cost of indexing it.
INDEX_COST = 256


class KnownText:
    """Append-only lowercase text: entries joined by newlines, searched through an index."""

    __slots__ = ("_entries", "_joined", "_length", "_pending", "_base", "_searched", "_windows", "_postings",
                 "_found", "_words", "scanned")  # fmt: skip

    def __init__(self) -> None:
        self._entries: list[str] = []
        self._joined: str | None = ""  # "\n".join(entries), only for the rare unindexed question
        self._length = 0  # len("\n".join(entries))
        self._pending = ""  # the text from ``_base`` on: not cut into windows yet
        self._base = 0
        self._searched = 0  # characters of ``_pending`` searched since it was last cut
        self._windows: list[str] = []  # window i: text[i*CHUNK - 1 (0 for i = 0) : (i+1)*CHUNK + REACH + 1]
        self._postings: dict[str, list[int]] = {}  # 3-character piece -> windows holding it, ascending
        # term -> (end of its first occurrence or -1, windows already searched, length searched)
        self._found: dict[str, tuple[int, int, int]] = {}
        self._words: dict[str, tuple[int, int, int]] = {}  # the same for whole-word occurrences
        #: the work done: characters searched, plus INDEX_COST per character indexed (for tests)
        self.scanned = 0

    def __len__(self) -> int:
        return self._length

    def add(self, text: str) -> None:
        """Append ``text`` (already lowercased) as a new entry."""
        joiner = "\n" if self._entries else ""
        self._entries.append(text)
        self._joined = None
        self._length += len(joiner) + len(text)
        self._pending = f"{self._pending}{joiner}{text}"

    def view(self) -> KnownView:
        """The text as it is now: later additions are not part of the view."""
        return KnownView(self, self._length)

    def _cut(self) -> None:
        """Index every complete window of the pending text."""
        pending, base, position = self._pending, self._base, 0
        while True:
            index = len(self._windows)
            end = (index + 1) * CHUNK + REACH + 1
            if base + len(pending) < end:
                break
            self._index(pending[position : end - base], index)
            position = (index + 1) * CHUNK - 1 - base  # the next window starts one character before its core
        if position:
            self._pending, self._base = pending[position:], base + position
        self._searched = 0

    def _index(self, window: str, index: int) -> None:
        self._windows.append(window)
        self.scanned += INDEX_COST * len(window)
        postings = self._postings
        for piece in {window[i : i + 3] for i in range(len(window) - 2)}:
            held = postings.get(piece)
            if held is None:
                postings[piece] = [index]
            else:
                held.append(index)

    def _text(self) -> str:
        if self._joined is None:
            self._joined = "\n".join(self._entries)
        return self._joined

    def first_end(self, term: str, *, word: bool = False) -> int:
        """Where the first occurrence of ``term`` ends (a whole word when ``word``), or -1."""
        memo = self._words if word else self._found
        end, searched, length = memo.get(term, (-1, 0, -1))
        if end >= 0 or length == self._length:
            return end
        size = len(term)
        if size == 0:
            end = 0
        elif size > REACH or "\n" in term:
            text = self._text()
            self.scanned += len(text)
            end = _first_end(text, term, 0, word, len(text), 0)
        else:
            end = self._search(term, searched, word)
        memo[term] = (end, len(self._windows), self._length)
        return end

    def _search(self, term: str, searched: int, word: bool) -> int:
        if self._searched > INDEX_COST * len(self._pending) and len(self._pending) > CHUNK + REACH:
            self._cut()  # searched as often as indexing it costs: index it
        windows = self._windows
        if len(term) < 3:  # no piece to look up: every window not searched yet
            candidates: list[int] | range = range(searched, len(windows))
        else:
            held = [self._postings.get(term[i : i + 3], []) for i in range(len(term) - 2)]
            rarest = min(held, key=lambda p: len(p) - bisect_left(p, searched))
            candidates = rarest[bisect_left(rarest, searched) :]
        for index in candidates:
            window = windows[index]
            self.scanned += len(window)
            # a whole word needs the characters around it: the one before the window's core is
            # there, and an occurrence running to the window's end is the next window's
            start = index * CHUNK - 1 if index else 0
            found = _first_end(window, term, 1 if index else 0, word, len(window), start, edge=False)
            if found >= 0:
                return found
        pending = self._pending
        self.scanned += len(pending)
        self._searched += len(pending)
        return _first_end(pending, term, 1 if self._base else 0, word, len(pending), self._base)


def _first_end(text: str, term: str, lead: int, word: bool, size: int, offset: int, *, edge: bool = True) -> int:
    """The end (``offset`` added) of the first occurrence of ``term`` in ``text`` starting at or
    after ``lead``, whole-word when ``word`` (``edge``: the end of ``text`` ends the known text)."""
    length = len(term)
    at = text.find(term, lead)
    while at >= 0:
        if not word:
            return offset + at + length
        after_at = at + length
        if after_at >= size and not edge:
            return -1
        before = text[at - 1] if at else " "
        after = text[after_at] if after_at < size else " "
        if not (before.isalnum() or after.isalnum()):
            return offset + at + length
        at = text.find(term, at + 1)
    return -1


class KnownView:
    """:class:`KnownText` as it was when the view was taken: ``term in view`` is ``term in``
    the text joined then; :meth:`recorded` asks for a whole word."""

    __slots__ = ("_text", "_upto")

    def __init__(self, text: KnownText, upto: int) -> None:
        self._text = text
        self._upto = upto

    def __contains__(self, term: str) -> bool:
        end = self._text.first_end(term)
        return 0 <= end <= self._upto

    def recorded(self, word: str) -> bool:
        """True when ``word`` occurs as a whole word: "art" is not recorded by "party"."""
        end = self._text.first_end(word, word=True)
        return 0 <= end <= self._upto

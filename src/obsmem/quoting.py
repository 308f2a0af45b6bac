"""Untrusted text as data inside obsmem's own blocks: the one rule, for every layer.

obsmem writes blocks of its own into a model's context (observations, pinned knowledge,
reminders, working memory) and fills them with text it does not trust: what users, tools, other
programs and models said or stored. :func:`defuse` makes such a text one line of data: every line
break and control character becomes a space (it cannot start a line of its own), angle brackets
become look-alikes (``<`` → ``‹``, ``>`` → ``›``: it cannot close a block or open a tag), and the
observation format's priority markers (🔴 🟡 🟢 ✅) are removed. Everything else stays character
for character. Linear (:meth:`str.translate`). :mod:`obsmem.om.text.quote` builds the
observations' quoting on it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LINE_BREAKS", "PRIORITY_MARKERS", "defuse", "defuse_lines"]

#: The characters :meth:`str.splitlines` breaks a line at.
LINE_BREAKS: Final = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: The observation format's priority markers: only the observer assigns one.
PRIORITY_MARKERS: Final = "🔴🟡🟢✅"
_CONTROLS: Final = [*range(0x20), 0x7F, *range(0x80, 0xA0)]

_DEFUSE_TABLE: dict[int, str | None] = {code: " " for code in _CONTROLS}
_DEFUSE_TABLE.update({ord(c): " " for c in LINE_BREAKS})
_DEFUSE_TABLE.update({ord("<"): "‹", ord(">"): "›"})
_DEFUSE_TABLE.update({ord(c): None for c in PRIORITY_MARKERS})
_DEFUSE: Final = str.maketrans(_DEFUSE_TABLE)


def defuse(text: str) -> str:
    """``text`` as data: one line, no angle bracket, no priority marker (see the module doc)."""
    return text.translate(_DEFUSE)


def defuse_lines(text: str) -> str:
    """:func:`defuse` each line of ``text`` and join them with ``\\n`` (for a text whose lines
    are kept, each inside a block that cannot be closed or opened from it)."""
    return "\n".join(defuse(line) for line in text.splitlines())

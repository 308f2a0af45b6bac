"""Secrets never become knowledge: what an automatic agent may not store as a fact.

A password, an API key or a PIN the user states in conversation ("my wifi password is
hunter2-Blue!") is no durable fact to capture, review and remind of later, whether or not the
privacy boundary is on. The knowledge agents (capture, :func:`obsmem.knowledge.capture.capture`
for a model's proposals, learn) ask :func:`holds_secret` of every text they are about to write
and leave it out when it holds one. What an application writes itself (``Knowledge.append``,
``memory.pin``, a reviewer's edit) is its own choice and is not checked here.

Two kinds of evidence, both pure and linear in the text, read in the text as written and as plain
text where it has Markdown (``**Password:** hunter2-Blue!``, ``__PIN__: 4821``, a table row
``| wifi password | hunter2-Blue! |`` or a column headed ``Password``: :func:`_plain`):

* the privacy module's secret detectors (:data:`obsmem.privacy.SECRET_CATEGORIES`: provider keys
  and tokens, private keys, ``password=``-style assignments in many languages, connection
  strings, the short forms ``pass: Tulip77x``, ``alarm: 4821``, ``door code 4821#``, ``PIN 4821``, …),
  with the same patterns (and so the same few false positives) as redaction;
* the conversational forms (:mod:`obsmem.said`; not used by redaction, where their false
  positives would destroy observation text): ``<password word> [for …] is|was|ist|est|は|是 … <value>`` (``my wifi password is
  hunter2-Blue``, ``Mein Passwort ist Sonnenblume-42``, ``パスワードは hunter2Blue``, ``my pw is …``,
  ``p4ssw0rd``, look-alike Cyrillic or Greek letters, a value quoted or spelled out ``h u n t e r 2``),
  the same with a code that opens something (``my door code is 4821-B``; not a zip or promo code),
  with a key or token word and an opaque value (``my AWS secret is wJalr…``), a PIN, PUK or card
  security code with its digits, a login given as ``user / password``, a password set ``to`` a
  value, a value before its word (``they use … as their password``, ``… is their wifi
  password``: only one made up like a credential, no address, date or version), and a password word
  followed within a sentence or two by ``it's <value>`` (``My password is set. It's
  hunter2-Blue!``); and a payment card number (Luhn-checked). A value that is an everyday word
  (``my password is expired``, ``… is too short``, ``… is on a sticky note``), a short number
  (``my password is 12 characters long``) or a placeholder (``[REDACTED:…]``, ``***``) is none;
  a plain word after a contraction counts where it ends the sentence (``My password's Sunflower``).

A text holding a placeholder the privacy boundary put where it found a secret
(``[REDACTED:password:…]``: "their wifi password is [REDACTED:password:…]") stated one too.

:func:`secret_values` gives the values themselves, so that a model's rewording of a statement
("wifi login: hunter2-Blue") that no longer names what the value is still counts when the value
was stated as a secret in the text it was read from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from obsmem.knowledge.store.values import latin_lookalikes
from obsmem.privacy import SECRET_CATEGORIES, Redactor
from obsmem.said import said_spans

__all__ = ["holds_secret", "secret_values"]

#: Only to find secrets (its placeholders are never stored): every built-in secret detector, and
#: payment card numbers (Luhn-checked: what pays with the card is no fact to keep either).
_DETECTORS = Redactor(b"obsmem.knowledge.secrets", secrets=True, pii=["credit_card"])

#: Characters that may split a value without showing (dropped before looking, as redaction does).
_INVISIBLE = re.compile(r"[\u200b-\u200d\u2060\ufeff\u00ad]")

def _spans(text: str) -> Iterable[tuple[int, int]]:
    """Every secret found in ``text``: the privacy module's secret detectors and payment card
    numbers, then the prose forms (:func:`obsmem.said.said_spans`, :data:`_CONTRACTED_WORD`)."""
    for detector in _DETECTORS.detectors:
        yield from detector.spans(text)
    yield from said_spans(text)
    for match in _CONTRACTED_WORD.finditer(text):
        value = match.group("value")
        word = value.casefold()
        if word not in _NOT_SECRET_WORDS and word not in _OWNED_WORDS and not word.endswith(_NOT_SECRET_ENDINGS):
            yield match.span("value")


#: A password word, a contraction and a plain word that ends the sentence: "My password's
#: Sunflower", "my wifi password’s sunflower." (not "My password's strength is good", nor a word
#: that says what it is like: "My password's expired", "… weak", "… gone").
_CONTRACTED_WORD = re.compile(
    r"(?<![^\W\d_])(?i:pass(?:word|phrase|code)s?|p[a@4]ssw[o0]rds?|passwd|pw)['\u2019]s[ \t]{1,3}[\"'\u201c\u2018]?"
    r"(?P<value>[^\W\d_]{4,40})[\"'\u201d\u2019]?[ \t]{0,3}(?=[.!?;,)]|$|\n)"
)
_NOT_SECRET_WORDS = frozenset(
    "weak strong long short secure insecure safe unsafe fine good bad great easy hard simple complex gone lost "
    "wrong right correct incorrect invalid valid same different new old blank empty missing unknown secret private "
    "hidden public mine yours ours theirs there here somewhere nothing something required optional mandatory "
    "temporary default random unique generic obvious predictable guessable unchanged".split()
)
#: What a password has (the same spelling is English's possessive: "The form checks the password's
#: length.", "We store only the password's hash."), and the endings of such nouns.
_OWNED_WORDS = frozenset(
    "length strength hash hashes salt format complexity expiry expiration age lifetime history policy rules "
    "requirements field input prompt hint owner value text characters digits letters spelling case meaning purpose "
    "entropy quality security storage encryption reset manager rotation validation".split()
)
_NOT_SECRET_ENDINGS = ("ed", "ing", "ly", "en", "tion", "sion", "ity", "ness", "ment", "ance", "ence", "th")


def _views(text: str) -> tuple[str, ...]:
    """``text`` as looked at (:func:`_readable`), and also as plain text where it has Markdown
    (:func:`_plain`), and each with look-alike letters read as Latin ones where it has any
    ("pаsswоrd" with a Cyrillic а and о, "ｐａｓｓｗｏｒｄ")."""
    readable = _readable(text)
    plain = _plain(readable)
    views = [readable] if plain == readable else [readable, plain]
    for view in tuple(views):
        latin = latin_lookalikes(view)
        if latin != view:
            views.append(latin)
    return tuple(views)


#: Markdown's emphasis and code marks ("**Password:** …", "__PIN__: 4821", "`password`: …"; not
#: one inside a word, ``DB_PASSWORD``), and HTML's ("<b>Password:</b> …").
_MARKS = re.compile(r"(?<![^\W_])[*_`~]+|[*_`~]+(?![^\W_])|</?(?i:b|i|u|s|em|strong|code|kbd|mark|span|tt|samp|var)>")
#: A Markdown table: a run of lines that begin with ``|``.
_TABLE = re.compile(r"(?:^[ \t]{0,12}\|[^\n]*(?:\n|$))+", re.MULTILINE)
#: A table's rule row's cell: ``---``, ``:--:``, or nothing.
_RULE = re.compile(r"\s*:?-*:?\s*")


def _plain(text: str) -> str:
    """``text`` with Markdown's marks taken out (one inside a word, ``DB_PASSWORD``, stays) and
    each table row written as ``cell: cell``, then each of its cells after its column's heading
    (``| Service | Password |`` over ``| Netflix | hunter2-Blue |``: ``Password: hunter2-Blue``)."""
    return _MARKS.sub("", _TABLE.sub(_cells, text))


#: A table cell that describes a value instead of giving one: a type (a schema's ``| password |
#: string |``), a requirement or a mark. Left out of the table's lines, it states no secret.
_DESCRIBES = re.compile(
    r"(?i:(?:string|str|text|varchar|char|int|integer|number|numeric|float|double|decimal|bool|boolean|date"
    r"|datetime|timestamp|uuid|json|object|array|list|bytes|binary|blob|enum"
    r"|null|none|nullable|optional|required|mandatory|yes|no|true|false|hidden|masked|redacted"
    r"|n/a|na|tbd|-+|\*+|x|✓|✔)(?:\(\d{1,6}\))?\??)"
)


def _cells(match: re.Match[str]) -> str:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in match.group().splitlines()]
    rows = [row for row in rows if not all(_RULE.fullmatch(cell) for cell in row)]
    rows = [["" if _DESCRIBES.fullmatch(cell) else cell for cell in row] for row in rows]
    lines: list[str] = []
    for n, row in enumerate(rows):
        lines.append(": ".join(cell for cell in row if cell))
        if n:
            lines.extend(f"{heading}: {cell}" for heading, cell in zip(rows[0], row, strict=False) if heading and cell)
    return "\n".join(lines) + "\n"


_REDACTED = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{8}\]")
#: A placeholder the privacy boundary put where it found a secret (not PII, not a custom pattern):
#: a text holding one stated a secret, and a fact about it ("their wifi password is
#: [REDACTED:password:…]") is none to keep or remind of.
_SECRET_PLACEHOLDER = re.compile(rf"\[REDACTED:(?:{'|'.join(SECRET_CATEGORIES)}):[0-9a-f]{{8}}\]")


def _readable(text: str) -> str:
    """``text`` as looked at: invisible characters out, and each privacy placeholder blanked
    (a value the privacy boundary already replaced is no secret, and its category's name,
    ``[REDACTED:password:…]``, is no ``password:`` assignment)."""
    return _REDACTED.sub(lambda match: " " * len(match.group()), _INVISIBLE.sub("", text))


def secret_values(text: str) -> frozenset[str]:
    """The secret values stated in ``text`` (of four characters or more)."""
    return frozenset(value for view in _views(text) for start, end in _spans(view)
                     if len(value := view[start:end]) >= 4)


def holds_secret(text: str, values: Iterable[str] = ()) -> bool:
    """Whether ``text`` states a secret, or gives one of ``values`` (secrets stated where it was
    read from, :func:`secret_values`) as a word of its own."""
    if _SECRET_PLACEHOLDER.search(text) is not None:
        return True  # what the privacy boundary took out as a secret: "their wifi password is [REDACTED:password:…]"
    views = _views(text)
    if any(next(iter(_spans(view)), None) is not None for view in views):
        return True
    return any(_gives(view, value) for value in values for view in views)


def _gives(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a word of its own, in any case ("HUNTER2-BLUE")."""
    text, value = text.casefold(), value.casefold()
    at = text.find(value)
    while at >= 0:
        before = text[at - 1] if at else " "
        after = text[at + len(value)] if at + len(value) < len(text) else " "
        if not (before.isalnum() or after.isalnum()):
            return True
        at = text.find(value, at + 1)
    return False

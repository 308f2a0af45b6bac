"""Redaction and the provider allow-list: what may leave the process for a memory model.

Pure functions and values, no I/O (the foundation layer). The boundary that applies them to
every model request lives in :mod:`obsmem.models.redacting` and :mod:`obsmem.assembly`.

**Redaction.** A :class:`Redactor` replaces secrets (API keys and tokens of common providers,
private keys, auth headers, passwords in URLs, assignments and connection strings, high-entropy
values after key-like names, and a password, PIN or door code said in prose with a value no word
could be: "my password is Sunflower42", "PIN is 4821", "kod do drzwi to 4821", "pass: Tulip77x",
"alarm: 4821", "door code 4821", "CVV 482", "netflix pw Tulip77x", "my password is
correcthorsebattery", "my password is tulipsun", "my password is abc", "The key is Tulip77x", "Your code:
482913", "what is the password? it is tulipsun", "my password is correct horse battery staple",
"security answer: fluffy") and the PII categories it is given
(:data:`PII_CATEGORIES`) by a stable placeholder ``[REDACTED:<category>:<8 hex>]``. The suffix is a keyed HMAC-SHA256 of the
value: the same value always gets the same placeholder under one key (so a model can still tell
two different values apart, and refer to one consistently), while without the key a placeholder
cannot be brute-forced back to a low-entropy value such as a phone number.

Every detector is a regex that starts at a boundary of its own character class (so a long run
of token characters offers one start, not one per character) and uses bounded repetition, or a
plain scan (private keys); redaction is linear in the text. Placeholders already in the text
are left alone. A value glued to the one before it is found where the scan restarts right after
its neighbour's placeholder, and the text around a replaced value is swept again until nothing
new is found (only that text: a chain of glued values of any length costs linear work), so
redaction is idempotent: ``redact(redact(t).text).text == redact(t).text``.

**Provider allow-list.** :class:`ProviderRules` maps scope patterns to the providers allowed to
see that scope's text: ``"thread:<glob>"``, ``"resource:<glob>"`` or ``"*"`` (any scope).
A provider is allowed for a scope when every rule matching the scope allows it (rules only ever
restrict; ``"*"`` in a provider list allows any); a scope no rule matches allows no hosted
provider, so write a ``"*"`` rule for the default. ``"offline"`` (the deterministic rules, in
process) is always allowed. A request whose scope is unknown is held to every rule at once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from urllib.parse import unquote

from obsmem.errors import ConfigError

__all__ = [
    "PII_CATEGORIES",
    "SECRET_CATEGORIES",
    "Detector",
    "ProviderRules",
    "Redacted",
    "Redactor",
    "compile_pattern",
    "provider_of",
]

PLACEHOLDER_HEX = 8
_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

#: Characters of opaque tokens; a detector for a token starts where a run of these starts.
_TOKEN = "A-Za-z0-9_-"


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret or PII: ``pattern`` finds candidates; the group named ``value`` (when
    present and matched, else ``value2``…``value4``, else the whole match) is what is replaced;
    ``check`` (when set) must accept that value (a checksum, an entropy floor)."""

    category: str
    pattern: re.Pattern[str] | None = None
    check: Callable[[str], bool] | None = None
    scan: Callable[[str], Iterator[tuple[int, int]]] | None = None

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        """The (start, end) of each value to replace, left to right."""
        if self.scan is not None:
            yield from self.scan(text)
            return
        assert self.pattern is not None
        for match in self.pattern.finditer(text):
            start, end = _value_span(match)
            if end <= start:
                continue
            if self.check is None or self.check(text[start:end]):
                yield start, end


def _value_span(match: re.Match[str]) -> tuple[int, int]:
    """The span of the group named ``value`` (else ``value2``…``value4``) when it matched, else
    of the whole match."""
    groups = match.re.groupindex
    for name in ("value", "value2", "value3", "value4"):
        if name in groups and match.group(name) is not None:
            return match.span(name)
    return match.span()


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


def _luhn(value: str) -> bool:
    digits = [int(c) for c in value if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for index, digit in enumerate(reversed(digits)):
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


#: Issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay,
#: Maestro): a Luhn-valid number outside them is more likely an order number than a card.
_CARD_PREFIX = re.compile(r"4|5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)|3[47]|6(?:011|5|4[4-9]|2)|35|3(?:0[0-5]|[689])|5[06-9]")


def _card(value: str) -> bool:
    digits = "".join(c for c in value if c.isdigit())
    separators = {c for c in value if not c.isdigit()}
    return len(separators) <= 1 and _CARD_PREFIX.match(digits) is not None and _luhn(digits)


_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def _iban(value: str) -> bool:
    compact = value.replace(" ", "")
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def _phone(value: str) -> bool:
    return 8 <= sum(c.isdigit() for c in value) <= 15


def _ipv6(value: str) -> bool:
    try:
        ipaddress.IPv6Address(value)
    except ValueError:
        return False
    # ``a[1::2]`` and ``::1`` parse too; an address worth hiding names at least three groups
    return sum(1 for group in value.split(":") if group) >= 3


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _high_entropy(value: str) -> bool:
    """A value that looks generated: letters and digits mixed, and no long runs of one class."""
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and _entropy(value) >= 3.0


def _opaque_token(value: str) -> bool:
    """A bearer token, not a word: a digit, mixed case or a token symbol somewhere."""
    return any(c.isdigit() or c in "._~+/-=" for c in value) or (value.lower() != value and value.upper() != value)


def _basic_credentials(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


_PLACEHOLDER_VALUES = frozenset({"null", "none", "nil", "true", "false", "undefined", "redacted"})


def _password_value(value: str) -> bool:
    """A real value, not an empty/templated one (``${DB_PASSWORD}``, ``<password>``, ``****``)."""
    stripped = value.strip()
    if not stripped or stripped.lower() in _PLACEHOLDER_VALUES:
        return False
    if stripped[0] in "$<{%" or set(stripped) <= set("*xX.•"):
        return False
    return True


#: What a form or a report says about a password after its label, not the password: "Password:
#: required", "Password: n/a", "password: not set", "Password: weak" (a strength meter).
_PASSWORD_LABEL_WORDS = frozenset(
    "required optional mandatory none n/a na tbd tba hidden field empty blank incorrect invalid wrong changed "
    "reset expired missing unset not masked protected encrypted hashed unchanged updated saved sent needed "
    "provided supplied enabled disabled weak medium strong fair ok yes no see below above same match matches "
    "mismatch forgotten locked ask check contact call email at use auto".split()
)


def _assigned_password(value: str) -> bool:
    """:func:`_password_value`, and no word a form or a report puts after the label (a real
    password "required" is rarer than the form that says a password is), nor a type annotation
    (``password: str``)."""
    return (_password_value(value) and value.strip().rstrip(".!?*:;").casefold() not in _PASSWORD_LABEL_WORDS
            and not _type_name(value))


#: The types code annotates a password with (``password: str``, ``password: SecretStr``,
#: TypeScript's ``password: string``); matched as written, a module's prefix aside
#: (``typing.Optional``).
_TYPE_NAMES = frozenset(
    "str bytes bytearray int float bool object Any Text AnyStr Optional Union SecretStr SecretBytes "
    "HiddenText string String number boolean char".split()
)
_MODULE_PREFIX = re.compile(r"(?:[a-z_][a-z0-9_]{0,30}\.){1,3}")


def _type_name(value: str) -> bool:
    prefix = _MODULE_PREFIX.match(value)
    return value[prefix.end() if prefix else 0:] in _TYPE_NAMES


# --------------------------------------------------------------------------------------------
# Private keys: a scan, not a regex (a BEGIN without END must not rescan the rest per BEGIN)
# --------------------------------------------------------------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]{1,20} ){0,4})PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END ((?:[A-Z0-9]{1,20} ){0,4})PRIVATE KEY(?: BLOCK)?-----")
#: Key material (and the headers of an encrypted key) after a BEGIN; ``>`` for the quote prefix
#: the observer's transcript puts before every line of a message after its first.
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,>-]{0,100000}")
#: One line of key material before an END with no BEGIN (the second part of a key pasted in two
#: messages): base64 after any quote prefix or indent; the line right before the END may be
#: short (the last line of the material), the ones above it are full ones.
_PEM_LAST_LINE = re.compile(r"[ \t>]*[A-Za-z0-9+/]{1,100}={0,2}[ \t]*")
_PEM_LINE = re.compile(r"[ \t>]*[A-Za-z0-9+/]{16,100}={0,2}[ \t]*")
_PEM_PREFIX = re.compile(r"[ \t>]*")
_PEM_TAIL_LINES = 2000  # 100,000 characters of material in 64-character lines, and some


def _private_keys(text: str) -> Iterator[tuple[int, int]]:
    begun = list(_begun_keys(text))
    yield from sorted(begun + list(_ended_keys(text, begun)))


def _begun_keys(text: str) -> Iterator[tuple[int, int]]:
    position = 0
    end_found = True
    while True:
        begin = _PEM_BEGIN.search(text, position)
        if begin is None:
            return
        start = begin.start()
        stop = -1
        if end_found:  # once no END follows one BEGIN, none follows a later one
            stop = text.find("-----END ", begin.end())
            end_found = stop >= 0
        if stop >= 0:
            closing = text.find("-----", stop + 9)
            end = len(text) if closing < 0 else closing + 5
        else:  # cut off (a pasted fragment): the header and the key material after it
            body = _PEM_BODY.match(text, begin.end())
            end = body.end() if body is not None else begin.end()
        yield start, end
        position = max(end, start + 1)


def _ended_keys(text: str, begun: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Each END outside the spans of ``begun`` with the lines of key material just above it (the
    tail of a key whose BEGIN was in another message). Each line is looked at once: the walk up
    from an END stops at the previous END or span."""
    floor = 0  # nothing before it is taken again
    spans = iter(begun)
    span = next(spans, None)
    for end in _PEM_END.finditer(text):
        while span is not None and span[1] <= end.start():
            floor = max(floor, span[1])
            span = next(spans, None)
        if span is not None and span[0] <= end.start():
            continue  # inside a key that has its BEGIN
        start = line_start = max(floor, text.rfind("\n", floor, end.start()) + 1)
        marker_alone = _PEM_PREFIX.fullmatch(text, line_start, end.start()) is not None
        if marker_alone or _PEM_LAST_LINE.fullmatch(text, line_start, end.start()) is not None:
            above = line_start
            for count in range(_PEM_TAIL_LINES):
                if above <= floor:
                    break
                line_end = above - 1  # the newline that ends the line above
                above = max(floor, text.rfind("\n", floor, line_end) + 1)
                pattern = _PEM_LAST_LINE if count == 0 and marker_alone else _PEM_LINE
                if pattern.fullmatch(text, above, line_end) is None:
                    break
                start = above
        else:  # prose before the END on its line: the marker alone
            start = end.start()
        yield start, end.end()
        floor = end.end()


# --------------------------------------------------------------------------------------------
# Base64 that holds a secret (a file an API returns encoded: GitHub's contents API, mail, storage)
# --------------------------------------------------------------------------------------------

#: A run of base64 of at least 16 characters, over line breaks as an API (``\n`` in JSON text) or
#: the observer's transcript (a newline and its ``> `` quote prefix) writes them.
_B64_RUN = re.compile(r"(?<![A-Za-z0-9+/=\\])[A-Za-z0-9+/]{16,}(?:(?:\\n|\r?\n(?:> )?)[A-Za-z0-9+/]{4,})*={0,2}")
_B64_BREAK = re.compile(r"\\n|\r?\n(?:> )?")


def _encoded_secrets(text: str) -> Iterator[tuple[int, int]]:
    """Each base64 run whose decoded text (UTF-8) holds a secret that a plain detector finds.
    Each run is decoded once and its text scanned once: linear."""
    for run in _B64_RUN.finditer(text):
        payload = _B64_BREAK.sub("", run.group())
        payload = payload[: len(payload) - len(payload) % 4] if len(payload) % 4 == 1 else payload
        try:
            decoded = base64.b64decode(payload + "=" * (-len(payload) % 4), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            continue  # not base64, or not text (an image, a zip)
        if any(next(detector.spans(decoded), None) is not None for detector in _PLAIN_SECRET_DETECTORS):
            yield run.span()


# --------------------------------------------------------------------------------------------
# The detectors
# --------------------------------------------------------------------------------------------


def _re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def _token(prefix: str, body: str) -> re.Pattern[str]:
    """A token that starts where a run of token characters starts (one start per run)."""
    return _re(rf"(?<![{_TOKEN}]){prefix}{body}")


#: Blanks within a line: a space, a tab, and the no-break spaces rich text and chat apps paste.
_SP = r"[^\S\r\n]"
#: A key's closing quote (``\"`` inside a JSON string that holds JSON, as a tool's result body is
#: rendered), then ``:``, ``=``, ``=>``, ``:=`` or a full-width ``：``/``＝`` (CJK input methods).
_ASSIGN = rf"""(?:\\?["'])?{_SP}{{0,10}}(?::|=>|=|:=|\uff1a|\uff1d){_SP}{{0,10}}"""
#: A value in quotes (``\"…\"`` escaped ones too) or bare (never starting at an escaped quote:
#: ``\"`` is a quote, not the value).
_ESCAPED = r'\\"(?P<value4>(?:[^"\\\r\n]|\\[^"\r\n]){1,200})\\"'
_VALUE = (r"""(?:"(?P<value>[^"\r\n]{1,200})"|'(?P<value2>[^'\r\n]{1,200})'|"""
          + _ESCAPED + r"""|(?P<value3>(?:[^\s"',;&<>()\[\]{}\\]|\\(?!["'])){1,200}))""")
#: :data:`_VALUE` after a CJK word: a bare value also ends at CJK characters and punctuation.
_CJK_VALUE = _VALUE.replace(
    r"""(?P<value3>(?:[^\s"',;&<>()\[\]{}\\]""",
    r"""(?P<value3>(?:[^\s"',;&<>()\[\]{}\\\u3000-\u303f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uff01-\uff20]""",
)
#: A URL-encoded ``=`` and the value after it, up to an encoded ``&`` or ``#`` (the next parameter).
_ENCODED_VALUE = r"%3[Dd](?P<value>(?:[^\s%&#\"'<>]|%(?!2[6Bb]|23)[0-9A-Fa-f]{2}){1,512})"


def _encoded_password(value: str) -> bool:
    return _password_value(unquote(value))


def _encoded_secret(value: str) -> bool:
    return _password_value(unquote(value)) and _high_entropy(unquote(value))


# --------------------------------------------------------------------------------------------
# Secrets said in prose: "my password is Sunflower42", "the PIN is 4821", "kod do drzwi to 4821"
# --------------------------------------------------------------------------------------------
#
# Only a value that cannot be an ordinary word counts: for a password, letters and digits (six or
# more; or six digits or more), no version, date, time, link or algorithm name ("AES-256"), or
# letters only where no describing word could be meant (:func:`_said_letters`); for a
# PIN or a code that opens something, what is typed on a keypad (digits, "#", "*", "-"). "The
# password is case-sensitive", "Le mot de passe est obligatoire", "The building code is
# IBC-2021" and the rest of tests/privacy/test_prose_secrets_redacted.py stay as written (the
# broader forms knowledge capture refuses, obsmem.said, are not used here for that reason).

#: The words for a password (a wifi key too), in the languages the assignments above read.
_SAID_PASSWORD = (
    r"pass(?:word|phrase)|passwd|pw|clave|passwort|kennwort|mot de passe|contrase[ñn]a|senha|wachtwoord"
    r"|l[öo]senord|adgangskode|passord|salasana|has[łl]o|heslo|[şs]ifre(?:si)?|парол[ья]|wi-?fi[ -]key|network key"
    r"|secret[ -]word|code[ -]word"
)
#: The words for a PIN (digits only).
_SAID_PIN = (r"pin(?:[ -]?(?:code|number|nummer))?|pinkod(?:en)?|pincode|passcode|puk|geheimzahl|code pin|codice pin|kod pin|digicode"
             r"|security code|verification code|one-time code|otp(?: code)?|2fa code|sms code")
#: A payment card's security code (three or four digits).
_SAID_CVV = r"cvv2?|cvc2?|csc|security code|card verification code"
#: What a code opens, in the same languages.
_OPENS = (
    r"front[ -]door|back[ -]door|doors?|gates?|alarm|garage|lock|padlock|safe|locker|keypad|entrance|vault|building"
    r"|drzwi|bram[ayę]|furtk[ia]|domofonu?|sejfu?|alarmu|gara[żz]u|klatki|wej[śs]cia|mieszkania"
    r"|porta|portone|cancello|allarme|cassaforte|ingresso|citofono"
    r"|porte|portail|alarme|coffre(?:-fort)?|entr[ée]e|immeuble|interphone"
    r"|puerta|port[óo]n|alarma|caja fuerte|garaje|entrada"
    r"|port[ãa]o|cofre|garagem|t[üu]r|haust[üu]r|tor|tresor|eingang|deur|poort|kluis|d[öo]rren|porten|larmet|grinden"
)
#: A code named by what it opens: "door code", "Türcode", "deurcode", "the code for the front
#: door", "kod do drzwi", "il codice dell'allarme", "le code d'entrée", "koden till dörren".
_SAID_CODE = (
    r"(?:door|gate|alarm|garage|safe|keypad|entry|lock|lock ?box|key ?box|key ?safe|intercom|buzzer|locker|unlock"
    r"|t[üu]r|haust[üu]r|tor|garagen|deur|poort|d[öo]rr|larm)[ -]?(?:code|kod|combination|combo)(?:en|e|s)?"
    r"|combination|combo|lock ?box|key ?box"
    r"|(?:codes?|combinations?|combos?|kod|codice|c[óo]digo|code|koden?|combinaison)"
    r"(?:\s(?:[^\s.,;:!?'’]{1,12}\s){0,3}?|\s(?:[^\s.,;:!?'’]{1,12}\s){0,2}?[^\s.,;:!?'’]{1,5}['’])"
    rf"(?:{_OPENS})(?:\s(?:wej[śs]ciow\w{{1,3}}|d['’]ingresso|d['’]entr[ée]e|principale?|d'entrada))?"
)
#: What kind of password, after its word: "mot de passe wifi", "PIN bancaire".
_SAID_OF = r"(?:\s(?:wi-?fi|wlan|admin|root|bancaire|du wifi))?"
#: What the value is for, between the word and its copula: "the password for the router is …".
_SAID_FOR = (r"(?:\s(?:for|of|to|on|at|in|f[üu]r|von|pour|de|du|para|per|del|della|dla|do|na|i|we|you|they|that)"
             r"(?:\s[^\s.,;:!?=]{1,30}){1,4}?)?")
#: The copula or mark between the word and the value ("to" is Polish's: "hasło to …"; "PIN=4821", "my PIN? 4821",
#: "PIN is: 4821").
_SAID_IS = (
    r"(?:\s{0,3}(?::|->|→|=>|=|\?|\uff1a)|\s{1,3}(?:--?|[—–])|[ \t]{0,3}[—–]|['’]s(?=\s)"
    r"|,?\s(?:is|was|ist|lautet|war|est|était|es|era|é|è|e['’]|er|var|är|jest|to|je|c['’]est"
    r"|(?:has been|have been|was|is|got|been)?\s?(?:changed|set|reset|updated)\sto)(?![^\W\d_]))"
    r"(?:(?<=[^\W\d_]):)?(?:\s{1,3}(?:now|still|currently|jetzt|nun|maintenant|ahora|agora|ora|teraz))?\s{0,3}"
    r"(?:(?:le|the|el|der|die|das)\s{1,3})?"
)
#: The value: one word, without the punctuation after it (optionally quoted).
_SAID_VALUE = r"""[\"'`“‘«]?(?P<value>[^\s\"'`“”‘’«»()\[\]{}<>]{0,199}[^\s\"'`“”‘’«»()\[\]{}<>.,;:!?])"""
#: A line that is only the word (a Markdown heading, a bold or a label line), and the value alone
#: on the next line (a transcript's "> " quote mark too): "## Password" then "Sunflower42".
_SAID_LINE = r"(?:#{1,6}[ \t]{1,3})?(?:\*\*|__)?(?:[^\W\d_]{1,20}[ \t]){0,2}?"
_SAID_NEXT_LINE = (r"(?:\*\*|__)?[ \t]{0,3}:?(?:\*\*|__)?[ \t]{0,3}\r?\n[ \t>]{0,6}"
                   r"[\"'`]?(?P<value>[^\s\"'`]{0,199}[^\s\"'`.,;:!?])[\"'`]?[ \t]*(?=\r?\n|$)")


def _said(words: str, joined: str = _SAID_IS, *, before: str = "") -> re.Pattern[str]:
    return _re(rf"(?<![^\W\d_]){before}(?i:{words})(?![^\W\d_])(?i:{_SAID_OF}{_SAID_FOR}{joined}){_SAID_VALUE}")


#: Code, not a code: the word as part of an identifier ("LED_PIN", "RESET_PIN", "x.alarm",
#: "self.pin"), and a lower-case "pin", "alarm", "door" or "gate" assigned with "=" ("int pin =
#: 2048;", "alarm = 4500", "door = 1999"): a constant of a sketch or a config a user pastes.
#: "PIN=2741", "Pin = 5820", "Alarm = 3958", "front door = 4821#" and "door code = 3852" are codes.
_NOT_CODE = r"(?<![_.])(?!(?-i:pin|alarm|door|gate)[ \t]{0,3}=(?!=))"


#: Finnish's copula ("Salasana on …", "PIN-koodi on 4821"), and no copula at all where a language
#: needs none: Turkish "Şifrem …" (my password), Russian "Мой пароль …", "Код от двери 4821".
_SAID_FINNISH = r"salasana(?:ni|si|mme)?|pin-?koodi(?:ni|si)?|tunnusluku|ovikoodi"
_SAID_ON = r"\s(?:on|oli)(?![^\W\d_])\s{0,3}"
_SAID_BARE_PASSWORD = r"[şs]ifrem(?:iz)?|parolam|парол[ья]|pin kodum"
_SAID_BARE_CODE = (r"пин-?код|пин|код(?:\sот)?\s(?:двери|домофона|подъезда|сейфа|ворот|калитки|сигнализации)")
_SAID_BARE = r"(?:\s{0,3}[:—–-]|\s(?:это|—))?\s{1,3}"
#: Chinese, Japanese and Korean, a copula and no space: "我的密码是Xiangri42", "パスワードはHimawari42です";
#: the value (ASCII) ends where the sentence goes on in CJK only at its end or a copula's ending
#: (not "パスワードは1Passwordに保存しています": the password is kept in 1Password).
_SAID_CJK = _re(
    r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호|암호)\s{0,3}(?:是|为|為|は|는|은|이|가)\s{0,3}[「『\"']?"
    r"(?P<value>[!-~]{0,199}[A-Za-z0-9])(?=\s|$|[。、，,.!！?？」』\"']|です|だ|입니다|이다|예요|이에요)"
)


def _said_on_next_line(words: str) -> re.Pattern[str]:
    return _re(rf"(?m:^|(?<=: ))[ \t>]{{0,6}}{_SAID_LINE}(?i:{words})(?![^\W\d_]){_SAID_NEXT_LINE}")


#: A login given as a user and a password: "username alice password Tulip77x", "user: alice pass:
#: Tulip77x", "WiFi: HomeNet / Tulip77x", "my login is alice / Tulip77x".
_SAID_PAIR = _re(
    r"(?<![^\W\d_])(?i:(?:user(?:[ -]?name)?|login|e-?mail|benutzer(?:name)?)\s{0,3}[:=]?\s{1,3}[^\s,;]{1,100}[,;]?\s{1,3}"
    r"(?:pass(?:word)?|pw|passwd|passwort|kennwort|mot de passe|senha|contrase[ñn]a)\s{0,3}[:=]?\s{0,3}"
    r"|(?:wi-?fi|login|log-in|sign-in|credentials?)(?:\s(?:is|are)|\s{0,3}:)\s{1,3}[^\s/]{1,100}\s{0,3}/\s{0,3})"
    r"[\"'`]?(?P<value>[^\s\"'`()\[\]{}<>/]{0,199}[^\s\"'`()\[\]{}<>/.,;:!?])"
)
#: A value before its word: "I use Tulip77x as my password", "Tulip77x is my wifi password",
#: "Tulip77x is the password" (a possessive or "the", and nothing after the word but the sentence's
#: end: not "… as our password hasher").
_SAID_BEFORE = _re(
    r"(?:(?<![^\W\d_])(?i:use|uses|used|using)\s|(?<![^\s\"'(]))[\"'`]?"
    r"(?P<value>[^\s\"'`()\[\]{}<>]{6,100}?)[\"'`]?\s(?i:as|is|was)\s(?i:my|our|his|her|their|your|the)"
    r"(?:\s[^\W\d_]{1,20}){0,2}?\s(?i:pass(?:word|code|phrase)|pw|pin(?:\scode)?)(?![^\W\d_])"
    r"(?=\s{0,3}(?:[.,;!?)]|$)|[ \t]{0,3}\r?\n|\s(?:for|on|at|and|but|now|too|here|there)(?![^\W\d_]))"
)

#: A code told by how it opens the door: "The gate opens with 4821", "You get in with code 4821",
#: "Press 4821# at the door", "The keypad takes 4821" (only keypad digits, four or more).
_SAID_OPENS_WITH = _re(
    r"(?<![^\W\d_])(?i:(?:(?:door|gate|garage|lock|padlock|safe|locker|keypad|lockbox|key ?box)s?\s(?:opens|unlocks|open|unlock)"
    r"|(?:get|gets|getting|let yourself|let yourselves)\sin)\swith\s(?:(?:the\s)?code\s)?"
    r"|keypad\s(?:takes|accepts)\s(?:(?:the\s)?code\s)?"
    r"|(?:press|type|enter|punch\sin|key\sin)\s(?:in\s)?(?=[0-9#*]{4,24}\s(?:at|on)\s(?:the\s)?"
    r"(?:front\s|back\s|main\s)?(?:door|gate|keypad|entrance|intercom|buzzer|lockbox|key ?box|garage)))"
    r"(?P<value>[0-9#*][0-9#*-]{2,23})(?![\w#*-])"
)

#: A value that is not one: a version, a date, a time, a link, an address (a dotted domain after
#: its "@": "P@ssw0rd" is a password), an algorithm or a standard ("AES-256", "WPA3-Personal",
#: "NIST-800-63", "sha256sum", "x86_64": after its number a short ending or a separator, so
#: "q1w2e3r4" and "md5sucks1" are passwords), a length ("12-characters"), a call.
_SAID_NOT_VALUE = re.compile(
    r"v?\d+(?:\.\d+)+\S*|\d{1,4}[-./]\d{1,2}[-./]\d{1,4}|\d{1,2}:\d{2}\S*|\w+://\S*|[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+"
    r"|(?i:aes|sha|md|rsa|dsa|ecdsa|wpa|wep|rfc|iso|nist|tls|ssl|utf|pbkdf|hmac|gpt|ibc|ssh|gpg|pgp|bcrypt|argon|scrypt"
    r"|crc|base|rot|des|x|win|ios|android|ipv|http|oauth|q|h|k|fips|pci|owasp|cve)[-_]?\d+(?:[A-Za-z]{1,3}\d*)?"
    r"(?:[-_.:/+]\S*)?"
    r"|\S*-(?i:based|only|protected|encrypted|hashed|salted|length|long|digits?|chars?|characters?|bits?)"
    r"|\d{1,3}(?:-|\s)?(?i:characters?|chars?|digits?|letters?|symbols?|bits?|bytes?|days?|months?)|[/~]\S*"
    # a cloud region (us-east-1, europe-west4), not a passphrase such as correct-horse42
    r"|(?:us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov|europe|asia|australia|northamerica|southamerica|africa)"
    r"-(?:north|south|east|west|central|northeast|southeast|northwest|southwest)\d{0,2}(?:-\d{1,2})?[a-z]?",
)


def _said_password(value: str) -> bool:
    """A password said in prose: letters and digits, six or more (or six digits or more)."""
    if len(value) < 6 or _SAID_NOT_VALUE.fullmatch(value) is not None or not _password_value(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    return has_digit and (value.isdigit() or any(c.isalpha() for c in value))


#: What is typed on a keypad: digits (four or more for a PIN, three for a door), "#", "*", "-",
#: a letter at either end ("4821B").
_KEYPAD_VALUE = re.compile(r"[A-Za-z]?[0-9#*][0-9#* -]{2,23}[A-Za-z]?")


def _said_keypad(value: str) -> bool:
    return _KEYPAD_VALUE.fullmatch(value) is not None and sum(c.isdigit() for c in value) >= 3


def _said_pin(value: str) -> bool:
    return _said_keypad(value) and sum(c.isdigit() for c in value) >= 4


def _said_password_or_pin(value: str) -> bool:
    return _said_password(value) or _said_pin(value)


def _said_cvv(value: str) -> bool:
    return value.isdigit() and 3 <= len(value) <= 4


# The short forms: "pass: hunter2x" (the word "pass" as a password's label), a code labelled by
# what it opens ("alarm: 4821", "keypad = 4821#"), a code word right before its digits ("alarm
# code 4821", "door code 1234#", "PIN 4821", "pin code 4821"), and a password of letters only
# that no describing word could be ("my password is correcthorsebattery", "… is Sunflower", "…
# is CorrectHorse", '… is "tulip"'). Each starts at a word boundary, and every repetition in
# them is bounded: linear, as the detectors above.

#: What "pass" means after these words: a ticket or a permit ("boarding pass: AB1234"), one run of
#: a compiler, a renderer or a test suite ("the second pass is x86-64 only").
_NOT_A_PASSWORD_PASS = (
    "boarding bus season day week weekly month monthly annual year yearly ski hall guest visitor press backstage "
    "transit metro rail train subway ferry museum park parking festival event vip free access all-access gym pool "
    "library student travel tour city national hotel mountain fast express first second third final last next "
    "single double one-pass two-pass multi-pass compiler optimization optimisation inlining render rendering shader "
    "lint linting review test tests build ci qa unit smoke check checks job jobs run runs hail forward backward bye "
    "day-pass e"
).split()
_SAID_PASS = _re(
    r"(?<![^\W\d_])pass(?![^\W\d_])" + "".join(f"(?<!{re.escape(word)} pass)" for word in _NOT_A_PASSWORD_PASS)
    + r"(?:[ \t]{0,3}(?::|=|->|\uff1a)|[ \t]{1,3}(?:is|was)(?:[ \t]{1,3}(?:now|still))?(?![^\W\d_]))"
    r"[ \t]{0,3}" + _SAID_VALUE,
    re.IGNORECASE,
)
#: A code labelled by what it opens: "alarm: 4821", "the alarm is 4821", "front door = 4821#".
#: An alarm, a door or a gate also has a time ("Alarm: 0630", "Doors: 1930"): see
#: :func:`_said_code_not_time`.
_LABELLED = r"(?:[ \t]{0,3}(?::|=|->|\uff1a)|[ \t]{1,3}(?:is|was)(?![^\W\d_]))[ \t]{0,3}"
_LABELLED_VALUE = r"(?P<value>[A-Za-z]?[0-9#*][0-9#*-]{2,23}[A-Za-z]?)(?![\w#*-])"
#: After a labelled code, its clause ends (not "The gate is 3000 metres away", "front door: 3000 mm").
_LABELLED_END = (r"(?=[ \t]{0,3}(?:[.!?;,)\"\u201d]|['\u2019](?![^\W\d_])|\r?\n|$)"
                 r"|[ \t]{1,3}(?:and|but|or|so|for|at|on|to|if|please|thanks|btw)(?![^\W\d_]))")
_SAID_TIMED_LABEL = _re(
    r"(?<![^\W\d_])" + _NOT_CODE + r"(?:alarm|(?:front |back |garage |main )?door|gate)(?![^\W\d_])" + _LABELLED
    + _LABELLED_VALUE
    + _LABELLED_END,
    re.IGNORECASE,
)
_SAID_KEYPAD_LABEL = _re(
    r"(?<![^\W\d_])(?:keypad|lock ?box|key ?box|key ?safe|padlock)(?![^\W\d_])" + _LABELLED + _LABELLED_VALUE
    + _LABELLED_END,
    re.IGNORECASE,
)
#: A code word right before its digits, no copula: "alarm code 4821", "passcode 4821", "PIN 4821" (a bare "PIN" in
#: capitals only: a lower-case "pin 1024" may be a connector's).
_SAID_BARE_KEYPAD = _re(
    r"(?<![^\W\d_])(?<![_.])(?:(?i:(?:door|gate|alarm|garage|safe|keypad|lock ?box|key ?box|key ?safe|padlock|entry|unlock"
    r"|intercom|buzzer)[ -]?code|pin[ -]?(?:code|number)|passcode)|PIN)(?![^\W\d_])[ \t]{1,3}" + _LABELLED_VALUE
)
#: An HTTP status's reason phrase after its number: "security code 200 OK" is a status, no code.
_NOT_HTTP_REASON = (r"(?![ \t]{1,3}(?:OK|Created|Accepted|No Content|Moved|Found|See Other|Not |Bad Request|Unauthori[sz]ed"
                    r"|Forbidden|Internal|Service Unavailable|Gateway|Too Many|Conflict|Gone|Continue|Partial|Temporary"
                    r"|Permanent|Payment|Method|Request|Unprocessable|Precondition|Unsupported)(?![^\W\d_]))")
#: A one-time code right after its word (a colon or "is" between them too: "access code: 7731",
#: "login code is 2719"): "verification code 123456", "2FA code 551203",
#: "OTP 739201", "one-time code 482-913" (four to eight digits, nothing glued to them, no year: not
#: "OTP 26", "2FA code 2 times", "the login code 2024 update"); and the text messages that bring
#: one, "482913 is your verification code", "G-482913 is your Google verification code".
_OTP_WORDS = (r"(?:verification|one[- ]?time|otp|2fa|two[- ]factor|mfa|sms|login|log[- ]?in|sign[- ]?in|auth(?:entication)?"
              r"|confirmation|access|totp|authenticator|backup|recovery)[ -]code|one[- ]time[ -](?:password|passcode|pin)"
              r"|otp|totp|2fa")
_OTP_VALUE = r"(?P<value>\d{4,8}|\d{3}[- ]\d{3})(?![\w#*-]|[.,:/]\d)"
_SAID_BARE_OTP = _re(
    r"(?<![\w.-])(?i:" + _OTP_WORDS + r")(?![^\W\d_])(?:[ \t]{0,3}[:=][ \t]{0,3}|[ \t]{1,3}(?:(?i:is|was)[ \t]{1,3})?)"
    + _OTP_VALUE + _NOT_HTTP_REASON
    + r"|(?<![\w.-])(?:[A-Z]{1,3}-)?" + _OTP_VALUE.replace("value", "value2") + r"[ \t]{1,3}(?i:is|was)[ \t]{1,3}"
    r"(?i:your|my|the)(?:[ \t]{1,3}[A-Za-z]{1,20}){0,2}?[ \t]{1,3}(?i:" + _OTP_WORDS + r"|(?:security|access|otp) code|code)"
    r"(?![^\W\d_])"
)
#: A wifi key said after its network's name: "network HomeNet, key Tulip77x", "SSID HomeNet key:
#: Tulip77x", "wifi HomeNet, password Tulip77x" (a value no word could be, :func:`_said_password`).
_SAID_NETWORK_KEY = _re(
    r"(?<![^\W\d_])(?i:(?:wi-?fi|wlan)(?:[ \t]{1,3}(?:network|name|ssid))?|network(?:[ \t]{1,3}name)?|ssid)(?![^\W\d_])"
    r"(?:[ \t]{0,3}[:=]|[ \t]{1,3}(?i:is|was))?[ \t]{1,3}[\"'`\u201c]?[^\s\"'`\u201c\u201d,;/]{1,64}[\"'`\u201d]?"
    r"(?:[ \t]{0,3}[,;/]|[ \t]{1,3}(?i:and|with))?[ \t]{1,3}(?:(?i:the)[ \t]{1,3})?(?i:key|pass(?:word|phrase)?|pw|code)"
    r"(?![^\W\d_])(?:[ \t]{0,3}[:=]|[ \t]{1,3}(?i:is|was))?[ \t]{1,3}[\"'`\u201c\u2018]?"
    r"(?P<value>[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>]{0,199}[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>.,;:!?])"
    r"(?=[\"'`\u201d\u2019]?[.,;:!?)]{0,3}(?:\s|$))"
)
#: An identifier after the word, not its value: "password field2", "password input1", "pw column3".
_BARE_NOT_VALUE = re.compile(
    r"(?i:field|input|column|col|box|form|label|prompt|entry|param|arg|argument|value|hash|attempt|reset|policy|rule"
    r"|manager|check|step|option|type|widget|element|button|page|screen|dialog|text|textbox|row|table|length"
    r"|string|var|variable|version|item|case|example|sample|hint|strength|level|method|mode|list|file|flag|setting"
    r"|config|node|slot|hasher|validator|encoder|rotation)s?_?\d{1,3}"
)


def _said_bare_password(value: str) -> bool:
    """:func:`_said_password`, and no identifier made of a word and a number ("field2"; a password
    such as "test123" or "user123" is none)."""
    return _said_password(value) and _BARE_NOT_VALUE.fullmatch(value) is None


#: A password right after its word, no copula or colon: "netflix pw Tulip77x", "my pw hunter2hunter",
#: "gmail password Orchid55k". Only a value no word could be counts (:func:`_said_password`), and
#: only a whole one: the clause goes on after it, not a call or a type ("password VARCHAR2(100)").
_SAID_BARE_PW = _re(
    r"(?<![^\W\d_])(?<![_.-])(?i:pw|passwd|password|passphrase|(?:wi-?fi|wlan|wpa2?|network)[ -]key)(?![^\W\d_])[ \t]{1,3}[\"'`\u201c\u2018]?"
    r"(?P<value>[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>]{0,199}[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>.,;:!?])"
    r"(?=[\"'`\u201d\u2019]?[.,;:!?]{0,3}(?:\s|$))"
)
#: A card's security code right before its digits, no copula: "CVV 482", "security code 4821",
#: "CVC2 093" (three or four digits and nothing glued to them: not "CVV 3 digits", "CVV 2 times",
#: "security code 2FA"; a lower-case "cvv" of code, "cvv_len = 3", is no code word).
_SAID_BARE_CVV = _re(
    r"(?<![^\W\d_])(?<![_.])(?i:cvv2?|cvc2?|(?:card[ -])?security[ -]code|card[ -]verification[ -](?:code|value))"
    r"(?![^\W\d_])[ \t]{1,3}(?P<value>\d{3,4})(?![\w#*-]|[.,:/]\d)" + _NOT_HTTP_REASON
)


def _said_otp(value: str) -> bool:
    """A one-time code: four to eight digits (three and three, "482-913"), not a year ("the login
    code 2024 update")."""
    return 4 <= sum(c.isdigit() for c in value) <= 8 and not (len(value) == 4 and value[:2] in ("19", "20"))


def _said_code_not_time(value: str) -> bool:
    """A keypad code (:func:`_said_pin`) that is not a 24-hour time written without its colon
    ("0630", "1930", "945", "2400")."""
    if not _said_pin(value):
        return False
    if value.isdigit() and len(value) in (3, 4):
        return not (int(value[:-2]) <= 24 and int(value[-2:]) <= 59)
    return True


#: A password of letters only: "my password is correcthorsebattery", "The password for the wifi
#: is Sunflower.", '… is "tulip"'. The copula in lower case (a title, "The Password Is Obsolete",
#: is none) and the value the last word of its sentence or clause.
_LETTERS_WORDS = r"(?<![^\W\d_])(?i:pass(?:word|phrase|code)|passwd|pw|wi-?fi key|network key)(?![^\W\d_])"
_LETTERS_IS = (rf"(?:(?i:{_SAID_FOR})[ \t]{{1,3}}(?i:is|was):?(?:[ \t]{{1,3}}(?i:now|still))?[ \t]{{1,3}}"
               rf"|(?i:{_SAID_FOR})[ \t]{{0,3}}:[ \t]{{0,3}}|[ \t]{{1,3}}[-\u2013\u2014][ \t]{{1,3}})")
#: What a sentence goes on with after a password, saying how long it holds: "my password is
#: tulipsun for now", "… until Friday", "… right now, I will change it" (helper-186).
_FOR_NOW = (r"(?:for[ \t]{1,3}(?:now|today|the[ \t]{1,3}(?:moment|time[ \t]{1,3}being))|right[ \t]{1,3}now"
            r"|at[ \t]{1,3}the[ \t]{1,3}moment|these[ \t]{1,3}days|now|today|currently"
            r"|(?:until|till)(?:[ \t]{1,3}[^\W\d_]{1,20}){1,3}?)(?![^\W\d_])")
#: A clause of its own after a password: "my password is tulip sun if you need it", "… which I
#: picked yesterday", "… in case you need it".
_NEW_CLAUSE = r"(?:and|but|so|though|btw|if|which|when|whenever|because|unless|since|in[ \t]{1,3}case)"
#: The first words of :data:`_FOR_NOW` and :data:`_NEW_CLAUSE`: a word of a passphrase is none of them.
_NOT_FOR_NOW = (r"(?!(?i:for|right|at|these|now|today|currently|until|till|if|which|when|whenever|because"
                r"|unless|since|in[ \t]{1,3}case)(?![^\W\d_]))")
_LETTERS_END = (r"(?=(?:[ \t]{1,3}(?i:" + _FOR_NOW + r"))?"
                r"(?:[ \t]{0,3}(?:[.!?;,)\"\u201d]|['\u2019](?![^\W\d_])|\r?\n|$)"
                r"|[ \t]{1,3}" + _NEW_CLAUSE + r"(?![^\W\d_])))")
_SAID_LETTERS = _re(_LETTERS_WORDS + _LETTERS_IS + r"(?P<value>[^\W\d_]{4,64})" + _LETTERS_END)
#: A quoted word or passphrase: '… is "tulip"', '… is "correct horse battery staple"' (words of
#: letters, up to eight, joined by a space or a hyphen).
_PHRASE = r"[^\W\d_]{1,30}(?:[ -][^\W\d_]{1,30}){0,7}"
_SAID_QUOTED_LETTERS = _re(
    _LETTERS_WORDS + _LETTERS_IS + rf"(?:\"(?P<value>{_PHRASE})\"|\u201c(?P<value2>{_PHRASE})\u201d"
    rf"|'(?P<value3>{_PHRASE})'|\u2018(?P<value4>{_PHRASE})\u2019)"
)
#: Words that say what a password is like, where it is or whose it is: no password.
_DESCRIBING_WORDS = frozenset(
    "weak strong stronger weaker long longer short shorter secure insecure safe safer unsafe fine good better bad "
    "worse great easy easier hard harder simple simpler complex gone lost wrong right correct incorrect invalid "
    "valid same different new old blank empty missing unknown secret private hidden public mine yours ours theirs "
    "hers there here somewhere anywhere everywhere elsewhere nowhere nothing something anything everything "
    "required optional mandatory compulsory necessary unnecessary temporary permanent default random unique "
    "generic obvious predictable guessable unguessable memorable unchanged obsolete complete incomplete accurate "
    "inaccurate adequate inadequate appropriate inappropriate alphanumeric numeric lowercase uppercase "
    "straightforward trustworthy untrustworthy whatever null none nil undefined redacted password passwords "
    "passphrase passcode same unset pending active inactive disabled enabled locked unlocked perfect awesome superb "
    "solid stupid silly weird funny crazy dumb ugly pretty lame stale fresh nice cool okay direct indirect exact inexact "
    "strict".split()
)
_DESCRIBING_ENDINGS = ("ed", "ing", "ly", "en", "able", "ible", "ive", "ous", "ful", "less", "al", "ic", "ent",
                       "ant", "ary", "ory", "ure", "ate", "ite", "ish", "tion", "sion", "ness", "ment", "ity", "ism",
                       "ist", "est", "ward", "wards", "where", "self", "selves", "some")


def _said_letters(value: str) -> bool:
    """A word no sentence about a password uses to describe it: made up of words run together
    (twelve letters or more, lower case: ``correcthorsebattery``), capitalised mid-sentence as a
    name (``Sunflower``, six letters or more) or in mixed case (``CorrectHorse``, eight or more)."""
    word = value.casefold()
    if word in _DESCRIBING_WORDS or word.endswith(_DESCRIBING_ENDINGS) or _type_name(value):
        return False
    if any(c.isupper() for c in value[1:]):
        return len(value) >= 8
    if value[0].isupper():
        return len(value) >= 6
    return len(value) >= 12


#: Words a quoted description of a password is made of beside :data:`_DESCRIBING_WORDS`
#: ('the password is "not required"', '"too short"', '"the same as before"').
_PHRASE_WORDS = frozenset(
    "a an the not no too very so quite still now just only yet as than of to in on at for with by and or but "
    "it is be been was any all some no one two three four five six seven eight nine ten characters letters "
    "digits chars long before again ever never always set see above below".split()
)


def _said_quoted_letters(value: str) -> bool:
    """A quoted word after a password word and its copula (``my password is "tulip"``: four
    letters or more), or a quoted passphrase (``… is "correct horse battery staple"``: twelve
    characters or more, not only describing words: ``… is "not required"``, and no hint: ``… is "the
    name of your first pet"``); neither ending in a describing word (``… is "case-sensitive"``)."""
    words = value.casefold().replace("-", " ").split()
    if not words or words[-1] in _DESCRIBING_WORDS or words[-1].endswith(_DESCRIBING_ENDINGS):
        return False  # '"expired"', '"case-sensitive"'
    if len(words) == 1:
        return len(value) >= 4 or (len(value) == 3 and _said_three_letters(value))
    if words[0] in ("the", "a", "an", "my", "your", "his", "her", "their", "our"):
        return False  # a description or a hint: '"the name of your first pet"'
    return len(value) >= 12 and not all(word in _DESCRIBING_WORDS or word in _PHRASE_WORDS for word in words)


#: A shorter password of letters only, after a cue that says whose password it is or after "pw":
#: "my password is tulipsun", "our netflix password is bluemoon", "pw: hollyoak", "the pw is
#: frostpine", "the wifi password is tulipsun", "the new netflix password is bluemoon", "the
#: password is tulipsun", or where a sentence starts with the word (a line, or after a colon: a
#: transcript's "User (10:00): Password is kiwi."); four letters or more, and no describing word
#: (:func:`_said_cued_letters`: "The password is unbreakable." stays). The copula is matched in
#: any case ("MY PASSWORD IS TULIPSUN").
_CUED_WORDS = r"(?i:pass(?:word|phrase|code)|passwd|wi-?fi key|network key|secret[ -]word|code[ -]word)"
_CUED_BY = (
    r"(?:(?<![^\W\d_])(?i:my|our|your|his|her|their|the)(?:[ \t]{1,3}[^\W\d_]{1,20}){0,2}?[ \t]{1,3}" + _CUED_WORDS
    + r"|(?:(?m:^)[ \t>*_-]{0,6}|(?<=[.!?:][ \t]))"
    r"(?:(?i:wi-?fi|wlan|router|network|admin|root|guest|home|email|account|master)[ \t]{1,3})?" + _CUED_WORDS
    + r"|(?<![^\W\d_])(?<![_.-])(?i:pw))(?![^\W\d_])"
)
_SAID_CUED_LETTERS = _re(_CUED_BY + _LETTERS_IS + r"(?P<value>[^\W\d_]{3,64})" + _LETTERS_END)
#: The same said with a contraction: "my password's tulipsun" (not "the password's strength": what
#: a password has, :data:`_POSSESSED`, is no password).
_SAID_CUED_CONTRACTED = _re(
    _CUED_BY + r"['\u2019]s(?:[ \t]{1,3}(?i:now|still))?[ \t]{1,3}(?P<value>[^\W\d_]{3,64})" + _LETTERS_END
)
#: More words that say what a password is like or where it is, beside :data:`_DESCRIBING_WORDS`
#: ("my password is garbage", "… is twelve", "… is below").
_CUED_STOP_WORDS = frozenset(
    "garbage rubbish nonsense trash junk common uncommon normal special unusual awful terrible horrible online "
    "offline inside outside either neither anyway always already enough below above attached following within "
    "without elsewhere eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty "
    "forty fifty hundred thousand letters digits characters numbers tricky clever decent sturdy robust "
    "useless pointless broken stolen leaked expired personal minimal original trivial typical normal identical "
    "essential confidential universal global local literal formal informal critical crucial vital fatal optimal "
    "taken written chosen forgotten frozen proven rotten given shaken honest modest latest oldest newest easiest "
    "hardest longest shortest strongest weakest safest simplest plaintext cleartext similar dissimilar tomorrow "
    "tonight yesterday upstairs downstairs underneath nearby backwards forwards bcrypt scrypt yescrypt "
    "argon crypt ntlm unicode please thanks".split()
)
#: Short words (four or five letters) a sentence about a password ends in: "the password is fake",
#: "my password is also", "password is what?", "the password is sent". A shorter password counts
#: only where it is none of them.
_SHORT_STOP_WORDS = frozenset(
    "also just only still then very quite what that this which where when whom whose some both each true false "
    "real sure done over back away down late soon fast slow plain clear dead live alive vague messy bogus crap "
    "dull tiny huge small large mixed upper lower equal basic known shown sent kept spent again ready fake free "
    "open shut paid full half caps bold cold warm dark cheap poor rich smart lazy best worst least most more less "
    "much many enough fair tough legit iffy risky shaky dodgy void zero three four five seven eight nine text "
    "hash salt reset ascii argon later twice once after first final next last todo none same such even ever "
    "never nope sorry thanks right left here there case yours mine ours "
    "hers theirs wrong fine okay cool nice good weak long short safe gone lost blank empty valid null unset "
    "stale fresh easy hard dumb lame ugly cute great awful solid silly funny unique above below "
    "login user users name names email visible useful usable needed typed been gone".split()
)
#: What a password has ("the password's strength", "my password's length"): no password after "'s".
_POSSESSED = frozenset(
    "hash hashes salt length strength entropy owner owners expiry expiration value format policy history "
    "lifetime complexity characters letters digits score field prompt label text input type requirements "
    "rules reset change changes user holder checksum digest encoding charset quality security validity status "
    "state name version storage location scope purpose meaning contents content plaintext ciphertext age "
    "manager hint hints cost rotation recovery confirmation fingerprint count size limit limits minimum maximum "
    "case string rule form box column key keys secret fault problem issue spelling encryption validation".split()
)
_POSSESSED_ENDINGS = ("tion", "sion", "ity", "ness", "ment", "ance", "ence", "th")
#: The endings of describing words (:data:`_DESCRIBING_ENDINGS`) less those a word of a password
#: ends in as often ("sunpetal", "kitten", "forest", "nation"): their describing words are listed
#: in :data:`_CUED_STOP_WORDS`.
_CUED_ENDINGS = tuple(ending for ending in _DESCRIBING_ENDINGS
                      if ending not in ("al", "en", "est", "tion", "sion", "ness", "ment", "ity", "ism", "ist",
                                        "ward", "wards"))
#: Things named by a word with a describing ending, that people make passwords of: "butterfly",
#: "dragonfly" (no describing word ends in "fly"), "chocolate", "elephant", "treasure", "darling".
_NAMED_LIKE_DESCRIBING = frozenset(
    "family lily jelly belly holly molly dolly polly billy kelly emily shelly italy july rally sally wally "
    "anomaly assembly monopoly chocolate pirate karate climate senate palate primate elephant pheasant infant "
    "merchant servant tyrant peasant giant treasure adventure picture nature creature pleasure texture sculpture "
    "olive detective magic music garlic picnic titanic atlantic pacific mosaic arctic canary library dictionary "
    "rosemary january february sanctuary diary memory victory factory darling blessing sterling viking dumpling "
    "pudding wedding duckling starling sibling kryptonite dynamite granite satellite meteorite termite english "
    "spanish radish finnish danish".split()
)


def _said_cued_letters(value: str) -> bool:
    """A word of four letters or more after "my password is", "the password is" or "pw": a password
    unless it is a word that describes one (:data:`_DESCRIBING_WORDS`, :data:`_CUED_STOP_WORDS`, a
    short word of :data:`_SHORT_STOP_WORDS`, or a describing ending, :data:`_CUED_ENDINGS`:
    "expired", "unbreakable", "somewhere"; but "butterfly", "chocolate" name things)."""
    word = value.casefold()
    if (len(word) < 4 or word in _DESCRIBING_WORDS or word in _CUED_STOP_WORDS or word in _SHORT_STOP_WORDS
            or word in _PASSWORD_LABEL_WORDS):
        return False
    if word in _NAMED_LIKE_DESCRIBING or (word.endswith("fly") and len(word) > 5):
        return True
    return not word.endswith(_CUED_ENDINGS)


def _said_cued_contracted(value: str) -> bool:
    """:func:`_said_cued_word` (three letters too: "my password's abc"), and not what a password has
    ("the password's strength", "my password's capitalisation": :data:`_POSSESSED`, or a noun's
    ending)."""
    word = value.casefold()
    return word not in _POSSESSED and not word.endswith(_POSSESSED_ENDINGS) and _said_cued_word(value)


# More of the ways people say a secret in chat: a key ("The key is Tulip77x", "my api key is
# Tulip77xQ9", "license key ABCD-1234-EFGH-5678"), a one-time code after "code" ("Your code:
# 482913", "Use code 482913 to sign in"), the answer to a question about a password ("what is the
# password? it is tulipsun"), three letters ("my password is abc"), a password set to a word ("I
# set my password to tulipsun"), "pwd: Tulip77x". Each starts at a word boundary and every
# repetition in them is bounded: linear, as the detectors above.

#: Three-letter words a sentence about a password ends in ("the password is new", "… is set", "pw:
#: n/a" is no word): a password of three letters counts only where it is none of them.
_THREE_LETTER_STOP_WORDS = frozenset(
    "new old bad big odd set not one two six ten any all off out yes yet too now due low hot fun sad mad raw "
    "his her its our who why how the and but you him she are was has had use per via etc tbd tba nil nah yep yup "
    "lol idk see key pin wep wpa xxx abd own few top lax".split()
)


def _said_three_letters(value: str) -> bool:
    """A password of three letters after a cue ("my password is abc", "pw: fox"), not a word that
    describes one (:data:`_THREE_LETTER_STOP_WORDS`)."""
    word = value.casefold()
    return len(word) == 3 and word not in _THREE_LETTER_STOP_WORDS and word not in _PASSWORD_LABEL_WORDS


def _said_cued_word(value: str) -> bool:
    """After a cue (:data:`_SAID_CUED_LETTERS`): three letters (:func:`_said_three_letters`) or more
    (:func:`_said_cued_letters`)."""
    if _type_name(value):  # "password: str" in pasted code
        return False
    return _said_three_letters(value) if len(value) == 3 else _said_cued_letters(value)


#: A value up to the end of its word (optionally quoted), then the clause's end or a blank.
_WORD_VALUE = (r"[\"'`\u201c\u2018]?(?P<value>[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>]{0,199}"
               r"[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb()\[\]{}<>.,;:!?])")
_WORD_END = r"(?=[\"'`\u201d\u2019]?[.,;:!?)]{0,3}(?:\s|$))"
#: After an asked-for value the clause ends ("it's 4821." but not "it's 2048 lines").
_CLAUSE_END = (r"(?=[\"'`\u201d\u2019]?(?:[ \t]{0,3}(?:[.!?;,)]|\r?\n|$)"
               r"|[ \t]{1,3}(?:and|but|so|though|btw)(?![^\W\d_])))")

#: A key named by what it is for ("api key", "license key", "door key") or by whose it is ("my key",
#: "the key"), then "is", "'s", ":" or "=".
_KEY_KINDS = r"api|secret|access|license|licence|product|activation|serial|door|house|app"


def _after_word(words: str, then: str) -> str:
    """Look-behinds for one of ``words`` (space-separated) and ``then`` right before the match, one
    per word length (a look-behind has one width)."""
    lengths = sorted({len(word) for word in words.split()})
    return "(?:" + "|".join(
        rf"(?<=\b(?i:{'|'.join(word for word in words.split() if len(word) == n)}){then})" for n in lengths
    ) + ")"


#: Whose key (token, secret) it is or what it is for, right before the word (look-behinds: the
#: scan tries "key", not every "the" and the words after it). After the kinds that are only ever a
#: string ("api key", "license key", "secret key") no copula is needed: "api key Sunfl0wer42Xy".
_SAID_KEY = _re(
    r"(?=[KkTtSs])(?=(?i:key|token|secret)(?![^\W\d_]))(?:" + _after_word("my our his her the your this their", " ")
    + "|" + _after_word(_KEY_KINDS.replace("|", " "), "[ -]") + r")(?i:key|token|secret)(?![^\W\d_])"
    r"(?:[ \t]{0,3}[:=][ \t]{0,3}|(?:[ \t]{1,3}(?i:is|was):?|['\u2019]s)(?:[ \t]{1,3}(?i:now|still))?[ \t]{1,3})"
    + _WORD_VALUE + _WORD_END
    + r"|(?=(?i:key)[ \t])" + _after_word("api secret license licence product activation", "[ -]")
    + r"(?i:key)(?![^\W\d_])[ \t]{1,3}" + _WORD_VALUE.replace("value", "value2") + _WORD_END
)
#: A short value assigned to a key-like name, too short for the entropy floor of the assignment
#: form (sixteen characters): "api_key=Tulip77xQ9", "token: Orchid55kWq", "client_secret = Maple42kz"
#: (a common word before the name, not any: each start tries a few letters, not twenty).
_SHORT_KEY_ASSIGNED = _re(
    r"(?=[AaSsTtCcPpRrBbGgOoUuDdWw])(?<![A-Za-z0-9])"
    r"(?i:(?:(?:client|app|api|access|secret|private|auth|bearer|refresh|session|github|gitlab|slack|openai|stripe"
    r"|user|db|webhook|bot|oauth|personal)[_-])?(?:api_?key|apikey|secret|token|access_?key|secret_?key|private_?key))"
    + _ASSIGN + r"""(?:\\?["'])?(?P<value>[A-Za-z0-9_\-+/=.~]{6,15})(?![A-Za-z0-9_\-+/=.~(\[])"""
)
#: What follows "the key is" without being a secret: a key of a keyboard ("Alt+F4", "F12"), a
#: curve or an algorithm ("Ed25519", "X25519"), a quantity ("1500ms", "4096bit"), a name and its
#: version ("Python3", "v1beta"), an identifier ("user_id2"), a product ("1Password").
_KEY_NOT_VALUE = re.compile(
    r"(?i:ctrl|control|alt|shift|cmd|command|option|opt|fn|win|meta|super|numpad|num|esc|tab|enter|space)\S*"
    r"|(?i:f)\d{1,2}|(?i:ed|x|curve|secp|p|chacha|kyber|ml-kem|ml-dsa|falcon|dilithium|blake|poly)[-_]?\d+\S*"
    r"|\d{1,6}(?:[.,]\d{1,3})?(?i:ms|s|secs?|mins?|h|hrs?|kb|mb|gb|tb|px|em|rem|pt|mm|cm|km|kg|g|lbs?|x|rpm|hz|khz"
    r"|mhz|ghz|fps|k|st|nd|rd|th|am|pm|bits?|bytes?)"
    r"|[^\W\d_]+\d|(?i:1password)|[a-z0-9]*_[a-z0-9_]*|v\d{1,3}(?:alpha|beta|rc|preview)\d{0,3}"
)


def _said_key(value: str) -> bool:
    """A key said in prose: a password-like value (:func:`_said_password`) with letters in it, no
    ``:``, ``/``, ``+``, ``.`` or ``@`` (a cache key "user:1234", a path, a shortcut, a file) and
    nothing of :data:`_KEY_NOT_VALUE`."""
    return (_said_password(value) and not value.isdigit() and not any(c in value for c in ":/+.@")
            and _KEY_NOT_VALUE.fullmatch(value) is None)


def _not_a_year(value: str) -> bool:
    return not (len(value) == 4 and value.isdigit() and value[:2] in ("19", "20"))


#: A code whose name is capitalised is no one-time code ("Your Zip code: 94110").
_CODE_NOT_NAMED = (r"(?:Zip|Postal|Post|Area|Country|Dialling|Dialing|Region|Error|Exit|Status|Return|Source|Dress"
                   r"|Building|Tax|Product|Item|Promo|Discount|Coupon|Voucher|Gift|Referral|Invite|Invitation|Airport"
                   r"|Sort|Routing|Swift|Bank|Branch|Morse|Colour|Color|Hex|Python|Rust|Java|Go|Qr|Bar)(?![^\W\d_])")
#: A one-time code after "code" and a cue: "Your code: 482913", "your code 482913 expires …", "the
#: code is 4821", "Your Uber code: 4821" (a brand between them), "Use code 482913 to sign in",
#: "Enter code 551203", "Code: 90817263" (a line or a sentence that starts with it). Four to eight
#: digits (or 3-3) that end the clause: not "the code is 2048 lines long"; "zip code 94110", "area
#: code 415" and "Error code: 80070005" have no cue. Like the ones below, it opens with a look-ahead
#: of its first letters: a position is passed over after one character test, not after the
#: case-insensitive alternation (a few ms a hundred KB each).
_SAID_CUED_CODE = _re(
    r"(?=[YyMmTtUuEeIiCc])(?<![^\W\d_])(?:(?i:your|my|the|this)(?:[ \t]{1,3}(?!" + _CODE_NOT_NAMED + r")[A-Z][a-z]{1,20})?"
    r"[ \t]{1,3}(?i:code)(?:[ \t]{0,3}:[ \t]{0,3}|[ \t]{1,3}(?:(?i:is|was)[ \t]{1,3})?)"
    r"|(?i:use|enter|type|input)[ \t]{1,3}(?:(?i:the|this)[ \t]{1,3})?(?i:code)(?:[ \t]{0,3}:[ \t]{0,3}|[ \t]{1,3})"
    r"|(?:(?m:^)|(?<=[\n>*])|(?<=[\n>*-] )|(?<=[.!?:][ \t]))(?i:code)[ \t]{0,3}:[ \t]{0,3})"
    + _OTP_VALUE
    + r"(?=[ \t]{0,3}(?:[.!?;,)\"\u201d]|['\u2019](?![^\W\d_])|\r?\n|$)|[ \t]{1,3}(?:and|but|or|so|for|at|on|to|if"
    r"|please|thanks|btw|expires?|expiring|is|was|will|valid|within|in)(?![^\W\d_]))"
)


#: The answer to a question about a password, a PIN, a code or a key: "what is the password? it is
#: tulipsun", "What's the door code? It's 4821.", "what's the api key? it's Tulip77xQ9".
_ANSWER = (r"(?![^\W\d_])[ \t]{0,3}\?[ \t]{1,3}(?i:it['\u2019]s|its|it[ \t]{1,3}(?:is|was)|that['\u2019]s"
           r"|that[ \t]{1,3}(?:is|was))(?:[ \t]{1,3}(?i:now|still))?[ \t]{1,3}")
_ASKED_PASSWORD = (r"(?=[PpWwNn])(?<![^\W\d_])(?<![_.-])(?i:pass(?:word|phrase|code)|passwd|pw|wi-?fi key"
                   r"|network key)" + _ANSWER)
_ASKED_CODE = (r"(?=[PpCc])(?<![^\W\d_])(?<![_.-])(?i:pass(?:word|phrase|code)|passwd|pw|pin(?:[ -](?:code|number))?"
               r"|code|combination|combo)" + _ANSWER)
_SAID_ASKED_LETTERS = _re(_ASKED_PASSWORD + r"[\"'`\u201c\u2018]?(?P<value>[^\W\d_]{4,64})" + _LETTERS_END)
_SAID_ASKED_VALUE = _re(_ASKED_CODE + _WORD_VALUE + _CLAUSE_END)
_SAID_ASKED_KEY = _re(
    r"(?=[AaSsLlPpDdHhWwNnKk])(?<![^\W\d_])(?<![_.-])(?:(?i:" + _KEY_KINDS + r"|wi-?fi|network)[ -])?(?i:key)"
    + _ANSWER + _WORD_VALUE + _CLAUSE_END
)


def _said_asked_value(value: str) -> bool:
    """A password (:func:`_said_password`) or a keypad code (:func:`_said_pin`, not a year)."""
    return _said_password(value) or (_said_pin(value) and _not_a_year(value))


#: A reply that is only the value, to an assistant's message ending in a question about it, as
#: the transcript the memory models read shows them (obsmem.om.text.transcript: blocks apart by a
#: blank line, a date line when the day changes, "User (10:01 AM): "): "Assistant: What is the
#: wifi password?" then "User: tulipsun" (or "User: it's tulipsun"). A code only when named by what
#: it opens or is for (a bare "code?" is too often a program's: "Which language for the code?" "Python").
_REPLY = (r"[ \t]{0,3}\?[ \t]{0,3}\r?\n\r?\n(?:[A-Z][a-z]{2} \d{1,2} \d{4}:\r?\n)?User(?: \([^()\r\n]{1,20}\))?:[ \t]{1,3}"
          r"(?:(?i:it['\u2019]s|its|it[ \t]{1,3}is)[ \t]{1,3})?[\"'`]?(?P<value>[^\s\"'`]{0,63}[^\s\"'`.,;:!?])[\"'`]?[.!]?"
          r"[ \t]*(?=\r?\n\r?\n|\r?\n?$)")
_SAID_REPLIED = _re(
    r"(?=[PpWwNnCcDdGgAaSsKkVvOoLl])(?<![^\W\d_])(?<![_.-])(?i:pass(?:word|phrase|code)|passwd|pw|wi-?fi key|network key"
    r"|pin(?:[ -](?:code|number))?|combination|combo"
    r"|(?:door|gate|alarm|garage|access|entry|verification|one-time|sms|login|safe|keypad|lock ?box)[ -]code)"
    rf"(?![^\W\d_])(?i:{_SAID_FOR})" + _REPLY
)
#: One-word replies that are no password: "Yes", "Maybe", "Dunno", "Why".
_REPLY_STOP_WORDS = frozenset(
    "maybe yeah yes yup yep sure please dunno idk nevermind hello thanks thank cheers great perfect awesome lol "
    "haha hmm hmmm ugh why what which where when how who forgot forget unsure nothing skip cancel stop wait "
    "hold retry help again sorry nope nah okay ok right correct done sometimes often usually occasionally".split()
)


def _said_reply(value: str) -> bool:
    """A reply that is a password (letters: :func:`_said_cued_word`; else :func:`_said_asked_value`),
    no word of :data:`_REPLY_STOP_WORDS`."""
    if value.casefold() in _REPLY_STOP_WORDS:
        return False
    return _said_cued_word(value) if value.isalpha() else _said_asked_value(value)


#: A password set to a word: "I set my password to tulipsun", "changed the wifi password to
#: bluemoon" (not "… to expire every 90 days", "… to something stronger").
_SAID_SET_TO = _re(
    r"(?=[SsCcRrUu])(?<![^\W\d_])(?i:set|changed?|reset|updated?)[ \t]{1,3}(?i:my|our|your|his|her|their|the)"
    r"(?:[ \t]{1,3}[^\W\d_]{1,20}){0,2}?[ \t]{1,3}" + _CUED_WORDS + r"(?![^\W\d_])[ \t]{1,3}(?i:to)[ \t]{1,3}"
    r"(?P<value>[^\W\d_]{4,64})" + _LETTERS_END
)
#: Verbs a password is set to do, beside the describing words: "set my password to expire".
_SET_TO_STOP_WORDS = frozenset("expire rotate change match reset lock unlock never something nothing blank".split())


def _said_set_to(value: str) -> bool:
    return value.casefold() not in _SET_TO_STOP_WORDS and _said_cued_letters(value)


#: An app password (Google's, Apple's: four groups of four letters): "the app password is abcd efgh
#: ijkl mnop", "App password: abcd-efgh-ijkl-mnop".
_SAID_APP_PASSWORD = _re(
    r"(?=[Aa])(?<![^\W\d_])(?i:app(?:[ -]specific)?[ -]?password)(?:[ \t]{0,3}[:=]|[ \t]{1,3}(?i:is|was):?)[ \t]{1,3}"
    r"[\"'`\u201c\u2018]?(?P<value>[a-zA-Z]{4}(?:([ -])[a-zA-Z]{4}\2[a-zA-Z]{4}\2[a-zA-Z]{4}|[a-zA-Z]{12}))(?![^\W\d_])"
)

#: "pwd" as a password's label: "pwd: Tulip77x", "Pwd=Orchid55k" (a value no word could be, not a
#: path: "pwd: /home/me" is a shell's working directory).
_SAID_PWD = _re(
    r"(?=[Pp])(?<![^\W\d_])(?<![_.$-])(?i:pwd)(?![^\W\d_])"
    r"(?:[ \t]{0,3}[:=][ \t]{0,3}|[ \t]{1,3}(?i:is|was)[ \t]{1,3})" + _WORD_VALUE + _WORD_END
)


# The forms helper 173 left open: a passphrase of ordinary words ("my password is correct horse
# battery staple", "password: tulip sun"), a password of letters after "pass is", "use the
# password …" and "… as the password", a security question's answer, a three-digit PIN after
# "my PIN is", and the whole reply to "Which PIN should I use?". Every repetition is bounded and
# each pattern opens at a word boundary: linear, as the detectors above.

#: A passphrase after a password word and its copula or colon: two to eight words of letters
#: (joined by a space or a hyphen) that end the clause; :func:`_said_phrase` decides.
_SAID_PHRASE = _re(
    r"(?:" + _CUED_BY + _LETTERS_IS
    + r"|(?<![^\W\d_])(?<![_.-])(?i:pass(?:word|phrase)|passwd|pw)(?![^\W\d_])[ \t]{0,3}[:=][ \t]{0,3})"
    r"(?P<value>[^\W\d_]{2,30}(?:[ -]" + _NOT_FOR_NOW + r"[^\W\d_]{2,30}){1,7})" + _LETTERS_END
)
#: Words a sentence about a password is made of beside the describing and stop words above: "the
#: password is on the fridge", "… is in my notebook", "… is hard to remember".
_FUNCTION_WORDS = frozenset(
    "me you him them us we they i my your his her our their its this that these those there here what "
    "which who whom whose when where why how into onto from about over under after before between "
    "through during without within upon via per like plus minus else also just then than off out up "
    "down away back both either neither each every another other such own should would could can will "
    "shall may might must do does did done have has had having being am are were is be not nor yet so "
    "if unless until while because since though although whether lot bit kind sort type part same very "
    "really pretty somewhat".split()
)
#: A first word that makes the phrase an instruction, not a password ("Password: ask admin").
_PHRASE_NOT_FIRST = frozenset(
    "ask check call contact email text ping try use type enter read look find get request send sent "
    "reach message visit open click go follow refer consult change".split()
)
#: Passphrases everyone knows, made of words the rules above read as prose ("open" is an
#: instruction in "Password: open settings", "me" a function word): "the password is open sesame".
_KNOWN_PASSPHRASES = frozenset({"open sesame", "let me in", "trust no one"})
#: Where a password is written down: "the password is sticky note", "… is router sticker".
_PHRASE_PLACES = frozenset(
    "note notes notebook paper sticker label drawer fridge wallet card document doc sheet folder desk "
    "monitor router box whiteboard vault keychain envelope".split()
)
#: What a password is named after, not what it is: "Password: Google Account", "Password: Windows
#: Login", "Password: Apple ID", "Password: Company Policy", "Password: Domain Credentials".
_PASSWORD_SOURCES = frozenset(
    "account accounts login logon signin credential credentials policy policies id sso ldap profile".split()
)
_PHRASE_STOP_WORDS = (_PHRASE_WORDS | _FUNCTION_WORDS | _CUED_STOP_WORDS | _SHORT_STOP_WORDS
                      | _THREE_LETTER_STOP_WORDS | _PASSWORD_LABEL_WORDS | _PHRASE_PLACES | _PASSWORD_SOURCES)


def _describing(word: str) -> bool:
    return word in _DESCRIBING_WORDS or (word.endswith(_CUED_ENDINGS) and word not in _NAMED_LIKE_DESCRIBING)


def _said_phrase(value: str) -> bool:
    """A passphrase of ordinary words: two to eight words in lower case (or capitalised), eight
    letters or more,
    no function word or word that says where or what a password is (:data:`_PHRASE_STOP_WORDS`:
    "too short", "on the fridge", "no longer valid"), no instruction first ("ask admin"); a
    phrase of two or three words has no describing word at all ("case sensitive", "really
    long", "public knowledge"), a longer one none last ("correct horse battery staple" is one)."""
    written = value.replace("-", " ").split()
    if not 2 <= len(written) <= 8 or not all(word.islower() or word.istitle() for word in written):
        return False
    words = [word.casefold() for word in written]
    if " ".join(words) in _KNOWN_PASSPHRASES:
        return True
    if sum(map(len, words)) < 8:
        return False
    if words[0] in _PHRASE_NOT_FIRST or any(word in _PHRASE_STOP_WORDS for word in words):
        return False
    described = words if len(words) <= 3 else words[-1:]
    return not any(_describing(word) for word in described)


#: A password of letters after "pass" where the word is a password's label: at the start of a
#: line or sentence ("pass is tulipsun", "Pass: hollyoak"; not "my pass is yellow", a ticket, nor
#: "PASS = ignore", a constant).
_SAID_PASS_LETTERS = _re(
    r"(?:(?m:^)[ \t>*_-]{0,6}|(?<=[.!?:][ \t]))(?i:pass)(?![^\W\d_])"
    + "".join(f"(?<!{re.escape(word)} pass)" for word in _NOT_A_PASSWORD_PASS)
    + r"(?:[ \t]{0,3}:[ \t]{0,3}|[ \t]{1,3}(?i:is|was)(?:[ \t]{1,3}(?i:now|still))?[ \t]{1,3})"
    r"(?P<value>[^\W\d_]{3,64})" + _LETTERS_END,
    re.IGNORECASE,
)
#: What a test report puts after "Pass:".
_PASS_RESULT_WORDS = frozenset(
    "fail failed failure pass passed skip skipped flaky error warn warning info".split()
)


def _said_pass_letters(value: str) -> bool:
    return value.casefold() not in _PASS_RESULT_WORDS and _said_cued_word(value)


#: A password of letters said as what to type: "use the password tulipsun", "enter password
#: bluemoon", "try the wifi password frostpine" (not "use the password manager").
_SAID_USE_PASSWORD = _re(
    r"(?=[UuTtEeIi])(?<![^\W\d_])(?i:use|try|enter|type|input)[ \t]{1,3}"
    r"(?:(?i:the|my|our|your|this)[ \t]{1,3})?"
    r"(?:[^\W\d_]{1,20}[ \t]{1,3}){0,2}?" + _CUED_WORDS + r"(?![^\W\d_])[ \t]{1,3}[\"'`\u201c\u2018]?"
    r"(?P<value>[^\W\d_]{3,64})" + _LETTERS_END
)
#: What follows "use the password" and is part of its name: "… manager", "… generator", "… grant".
_PASSWORD_COMPOUNDS = frozenset(
    "manager managers generator vault app apps tool tools keeper file files option options feature "
    "link page screen dialog button menu setting settings login mechanism protection flow grant flag "
    "argument parameter variable command method approach instead prompt field box form input".split()
)


def _said_used_password(value: str) -> bool:
    return value.casefold() not in _PASSWORD_COMPOUNDS and _said_cued_contracted(value)


#: A password of letters before its word: "log in with tulipsun as the password", "I used
#: quillrose as my password." (the word ends the clause, as in :data:`_SAID_BEFORE`).
_SAID_AS_PASSWORD = _re(
    r"(?=[WwUuTtCcPp])(?<![^\W\d_])(?i:with|use|uses|used|using|try|tried|chose|choose|picked|pick)[ \t]{1,3}"
    r"[\"'`\u201c\u2018]?(?P<value>[^\W\d_]{3,64})[\"'`\u201d\u2019]?[ \t]{1,3}(?i:as)[ \t]{1,3}"
    r"(?i:my|our|his|her|their|your|the)(?:[ \t]{1,3}[^\W\d_]{1,20}){0,2}?[ \t]{1,3}"
    r"(?i:pass(?:word|phrase|code)|passwd|pw)(?![^\W\d_])"
    r"(?=[ \t]{0,3}(?:[.,;!?)]|\r?\n|$)|[ \t]{1,3}(?:for|on|at|and|but|now|too|here|there)(?![^\W\d_]))"
)
_AS_PASSWORD_STOP_WORDS = frozenset("username usernames nickname birthday phone".split())


def _said_as_password(value: str) -> bool:
    return value.casefold() not in _AS_PASSWORD_STOP_WORDS and _said_cued_word(value)


#: The answer to a security question, any word: "security answer: fluffy", "my security answer is
#: fluffy", "the answer to my security question is Paris" (one word that ends the clause).
_SECURITY_ANSWER_IS = (
    r"(?=[SsAa])(?<![^\W\d_])(?i:security[ \t]{1,3}(?:question[ \t]{1,3})?answer|answer[ \t]{1,3}to[ \t]{1,3}"
    r"(?:my|the|your|our)[ \t]{1,3}security[ \t]{1,3}question)(?![^\W\d_])"
    r"(?:[ \t]{0,3}[:=][ \t]{0,3}|[ \t]{1,3}(?i:is|was):?[ \t]{1,3})"
)
_SAID_SECURITY_ANSWER = _re(_SECURITY_ANSWER_IS + _WORD_VALUE + _CLAUSE_END)


def _said_answer(value: str) -> bool:
    word = value.casefold()
    return (_password_value(value) and word not in _DESCRIBING_WORDS and word not in _PASSWORD_LABEL_WORDS
            and word not in _SHORT_STOP_WORDS)


#: The same answer in two to six words of letters: "Security question answer: my first dog", "the
#: answer to my security question is in London." (helper-186); :func:`_said_answer_phrase` decides.
_SAID_SECURITY_PHRASE = _re(
    _SECURITY_ANSWER_IS + r"(?P<value>[^\W\d_]{1,30}(?:[ \t]{1,3}" + _NOT_FOR_NOW + r"[^\W\d_]{1,30}){1,5})"
    + _LETTERS_END
)
#: Words that say what an answer is like, where it is or what it asks, beside the describing and
#: label words: "the security answer is the same as last time", "… what you told me", "… in my notes".
_ANSWER_STOP_WORDS = (
    _DESCRIBING_WORDS | _PASSWORD_LABEL_WORDS | _CUED_STOP_WORDS | _PHRASE_PLACES | frozenset(
        "what which who whom whose where when why how this that these those it its file record list form "
        "system account answer answers question questions name names hint hints".split()
    )
)


def _said_answer_phrase(value: str) -> bool:
    """An answer of several words (unlike a passphrase, function words and all: "my first dog",
    "in London"), none of them a word that describes, places or asks about the answer
    (:data:`_ANSWER_STOP_WORDS`, or a describing ending in lower case: "case sensitive", "stored in
    plain text"; a capitalised word is a name: "Aunt Mary"), and no instruction first ("check your
    email")."""
    written = value.split()
    words = [word.casefold() for word in written]
    return (words[0] not in _PHRASE_NOT_FIRST and words[0] not in ("a", "an")
            and not any(word in _ANSWER_STOP_WORDS for word in words)
            and not any(_describing(word) for word in written if word.islower()))


#: A PIN of three digits after whose it is ("my PIN is 482", "my bank PIN is 907"; "The PIN is
#: 615." in capitals), not a board's pin ("the pin is 120", "my GPIO pin is 121").
_NOT_BOARD_PIN = (r"(?:[ \t]{1,3}(?!(?i:gpio|reset|data|led|output|input|ground|power|analog|digital|clock"
                  r"|enable|signal|header|pin)(?![^\W\d_]))[^\W\d_]{1,20}){0,2}?[ \t]{1,3}")
_SAID_SHORT_PIN = _re(
    r"(?=[MmOoYyHhTt])(?<![^\W\d_])(?:(?i:my|our|your|his|her|their)" + _NOT_BOARD_PIN
    + r"(?i:pin(?:[ -]?(?:code|number))?|passcode)|(?i:the)" + _NOT_BOARD_PIN
    + r"(?:PIN(?:[ -]?(?i:code|number))?|(?i:pin[ -]?(?:code|number)|passcode)))(?![^\W\d_])"
    r"(?:[ \t]{1,3}(?i:is|was)(?:[ \t]{1,3}(?i:now|still))?|['\u2019]s|[ \t]{0,3}:)[ \t]{1,3}"
    r"(?P<value>\d{3})(?![\w#*-]|[.,:/]\d)" + _CLAUSE_END
)
#: The whole reply to a question that asks which password or PIN to use: "Which PIN should I
#: use?" then "7305", "What password should I set for the router?" then "Orchid55k" (not "What
#: password manager do you use?": the word is followed by the question's verb and subject).
_SAID_REPLIED_WHICH = _re(
    r"(?=[WwHh])(?<![^\W\d_])(?i:which|what)(?:[ \t]{1,3}[^\W\d_]{1,20}){0,2}?[ \t]{1,3}"
    r"(?i:pass(?:word|phrase|code)|passwd|pw|pin(?:[ -](?:code|number))?|wi-?fi key|network key)"
    r"[ \t]{1,3}(?i:should|shall|do|did|would|will|can|could)[ \t]{1,3}(?i:i|we|you)"
    r"(?:[ \t]{1,3}(?i:use|enter|type|try|set|pick|choose|want|give|need))?(?![^\W\d_])"
    rf"(?i:{_SAID_FOR})" + _REPLY
)


#: A type annotation between a password's name and its default, and the default when it is a
#: string: ``password: str = "hunter2"``, ``password: Optional[str] = 'Tulip77x'``, ``password:
#: bytes = b"hunter2"`` (a known type or a capitalised name, a subscript, up to three more joined
#: by ``|``). A default that is no string is code: ``password: str | Omit = omit`` (helper-186).
_ANNOTATION_TYPE = (r"(?:(?:[a-z_][a-z0-9_]{0,30}\.){0,3}(?:str|bytes|int|Any|Text|[A-Z][A-Za-z]{1,40})"
                    r"(?:\[[^\]\r\n=]{0,60}\]{1,3})?)")
_SAID_ANNOTATED = _re(
    r"(?i:passwd|password|passphrase)[ \t]{0,3}:[ \t]{0,3}" + _ANNOTATION_TYPE + r"(?:[ \t]{0,3}\|[ \t]{0,3}"
    + _ANNOTATION_TYPE + r"){0,3}[ \t]{0,3}=(?!=)[ \t]{0,3}(?:[bBrRuU]{1,2})?"
    r"""(?:"(?P<value>[^"\r\n]{1,200})"|'(?P<value2>[^'\r\n]{1,200})')"""
)
#: A bare value after "password:" is never the first of several words of letters ("Password: user
#: defined", "password: change me"): :data:`_SAID_PHRASE` has read those words as a passphrase or
#: not, and :data:`_FIRST_OF_WORDS` reads the first word alone.
_PASSWORD_VALUE = _VALUE.replace("|(?P<value3>", r"|(?![^\W\d_]{1,30}[ \t]{1,3}[^\W\d_])(?P<value3>")
_FIRST_OF_WORDS = (r"(?P<value>[^\W\d_]{1,30})(?=[ \t]{1,3}(?!(?i:"
                   + "|".join(sorted(_PASSWORD_SOURCES)) + r")(?![^\W\d_]))[^\W\d_])")


def _assigned_first_word(value: str) -> bool:
    """The first of several words after "password:" when they make no passphrase: a password
    unless a sentence or a form's label starts with it ("Password: hollyoak please" is one;
    "Password: user defined", "Password: Auto Generated", "password: your password here",
    "Password: open the settings page" are none)."""
    word = value.casefold()
    return (_assigned_password(value) and word not in _PHRASE_STOP_WORDS and word not in _PHRASE_NOT_FIRST
            and not _describing(word))


_DB_SCHEMES = (
    "postgres|postgresql|mysql|mariadb|mongodb|mongodb\\+srv|redis|rediss|amqp|amqps|mssql|sqlserver|"
    "oracle|cockroachdb|clickhouse|couchdb|neo4j|neo4j\\+s|bolt|cassandra|snowflake|db2"
)

SECRET_DETECTORS: tuple[Detector, ...] = (
    Detector("private_key", scan=_private_keys),
    Detector(
        "ssh_key",
        _re(r"(?<![A-Za-z0-9-])(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp(?:256|384|521)|sk-ssh-ed25519@openssh\.com)"
            r"[^\S\r\n]{1,5}AAAA[A-Za-z0-9+/]{20,16000}={0,3}"),
    ),
    Detector("anthropic_key", _token("sk-ant-", r"[A-Za-z0-9_-]{20,300}")),
    Detector("openai_key", _token("sk-", r"(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,300}"), _high_entropy),
    Detector("google_key", _token("", r"(?:AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_.-]{20,2000}|GOCSPX-[A-Za-z0-9_-]{28})")),
    Detector("aws_access_key", _re(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}(?![A-Z0-9])")),
    Detector(
        "aws_secret_key",
        _re(r"(?i:aws_?secret_?(?:access_?)?key|aws_?session_?token|SecretAccessKey)" + _ASSIGN
            + r"""(?:\\?["'])?(?P<value>[A-Za-z0-9/+=]{40,1000})(?![A-Za-z0-9/+=])"""),
    ),
    Detector("github_token", _token("", r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})")),
    Detector("gitlab_token", _token("", r"gl(?:pat|ptt|dt|rt|cbt|soat|ft|imt|agent)-[A-Za-z0-9_-]{20,255}")),
    Detector(
        "slack_token",
        _re(r"(?<![A-Za-z0-9_-])(?:xox[abposr]-[A-Za-z0-9-]{10,255}|xapp-\d-[A-Za-z0-9-]{10,255})"
            r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,200}"),
    ),
    Detector("stripe_key", _token("", r"(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,255}|whsec_[A-Za-z0-9]{24,255})")),
    Detector("sendgrid_key", _token("", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}")),
    Detector("twilio_key", _re(r"(?<![A-Za-z0-9])(?:SK|AC)[0-9a-f]{32}(?![A-Za-z0-9])")),
    Detector("huggingface_token", _token("", r"hf_[A-Za-z0-9]{30,60}")),
    Detector("npm_token", _token("", r"npm_[A-Za-z0-9]{36}")),
    Detector("pypi_token", _token("", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,1000}")),
    Detector("digitalocean_token", _token("", r"do[por]_v1_[a-f0-9]{64}")),
    Detector("shopify_token", _token("", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}")),
    Detector("jwt", _token("", r"eyJ[A-Za-z0-9_-]{2,8000}\.eyJ[A-Za-z0-9_-]{2,8000}\.[A-Za-z0-9_-]{0,8000}")),
    Detector(
        "connection_string",
        _re(rf"(?<![A-Za-z0-9+.-])(?i:{_DB_SCHEMES})://[^\s:/?#@\[\]]{{0,256}}:(?P<value>[^\s/?#@]{{1,256}})@"),
    ),
    Detector(
        "connection_string",
        _re(r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature)=(?P<value>[A-Za-z0-9+/=%&:_.-]{16,1000})"),
    ),
    Detector(
        "url_password",
        _re(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@\[\]]{0,256}:(?P<value>[^\s/?#@]{1,256})@"),
    ),
    # The signature (and session token) of a pre-signed link: S3, Google Cloud Storage, Azure
    # SAS, CloudFront. Whoever holds the link downloads the file until it expires.
    Detector(
        "secret",
        _re(r"(?<![A-Za-z0-9_-])(?i:X-Amz-Signature|X-Amz-Security-Token|X-Goog-Signature|Signature|sig)="
            r"(?P<value>(?:[A-Za-z0-9+/=_~.-]|%[0-9A-Fa-f]{2}){16,4000})"),
        lambda value: _high_entropy(unquote(value)),
    ),
    # A session cookie (whoever holds it is logged in): Set-Cookie and Cookie headers in an HTTP
    # tool's result or a request log. By the cookie's name: *sess*, *session*, ``sid`` or *_sid*
    # (not a Wi-Fi network's ``ssid``).
    Detector(
        "secret",
        _re(r"(?<![A-Za-z0-9_.-])(?i:[A-Za-z0-9_.-]{0,30}sess(?:ion)?(?:_?id)?|(?:[A-Za-z0-9_.-]{0,30}[_.-])?sid)="
            r"(?P<value>[^\s;,\"'<>]{16,4096})"),
        lambda value: _high_entropy(unquote(value)),
    ),
    # A Discord webhook (its token is the last segment of the path) and a Telegram bot token.
    Detector("secret", _re(r"discord(?:app)?\.com/api/webhooks/\d{5,30}/(?P<value>[A-Za-z0-9_-]{50,100})")),
    Detector("secret", _re(r"(?:(?<![A-Za-z0-9_])|(?<=bot))\d{8,10}:AA[A-Za-z0-9_-]{30,40}(?![A-Za-z0-9_-])")),
    # The same, URL-encoded: a URL carried in another URL's query (a redirect or callback
    # parameter) reads ``https%3A%2F%2Fuser%3Asecret%40host``.
    Detector(
        "url_password",
        _re(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,20}%3[Aa]%2[Ff]%2[Ff]"
            r"(?:[^\s:/?#@%&]|%(?!3[Aa]|40)[0-9A-Fa-f]{2}){0,256}%3[Aa]"
            r"(?P<value>(?:[^\s:/?#@%&]|%(?!40)[0-9A-Fa-f]{2}){1,256})%40"),
    ),
    Detector(
        "password",
        _re(r"(?:(?<![A-Za-z0-9])|(?<=%[0-9A-Fa-f]{2}))(?i:(?:[A-Za-z0-9]{1,20}[_-])?(?:passw(?:or)?d|passphrase))"
            + _ENCODED_VALUE),
        _encoded_password,
    ),
    Detector(
        "secret",
        _re(r"(?:(?<![A-Za-z0-9])|(?<=%[0-9A-Fa-f]{2}))(?i:(?:[A-Za-z0-9]{1,20}[_-])?(?:secret|token|api_?key|apikey"
            r"|access_?key|private_?key|credential|signing_?key|auth)[A-Za-z0-9_-]{0,20})" + _ENCODED_VALUE),
        _encoded_secret,
    ),
    Detector(
        "auth_header",
        _re(r"(?i:(?<![A-Za-z0-9])(?:bearer|token))[^\S\r\n]{1,5}(?P<value>[A-Za-z0-9._~+/-]{16,8000}=*)"),
        _opaque_token,
    ),
    Detector("auth_header", _re(r"(?i:(?<![A-Za-z0-9])basic)[^\S\r\n]{1,5}(?P<value>[A-Za-z0-9+/]{6,2000}={0,2})"), _basic_credentials),
    Detector(
        "auth_header",
        _re(r"(?i:(?<![A-Za-z0-9-])(?:proxy-)?authorization|x-api-key|api-key|x-auth-token)(?:\\?[\"'])?[^\S\r\n]{0,10}[:=\uff1a\uff1d][^\S\r\n]{0,10}(?:\\?[\"'])?"
            r"(?P<value>[A-Za-z0-9._~+/=-]{8,8000})"),
        _password_value,
    ),
    # Before the assignment form, which would take the first word of "password: tulip sun" alone.
    Detector("password", _SAID_PHRASE, _said_phrase),
    Detector("password", _SAID_ANNOTATED, _assigned_password),
    Detector(
        "password",
        _re(r"(?i:passwd|password|passphrase)" + _ASSIGN + _PASSWORD_VALUE),
        _assigned_password,
    ),
    Detector("password", _re(r"(?i:passwd|password|passphrase)" + _ASSIGN + _FIRST_OF_WORDS),
             _assigned_first_word),
    # The text of an XML element named like a secret (Maven's settings.xml, a SOAP answer, a
    # config file): <password>…</password>, <AccessKey>…</AccessKey>, <db:password …>…</…>.
    Detector(
        "secret",
        _re(r"<(?:(?:[A-Za-z0-9_.-]{1,30}[:_.-])?(?i:password|passwd|passphrase|secret|client_?secret|"
            r"access_?token|refresh_?token|api_?key|apikey|access_?key|secret_?key|private_?key|credential)"
            r"|[A-Za-z0-9_.-]{1,30}[_.-](?i:token))"  # a bare <token> is how tokenizers' XML marks a word
            r"(?:\s[^<>]{0,200})?>(?P<value>[^<\r\n]{1,512})</"),
        _password_value,
    ),
    # A password on a command line (a shell tool's command): curl's -u/--user user:password, and
    # the password flags of the MySQL/MariaDB clients (-p glued to it), sshpass, docker/podman/helm
    # login, redis-cli (-a) and the MongoDB shells, on the same command.
    Detector(
        "password",
        _re(r"(?<![A-Za-z0-9_-])(?:curl|wget|http|https|xh)(?![A-Za-z0-9_-])[^\n;|&]{0,200}?"
            r"(?<![A-Za-z0-9-])(?:-u|--user|--proxy-user|-U|--http-user)(?:[ \t]{1,5}|=)['\"]?[^\s:'\"]{1,100}:"
            r"(?P<value>[^\s'\"]{1,200})"),  # (docker's -u 1000:1000 is a user and a group)
        _password_value,
    ),
    Detector(
        "password",
        _re(r"(?<![A-Za-z0-9_-])(?:mysql(?:dump|admin|import|sh)?|mariadb(?:-dump|-admin)?)(?![A-Za-z0-9_-])"
            # only options (and their values) between the client and -p: prose "-perfectly" is no flag
            r"(?:[ \t]{1,5}-{1,2}[A-Za-z][\w-]{0,40}(?:(?:=|[ \t]{1,5})[^\s-][^\s]{0,100})?){0,12}"
            r"[ \t]{1,5}-p(?:'(?P<value2>[^'\n]{1,200})'|(?P<value>[^\s'\"$][^\s'\"]{0,199}))"),
        _password_value,
    ),
    Detector(
        "password",
        _re(r"(?<![A-Za-z0-9_-])(?:(?:sshpass|(?:docker|podman|helm[ \t]{1,5}registry|nerdctl)[ \t]{1,5}login"
            r"|mongosh|mongo|mongodump|mongorestore|mongoexport|mongoimport)(?![A-Za-z0-9_-])"
            r"[^\n;|&\"]{0,200}?[ \t](?:-p|--pass)"
            r"|redis-cli(?![A-Za-z0-9_-])[^\n;|&\"]{0,200}?[ \t](?:-a|--pass))[ \t]{1,5}"  # redis-cli's -p is its port
            r"(?:'(?P<value2>[^'\n]{1,200})'|(?P<value>[^\s'\"$-][^\s'\"]{0,199}))"),
        _password_value,
    ),
    # The word for a password in the languages users most often write it in (German, Dutch,
    # French, Spanish, Portuguese, Scandinavian, Finnish, Polish, Czech, Turkish, Russian,
    # Ukrainian; and Chinese, Japanese, Korean, written with no space before the word).
    Detector(
        "password",
        _re(r"(?:(?i:passwort|kennwort|wachtwoord|l[öo]senord|adgangskode|salasana|пароль)"  # in compounds too
            r"|(?<![^\W\d_])(?i:mot de passe|contrase[ñn]a|senha|passord|has[łl]o|heslo|[şs]ifre))" + _ASSIGN + _VALUE),
        _password_value,
    ),
    # Chinese, Japanese and Korean run the next words on with no space: a bare value ends at the
    # first CJK character or punctuation ("密码：abc12345，我明天…" takes "abc12345" only).
    Detector(
        "password",
        _re(r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호)" + _ASSIGN + _CJK_VALUE),
        _password_value,
    ),
    Detector(
        "password",
        _re(r"(?<![A-Za-z0-9-])--(?:password|passwd|pass)(?:=|[^\S\r\n]{1,5})(?P<value>[^\s\"']{1,200})"),
        _password_value,
    ),
    Detector(
        "secret",
        _re(r"(?i:secret|token|api_?key|apikey|access_?key|private_?key|credential|signing_?key|auth)[A-Za-z0-9_-]{0,20}"
            + _ASSIGN + r"""(?:\\?["'])?(?P<value>[A-Za-z0-9_\-+/=.~]{16,512})"""),
        _high_entropy,
    ),
    # A quoted value assigned to a key-like name, whatever it looks like: what structured data
    # (tool-call arguments, JSON) gives as ``"api_key": "…"`` and a transcript as ``api_key: "…"``,
    # the text form of the redacting wrapper's key-name rule. Unquoted values ("max tokens: 4096")
    # keep needing the entropy floor above.
    Detector(
        "secret",
        _re(r"(?<![A-Za-z0-9])(?i:(?:[A-Za-z0-9]{1,20}[_-])?(?:secret|token|api_?key|apikey|access_?key|private_?key"
            r"|credential|signing_?key|authorization)[A-Za-z0-9_-]{0,20})"
            + _ASSIGN + r"""(?:"(?P<value>[^"\r\n]{1,512})"|'(?P<value2>[^'\r\n]{1,512})'"""
            + r'|\\"(?P<value4>(?:[^"\\\r\n]|\\[^"\r\n]){1,512})\\")'),
        _password_value,
    ),
    # A password, PIN or door code said in prose (see "Secrets said in prose" above).
    Detector("password", _said(_SAID_PASSWORD), _said_password),
    Detector("password", _said_on_next_line(_SAID_PASSWORD), _said_password),
    Detector("password", _said(_SAID_PIN, before=_NOT_CODE), _said_pin),
    Detector("password", _said(_SAID_CODE), _said_keypad),
    Detector("password", _said_on_next_line(f"{_SAID_PIN}|{_SAID_CODE}"), _said_keypad),
    Detector("password", _said(_SAID_CVV), _said_cvv),
    Detector("password", _SAID_PASS, _said_password),
    Detector("password", _SAID_TIMED_LABEL, _said_code_not_time),
    Detector("password", _SAID_KEYPAD_LABEL, _said_pin),
    Detector("password", _SAID_BARE_KEYPAD, _said_pin),
    Detector("password", _SAID_BARE_CVV, _said_cvv),
    Detector("password", _SAID_BARE_PW, _said_bare_password),
    Detector("password", _SAID_BARE_OTP, _said_otp),
    Detector("password", _SAID_NETWORK_KEY, _said_password),
    Detector("password", _SAID_LETTERS, _said_letters),
    Detector("password", _SAID_QUOTED_LETTERS, _said_quoted_letters),
    Detector("password", _SAID_CUED_LETTERS, _said_cued_word),
    Detector("password", _SAID_CUED_CONTRACTED, _said_cued_contracted),
    Detector("password", _SAID_KEY, _said_key),
    Detector("password", _SAID_CUED_CODE, _said_otp),
    Detector("password", _SAID_ASKED_LETTERS, _said_cued_letters),
    Detector("password", _SAID_ASKED_VALUE, _said_asked_value),
    Detector("password", _SAID_ASKED_KEY, _said_key),
    Detector("password", _SAID_SET_TO, _said_set_to),
    Detector("password", _SAID_PWD, _said_password),
    Detector("password", _SAID_APP_PASSWORD),
    Detector("password", _SAID_REPLIED, _said_reply),
    Detector("password", _SAID_REPLIED_WHICH, _said_reply),
    Detector("password", _SAID_PASS_LETTERS, _said_pass_letters),
    Detector("password", _SAID_USE_PASSWORD, _said_used_password),
    Detector("password", _SAID_AS_PASSWORD, _said_as_password),
    Detector("password", _SAID_SECURITY_ANSWER, _said_answer),
    Detector("password", _SAID_SECURITY_PHRASE, _said_answer_phrase),
    Detector("password", _SAID_SHORT_PIN),
    Detector("secret", _SHORT_KEY_ASSIGNED, _said_key),
    Detector("password", _SAID_PAIR, _said_password),
    Detector("password", _SAID_BEFORE, _said_password),
    Detector("password", _SAID_OPENS_WITH, _said_pin),
    Detector("password", _said(_SAID_FINNISH, _SAID_ON), _said_password_or_pin),
    Detector("password", _said(_SAID_BARE_PASSWORD, _SAID_BARE), _said_password),
    Detector("password", _said(_SAID_BARE_CODE, _SAID_BARE), _said_pin),
    Detector("password", _SAID_CJK, _said_password_or_pin),
    # Last: base64 whose decoded text holds a secret any detector above finds.
    Detector("secret", scan=_encoded_secrets),
)

#: What :func:`_encoded_secrets` looks for in decoded base64 (every secret detector but itself).
_PLAIN_SECRET_DETECTORS: tuple[Detector, ...] = SECRET_DETECTORS[:-1]

SECRET_CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(detector.category for detector in SECRET_DETECTORS))

_PII_DETECTORS: dict[str, tuple[Detector, ...]] = {
    "credit_card": (Detector("credit_card", _re(r"(?<![\d-])\d(?:[ \u00a0\u2007\u202f-]?\d){12,18}(?!\d)"), _card),),
    "iban": (
        Detector(
            "iban",
            _re(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])"),
            _iban,
        ),
    ),
    "ssn": (
        Detector("ssn", _re(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")),
        Detector("ssn", _re(r"(?i:(?<![A-Za-z])ssn)[#:\s]{1,5}(?P<value>\d{9})(?!\d)")),
    ),
    "email": (
        Detector(
            "email",
            _re(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}"
                r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])"),
        ),
    ),
    "phone": (
        Detector("phone", _re(r"(?<![\w+])\+[1-9](?:[ .()-]{0,2}\d){6,14}(?!\d)"), _phone),
        Detector("phone", _re(r"(?<![\w+(.-])(?:1[ .-])?(?:\(\d{3}\)[ ]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\d]|[.-]\d)")),
    ),
    "ipv4": (
        Detector(
            "ipv4",
            _re(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\.?\d)"),
        ),
    ),
    "ipv6": (
        Detector("ipv6", _re(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])"), _ipv6),
    ),
}

#: The PII categories a :class:`Redactor` can be asked for, in the order they are applied.
PII_CATEGORIES: tuple[str, ...] = tuple(_PII_DETECTORS)

#: A built-in pattern's opening ``(?<![...])``: "no token character just before". Right after a
#: placeholder that always holds (a placeholder ends with ``]``, in none of those classes), so
#: there the pattern is tried without it; see :meth:`Redactor._restart`.
_LEFT_BOUNDARY = re.compile(r"\(\?<!\[(?:\\.|[^\]\\])+\]\)")


def _fresh(pattern: re.Pattern[str] | None) -> re.Pattern[str] | None:
    return None if pattern is None else re.compile(_LEFT_BOUNDARY.sub("", pattern.pattern), pattern.flags)


#: Each built-in detector's pattern as it applies right after a placeholder (custom patterns are
#: tried there as written; scans, which need no left boundary, are not tried there at all).
_FRESH: dict[int, re.Pattern[str] | None] = {
    id(detector): _fresh(detector.pattern)
    for detector in (*SECRET_DETECTORS, *(d for group in _PII_DETECTORS.values() for d in group))
}


# --------------------------------------------------------------------------------------------
# Custom patterns
# --------------------------------------------------------------------------------------------


def compile_pattern(name: object, pattern: object, *, option: str = "privacy.patterns") -> Detector:
    """A custom detector from a ``(name, regex)`` pair; a mistake is a ConfigError naming ``option``.

    ``name`` becomes the placeholder's category (lowercase letters, digits, ``_``; at most 40).
    A group named ``value`` limits what is replaced (``employee=(?P<value>E\\d+)``).
    """
    allowed = "(name, regex) pairs: name like 'employee_id', a regex that cannot match empty text"
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise ConfigError(option, f"pattern name {name!r} must be lowercase letters, digits or '_'", allowed=allowed)
    if name in SECRET_CATEGORIES or name in PII_CATEGORIES:
        raise ConfigError(option, f"pattern name {name!r} is a built-in category", allowed=allowed)
    if not isinstance(pattern, str) or not pattern:
        raise ConfigError(option, f"pattern {name!r} needs a non-empty regex string, got {pattern!r}", allowed=allowed)
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(option, f"pattern {name!r} is not a valid regex: {exc}", allowed=allowed) from None
    if compiled.fullmatch("") is not None:
        raise ConfigError(option, f"pattern {name!r} matches empty text", allowed=allowed)
    return Detector(name, compiled)


# --------------------------------------------------------------------------------------------
# The redactor
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Redacted:
    """A redacted text and how many values of each category were replaced in it."""

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)


class Redactor:
    """Replaces secrets and the chosen PII in text by keyed, stable placeholders.

    ``key`` keys the placeholders' HMAC (keep it secret and share it between processes that
    must agree on placeholders); ``secrets`` turns the built-in secret detectors on; ``pii``
    names the PII categories (see :data:`PII_CATEGORIES`); ``patterns`` are custom
    ``(name, regex)`` pairs, applied first.
    """

    def __init__(
        self,
        key: bytes,
        *,
        secrets: bool = True,
        pii: Iterable[str] = (),
        patterns: Sequence[tuple[str, str]] = (),
    ) -> None:
        if not isinstance(key, bytes) or not key:
            raise ConfigError("privacy.key", "the redaction key must be non-empty bytes", allowed="a secret string")
        chosen_pii = tuple(pii)
        unknown = [category for category in chosen_pii if category not in _PII_DETECTORS]
        if unknown:
            raise ConfigError(
                "privacy.redact_pii", f"unknown PII category {unknown[0]!r}", allowed=", ".join(PII_CATEGORIES)
            )
        detectors = [compile_pattern(name, regex) for name, regex in patterns]
        if secrets:
            detectors.extend(SECRET_DETECTORS)
        for category in PII_CATEGORIES:  # a fixed order: cards before phones, IBANs before both
            if category in chosen_pii:
                detectors.extend(_PII_DETECTORS[category])
        self._key = key
        self.detectors: tuple[Detector, ...] = tuple(detectors)
        #: (index, detector, pattern as it applies right after a placeholder) for a restart
        self._anchored: tuple[tuple[int, Detector, re.Pattern[str]], ...] = tuple(
            (index, detector, pattern)
            for index, detector in enumerate(detectors)
            if (pattern := _FRESH.get(id(detector), detector.pattern)) is not None
        )
        self.categories: tuple[str, ...] = tuple(dict.fromkeys(d.category for d in detectors))
        names = "|".join(re.escape(category) for category in self.categories) or "(?!)"
        self._placeholder = re.compile(rf"\[REDACTED:(?:{names}):[0-9a-f]{{{PLACEHOLDER_HEX}}}\]")

    def keyed(self, label: str, value: str) -> str:
        """24 hex digits of an HMAC of ``value`` under this redactor's key (``label`` separates
        uses): stable for one value, and not to be told from a hash of a guessed value."""
        digest = hmac.new(self._key, f"{label}\x00{value}".encode("utf-8", "surrogatepass"), hashlib.sha256)
        return digest.hexdigest()[:24]

    def placeholder(self, category: str, value: str) -> str:
        """``[REDACTED:<category>:<hmac>]``: the same for the same value, under this key."""
        digest = hmac.new(self._key, f"{category}\x00{value}".encode("utf-8", "surrogatepass"), hashlib.sha256)
        return f"[REDACTED:{category}:{digest.hexdigest()[:PLACEHOLDER_HEX]}]"

    def redact(self, text: str) -> Redacted:
        """``text`` with every detected value replaced, and the counts per category.

        One sweep runs every detector over the text outside placeholders. A value glued to the
        one before it (``npm_…npm_…sk-…``: no token starts inside a run of token characters) can
        be found only once its neighbour is a placeholder, so the sweep restarts right after
        each value it replaces (:meth:`_restart`) and takes a chain of any length as it goes.
        The text around a replaced value now stands alone and is swept once more, and only that
        text, until a sweep changes nothing: the result is a fixed point (idempotent). A glued
        chain goes in the first sweep whatever its length (the second finds nothing in what is
        left), so its work is linear in its length, not one pass over the text per value.

        Invisible characters that could split a value (:data:`_INVISIBLE`) are dropped first
        when anything is found; a text with nothing to replace is returned as given.
        """
        if not self.detectors or not text:
            return Redacted(text)
        if _INVISIBLE.search(text) is not None:
            # Read as the model reads it; a text with nothing to replace comes back as given
            # (unchanged text means "nothing found" to callers).
            found = self._redact(_INVISIBLE.sub("", text))
            return found if found.counts else Redacted(text)
        return self._redact(text)

    def _redact(self, text: str) -> Redacted:
        counts: Counter[str] = Counter()
        segments: list[_Segment] = []
        last = 0
        for match in self._placeholder.finditer(text):
            segments += [(text[last:match.start()], _DIRTY, -1), (match.group(), _PLACEHOLDER, -1)]
            last = match.end()
        segments.append((text[last:], _DIRTY, -1))
        while any(kind == _DIRTY for _, kind, _ in segments):
            segments = self._sweep(segments, counts)
        return Redacted("".join(segment for segment, _, _ in segments), dict(counts))

    def _sweep(self, segments: list[_Segment], counts: Counter[str]) -> list[_Segment]:
        """Every detector, in order, over the dirty segments and the pieces they split into;
        then a restart right after each new placeholder. Unsplit dirty segments come back clean,
        new pieces dirty."""
        for index, detector in enumerate(self.detectors):
            updated: list[_Segment] = []
            for segment, kind, by in segments:
                if kind not in (_DIRTY, _PIECE) or not segment:
                    updated.append((segment, kind, by))
                    continue
                cursor = 0
                for start, end in detector.spans(segment):
                    if start < cursor:
                        continue
                    placeholder = self._replace(detector, segment[start:end], counts)
                    updated += [(segment[cursor:start], _PIECE, -1), (placeholder, _NEW, index)]
                    cursor = end
                updated.append((segment[cursor:], _PIECE, -1) if cursor else (segment, kind, by))
            segments = updated
        swept: list[_Segment] = []
        made_by = -1  # the detector that made the placeholder just before (-1: none new)
        for segment, kind, by in segments:
            if kind == _PIECE and made_by >= 0:
                swept += self._restart(segment, made_by, counts)
            else:
                swept.append((segment, _SETTLED[kind] if segment or kind == _NEW else _CLEAN, -1))
            made_by = by if kind == _NEW else -1
        return swept

    def _restart(self, segment: str, made_by: int, counts: Counter[str]) -> list[_Segment]:
        """``segment`` (text right after a placeholder the detector ``made_by`` just made), its
        leading chain of glued values replaced: at each start, the first detector that matches
        there, until none does. What is left is dirty (the next sweep scans it whole).

        The detectors are tried from the one after the maker of the placeholder before, round to
        the maker itself: the order in which the detectors would meet that text if the sweep
        simply went on (the later ones in this sweep, the earlier ones in the next)."""
        pieces: list[_Segment] = []
        clear = position = 0
        while position < len(segment):
            found = self._anchored_at(segment, position, made_by)
            if found is None:
                break
            made_by, start, end = found
            placeholder = self._replace(self.detectors[made_by], segment[start:end], counts)
            pieces += [(segment[clear:start], _DIRTY, -1), (placeholder, _PLACEHOLDER, -1)]
            clear = position = end
        pieces.append((segment[clear:], _DIRTY, -1))
        return [(piece, _CLEAN if kind == _DIRTY and not piece else kind, -1) for piece, kind, _ in pieces]

    def _anchored_at(self, segment: str, position: int, after: int) -> tuple[int, int, int] | None:
        """The index of the first detector (from the one after ``after``, round) with a value in a
        match starting at ``position``, and the value's span."""
        split = next((i for i, (index, _, _) in enumerate(self._anchored) if index > after), len(self._anchored))
        for index, detector, pattern in (*self._anchored[split:], *self._anchored[:split]):
            match = pattern.match(segment, position)
            if match is None:
                continue
            start, end = _value_span(match)
            if end > start and (detector.check is None or detector.check(segment[start:end])):
                return index, start, end
        return None

    def _replace(self, detector: Detector, value: str, counts: Counter[str]) -> str:
        counts[detector.category] += 1
        return self.placeholder(detector.category, value)


#: Characters a reader (and a model) reads straight through, and that copying a key from a web
#: page, a chat app or a PDF leaves inside it: zero-width space, word joiner, byte-order mark, soft
#: hyphen. They are dropped before the detectors run, so none can split a value in two. The
#: joiners U+200C/U+200D only between ASCII token characters: elsewhere they are spelling
#: (Persian, Indic scripts) or emoji sequences.
_INVISIBLE = re.compile(r"[\u200b\u2060\ufeff\u00ad]+|(?<=[A-Za-z0-9_+/=.-])[\u200c\u200d]+(?=[A-Za-z0-9_+/=.-])")

#: A segment while redacting: its text, its kind, and (a placeholder made in this sweep) the
#: index of the detector that made it, else -1.
_Segment = tuple[str, int, int]
#: Segment kinds while redacting: text still to sweep (``_DIRTY``), a piece split off in this
#: sweep (swept by the detectors after the one that split it, dirty for the next sweep), text no
#: detector finds anything in (``_CLEAN``), a placeholder made in this sweep (``_NEW``) or before.
_DIRTY, _PIECE, _CLEAN, _NEW, _PLACEHOLDER = range(5)
#: What each kind is once a sweep is over.
_SETTLED = {_DIRTY: _CLEAN, _PIECE: _DIRTY, _CLEAN: _CLEAN, _NEW: _PLACEHOLDER, _PLACEHOLDER: _PLACEHOLDER}


# --------------------------------------------------------------------------------------------
# The provider allow-list
# --------------------------------------------------------------------------------------------

OFFLINE = "offline"


def provider_of(model_name: str) -> str:
    """The provider part of a ``provider:model`` name (``openai:gpt-4o`` → ``openai``)."""
    return model_name.split(":", 1)[0].strip().lower()


def _check_rule(key: object, providers: object, option: str) -> tuple[str, tuple[str, ...]]:
    allowed = "{'thread:<glob>' | 'resource:<glob>' | '*': ['openai', 'offline', ...]}"
    if not isinstance(key, str) or not (key == "*" or key.startswith(("thread:", "resource:"))):
        raise ConfigError(option, f"scope key {key!r} must be '*', 'thread:<glob>' or 'resource:<glob>'", allowed=allowed)
    if key != "*" and not key.split(":", 1)[1]:
        raise ConfigError(option, f"scope key {key!r} has an empty pattern", allowed=allowed)
    if isinstance(providers, str) or not isinstance(providers, Iterable):
        raise ConfigError(option, f"the providers for {key!r} must be a list of names, got {providers!r}",
                          allowed=allowed)
    names: list[str] = []
    for provider in providers:
        if not isinstance(provider, str) or not provider.strip():
            raise ConfigError(option, f"provider {provider!r} for {key!r} is not a name", allowed=allowed)
        names.append(provider.strip().lower())
    return key, tuple(names)


@dataclass(frozen=True, slots=True)
class ProviderRules:
    """Which providers may see which scope's text (see the module docstring)."""

    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, mapping: Mapping[Any, Any], *, option: str = "privacy.providers") -> ProviderRules:
        """Validated rules from ``{scope pattern: [provider, ...]}``; a mistake is a ConfigError."""
        return cls(tuple(_check_rule(key, value, option) for key, value in mapping.items()))

    def _matches(self, key: str, thread_id: str | None, resource_id: str | None) -> bool:
        if key == "*":
            return True
        kind, pattern = key.split(":", 1)
        subject = thread_id if kind == "thread" else resource_id
        return subject is not None and fnmatchcase(subject, pattern)

    def allows(self, provider: str, scopes: Iterable[tuple[str | None, str | None]] | None) -> bool:
        """Whether ``provider`` may see text of every ``(thread_id, resource_id)`` in ``scopes``.

        A rule matches a scope by its thread id or its resource id; every matching rule must allow
        the provider, and a scope that no rule matches allows none. ``scopes=None`` (a request that
        names no scope) holds the provider to every rule, and needs a ``"*"`` rule.
        """
        provider = provider.strip().lower()
        if provider == OFFLINE:
            return True
        if scopes is None:
            return any(key == "*" for key, _ in self.rules) and all(_allows(names, provider) for _, names in self.rules)
        for thread_id, resource_id in scopes:
            matching = [names for key, names in self.rules if self._matches(key, thread_id, resource_id)]
            if not matching or not all(_allows(names, provider) for names in matching):
                return False
        return True


def _allows(names: tuple[str, ...], provider: str) -> bool:
    return "*" in names or provider in names

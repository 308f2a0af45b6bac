"""Secrets never become knowledge: what an automatic agent may not store as a fact.

A password, an API key or a PIN the user states in conversation ("my wifi password is
hunter2-Blue!") is no durable fact to capture, review and remind of later, whether or not the
privacy boundary is on. The knowledge agents (capture, :func:`obsmem.knowledge.capture.capture`
for a model's proposals, learn) ask :func:`holds_secret` of every text they are about to write
and leave it out when it holds one. What an application writes itself (``Knowledge.append``,
``memory.pin``, a reviewer's edit) is its own choice and is not checked here.

Two kinds of evidence, both pure and linear in the text:

* the privacy module's secret detectors (:data:`obsmem.privacy.SECRET_CATEGORIES`: provider keys
  and tokens, private keys, ``password=``-style assignments in many languages, connection
  strings, …), with the same patterns (and so the same few false positives) as redaction;
* the conversational forms those detectors leave alone because they are prose, not
  configuration: ``<password word> [for …] is|was|ist|est|は|是 … <value>`` (``my wifi password is
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
  (``my password is 12 characters long``) or a placeholder (``[REDACTED:…]``, ``***``) is none.

:func:`secret_values` gives the values themselves, so that a model's rewording of a statement
("wifi login: hunter2-Blue") that no longer names what the value is still counts when the value
was stated as a secret in the text it was read from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from obsmem.knowledge.store.values import latin_lookalikes
from obsmem.privacy import Redactor

__all__ = ["holds_secret", "secret_values"]

#: Only to find secrets (its placeholders are never stored): every built-in secret detector, and
#: payment card numbers (Luhn-checked: what pays with the card is no fact to keep either).
_DETECTORS = Redactor(b"obsmem.knowledge.secrets", secrets=True, pii=["credit_card"])

#: Characters that may split a value without showing (dropped before looking, as redaction does).
_INVISIBLE = re.compile(r"[\u200b-\u200d\u2060\ufeff\u00ad]")

_PASSWORD_WORDS = (
    r"pass(?:word|wort|code|phrase)s?|p[a@4]ssw[o0]rds?|passwd|pw|kennw[oö]rt(?:er)?|mot de passe|contrase[ñn]as?|senhas?"
    r"|wachtwoord(?:en)?|l[öo]senord|adgangskode|passord|salasana|has[łl]o|heslo|[şs]ifre(?:si)?|парол[ья]"
    r"|wi-?fi[ -]key|network key"
)
_CJK_PASSWORD_WORDS = r"密码|密碼|口令|パスワード|暗証番号|비밀번호|암호"
_KEY_WORDS = (
    r"(?:api|access|secret|private|client|signing|encryption|master|recovery)[ _-]?key"
    r"|(?:aws[ _-]?)?secret(?:[ _-]?access[ _-]?key)?|client[ _-]?secret"
    r"|(?:access|auth|api|bearer|refresh|session|bot|github|gitlab|slack|personal[ _-]access)[ _-]?token|token"
    r"|recovery[ _-]codes?|backup[ _-]codes?|seed[ _-]phrase|mnemonic"
)
#: Codes that open something (a door, an alarm, an account), not a zip, promo or booking code.
_CODE_WORDS = (
    r"(?:door|gate|alarm|garage|lock|safe|entry|access|wi-?fi|keypad|building|unlock|verification|2fa"
    r"|otp|one-time|login|sign-in|tür|haustür)[ -]?codes?|(?:lock|safe|locker)[ -]combination"
)
#: A login given as a user and a password: "my Netflix login is alice@example.com / hunter2-Blue".
_LOGIN = re.compile(
    r"(?<![^\W\d_])(?i:login|log-in|sign-in|credentials?|account|zugangsdaten)(?![^\W\d_])"
    r"(?:\s(?i:is|are|ist|sind)|\s{0,3}:)\s{1,3}\S{1,100}?\s{0,3}[/:|]\s{0,3}(?P<value>[^\s\"']{1,200})"
)
_PIN_WORDS = r"PIN(?:[ -]?(?:code|number|nummer))?|pin(?:[ -]?(?:code|number))?|PUK|CVV2?|CVC2?|security code|Geheimzahl"

#: What joins the word to its value: a copula in the languages of the password words, or ``:``/``=``.
_IS = (
    r"(?:\s{0,3}[:=(\uff1a\uff1d\u2192\u2014\u2013]|\s{0,3}->|\s(?:is|was)\s{0,2}[:\-\u2013\u2014]"
    r"|,?\s(?:which|that)\s(?:is|was)|\s(?:is|was|are|were|ist|lautet|war|sind|est|était|es|era|é|er|var|är"
    r"|jest|je|zijn|reads|has been changed to|changed to)(?![^\W\d_]))"
)
#: "for the wifi at home", "of my laptop": what the value is for, between the word and the copula.
_FOR = (r"(?:\s(?:for|of|to|on|at|in|f[üu]r|von|pour|de|para|they|i|we|you|he|she|that|which|one)"
        r"(?:\s[^\s.,;:!?=]{1,40}){1,4}?)?")
_NOW = (r"(?:\s{1,3}(?:now|still|currently|simply|just|jetzt|nun|maintenant|ahora|agora))?"
        r"(?:\s{1,3}(?:set to|changed to|updated to))?")
#: The value: quoted (spaces and all), spelled out ("h u n t e r 2"), else one word.
_VALUE = (
    r"\s{0,3}(?:(?P<spelled>(?:[^\s\"'] ){3,60}[^\s\"'.,;!?])(?![^\s.,;!?])|\"(?P<quoted>[^\"\n]{1,200})\"|\u201c(?P<quoted2>[^\u201d\n]{1,200})\u201d"
    r"|'(?P<quoted3>[^'\n]{1,200})'|\u2018(?P<quoted4>[^\u2019\n]{1,200})\u2019"
    r"|\u300c(?P<quoted5>[^\u300d\n]{1,200})\u300d|\u00ab\s?(?P<quoted6>[^\u00bb\n]{1,200}?)\s?\u00bb"
    r"|[\"'`\u201c\u2018\u00ab\u300c\u300e]?(?P<value>[^\s\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb\u300c\u300d\u300e\u300f]{1,200}))"
)
_VALUE_GROUPS = ("value2", "spelled", "quoted", "quoted2", "quoted3", "quoted4", "quoted5", "quoted6", "value")


def _said(words: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\W\d_])(?:{words})(?![^\W\d_]){_FOR}{_IS}{_NOW}{_VALUE}", flags)


_PASSWORD_SAID = _said(_PASSWORD_WORDS)
#: "they set their wifi password to …", and the value before the word: "they use … as their
#: password", "… is their wifi password" (only a value made up like a credential, there).
_SET_TO = re.compile(
    rf"(?<![^\W\d_])(?i:set|sets|changed|changes|change|updated|update|reset)(?:\s[^\s.,;:!?=]{{1,40}}){{0,3}}?"
    rf"\s(?i:{_PASSWORD_WORDS})\s(?i:to|as){_VALUE}"
)
_BEFORE = re.compile(
    r"(?:(?<![^\W\d_])(?i:use|uses|used|using)\s(?P<value>[^\s\"']{6,200})\s(?i:as)"
    r"|(?<!\S)(?P<value2>[^\s\"']{6,200})\s(?i:is|was)\s(?i:their|my|our|his|her|your|the))"
    rf"(?:\s[^\s.,;:!?=]{{1,40}}){{0,3}}?\s(?i:{_PASSWORD_WORDS})(?![^\W\d_])"
    r"(?!\s(?i:managers?|reset|polic(?:y|ies)|rules|requirements|hint|field|prompt|generator|vault|app|protected"
    r"|strength|length|change|expiry)(?![^\W\d_]))"
)
_CODE_SAID = _said(_CODE_WORDS)
_KEY_SAID = _said(_KEY_WORDS)
_PIN_SAID = _said(_PIN_WORDS, 0)
#: Chinese, Japanese and Korean: no space before the value, which ends at the first CJK character.
_CJK_SAID = re.compile(
    rf"(?:{_CJK_PASSWORD_WORDS})\s{{0,3}}(?:は|是|为|為|는|은|이|가|:|：|=)?\s{{0,3}}(?:[「『\"'])?"
    r"(?P<value>[!-~]{1,200})"
)
#: "My password is set. It's hunter2-Blue!": the value a sentence or two after the word.
_SPLIT_SAID = re.compile(
    rf"(?<![^\W\d_])(?:{_PASSWORD_WORDS}|{_KEY_WORDS}|{_CJK_PASSWORD_WORDS})(?![^\W\d_])[^\n.!?;。！？]{{0,160}}"
    r"[.!?;。！？\n]\s{0,40}(?:[*-]\s{1,3}\S{1,3}\s{1,3}(?:\(\d{1,2}:\d{2}\)\s{1,3})?)?"
    r"(?:User (?:said|stated)(?: that)?\s{1,3})?(?:it'?s|it’s|it is|it was|es ist|das ist|c'est|that's|that is)"
    rf"{_NOW}{_VALUE}",
    re.IGNORECASE,
)

_TRAILING = ".,!?;:)]}>。、，！？）」』"
#: Words that say something about a password, not what it is.
_NOT_VALUES = frozenset(
    "a an the my your his her their our its this that these those what which who whom whose where when how "
    "not no never none too very so also still now just only already being been be in on at for to of "
    "with from by under inside behind same different new old wrong right correct incorrect invalid valid "
    "weak strong long short secure insecure safe unsafe fine ok okay good bad great easy hard simple complex "
    "forgotten lost unknown empty blank missing mandatory optional required secret private hidden public "
    "case-sensitive sensitive ready due there here something nothing anything everything one two three "
    "null nil undefined redacted again written somewhere "
    "ist nicht falsch richtig neu alt zu sehr das der die ein eine mein dein sein im am "
    "est pas trop le la les un une mon ton son faux "
    "es no muy el los una mi tu su "
    "irgendwo".split()
)
_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{8}\]|[*xX•.]{3,}|[$<{%\[].*")


def _value(match: re.Match[str]) -> tuple[int, str]:
    """Where the value starts, and the value (a bare word without the punctuation after it; a
    placeholder whole, so that it is known for one)."""
    name = next(name for name in _VALUE_GROUPS if name in match.re.groupindex and match.group(name) is not None)
    value = match.group(name)
    if name == "value" and _PLACEHOLDER.match(value) is None:
        value = value.rstrip(_TRAILING)
    return match.start(name), value


def _shaped(value: str) -> bool:
    """Looks made up as a credential: a digit, a symbol inside it, or a capital after its first letter."""
    return (any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
            or any(c.isupper() for c in value[1:]))


def _password(value: str) -> bool:
    if len(value) < 3 or _PLACEHOLDER.fullmatch(value):
        return False
    if value.isdigit():
        return len(value) >= 4  # "12 characters long" is no password; "4821" is
    if _shaped(value):
        return True
    word = value.casefold()
    if word in _NOT_VALUES or len(word) < 4 or word.endswith(("ed", "ing", "ly", "en", "é")):
        return False  # "expired", "changing", "forgotten", "expiré": what it is like, not what it is
    return True


def _opaque(value: str) -> bool:
    """A key or token's value: long, no everyday word (``my API key is in the vault`` is none)."""
    if len(value) < 12 or _PLACEHOLDER.fullmatch(value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    return (has_digit and has_letter) or (has_letter and _shaped(value) and len(value) >= 20)


def _pin(value: str) -> bool:
    digits = value.replace("-", "").replace(" ", "")
    return digits.isdigit() and 3 <= len(digits) <= 12


def _spans(text: str) -> Iterable[tuple[int, int]]:
    for detector in _DETECTORS.detectors:
        yield from detector.spans(text)
    for pattern, check in ((_PASSWORD_SAID, _password), (_CJK_SAID, _password), (_CODE_SAID, _password),
                           (_SET_TO, _password), (_KEY_SAID, _opaque), (_PIN_SAID, _pin), (_LOGIN, _shaped_password),
                           (_BEFORE, _credential)):
        for match in pattern.finditer(text):
            start, value = _value(match)
            if check(value):
                yield start, start + len(value)
    for match in _SPLIT_SAID.finditer(text):
        start, value = _value(match)
        if len(value) >= 6 and _shaped_password(value):
            yield start, start + len(value)


#: What a value standing before its word must not be: an address, a link, a date, a version.
_NOT_CREDENTIAL = re.compile(r"[^@\s]+@[^@\s]+\.\w+|\w+://.*|\d{1,4}[-./]\d{1,2}[-./]\d{1,4}|v?\d+(?:\.\d+)+")


def _credential(value: str) -> bool:
    """Made up like a credential beyond doubt: letters and digits or symbols, six or more, and no
    address, link, date or version."""
    return (len(value) >= 6 and any(c.isalpha() for c in value) and _shaped(value)
            and _NOT_CREDENTIAL.fullmatch(value) is None and _password(value))


def _shaped_password(value: str) -> bool:
    """A value whose word does not say it is a secret: only one made up like a credential."""
    return _shaped(value) and _password(value)


def _views(text: str) -> tuple[str, ...]:
    """``text`` as looked at (:func:`_readable`), and also with look-alike letters read as Latin
    ones where it has any ("pаsswоrd" with a Cyrillic а and о, "ｐａｓｓｗｏｒｄ")."""
    readable = _readable(text)
    latin = latin_lookalikes(readable)
    return (readable,) if latin == readable else (readable, latin)


_REDACTED = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}:[0-9a-f]{8}\]")


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

"""Secrets said in conversation: the forms a password, key or PIN takes in prose.

The privacy module's other secret detectors read configuration (``password=…``, ``Passwort: …``,
provider keys and tokens); people say them: ``<password word> [for …] is|was|ist|est|は|是 …
<value>`` (``my wifi password is hunter2-Blue``, ``Mein Passwort ist Sonnenblume-42``,
``パスワードは hunter2Blue``, ``my pw is …``, ``p4ssw0rd``, a value quoted or spelled out
``h u n t e r 2``), the same with a code that opens something (``my door code is 4821-B``; not a
zip or promo code), a key or token word with an opaque value (``my AWS secret is wJalr…``), a PIN,
PUK or card security code with its digits, a login given as ``user / password``, a password set
``to`` a value, a value before its word (``they use … as their password``: only one made up like a
credential, no address, date or version), and a password word followed within a sentence or two by
``it's <value>``; and, with a value made up like a credential (or digits for a PIN or a code), a
contraction (``my password's hunter2-Blue!``, ``my pin's 4821``), no copula at all (``PIN CODE 4821``,
``Door code 1234#``, ``wifi password hunter2-Blue!``) or the code's door after its word (``the code
to the gate is 4821``). The words are read in any case (``Pin code: 4821``; a bare ``PIN`` without a
copula only in capitals). A value that is an everyday word (``my password is expired``, ``… is too short``),
a short number (``my password is 12 characters long``) or a placeholder (``[REDACTED:…]``, ``***``)
is none.

:func:`said_spans` gives the values' spans: what :mod:`obsmem.knowledge.secrets` reads (with
look-alike letters folded) to keep secrets out of knowledge, where a false positive costs a
candidate fact. The privacy boundary's redaction does not use it: tried there, it replaced words
of 59 ordinary sentences a hostile review wrote ("The building code is strict about fire exits",
"Le mot de passe est obligatoire", "Login: https://…", source code naming a token), text a
privacy user would lose from every observation. Pure and linear in the text (bounded quantifiers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["said_spans"]

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
    r"(?:door|gate|alarm|garage|lock|safe|entry|access|wi-?fi|keypad|unlock|verification|2fa"
    r"|otp|one-time|login|sign-in|tür|haustür)(?:['\u2019]s\s|[ -]?)codes?|(?:lock|safe|locker)[ -]combination"
)
#: A login given as a user and a password: "my Netflix login is alice@example.com / hunter2-Blue".
_LOGIN = re.compile(
    r"(?<![^\W\d_])(?i:login|log-in|sign-in|credentials?|account|zugangsdaten)(?![^\W\d_])"
    r"(?:\s(?i:is|are|ist|sind)|\s{0,3}:)\s{1,3}\S{1,100}?\s{0,3}[/:|]\s{0,3}(?P<value>[^\s\"']{1,200})"
)
_PIN_WORDS = r"pin(?:[ -]?(?:code|number|nummer))?|puk|cvv2?|cvc2?|security code|geheimzahl"
#: The PIN words that say a PIN without a copula ("PIN CODE 4821", "my bank PIN 4821 works"; a
#: lower-case "pin 1024" may be a connector's).
_BARE_PIN_WORDS = r"(?i:pin[ -]?(?:code|number|nummer)|security code|geheimzahl)|PIN|PUK|CVV2?|CVC2?"
#: "The building code is strict about fire exits" is law: a building's code is one only with
#: digits ("The building code is 4821").
_BUILDING_WORDS = r"building[ -]?codes?"
#: What a code opens, named after it: "the code to the gate is 4821", "the code for the front door …".
_OPENED = (r"(?:codes?|combinations?)\s(?:to|for|of|on)(?:\s[^\s.,;:!?=]{1,40}){0,3}?"
           r"\s(?:door|gate|alarm|garage|lock|padlock|safe|locker|keypad|entrance|vault|building|house|flat"
           r"|apartment|office|garden|shed|storage|bike)s?")

#: What joins the word to its value: a copula in the languages of the password words, or ``:``/``=``.
_IS = (
    r"(?:\s{0,3}[:=(\uff1a\uff1d\u2192\u2014\u2013]|\s{0,3}->|\s(?:is|was)\s{0,2}[:\-\u2013\u2014]"
    r"|,?\s(?:which|that)\s(?:is|was)|\s(?:is|was|are|were|ist|lautet|war|sind|est|était|es|era|é|er|var|är"
    r"|jest|je|zijn|reads|has been changed to|changed to|\u00e8)(?![^\W\d_])|,?\s(?:c'est|c\u2019est)(?![^\W\d_]))"
)
#: Italian's copula: its everyday words are not in :data:`_NOT_VALUES` ("La password è sicura",
#: "… è stata cambiata"), so after it only a value made up like a credential counts, as after a
#: contraction ("La password è hunter2-Blue!"; digits after a PIN word, as anywhere).
_SHAPED_ONLY = re.compile(r"\s\u00e8(?![^\W\d_])")
#: A contraction: "my password's hunter2-Blue!", "my pin\u2019s 4821" (only a value made up like a
#: credential: "my password's strength is good" is none).
_CONTRACTED = r"['\u2019]s(?![^\W\d_])"
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


def _said(words: str, flags: int = re.IGNORECASE, joined: str = _IS) -> re.Pattern[str]:
    return re.compile(rf"(?<![^\W\d_])(?:{words})(?![^\W\d_]){_FOR}{joined}{_NOW}{_VALUE}", flags)


def _bare(words: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    """The word and its value with no copula between: "PIN CODE 4821", "Door code 1234#"."""
    return re.compile(rf"(?<![^\W\d_])(?:{words})(?![^\W\d_])[ \t]{{1,3}}(?P<value>[^\s\"'`]{{1,200}})", flags)


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
_PIN_SAID = _said(_PIN_WORDS)
_BUILDING_SAID = _said(_BUILDING_WORDS)
_OPENED_SAID = _said(_OPENED)
_PASSWORD_S = _said(_PASSWORD_WORDS, re.IGNORECASE, _CONTRACTED)
_CODE_S = _said(_CODE_WORDS, re.IGNORECASE, _CONTRACTED)
_KEY_S = _said(_KEY_WORDS, re.IGNORECASE, _CONTRACTED)
_PIN_S = _said(_PIN_WORDS, re.IGNORECASE, _CONTRACTED)
_PASSWORD_BARE = _bare(_PASSWORD_WORDS)
_CODE_BARE = _bare(_CODE_WORDS)
_PIN_BARE = _bare(_BARE_PIN_WORDS, 0)
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
    "irgendwo tout "
    "non troppo il mia tua sua obbligatoria sbagliata errata scaduta nuova".split()
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


def _keypad(value: str) -> bool:
    """What is typed on a keypad: digits (three or more), with ``#``, ``*`` or ``-``."""
    return _KEYPAD.fullmatch(value) is not None and sum(c.isdigit() for c in value) >= 3


_KEYPAD = re.compile(r"[0-9#*-]{3,24}")


def _pin(value: str) -> bool:
    digits = value.replace("-", "").replace(" ", "")
    return digits.isdigit() and 3 <= len(digits) <= 12


def said_spans(text: str) -> Iterator[tuple[int, int]]:
    """The (start, end) of each secret value ``text`` states in words (see the module docstring),
    left to right within each form."""
    for pattern, check in ((_PASSWORD_SAID, _password), (_CJK_SAID, _password), (_CODE_SAID, _password),
                           (_SET_TO, _password), (_KEY_SAID, _opaque), (_PIN_SAID, _pin), (_LOGIN, _shaped_password),
                           (_BEFORE, _credential), (_BUILDING_SAID, _keypad), (_OPENED_SAID, _shaped_password),
                           (_PASSWORD_S, _shaped_password), (_CODE_S, _shaped_password), (_KEY_S, _opaque),
                           (_PIN_S, _pin), (_PASSWORD_BARE, _bare_credential), (_CODE_BARE, _keypad), (_PIN_BARE, _pin)):
        for match in pattern.finditer(text):
            start, value = _value(match)
            if check is _password and _SHAPED_ONLY.search(text, match.start(), start):
                if _shaped_password(value):
                    yield start, start + len(value)
            elif check(value):
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


def _bare_credential(value: str) -> bool:
    """A value after its password word with nothing between ("wifi password hunter2-Blue!"): a
    credential with a digit that begins with a letter or digit ("password (optional)",
    "**Password manager:** 1Password" are none)."""
    last = value.rsplit("-", 1)[-1]
    described = "-" in value and last.islower() and last.endswith(("ed", "ing", "based", "only"))
    return (value[:1].isalnum() and any(c.isdigit() for c in value) and not described  # "WPA2-protected"
            and _credential(value))


def _shaped_password(value: str) -> bool:
    """A value whose word does not say it is a secret: only one made up like a credential."""
    return _shaped(value) and _password(value)

"""Phone numbers as values: where an international number's country code ends, and the digits
every written form of one number shares. Pure functions (the foundation layer): the knowledge
store's tombstones and forgets (:mod:`obsmem.knowledge.store.values`) and the conversation's
forget (:mod:`obsmem.storage.forgetting`) read numbers by the same rule.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["DATE_SHAPED", "KEEPS_ZERO", "country_code", "digit_runs", "national_digits"]

#: The two-digit country calling codes (ITU-T E.164); "1" and "7" are the one-digit ones and every
#: other code is three digits. The codes are prefix-free, so these decide where a number's
#: country code ends: "+49 151 …" is 49 and 151 …, "+491 …" could only be a three-digit code.
_TWO_DIGIT_CODES = frozenset(
    "20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 "
    "60 61 62 63 64 65 66 81 82 84 86 90 91 92 93 94 95 98".split()
)
#: Countries whose numbers keep their leading 0 after the country code (Italy, San Marino, the Vatican).
KEEPS_ZERO = frozenset({"39", "378", "379"})

#: A value that is one phone number and nothing else: "+49 151 2345678", "0151-234-5678",
#: "0049 (0)151 2345678" (digits, the usual separators, a leading "+").
_ONE_NUMBER = re.compile(r"\s*\+?\s*\(?\s*\d[\d ()./-]*\d\s*")
_SEPARATED = re.compile(r"\d[ ()./-]+\d")
#: A date, not a phone number: "05.12.2026", "05/12/26", "2026-12-05".
DATE_SHAPED = re.compile(r"\(?\d{1,4}[./-]\d{1,2}[./-]\d{1,4}\)?")
_TRUNK_IN_INTERNATIONAL = re.compile(r"\(\s*0\s*\)")
#: A run of digits with separators inside it, as a text writes a number.
_DIGIT_RUN = re.compile(r"\d(?:[ ()./-]?\d)*")
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")


def country_code(digits: str) -> str:
    """The country calling code an international number's digits begin with."""
    if digits[:1] in ("1", "7"):
        return digits[:1]
    return digits[:2] if digits[:2] in _TWO_DIGIT_CODES else digits[:3]


def _ascii_digits(text: str) -> str:
    return text if text.isascii() else _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)


def national_digits(value: str) -> str | None:
    """For a value that is one phone number and nothing else, its national digits without
    country code or trunk ``0`` ("+49 151 2345678", "0151-234-5678", "0049 151 2345678" and
    "+49 (0)151 2345678" are all ``1512345678``), which every written form of the number holds;
    None for any other value (fewer than 6 such digits, other characters, a date, or "00…"
    written solid, which is as likely an id)."""
    text = _ascii_digits(value.strip())
    if not _ONE_NUMBER.fullmatch(text) or (text[:2] == "00" and not _SEPARATED.search(text)):
        return None
    if DATE_SHAPED.fullmatch(text):
        return None  # "05.12.2026" is a date, not a number
    international = text.startswith(("+", "00"))
    digits = "".join(ch for ch in _TRUNK_IN_INTERNATIONAL.sub(" ", text) if ch.isdigit())
    if international:
        digits = digits.removeprefix("00") if text.startswith("00") else digits
        code = country_code(digits)
        own = digits[len(code):]
        own = own if code in KEEPS_ZERO else own.removeprefix("0")
    elif digits.startswith("0"):  # national: its trunk 0 ("(0151) …" too)
        own = digits[1:]
    else:
        return None  # no "+" and no trunk 0: a count, an id, a year
    return own if len(own) >= 6 else None


def digit_runs(text: str) -> list[str]:
    """The numbers ``text`` writes, each as its digits alone (separators inside dropped):
    "call 0151 234-5678 or (030) 123" gives ``["01512345678", "030123"]``. Linear."""
    return ["".join(ch for ch in run if ch.isdigit()) for run in _DIGIT_RUN.findall(_ascii_digits(text))]

"""obsmem.phones: the digits every written form of one phone number shares (a pure table)."""

from __future__ import annotations

import pytest

from obsmem.phones import country_code, digit_runs, national_digits
from obsmem.storage.forgetting import forget_lines


@pytest.mark.parametrize(("value", "digits"), [
    ("+49 151 2345678", "1512345678"),
    ("0151-234-5678", "1512345678"),
    ("0049 151 2345678", "1512345678"),
    ("+49 (0)151 2345678", "1512345678"),
    ("(0151) 2345678", "1512345678"),
    ("+39 06 1234 5678", "0612345678"),   # Italy keeps its trunk 0
    ("+1 415 555 0100", "4155550100"),
    ("０１５１ ２３４５６７８", "1512345678"),  # full-width digits
    ("0012345678", None),                 # "00…" written solid: as likely an id
    ("12345678", None),                   # no "+" and no trunk 0: a count or an id
    ("2026", None),
    ("05.12.2026", None),                 # a date
    ("05/12/26", None),
    ("+49 151", None),                    # too short to be a number
    ("call me on 0151 2345678", None),    # a text holding a number is not a number
    ("alice@example.com", None),
])
def test_national_digits(value: str, digits: str | None) -> None:
    assert national_digits(value) == digits


def test_country_codes_are_prefix_free() -> None:
    assert [country_code(d) for d in ("14155550100", "74951234567", "491512345678", "3531234567")] == \
        ["1", "7", "49", "353"]


def test_digit_runs_and_the_lines_a_forgotten_number_takes() -> None:
    assert digit_runs("call 0151 234-5678 or (030) 123 on 05.12.2026") == ["01512345678", "030", "123", "05122026"]
    text = "User's phone is 0151 2345678.\nUser flies on 2026-12-05.\nOffice: +49 30 1234567."
    assert forget_lines(text, "+49 151 2345678") == "User flies on 2026-12-05.\nOffice: +49 30 1234567."
    assert forget_lines(text, "2026") == "User's phone is 0151 2345678.\nOffice: +49 30 1234567."  # as ever: a substring

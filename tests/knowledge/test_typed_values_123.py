"""Which phone numbers and email addresses are one value for a tombstone (helper-123): the forms
:func:`typed_values` reads and the rule :func:`same_typed` applies (see its docstring)."""

from __future__ import annotations

import pytest

from obsmem.knowledge.store.values import same_typed, same_value, typed_values


@pytest.mark.parametrize(("text", "found"), [
    ("phone 0151 2345678", {"01512345678"}),
    ("mobile (0151) 234 56 78", {"01512345678"}),
    ("call 0049 151 2345678", {"491512345678"}),
    ("+49 (0)151 2345678", {"491512345678"}),
    ("+٤٩ ١٥١ ٢٣٤٥٦٧٨", {"491512345678"}),           # Arabic-Indic digits
    ("call on 05.12.2026 at 0930", set()),                # a date and a time, not numbers
    ("number 012 or 0123456789012345678", set()),      # too short, too long for a national number
    ("mailto:Old.Alice@Mail.Example", {"old.alice@mail.example"}),
])
def test_typed_values(text: str, found: set[str]) -> None:
    assert typed_values(text) == found


@pytest.mark.parametrize(("first", "second", "same"), [
    ("+49 151 2345678", "0151 2345678", True),
    ("+49 151 2345678", "0151-234-5678", True),
    ("+39 06 1234 5678", "06 1234 5678", True),      # Italy keeps the 0
    ("0151 2345678", "+43 151 2345678", True),       # a national number says no country: every one
    ("+49 151 2345678", "+43 151 2345678", False),   # two countries: two numbers
    ("+49 151 2345678", "+1 151 2345678", False),
    ("0151 2345678", "0151 2345679", False),
    ("0151 2345678", "0171 2345678", False),
    ("0151 2345678", "+49 1151 2345678", False),     # 49 then 1151…: other digits
    ("+49 0151 2345678", "+49 151 2345678", True),   # a trunk 0 kept by mistake
    ("old.alice@mail.example", "OLD.ALICE@MAIL.EXAMPLE", True),
    ("old.alice@mail.example", "oldalice@mail.example", False),
    ("old.alice@mail.example", "old.alice+x@mail.example", False),
])
def test_same_typed(first: str, second: str, same: bool) -> None:
    (a,), (b,) = typed_values(f"phone {first}"), typed_values(f"phone {second}")
    assert same_typed(a, b) is same
    assert same_typed(b, a) is same


def test_a_date_in_a_tombstone_does_not_refuse_other_facts_on_that_date() -> None:
    assert not same_value("meeting bob on 05.12.2026", "dentist on 05.12.2026", near=True)


def test_addresses_that_share_a_key_are_two_values() -> None:
    assert not same_value("their email is old.alice@mail.example", "their email is oldalice@mail.example", near=False)
    assert same_value("their email is old.alice@mail.example", "THEIR EMAIL IS Old.Alice@mail.example", near=False)


def test_a_number_without_plus_is_a_phone_number_only_where_the_text_speaks_of_one() -> None:
    assert typed_values("order 0012345678 was late") == set()
    assert typed_values("account 0123456789") == set()
    assert typed_values("call me on 0151 2345678") == {"01512345678"}
    assert typed_values("order +49 151 2345678") == {"491512345678"}  # a "+" number is one anyway
    assert not same_value("order 0012345678 was late", "order 0012345678 arrived on time", near=True)

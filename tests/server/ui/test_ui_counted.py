"""The inspector counts in the number a count asks for (it said "1 message(s)", "3 call(s)")."""

from __future__ import annotations

import pytest

from obsmem.server.ui.html import counted


@pytest.mark.parametrize(
    ("n", "noun", "shown"),
    [
        (0, "message", "0 messages"),
        (1, "message", "1 message"),
        (2, "linked node", "2 linked nodes"),
        (1, "unobserved message", "1 unobserved message"),
        (None, "failure", "None failures"),  # a value that is not a count keeps the plural
        (True, "call", "True calls"),
    ],
)
def test_counted(n: object, noun: str, shown: str) -> None:
    assert counted(n, noun) == shown

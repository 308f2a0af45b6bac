"""Issue 15, LoCoMo mode: which old notes between people a tight budget keeps.

Hand-written notes only; the public reflector's last step (``fit_participants``) is asked to free
a few tokens and must give up the note that tells least.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pytest

from obsmem.om.text.format import ObservationLine
from obsmem.om.offline.participants import fit_participants
from obsmem.om.offline.rules import estimate_tokens

DAY = date(2023, 5, 8)


@dataclass
class _Entry:
    day: date | None
    line: ObservationLine
    old: bool = True


@pytest.mark.parametrize(
    ("kept", "dropped"),
    [
        # a resolved date is an answer in itself: the event it dates outweighs its ~10 tokens
        ("went hiking with sister last Saturday (meaning May 6, 2023)", "sunset violet clouds orange lake"),
        ("adopted puppy (meaning May 6, 2023)", "quiet mornings garden birdsong"),
        # names and titles outweigh a feeling about nothing named
        ('loved "Becoming Nicole" by Amy Ellis Nutt', "felt so grateful for everything lately"),
    ],
)
def test_one_note_must_go_and_the_one_that_tells_least_goes(kept: str, dropped: str) -> None:
    for notes in ([kept, dropped], [dropped, kept]):
        entries = [_Entry(DAY, ObservationLine(f"Mel: {'; '.join(notes)}."))]
        fitted = fit_participants(entries, excess_tokens=1, count_tokens=estimate_tokens)
        assert [e.line.text for e in fitted] == [f"Mel: {kept}."]


def test_only_the_newest_lines_keep_every_note() -> None:
    # the reflector keeps its recent window in detail; between people only the newest few lines
    # need every note, so a recent line's chatter goes before an older day's event
    entries = [
        _Entry(DAY, ObservationLine("Mel: adopted puppy named Rex (meaning May 6, 2023).")),
        _Entry(DAY, ObservationLine("Ana: felt so grateful for everything lately; bought kayak."), old=False),
        *(
            _Entry(DAY, ObservationLine(f"{name}: felt so grateful for everything lately."), old=False)
            for name in ("Mel", "Ana", "Mel")
        ),
    ]
    fitted = fit_participants(entries, excess_tokens=1, count_tokens=estimate_tokens)
    assert [e.line.text for e in fitted] == [
        "Mel: adopted puppy named Rex (meaning May 6, 2023).",
        "Ana: bought kayak.",
        "Mel: felt so grateful for everything lately.",  # the newest three: whole
        "Ana: felt so grateful for everything lately.",
        "Mel: felt so grateful for everything lately.",
    ]

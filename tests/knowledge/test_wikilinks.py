"""Wikilink extraction: dedupe, first spelling wins, malformed ignored, linear on long input."""

from __future__ import annotations

import pytest

from obsmem.knowledge import extract_wikilinks


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("[[Jane]] fixed it with [[jane]] and the [[deploy fix]]", ["Jane", "deploy fix"]),
        ("[[valid]] [[bad", ["valid"]),
        ("[[bad [[valid]]", ["valid"]),
        ("[[]] [[  ]] [ [x] ]", []),
        ("[[ Project X ]] and [[Project x|the project]]", ["Project X"]),
        ("[[[nested]]]", ["nested"]),
        ("no links here", []),
    ],
)
def test_extract(text: str, names: list[str]) -> None:
    assert extract_wikilinks(text) == names


def test_adversarial_long_inputs_complete() -> None:
    # Each of these makes a naive "find the next ]] from every [[" scan quadratic.
    padding = "x" * 100_000
    assert extract_wikilinks("[[" + padding) == []
    assert extract_wikilinks("[[a" * 100_000) == []
    assert extract_wikilinks(padding + "[[end]]") == ["end"]
    many = "".join(f"[[n{i}]]" for i in range(20_000))
    assert len(extract_wikilinks(many)) == 20_000

"""How many repeated short lines the degenerate-output check explains away (``input_lines``)."""

from __future__ import annotations

import pytest

from obsmem.om.llm.degenerate import _unexplained_lines


@pytest.mark.parametrize(
    ("input_lines", "kept"),
    [
        pytest.param(None, 1, id="no limit: every repeat explained"),
        pytest.param(0, 4, id="no repeats in the input: none explained"),
        pytest.param(1, 3, id="one repeat explained"),
        pytest.param(2, 2, id="two repeats explained"),
        pytest.param(5, 1, id="more allowed than there are"),
    ],
)
def test_repeats_explained_up_to_the_inputs_count(input_lines: int | None, kept: int) -> None:
    lines = _unexplained_lines("ok\nok\n\nok\nok", input_lines)
    assert [line.text for line in lines] == ["ok"] * kept

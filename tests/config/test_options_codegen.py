"""Each option is declared once (a pydantic field); the TypedDict keyword forms are generated.

The block in ``src/obsmem/config.py`` must be what ``tests/config/options_codegen.py`` renders
from the fields now: a field added, removed or retyped without regenerating fails here.
"""

from __future__ import annotations

import typing
from typing import ClassVar, Literal

import pytest
from pydantic import StrictBool, StrictInt, StrictStr
from tests.config import options_codegen

from obsmem import config as config_module
from obsmem.config import (
    MemoryConfig,
    MemoryOptions,
    ObservationConfig,
    ObservationOptions,
    ReflectionConfig,
    ReflectionOptions,
    RetrievalConfig,
    RetrievalOptions,
    _Options,
)


def test_the_generated_keyword_forms_are_up_to_date() -> None:
    source = options_codegen.CONFIG_PATH.read_text()
    assert options_codegen.current_block(source) == options_codegen.render(), (
        "config.py's keyword forms are stale: run `python tests/config/options_codegen.py`"
    )


@pytest.mark.parametrize(
    ("options", "model"),
    [
        (MemoryOptions, MemoryConfig),
        (ObservationOptions, ObservationConfig),
        (ReflectionOptions, ReflectionConfig),
        (RetrievalOptions, RetrievalConfig),
    ],
)
def test_every_keyword_form_resolves_and_lists_the_fields_in_order(
    options: type, model: type[_Options]
) -> None:
    hints = typing.get_type_hints(options, vars(config_module))
    assert list(hints) == list(model.model_fields)


class _SampleSection(_Options):
    SECTION: ClassVar[str] = "sample"

    flag: StrictBool = False
    count: StrictInt | Literal[False] = 3
    tiers: dict[int, str] | None = None
    patterns: tuple[str, ...] = ()
    label: StrictStr | None = None


class _SampleConfig(_Options):
    mode: Literal["a", "b"] = "a"
    sample: _SampleSection = _SampleSection()


def test_a_field_becomes_the_type_its_keyword_accepts() -> None:
    sections = {"_SampleSection"}
    rendered = options_codegen._typed_dict(_SampleSection, sections)
    assert rendered.splitlines()[3:] == [
        "    flag: bool",
        "    count: int | Literal[False]",
        "    tiers: Mapping[int, str] | None",
        "    patterns: Sequence[str]",
        "    label: str | None",
    ]
    top = options_codegen._typed_dict(_SampleConfig, sections)
    assert top.splitlines()[3:] == [
        '    mode: Literal["a", "b"]',
        "    sample: _SampleSection | _SampleSectionOptions",
    ]

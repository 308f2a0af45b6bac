"""Writes the keyword forms (``MemoryOptions``, ``ObservationOptions``, ...) of the config models.

Each option is declared once, as a field of its pydantic model in ``src/obsmem/config.py``. The
``TypedDict`` keyword forms, which let a type checker check ``MemoryConfig(observation={...})``
and a user's own option dicts, are derived from those fields and written into a marked block of
the same module. ``tests/config/test_options_codegen.py`` fails when the block is out of date;
then run::

    python tests/config/options_codegen.py

A field's annotation becomes the type its keyword accepts: the strict types become plain ones
(a type checker cannot tell them apart), ``dict[K, V]`` becomes ``Mapping[K, V]``,
``tuple[X, ...]`` becomes ``Sequence[X]``, and a section model ``S`` becomes ``S | SOptions``.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

from obsmem import config as config_module
from obsmem.config import MemoryConfig

CONFIG_PATH = Path(config_module.__file__)
BEGIN = "# --- generated keyword forms: do not edit; run `python tests/config/options_codegen.py` ---"
END = "# --- end of the generated keyword forms ---"

#: Plain types for the strict ones and the validated idle setting's alias.
_RENAMED = {
    "StrictBool": "bool",
    "StrictInt": "int",
    "StrictFloat": "float",
    "StrictStr": "str",
    "_TTLField": "ActivationTTLSetting",
}

#: Inputs a field's ``mode="before"`` validator accepts beyond its type (``retrieval=True``).
_ALSO_ACCEPTS = {("MemoryConfig", "retrieval"): "bool"}

_DOCSTRINGS = {"MemoryConfig": "The keyword arguments of :class:`MemoryConfig`."}


def _sections(model: type[config_module._Options]) -> list[type[config_module._Options]]:
    """The section models under ``model``, in field order."""
    found: list[type[config_module._Options]] = []
    for field in model.model_fields.values():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, config_module._Options):
            found.append(annotation)
    return found


class _ToAccepted(ast.NodeTransformer):
    def __init__(self, sections: set[str]) -> None:
        self.sections = sections

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.sections:
            return ast.BinOp(left=node, op=ast.BitOr(), right=ast.Name(id=f"{_options_name(node.id)}"))
        return ast.Name(id=_RENAMED.get(node.id, node.id))

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "dict":
            return ast.Subscript(value=ast.Name(id="Mapping"), slice=self.visit(node.slice))
        if (
            isinstance(node.value, ast.Name)
            and node.value.id == "tuple"
            and isinstance(node.slice, ast.Tuple)
            and len(node.slice.elts) == 2
            and isinstance(node.slice.elts[1], ast.Constant)
            and node.slice.elts[1].value is Ellipsis
        ):
            return ast.Subscript(value=ast.Name(id="Sequence"), slice=self.visit(node.slice.elts[0]))
        return self.generic_visit(node)


def _options_name(model_name: str) -> str:
    return model_name.removesuffix("Config") + "Options"


def _accepted(model: type[config_module._Options], name: str, sections: set[str]) -> str:
    source = inspect.get_annotations(model)[name]
    if not isinstance(source, str):  # pragma: no cover - config.py uses postponed annotations
        raise TypeError(f"{model.__name__}.{name}: expected a postponed (string) annotation")
    tree = _ToAccepted(sections).visit(ast.parse(source, mode="eval"))
    accepted = re.sub(r"'([^'\"]*)'", r'"\1"', ast.unparse(tree))  # the project's quotes
    extra = _ALSO_ACCEPTS.get((model.__name__, name))
    return f"{extra} | {accepted}" if extra else accepted


def _typed_dict(model: type[config_module._Options], sections: set[str]) -> str:
    name = model.__name__
    doc = _DOCSTRINGS.get(
        name, f"The keyword form of :class:`{name}`, so a dict section is type-checked too."
    )
    lines = [f"class {_options_name(name)}(TypedDict, total=False):", f'    """{doc}"""', ""]
    for field in model.model_fields:
        lines.append(f"    {field}: {_accepted(model, field, sections)}")
    return "\n".join(lines)


def render() -> str:
    """The generated block, markers included."""
    sections = _sections(MemoryConfig)
    names = {section.__name__ for section in sections}
    classes = [_typed_dict(section, names) for section in sections] + [_typed_dict(MemoryConfig, names)]
    return BEGIN + "\n\n\n" + "\n\n\n".join(classes) + "\n\n\n" + END


def current_block(source: str) -> str:
    """The generated block as it stands in ``source``."""
    start = source.index(BEGIN)
    end = source.index(END, start) + len(END)
    return source[start:end]


def write() -> bool:
    """Rewrite the block in config.py; True when it changed."""
    source = CONFIG_PATH.read_text()
    updated = source.replace(current_block(source), render())
    if updated == source:
        return False
    CONFIG_PATH.write_text(updated)
    return True


if __name__ == "__main__":
    changed = write()
    print(f"{CONFIG_PATH}: {'keyword forms rewritten' if changed else 'already up to date'}")
    sys.exit(0)

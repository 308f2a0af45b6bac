"""The converters sit in the foundation: they import only obsmem.types, obsmem.errors and the stdlib."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import obsmem.convert

_PACKAGE = Path(obsmem.convert.__file__).parent
_ALLOWED_OBSMEM = {"obsmem.types", "obsmem.errors"}
_ALLOWED_STDLIB = {"__future__", "base64", "binascii", "collections", "dataclasses", "json", "typing"}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_converters_import_only_the_foundation_and_the_stdlib() -> None:
    files = sorted(_PACKAGE.glob("*.py"))
    assert {f.name for f in files} >= {
        "__init__.py",
        "_common.py",
        "openai.py",
        "openai_responses.py",
        "anthropic.py",
    }
    for path in files:
        for module in _imports(path):
            if module.startswith("obsmem"):
                assert module in _ALLOWED_OBSMEM or module.startswith("obsmem.convert"), (path.name, module)
            else:
                assert module.split(".")[0] in _ALLOWED_STDLIB, (path.name, module)


def test_importing_the_converters_loads_no_provider_sdk() -> None:
    code = (
        "import sys, obsmem.convert\n"
        "heavy = {'openai', 'anthropic', 'httpx', 'numpy'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr

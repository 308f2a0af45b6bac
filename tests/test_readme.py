"""Every Python example in the README runs as written (against a temporary OBSMEM_HOME), and the
README teaches only the public faces: what it imports and every error it names come from them."""

from __future__ import annotations

import builtins
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import obsmem

README_TEXT = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
EXAMPLES = re.findall(r"```python\n(.*?)```", README_TEXT, re.S)

#: Module paths a user may import; everything else under obsmem is an implementation detail.
PUBLIC_MODULES = re.compile(
    r"obsmem(\.(models(\.\w+)?|embeddings|vectors|knowledge(\.lifecycle)?|storage|clock|integrations\.\w+))?"
)
_IMPORT = re.compile(r"^\s*(?:from\s+(obsmem[\w.]*)\s+import\b|import\s+(obsmem[\w.]*))", re.M)


def test_readme_has_python_examples() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                            check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


def test_readme_imports_only_public_modules() -> None:
    imported = {m.group(1) or m.group(2) for m in _IMPORT.finditer(README_TEXT)}
    assert "obsmem" in imported
    assert sorted(module for module in imported if not PUBLIC_MODULES.fullmatch(module)) == []
    for module in imported:
        importlib.import_module(module)


def test_the_public_module_rule_refuses_internal_paths() -> None:
    assert PUBLIC_MODULES.fullmatch("obsmem.models.testing")
    assert not PUBLIC_MODULES.fullmatch("obsmem.om.text.groups")
    assert not PUBLIC_MODULES.fullmatch("obsmem.storage.sqlite.store")


def test_every_error_the_readme_names_is_exported() -> None:
    named = set(re.findall(r"`(?:obsmem\.)?(\w+Error)`", README_TEXT)) - set(dir(builtins))
    assert {"ObsmemError", "ConfigError", "ModelUnavailableError"} <= named
    assert sorted(name for name in named if name not in obsmem.__all__) == []

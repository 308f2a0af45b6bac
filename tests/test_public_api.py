"""The public face: one sorted __all__, every name importable, and the layering contracts hold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import obsmem


def test_all_is_sorted_and_complete() -> None:
    assert obsmem.__all__ == sorted(obsmem.__all__)
    public = {name for name in vars(obsmem) if not name.startswith("_") or name == "__version__"}
    public -= {"annotations"}
    modules = {name for name in public if type(getattr(obsmem, name)).__name__ == "module"}
    assert set(obsmem.__all__) == public - modules


def test_import_linter_contracts_hold() -> None:
    root = Path(__file__).resolve().parents[1]
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_py_typed_is_shipped() -> None:
    assert (Path(obsmem.__file__).parent / "py.typed").exists()

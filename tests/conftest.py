"""Shared fixtures: every test gets its own OBSMEM_HOME, and async tests run on asyncio."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point obsmem's default data directory at a temporary folder."""
    home = tmp_path / "obsmem-home"
    monkeypatch.setenv("OBSMEM_HOME", str(home))
    yield home

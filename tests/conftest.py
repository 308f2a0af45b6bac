"""Shared fixtures: every test gets its own OBSMEM_HOME, and async tests run on asyncio."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (seeded per test), so CI is reproducible: a
# failure is a bug in the change, not a new random draw. To explore new examples, run with
# HYPOTHESIS_PROFILE=explore (random draws, as Hypothesis does by default); this found three
# latent bugs this session (a step naming `messages`, glued secrets, two unnamed arguments).
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))

# A session-wide throwaway PostgreSQL cluster for every test that asks for one.
pytest_plugins = ["tests.postgres_fixtures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point obsmem's default data directory at a temporary folder."""
    home = tmp_path / "obsmem-home"
    monkeypatch.setenv("OBSMEM_HOME", str(home))
    yield home


# A skipped test proves nothing: unless OBSMEM_ALLOW_SKIPS is set, any skip fails the run.
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if _skipped and not os.environ.get("OBSMEM_ALLOW_SKIPS"):
        print(f"\n{len(_skipped)} test(s) were skipped; skips are not allowed: {_skipped[:5]}")
        session.exitstatus = 1

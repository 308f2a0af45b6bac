"""A store URL a URL parser refuses (hostile review, helper-108).

Before the fix: ``--store 'postgresql://bob:pw@[::1/db'`` (an IPv6 host without its ``]``)
answered with a ``ValueError: Invalid IPv6 URL`` traceback instead of one line.
"""

from __future__ import annotations

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def _refused(result: object, needle: str) -> None:
    """Status 1, one ``error:`` line holding ``needle``, no exception but the exit."""
    assert result.exit_code == 1, result.output  # type: ignore[attr-defined]
    exception = result.exception  # type: ignore[attr-defined]
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1 and needle in errors[0], result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]


def test_a_store_url_with_a_broken_host_is_refused_without_its_password() -> None:
    result = runner.invoke(app, ["threads", "--store", "postgresql://bob:s3cr3t-pw@[::1/db"])
    _refused(result, "store")
    assert "s3cr3t-pw" not in result.output

"""A store URL a URL parser refuses (hostile review, helper-108).

Before the fix: ``--store 'postgresql://bob:pw@[::1/db'`` (an IPv6 host without its ``]``)
answered with a ``ValueError: Invalid IPv6 URL`` traceback instead of one line.
"""

from __future__ import annotations

from typer.testing import CliRunner

from obsmem.cli import app
from tests.cli.hostile_108 import refused as _refused

runner = CliRunner()


def test_a_store_url_with_a_broken_host_is_refused_without_its_password() -> None:
    result = runner.invoke(app, ["threads", "--store", "postgresql://bob:s3cr3t-pw@[::1/db"])
    _refused(result, "store")
    assert "s3cr3t-pw" not in result.output

"""``obsmem keys create --resource``: a resource a live key of another org is bound to is that
org's (see obsmem.server.access), so the operator's command refuses to bind a key of a second
org to it. Both orgs' keys claiming one resource would lock each other out of it: each would
answer 404 on the resource's routes until one of them made its first thread."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from obsmem.cli import app

runner = CliRunner()


def _create(db: Path, org: str, resource: str | None = None) -> object:
    return runner.invoke(app, ["keys", "create", "--org", org, *(["--resource", resource] if resource else []),
                               "--store", str(db)])  # fmt: skip


def test_a_second_org_is_not_bound_to_a_claimed_resource(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    assert _create(db, "acme", "dave").exit_code == 0  # type: ignore[attr-defined]
    refused = _create(db, "globex", "dave")
    assert refused.exit_code == 1, refused.output  # type: ignore[attr-defined]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1 and "'dave'" in errors[0] and "another org" in errors[0], refused.stderr  # type: ignore[attr-defined]
    listed = runner.invoke(app, ["keys", "list", "--store", str(db)])
    assert listed.stdout.count('"org_id"') == 1 and '"globex"' not in listed.stdout, listed.stdout
    # the same org binds more keys to it; the other org gets its own resources and org-wide keys
    for org, resource in (("acme", "dave"), ("globex", "erin"), ("globex", None)):
        made = _create(db, org, resource)
        assert made.exit_code == 0, made.output  # type: ignore[attr-defined]

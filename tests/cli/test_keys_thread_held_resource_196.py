"""``obsmem keys create --resource`` on a resource another org's threads hold (found by helper
196): the command refused a resource a live key of another org is bound to, but not one whose
threads are another org's, which ``POST /api/keys`` refuses (409). The key it made saw nothing
(every route answers 404 for a resource another org's first thread holds), and it claimed the
resource against its owner: the owner's admin key could no longer bind a key to its own resource
(409), and once the owner's threads were deleted, its own keys got 404 there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from typer.testing import CliRunner

from obsmem import Memory
from obsmem.cli import app
from obsmem.server import ServerSettings, Service
from tests.server.live import auth, live_server

runner = CliRunner()


def _create_key(db: Path, org: str, resource: str | None = None, *flags: str) -> object:
    return runner.invoke(app, ["keys", "create", "--org", org, *(["--resource", resource] if resource else []),
                               *flags, "--store", str(db)])  # fmt: skip


def _acme_thread(db: Path) -> None:
    async def run() -> None:
        memory = Memory(f"sqlite:///{db}")
        try:
            await memory.create_thread("alice-1", "alice", org_id="acme")
        finally:
            await memory.aclose()

    asyncio.run(run())


def test_a_key_of_another_org_is_not_bound_to_a_resource_its_threads_hold(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _acme_thread(db)
    refused = _create_key(db, "globex", "alice")
    assert refused.exit_code == 1, refused.output  # type: ignore[attr-defined]
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]  # type: ignore[attr-defined]
    assert len(errors) == 1 and "'alice'" in errors[0] and "another org" in errors[0], refused.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in refused.output  # type: ignore[attr-defined]
    listed = runner.invoke(app, ["keys", "list", "--store", str(db)])
    assert '"globex"' not in listed.stdout, listed.stdout

    # the owner's admin key still binds keys to its own resource, as before the refused command
    admin = _create_key(db, "acme", None, "--admin")
    assert admin.exit_code == 0, admin.output  # type: ignore[attr-defined]
    secret = admin.stdout.strip().splitlines()[-1]  # type: ignore[attr-defined]
    service = Service.open(f"sqlite:///{db}", settings=ServerSettings())
    with live_server(service) as live, httpx.Client(base_url=live.url, timeout=60) as client:
        made = client.post("/api/keys", json={"resource_id": "alice"}, headers=auth(secret))
        assert made.status_code == 201, made.text


def test_the_same_org_and_unheld_resources_still_get_keys(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _acme_thread(db)
    for org, resource in (("acme", "alice"), ("globex", "carol"), ("globex", None)):
        made = _create_key(db, org, resource)
        assert made.exit_code == 0, made.output  # type: ignore[attr-defined]
    # a new database file: no thread to check, the key is made (and the file with it)
    fresh = tmp_path / "new.db"
    assert _create_key(fresh, "acme", "alice").exit_code == 0  # type: ignore[attr-defined]

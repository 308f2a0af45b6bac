"""``obsmem keys`` and ``obsmem serve`` from the command line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
from typer.testing import CliRunner

from obsmem.cli.app import app
from obsmem.server.keys import SQLiteKeyStore

ROOT = Path(__file__).resolve().parents[2]


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    runner = CliRunner()
    made = runner.invoke(app, ["keys", "create", "--org", "acme", "--resource", "alice", "--read-only", "--store", store])
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"om_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", secret)
    key = asyncio.run(SQLiteKeyStore(str(tmp_path / "m.db")).verify(secret))
    assert key is not None and (key.org_id, key.resource_id, key.read_only, key.admin) == ("acme", "alice", True, False)

    admin = runner.invoke(app, ["keys", "create", "--org", "acme", "--admin", "--store", store])
    assert admin.exit_code == 0
    listed = runner.invoke(app, ["keys", "list", "--store", store])
    rows = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert [r["admin"] for r in rows] == [False, True]
    assert secret.split("_", 2)[2] not in listed.stdout and "sha256" not in listed.stdout

    revoked = runner.invoke(app, ["keys", "revoke", key.key_id, "--store", store])
    assert revoked.exit_code == 0
    assert asyncio.run(SQLiteKeyStore(str(tmp_path / "m.db")).verify(secret)) is None
    again = runner.invoke(app, ["keys", "revoke", key.key_id, "--store", store])
    assert again.exit_code == 1
    refused = runner.invoke(app, ["keys", "create", "--org", "acme", "--store", "memory://"])
    assert refused.exit_code == 1


def _serve(args: list[str]) -> tuple[subprocess.Popen[str], str, list[str]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "obsmem", "serve", "--port", "0", *args], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    lines: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:  # ends when the process exits, so a failed start cannot hang
        lines.append(line)
        found = re.search(r"Uvicorn running on (http://\S+)", line)
        if found:
            return process, found.group(1), lines
    raise AssertionError("".join(lines))


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(60)


def test_serve_dev_binds_loopback_and_says_so(tmp_path: Path) -> None:
    process, url, lines = _serve(["--dev", "--host", "0.0.0.0", "--store", f"sqlite:///{tmp_path / 'm.db'}"])
    try:
        assert url.startswith("http://127.0.0.1:")
        text = "".join(lines)
        assert "dev mode" in text and "127.0.0.1 only" in text and "ignoring --host 0.0.0.0" in text
        made = httpx.post(url + "/api/threads", json={"id": "d-1", "resource_id": "r"}, timeout=60)
        assert made.status_code == 201
    finally:
        _stop(process)


def test_serve_without_dev_needs_a_key(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    process, url, lines = _serve(["--store", store])
    try:
        assert "no API keys yet" in "".join(lines)
        refused = httpx.get(url + "/api/threads", timeout=60)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "AuthenticationError"
        secret = CliRunner().invoke(app, ["keys", "create", "--org", "o", "--resource", "r", "--store", store])
        key = secret.stdout.strip().splitlines()[-1]
        listed = httpx.get(url + "/api/threads", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert listed.status_code == 200 and listed.json() == {"resource_id": "r", "threads": []}
    finally:
        _stop(process)


def test_keys_create_refuses_an_empty_org_or_resource_before_touching_the_store(tmp_path: Path) -> None:
    """``keys create --org ''`` (or whitespace, or such a ``--resource``) is refused in one line,
    exit 1, no key, and the store is left alone: no database file appears at a mistyped path.

    On main the key store refused it (no key was made), but only after the store was opened and
    its key table made, so a new ``k.db`` with an empty ``obsmem_api_keys`` was left behind and the
    message named the Python argument: ``AssertionError: store: sqlite …/k.db`` /
    ``error: Invalid org_id: expected a non-empty string of at most 200 characters`` /
    ``assert (2 == 1)`` (two stderr lines, the store already opened)."""
    db = tmp_path / "k.db"
    runner = CliRunner()
    for args, option in (
        (["--org", ""], "--org"), (["--org", "   "], "--org"),
        (["--org", "acme", "--resource", ""], "--resource"),
        (["--org", "acme", "--resource", " \t"], "--resource"),
    ):  # fmt: skip
        result = runner.invoke(app, ["keys", "create", *args, "--store", str(db)])
        assert result.exit_code == 1, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], result.stderr
        assert "Traceback" not in result.output and result.stdout == ""
        assert not db.exists()

"""An org id is one segment of a knowledge scope (``org:<org>``), as a resource id is: an org
named ``acme/resource:alice`` read and wrote alice's knowledge in org acme. ``obsmem keys create
--org 'acme/resource:alice'`` made such a key (only ``--org ''`` was refused) and its knowledge
search answered alice's records (``scope: org:acme/resource:alice``), its ``POST /api/knowledge``
wrote among them. Now ``keys create`` (and ``POST /api/keys`` under ``--dev``) refuses an org or
resource id holding '/', whitespace or control characters, as the REST API refuses such a
resource id, and a key already made so reaches no knowledge (400 naming ``org_id``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from obsmem.cli.app import app
from tests.server.conftest import Env, open_env
from tests.server.live import auth

LOCKER = "Alice's locker code is 4455"
ODD_ORGS = ("acme/resource:alice", "acme/eu", "acme eu", "acme\x07")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    for env in open_env(tmp_path_factory.mktemp("org-scope-139")):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            said = client.post("/api/knowledge", json={"text": LOCKER, "subject": "alice"},
                               headers=auth(env.keys.alice))  # fmt: skip
            assert said.status_code == 201, said.text
        yield env


def made_before(env: Env, org: str) -> str:
    """A key of ``org`` as the key store holds it (made by an earlier ``keys create``)."""
    return str(env.live.call(env.live.service.keys.create(org))[1])


def test_a_key_of_an_org_named_like_a_resource_scope_reaches_no_knowledge(env: Env) -> None:
    key = made_before(env, "acme/resource:alice")
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(key)) as client:
        for method, path, body in (
            ("GET", "/api/knowledge/search?q=locker", None), ("GET", "/api/knowledge/audit", None),
            ("GET", "/api/knowledge/review", None),
            ("POST", "/api/knowledge", {"text": "Alice owes me 500 EUR"}),
        ):  # fmt: skip
            answer = client.request(method, path, json=body)
            # before: 200 / 201 with scope org:acme/resource:alice, the locker code among the hits
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json()["error"]["argument"] == "org_id"
            assert "4455" not in answer.text
    with httpx.Client(base_url=env.url, timeout=60, headers=auth(env.keys.alice)) as client:
        hits = client.get("/api/knowledge/search", params={"q": "owes"}).json()["hits"]
    assert hits == []


def test_keys_create_refuses_an_org_or_resource_id_a_scope_cannot_hold(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    runner = CliRunner()
    for args, option in (
        *((["--org", org], "--org") for org in ODD_ORGS),
        (["--org", "acme", "--resource", "a/b"], "--resource"),
        (["--org", "acme", "--resource", "bo b"], "--resource"),
    ):  # fmt: skip
        result = runner.invoke(app, ["keys", "create", *args, "--store", str(db)])
        # before: exit 0 and a key printed
        assert result.exit_code == 1, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], result.stderr
        assert result.stdout == "" and not db.exists()
    fine = runner.invoke(app, ["keys", "create", "--org", "acme", "--resource", "alice", "--store", str(db)])
    assert fine.exit_code == 0, fine.output


def test_a_dev_server_makes_no_key_of_such_an_org(tmp_path: Path) -> None:
    for env in open_env(tmp_path, dev=True):
        with httpx.Client(base_url=env.url, timeout=60) as client:
            for org in ODD_ORGS:
                refused = client.post("/api/keys", json={"org_id": org})
                # before: 201 and a secret
                assert refused.status_code == 400, refused.text
                assert refused.json()["error"]["argument"] == "org_id"
            assert client.post("/api/keys", json={"org_id": "acme"}).status_code == 201

"""Key management reaches no further than the admin key doing it: an admin key bound to a resource
lists, creates and revokes keys of that resource only, and never mints a broader key; an org admin
key manages every key of its org. Over REST, as a client sees it, and for a key made by the CLI."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from obsmem.cli.app import app
from obsmem.server import ServerSettings, Service
from tests.server.conftest import Env
from tests.server.live import auth, live_server

BOB_SECRET = "BOB-PIN-4321"


@dataclass
class Admins:
    env: Env
    client: httpx.Client
    alice_admin: str  # admin=True, bound to acme/alice, made by the org admin over REST

    def as_(self, key: str, method: str, path: str, **kwargs: object) -> httpx.Response:
        return self.client.request(method, path, headers=auth(key), **kwargs)  # type: ignore[arg-type]

    def key_ids(self, key: str) -> dict[str, str | None]:
        """key id → resource of every key ``key`` lists."""
        listed = self.as_(key, "GET", "/api/keys")
        assert listed.status_code == 200, listed.text
        return {k["key_id"]: k["resource_id"] for k in listed.json()["keys"]}


def key_id(secret: str) -> str:
    return secret.split("_")[1]


@pytest.fixture(scope="module")
def admins(env: Env) -> Iterator[Admins]:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        made = client.post("/api/keys", json={"resource_id": "alice", "admin": True, "label": "alice admin"},
                           headers=auth(env.keys.acme_admin))  # fmt: skip
        assert made.status_code == 201, made.text
        world = Admins(env, client, made.json()["secret"])
        bob = env.keys.bob
        assert world.as_(bob, "POST", "/api/threads", json={"id": "kr-bob"}).status_code == 201
        said = {"format": "openai", "messages": [{"role": "user", "content": f"My PIN is {BOB_SECRET}."}]}
        assert world.as_(bob, "POST", "/api/threads/kr-bob/messages", json=said).status_code == 201
        assert world.as_(world.alice_admin, "GET", "/api/threads/kr-bob").status_code == 404
        yield world


def test_resource_admin_lists_only_its_resources_keys(admins: Admins) -> None:
    keys = admins.env.keys
    listed = admins.key_ids(admins.alice_admin)
    assert set(listed.values()) == {"alice"}, listed
    assert {key_id(keys.alice), key_id(keys.alice_read_only), key_id(admins.alice_admin)} <= set(listed)
    for other in (keys.bob, keys.acme_admin, keys.acme_org, keys.globex):
        assert key_id(other) not in listed


ORG_WIDE: list[dict[str, object]] = [
    {}, {"resource_id": None}, {"resource_id": None, "admin": True}, {"org_id": "acme", "resource_id": None},
]


@pytest.mark.parametrize("body", ORG_WIDE)
def test_resource_admin_cannot_mint_an_org_wide_key(admins: Admins, body: dict[str, object]) -> None:
    before = admins.key_ids(admins.env.keys.acme_admin)
    refused = admins.as_(admins.alice_admin, "POST", "/api/keys", json=body)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["type"] == "PermissionDeniedError"
    assert "secret" not in refused.text
    assert admins.key_ids(admins.env.keys.acme_admin) == before


@pytest.mark.parametrize("admin", [False, True])
def test_resource_admin_cannot_mint_a_key_for_another_resource(admins: Admins, admin: bool) -> None:
    before = admins.key_ids(admins.env.keys.acme_admin)
    for resource in ("bob", "nobody-yet"):
        body = {"resource_id": resource, "admin": admin}
        refused = admins.as_(admins.alice_admin, "POST", "/api/keys", json=body)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "PermissionDeniedError"
    other_org = {"org_id": "globex", "resource_id": "alice"}
    globex = admins.as_(admins.alice_admin, "POST", "/api/keys", json=other_org)
    assert globex.status_code == 403, globex.text
    assert admins.key_ids(admins.env.keys.acme_admin) == before


def test_resource_admin_mints_keys_for_its_own_resource(admins: Admins) -> None:
    admin = admins.alice_admin
    assert admins.as_(admin, "POST", "/api/threads", json={"id": "kr-alice"}).status_code == 201
    own = {"org_id": "acme", "resource_id": "alice", "read_only": True}
    made = admins.as_(admin, "POST", "/api/keys", json=own)
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["org_id"], body["resource_id"], body["read_only"]) == ("acme", "alice", True)
    minted = made.json()["secret"]
    assert admins.as_(minted, "GET", "/api/threads/kr-alice").status_code == 200
    assert admins.as_(minted, "GET", "/api/threads/kr-bob/messages").status_code == 404

    # an admin key it mints is confined the same way
    second = admins.as_(admin, "POST", "/api/keys", json={"resource_id": "alice", "admin": True})
    assert second.status_code == 201, second.text
    deputy = second.json()["secret"]
    assert set(admins.key_ids(deputy).values()) == {"alice"}
    assert admins.as_(deputy, "POST", "/api/keys", json={"resource_id": None}).status_code == 403
    assert key_id(minted) in admins.key_ids(deputy)


def test_resource_admin_cannot_revoke_keys_beyond_its_resource(admins: Admins) -> None:
    keys = admins.env.keys
    missing = admins.as_(admins.alice_admin, "DELETE", "/api/keys/0123456789abcdef")
    assert missing.status_code == 404
    for other in (keys.bob, keys.acme_org, keys.acme_admin, keys.globex):
        refused = admins.as_(admins.alice_admin, "DELETE", f"/api/keys/{key_id(other)}")
        # exactly like a key that does not exist: nothing tells the id is live
        error, unknown = refused.json()["error"], missing.json()["error"]
        assert (refused.status_code, error["type"]) == (404, unknown["type"])
        same = unknown["message"].replace("0123456789abcdef", key_id(other))
        assert error["message"] == same
        assert admins.as_(other, "GET", "/api/threads/kr-bob").status_code != 401  # still live
    # bob's key still works, and still reads bob's thread
    page = admins.as_(keys.bob, "GET", "/api/threads/kr-bob/messages")
    assert page.status_code == 200 and BOB_SECRET in page.text

    made = admins.as_(admins.alice_admin, "POST", "/api/keys", json={"resource_id": "alice", "label": "temp"})
    temp = made.json()["key_id"]
    revoked = admins.as_(admins.alice_admin, "DELETE", f"/api/keys/{temp}")
    assert revoked.status_code == 200 and revoked.json() == {"key_id": temp, "revoked": True}
    assert admins.as_(made.json()["secret"], "GET", "/api/threads").status_code == 401


def test_org_admin_still_manages_every_key_of_its_org(admins: Admins) -> None:
    keys = admins.env.keys
    org_admin = keys.acme_admin
    listed = admins.key_ids(org_admin)
    assert {key_id(k) for k in (keys.alice, keys.bob, keys.acme_org, admins.alice_admin)} <= set(listed)
    assert key_id(keys.globex) not in listed

    wide = admins.as_(org_admin, "POST", "/api/keys", json={"resource_id": None})
    assert wide.status_code == 201 and wide.json()["resource_id"] is None
    page = admins.as_(wide.json()["secret"], "GET", "/api/threads/kr-bob/messages")
    assert page.status_code == 200 and BOB_SECRET in page.text

    bobs = admins.as_(org_admin, "POST", "/api/keys", json={"resource_id": "bob"})
    assert bobs.status_code == 201
    assert admins.as_(org_admin, "DELETE", f"/api/keys/{bobs.json()['key_id']}").status_code == 200
    assert admins.as_(org_admin, "DELETE", f"/api/keys/{wide.json()['key_id']}").status_code == 200
    assert admins.as_(org_admin, "POST", "/api/keys", json={"org_id": "globex"}).status_code == 403
    assert admins.as_(org_admin, "DELETE", f"/api/keys/{key_id(keys.globex)}").status_code == 404


def test_a_resource_admin_key_made_by_the_cli_is_confined_alike(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    runner = CliRunner()

    def create(*args: str) -> str:
        made = runner.invoke(app, ["keys", "create", "--org", "acme", *args, "--store", store])
        assert made.exit_code == 0, made.output
        return made.stdout.strip().splitlines()[-1]

    resource_admin = create("--resource", "alice", "--admin")
    bob = create("--resource", "bob")
    service = Service.open(store, settings=ServerSettings(), max_turn_wait=None)
    with live_server(service) as live, httpx.Client(base_url=live.url, timeout=60) as client:
        as_admin = auth(resource_admin)
        listed = client.get("/api/keys", headers=as_admin).json()["keys"]
        assert [k["key_id"] for k in listed] == [key_id(resource_admin)]
        assert client.post("/api/keys", json={"resource_id": None}, headers=as_admin).status_code == 403
        assert client.delete(f"/api/keys/{key_id(bob)}", headers=as_admin).status_code == 404
        assert client.get("/api/threads", headers=auth(bob)).status_code == 200

"""A deleted resource leaves nothing another resource can read (helper-123's hostile review).

Deleting alice's resource purges her knowledge and leaves one ``scope-purged`` event at the org
(the org's audit of the deletion: who, when, how many rows, the scope named by digest). Bob's
key (another resource of the org) read that event in ``GET /api/knowledge/audit``, since a
resource's audit log holds its ancestors' events: he learnt that alice's data was deleted, when,
by which key, and how many nodes, records and events she had; the digest is of
``org:acme/resource:alice``, so anyone who can guess the id can confirm whose it was. A
resource's purge event is now shown only from the org it is stored at (the org key, or an org key
naming that resource), never from another resource's scope. (A thread's deletion stays at its
resource, seen by that resource's keys and threads: one user's own history.)
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.values import forgotten_digest
from obsmem.server import ServerSettings, Service, create_app

ALICE = "org:acme/resource:alice"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestClient, dict[str, str]]]:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    service = Service.open(f"sqlite:///{tmp_path / 'm.db'}", settings=ServerSettings(mcp=False), knowledge=knowledge)
    with TestClient(create_app(service)) as client:
        portal = client.portal
        assert portal is not None
        keys = {
            name: portal.call(partial(service.keys.create, org, resource_id=res))[1]
            for name, org, res in (("alice", "acme", "alice"), ("bob", "acme", "bob"), ("org", "acme", None))
        }
        yield client, {name: f"Bearer {key}" for name, key in keys.items()}


def audit(client: TestClient, key: str, **params: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    after = None
    while True:
        page = client.get("/api/knowledge/audit", headers={"Authorization": key},
                          params={"limit": 2, **params, **({"after": after} if after else {})})
        assert page.status_code == 200, page.text
        events.extend(page.json()["events"])
        after = page.json()["next_cursor"]
        if after is None:
            return events


def test_another_resources_deletion_is_not_in_a_resource_keys_audit_log(
        world: tuple[TestClient, dict[str, str]]) -> None:
    client, keys = world
    for who, fact in (("alice", "Alice keeps her bike in the Heron garage"), ("bob", "Bob plays the cello")):
        made = client.post("/api/knowledge", headers={"Authorization": keys[who]}, json={"text": fact})
        assert made.status_code == 201, made.text
    for thread in ("b-1", "b-2"):
        assert client.post("/api/threads", headers={"Authorization": keys["bob"]}, json={"id": thread}).status_code == 201
    assert client.delete("/api/threads/b-2", headers={"Authorization": keys["bob"]}).status_code == 200
    deleted = client.delete("/api/resources/alice", headers={"Authorization": keys["alice"]})
    assert deleted.status_code == 200, deleted.text

    bobs = audit(client, keys["bob"])
    about_alice = [e for e in bobs if e["subject_id"] == forgotten_digest(ALICE) or "alice" in str(e)]
    assert about_alice == []
    # bob's own history is all there, his deleted thread's purge with it
    assert {e["action"] for e in bobs} >= {"node-created", "record-created"}
    assert any(e["action"] == "scope-purged" and e["subject_id"] == forgotten_digest("org:acme/resource:bob/thread:b-2")
               for e in bobs), bobs
    # the org's audit still records the deletion, by digest
    purged = [e for e in audit(client, keys["org"]) if e["action"] == "scope-purged"]
    assert [e["subject_id"] for e in purged] == [forgotten_digest(ALICE)]

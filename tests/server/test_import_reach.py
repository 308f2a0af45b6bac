"""An import writes knowledge no further than the key doing it reaches: a resource key writes its
resource's rows (and its threads'), and brings back its org's rows only as the store already holds
them; an org key writes its org's. Anything else is refused (403) and nothing is written. Over
REST, as a client sees it: export, delete, edit the file, import."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.server.conftest import Env
from tests.server.live import auth

ORG_FACT = "The acme office is in Lyon"
Item = dict[str, Any]


@dataclass
class World:
    env: Env
    client: httpx.Client

    def as_(self, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, headers=auth(key), **kwargs)

    @property
    def org(self) -> str:
        return self.env.keys.acme_org

    def resource_key(self, resource: str) -> str:
        live = self.env.live
        return str(live.call(live.service.keys.create("acme", resource_id=resource))[1])

    def search(self, key: str, text: str) -> list[dict[str, Any]]:
        found = self.as_(key, "GET", "/api/knowledge/search", params={"q": text, "limit": 100})
        assert found.status_code == 200, found.text
        return [hit for hit in found.json()["hits"] if text in hit["text"]]

    def audit(self, key: str) -> list[str]:
        page = self.as_(key, "GET", "/api/knowledge/audit", params={"limit": 500})
        assert page.status_code == 200, page.text
        return [event["id"] for event in page.json()["events"]]

    def exported_and_deleted(self, resource: str) -> tuple[str, str]:
        """A key of a new resource of acme with a thread and a fact, the resource's export, and the
        resource deleted (so importing the export again is allowed)."""
        key = self.resource_key(resource)
        assert self.as_(key, "POST", "/api/threads", json={"id": f"{resource}-t"}).status_code == 201
        said = {"format": "openai", "messages": [{"role": "user", "content": f"I am {resource}."}]}
        assert self.as_(key, "POST", f"/api/threads/{resource}-t/messages", json=said).status_code == 201
        fact = {"text": f"{resource} likes tea"}
        assert self.as_(key, "POST", "/api/knowledge", json=fact).status_code == 201
        exported = self.as_(key, "GET", f"/api/resources/{resource}/export")
        assert exported.status_code == 200, exported.text
        assert self.as_(key, "DELETE", f"/api/resources/{resource}").status_code == 200
        return key, exported.text


@pytest.fixture(scope="module")
def world(env: Env) -> Iterator[World]:
    with httpx.Client(base_url=env.url, timeout=60) as client:
        world = World(env, client)
        # the org's shared rows every export of one of its resources carries: a node, a verified
        # record, a rejected candidate with its tombstone, and their audit events
        assert world.as_(world.org, "POST", "/api/knowledge", json={"text": ORG_FACT}).status_code == 201
        guess = {"text": "Acme sells anvils", "candidate": True}
        candidate = world.as_(world.org, "POST", "/api/knowledge", json=guess)
        assert candidate.status_code == 201, candidate.text
        rejected = world.as_(world.org, "POST", f"/api/knowledge/review/{candidate.json()['id']}/reject",
                             json={"tombstone": True, "reason": "wrong"})  # fmt: skip
        assert rejected.status_code == 200, rejected.text
        yield world


def lines(export: str) -> list[Item]:
    return [json.loads(line) for line in export.splitlines() if line.strip()]


def edited(export: str, edit: Callable[[list[Item]], None]) -> str:
    """The export with its items edited by ``edit`` and the end line's counts made to match."""
    header, *items, end = lines(export)
    edit(items)
    counts: dict[str, int] = {}
    for item in items:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    end["data"]["counts"] = counts
    return "\n".join(json.dumps(line) for line in (header, *items, end))


_OTHER_IDS: dict[str, str] = {}


def other_id(row_id: str) -> str:
    """A new id for ``row_id``, the same each time (ids made in one millisecond share a prefix)."""
    return _OTHER_IDS.setdefault(row_id, f"{row_id[:-6]}Z{len(_OTHER_IDS):05d}")


def planted(export: str, resource: str, text: str) -> str:
    """The export plus a new org record: a copy of the resource's own record, moved to org:acme."""

    def plant(items: list[Item]) -> None:
        scope = f"org:acme/resource:{resource}"
        own = next(i for i in items if i["kind"] == "knowledge_record" and i["data"]["scope"] == scope)
        data = {**own["data"], "id": other_id(own["data"]["id"]), "scope": "org:acme", "text": text}
        items.append({"kind": "knowledge_record", "data": data})

    return edited(export, plant)


def refused(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["error"]["type"] == "PermissionDeniedError"


def test_a_resource_key_cannot_plant_an_org_record(world: World) -> None:
    key, export = world.exported_and_deleted("dana")
    audit_before = world.audit(world.org)
    plant = planted(export, "dana", "PLANTED by dana")
    refused(world.as_(key, "POST", "/api/resources/import", json={"export": plant}))
    # nothing was written: not the org record, not the resource's own knowledge or threads
    assert world.search(world.org, "PLANTED") == []
    assert world.search(key, "PLANTED") == []
    assert world.search(key, "dana likes tea") == []
    assert world.as_(key, "GET", "/api/threads/dana-t").status_code == 404
    assert world.audit(world.org) == audit_before
    # ... so the unmodified export still imports whole
    assert world.as_(key, "POST", "/api/resources/import", json={"export": export}).status_code == 201
    assert [hit["scope"] for hit in world.search(key, "dana likes tea")] == ["org:acme/resource:dana"]


def test_a_resource_key_reimports_its_own_export_with_the_unchanged_org_rows(world: World) -> None:
    key, export = world.exported_and_deleted("erin")
    org_rows = {i["kind"] for i in lines(export) if i.get("data", {}).get("scope") == "org:acme"}
    assert org_rows >= {"knowledge_node", "knowledge_record", "knowledge_tombstone", "knowledge_activity"}
    audit_before = world.audit(world.org)
    imported = world.as_(key, "POST", "/api/resources/import", json={"export": export})
    assert imported.status_code == 201, imported.text
    assert world.as_(key, "GET", "/api/threads/erin-t").status_code == 200
    assert [hit["scope"] for hit in world.search(key, "erin likes tea")] == ["org:acme/resource:erin"]
    assert [hit["scope"] for hit in world.search(key, ORG_FACT)] == ["org:acme"]  # kept, not doubled
    assert world.audit(world.org) == audit_before


def test_an_org_key_imports_org_rows(world: World) -> None:
    _, export = world.exported_and_deleted("fay")
    imported = world.as_(world.org, "POST", "/api/resources/import",
                         json={"export": planted(export, "fay", "Written by the acme org key")})  # fmt: skip
    assert imported.status_code == 201, imported.text
    assert [hit["scope"] for hit in world.search(world.org, "Written by the acme org key")] == ["org:acme"]
    assert world.as_(world.org, "GET", "/api/threads/fay-t").status_code == 200


def test_a_resource_key_cannot_change_an_org_record(world: World) -> None:
    key, export = world.exported_and_deleted("gus")

    def rewrite(items: list[Item]) -> None:
        for item in items:
            if item["kind"] == "knowledge_record" and item["data"]["text"] == ORG_FACT:
                item["data"]["text"] = "The acme office moved to gus's flat"

    refused(world.as_(key, "POST", "/api/resources/import", json={"export": edited(export, rewrite)}))
    assert world.search(world.org, "gus's flat") == []
    assert [hit["text"] for hit in world.search(world.org, ORG_FACT)] == [ORG_FACT]
    assert world.as_(key, "GET", "/api/threads/gus-t").status_code == 404


def rescoped(export: str, old: str, new: str, text: str) -> str:
    """The export with its knowledge scope and every row of ``old`` moved to ``new`` (new ids,
    so nothing the store holds is named), the moved records saying ``text``."""
    header, *_ = lines(export)
    header["knowledge_scope"] = header["knowledge_scope"].replace(old, new)

    def move(items: list[Item]) -> None:
        for item in items:
            data = item["data"]
            if item["kind"].startswith("knowledge_") and data["scope"].startswith(old):
                data.update(id=other_id(data["id"]), scope=new + data["scope"][len(old) :])
                if item["kind"] == "knowledge_record":
                    data.update(node_id=other_id(data["node_id"]), text=text)

    body = edited(export, move).splitlines()
    return "\n".join([json.dumps(header), *body[1:]])


def test_a_resource_key_cannot_write_into_another_resource(world: World) -> None:
    key, export = world.exported_and_deleted("hal")
    bob = world.env.keys.bob
    into_bob = rescoped(export, "org:acme/resource:hal", "org:acme/resource:bob", "PLANTED for bob")
    refused(world.as_(key, "POST", "/api/resources/import", json={"export": into_bob}))
    assert world.search(bob, "PLANTED for bob") == []
    assert world.as_(key, "GET", "/api/threads/hal-t").status_code == 404


def test_an_org_key_cannot_write_into_another_org(world: World) -> None:
    _, export = world.exported_and_deleted("ivy")
    into_globex = rescoped(export, "org:acme", "org:globex", "PLANTED for globex")
    refused(world.as_(world.org, "POST", "/api/resources/import", json={"export": into_globex}))
    assert world.search(world.env.keys.globex, "PLANTED for globex") == []
    assert world.as_(world.org, "GET", "/api/threads/ivy-t").status_code == 404

"""A resource key reviews and audits what capture wrote in its own threads, and nothing else.

Found by a hostile review: capture writes its candidates at thread scope
(``org:acme/resource:alice/thread:<id>``), but the review queue listed only the candidates
stored at the key's scope itself, a decision looked the record up from the resource scope
(which never sees a thread below it), and the audit log covered the scope and its ancestors
only. So alice's key could neither see, approve, reject, edit nor audit the candidates the
capture agent wrote from her own turns, though knowledge_api promises "a resource key decides
only on its resource's (and its threads') records" and the README's audit log shows "every
knowledge change in the scope".

On main: alice's ``GET /api/knowledge/review`` did not list her thread's captured candidate,
``POST /api/knowledge/review/<id>/approve`` answered 404 "Knowledge record '…' is not visible
from this key.", ``GET /api/knowledge/audit`` held no event about it, and
``/ui/knowledge/review`` did not show it (the test failed at its first assertion,
``alice's queue lists her threads' candidates``).

Negative controls: bob (another resource of acme), ``alice2`` (a sibling resource whose id
starts with alice's), globex's carol, and the org key (which decides at the org's own scope
only) see and decide on none of alice's thread records; alice sees none of theirs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from obsmem import MemoryConfig
from obsmem.knowledge import Knowledge, Record
from obsmem.server import ServerSettings, Service, create_app

THREADS = {"alice": ("t-a1", "t-a2", "t-a3"), "alice2": ("t-x1",), "bob": ("t-b1",)}
SAID = {
    "t-a1": "My dog is called Kiki and she loves the beach.",
    "t-a2": "My sister Maria lives in Lisbon and works as a nurse.",
    "t-a3": "My favourite drink is green tea with honey.",
    "t-x1": "My cat is called Zorro and he hates the rain.",
    "t-b1": "My brother Paolo lives in Turin and plays the cello.",
}


@dataclass
class World:
    client: TestClient
    service: Service
    knowledge: Knowledge
    keys: dict[str, str]
    captured: dict[str, list[Record]]  # thread id -> the candidates capture wrote there

    def call(self, coroutine: Any) -> Any:
        return self.client.portal.call(lambda: coroutine)  # type: ignore[union-attr]

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[who]}"}

    def ui(self, who: str) -> TestClient:
        self.client.cookies.clear()
        self.client.cookies.set("obsmem_ui_key", self.keys[who])
        return self.client

    def queue(self, who: str) -> set[str]:
        page = self.client.get("/api/knowledge/review", headers=self.headers(who), params={"limit": 500})
        assert page.status_code == 200, page.text
        return {r["id"] for r in page.json()["records"]}

    def audited(self, who: str) -> set[str]:
        page = self.client.get("/api/knowledge/audit", headers=self.headers(who), params={"limit": 500})
        assert page.status_code == 200, page.text
        return {e["subject_id"] for e in page.json()["events"]}


def _turn(world: World, who: str, thread: str, text: str) -> None:
    made = world.client.post("/api/threads", headers=world.headers(who), json={"id": thread})
    assert made.status_code in (200, 201), made.text
    began = world.client.post(f"/api/threads/{thread}/turns", headers=world.headers(who),
                              json={"format": "openai", "messages": [{"role": "user", "content": text}]})  # fmt: skip
    assert began.status_code == 201, began.text
    ended = world.client.post(f"/api/turns/{began.json()['turn_id']}/end", headers=world.headers(who),
                              json={"messages": [{"role": "assistant", "parts": [{"type": "text", "text": "Noted."}]}]})  # fmt: skip
    assert ended.status_code == 200, ended.text
    memory = world.service.memory
    world.client.portal.call(memory.observe, thread)  # type: ignore[union-attr]
    world.client.portal.call(memory.settled)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root: Path = tmp_path_factory.mktemp("review-threads")
    knowledge = Knowledge.sqlite(root / "k.db")
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False})
    service = Service.open(f"sqlite:///{root / 'm.db'}", settings=ServerSettings(mcp=False), knowledge=knowledge,
                           config=config)  # fmt: skip
    with TestClient(create_app(service)) as client:
        portal = client.portal
        assert portal is not None
        keys = {
            name: portal.call(partial(service.keys.create, org, resource_id=res))[1]
            for name, org, res in (("alice", "acme", "alice"), ("alice2", "acme", "alice2"), ("bob", "acme", "bob"),
                                   ("carol", "globex", "carol"), ("org", "acme", None))
        }  # fmt: skip
        world = World(client, service, knowledge, keys, {})
        for who, threads in THREADS.items():
            for thread in threads:
                _turn(world, who, thread, SAID[thread])
                scope = f"org:acme/resource:{who}/thread:{thread}"
                found = world.call(knowledge.review.pending(scope, within=True, limit=100)).items
                assert found and all(r.scope == scope for r in found), f"capture wrote no candidate in {thread}"
                world.captured[thread] = found
        yield world


def _ids(world: World, *threads: str) -> set[str]:
    return {r.id for thread in threads for r in world.captured[thread]}


def _token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def test_a_resource_key_reviews_and_audits_its_threads_captured_candidates(world: World) -> None:
    alice_own, alice2_own, bob_own = _ids(world, "t-a1", "t-a2", "t-a3"), _ids(world, "t-x1"), _ids(world, "t-b1")

    # -- the queue -------------------------------------------------------------------------------
    queue = world.queue("alice")
    assert alice_own <= queue, "alice's queue lists her threads' candidates"
    assert not queue & (alice2_own | bob_own), "alice's queue holds another resource's candidates"
    assert bob_own <= world.queue("bob") and not world.queue("bob") & alice_own
    assert alice2_own <= world.queue("alice2") and not world.queue("alice2") & alice_own
    assert not world.queue("carol") & (alice_own | bob_own | alice2_own)
    assert not world.queue("org") & alice_own  # the org key's queue is the org's own scope
    named = world.client.get("/api/knowledge/review", headers=world.headers("org"), params={"resource_id": "alice"})
    assert alice_own <= {r["id"] for r in named.json()["records"]}  # ... or the resource it names
    paged = world.client.get("/api/knowledge/review", headers=world.headers("alice"), params={"limit": 1})
    assert len(paged.json()["records"]) == 1 and paged.json()["next_cursor"] is not None  # still paged

    # -- decisions: approve, reject, edit --------------------------------------------------------
    first, second = world.captured["t-a1"][0], world.captured["t-a2"][0]
    for who in ("bob", "alice2", "carol", "org"):
        for action, body in (("approve", {}), ("reject", {"tombstone": True}), ("edit", {"text": "planted"})):
            refused = world.client.post(f"/api/knowledge/review/{first.id}/{action}", headers=world.headers(who),
                                        json=body)  # fmt: skip
            assert refused.status_code == 404, (who, action, refused.text)
    for bobs in bob_own | alice2_own:
        refused = world.client.post(f"/api/knowledge/review/{bobs}/approve", headers=world.headers("alice"), json={})
        assert refused.status_code == 404, refused.text
    assert world.queue("alice") >= alice_own  # nothing changed by the refusals

    approved = world.client.post(f"/api/knowledge/review/{first.id}/approve", headers=world.headers("alice"), json={})
    assert approved.status_code == 200, approved.text
    assert approved.json()["trust"] == "verified" and approved.json()["scope"] == first.scope
    edited = world.client.post(f"/api/knowledge/review/{second.id}/edit", headers=world.headers("alice"),
                               json={"text": "their sister Maria lives in Porto"})  # fmt: skip
    assert edited.status_code == 200, edited.text
    assert edited.json()["scope"] == second.scope and edited.json()["trust"] == "verified"
    assert first.id not in world.queue("alice") and second.id not in world.queue("alice")

    # -- the audit log ---------------------------------------------------------------------------
    audited = world.audited("alice")
    assert {first.id, second.id, edited.json()["id"]} <= audited, "alice's audit log covers her threads"
    assert not audited & (bob_own | alice2_own)
    for who in ("bob", "alice2", "carol"):
        assert not world.audited(who) & (alice_own | {edited.json()["id"]}), who
    assert not world.audited("org") & alice_own
    assert bob_own <= world.audited("bob")


def test_the_inspector_reviews_and_audits_a_resources_threads(world: World) -> None:
    target = world.captured["t-a3"][0]
    alice_all, others = _ids(world, "t-a1", "t-a2", "t-a3"), _ids(world, "t-b1", "t-x1")
    html = world.ui("alice").get("/ui/knowledge/review").text
    assert f'data-record="{target.id}"' in html, "the inspector's queue lists alice's thread candidate"
    assert not any(f'data-record="{other}"' in html for other in others)
    bob_html = world.ui("bob").get("/ui/knowledge/review").text
    assert not any(f'data-record="{mine}"' in bob_html for mine in alice_all)

    bob_ui = world.ui("bob")
    refused = bob_ui.post(f"/ui/knowledge/review/{target.id}/reject",
                          data={"csrf_token": _token(bob_ui.get("/ui/knowledge/review").text)}, follow_redirects=False)  # fmt: skip
    assert refused.status_code == 404, refused.text
    assert target.id in world.queue("alice")
    alice_ui = world.ui("alice")
    token = _token(alice_ui.get("/ui/knowledge/review").text)
    decided = alice_ui.post(f"/ui/knowledge/review/{target.id}/reject", data={"csrf_token": token, "reason": "wrong"},
                            follow_redirects=False)  # fmt: skip
    assert decided.status_code == 303, decided.text
    assert target.id not in world.queue("alice")
    stored = world.call(world.knowledge.store.load_record(target.id))
    assert stored is not None and stored.trust.value == "rejected"

    audit = world.ui("alice").get("/ui/knowledge/audit").text
    assert target.id in audit, "the inspector's audit log shows the decision on alice's thread record"
    assert not any(other in audit for other in others)
    bob_audit = world.ui("bob").get("/ui/knowledge/audit").text
    assert not any(mine in bob_audit for mine in alice_all)

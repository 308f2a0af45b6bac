"""A resource the gateway made from a request's ``user`` ('tenant/42': the gateway takes any
string) can be named in every REST route that takes a resource id, its '/' sent as ``%2F``:
``GET /api/resources/tenant%2F42/usage``, ``…/export``, ``POST …/forget`` and
``DELETE /api/resources/tenant%2F42``
(the user's "delete everything about me"). Before, each answered 404 'Not Found' (the decoded '/'
matched no route), so such a user's data could be neither exported nor erased over REST.

Every other key still gets the 404 any resource it may not see gets; a trailing '/' the client
wrote is still redirected to the route without it (924660e); an id ending in a route's own word
('a/usage', 'x/export') names that resource, not a shorter one."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from tests.server.conftest import Env, open_env
from tests.server.live import auth

SECRET = "RES-SLASH-SECRET-5519"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("slash-resource-147"))


def said(client: httpx.Client, key: str, thread_id: str, user: str, text: str) -> None:
    answer = client.post(
        "/v1/chat/completions", headers={**auth(key), "X-Obsmem-Thread": thread_id},
        json={"model": "m", "user": user, "messages": [{"role": "user", "content": text}]},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text


RESOURCES = ["tenant/42", "a/usage", "x/export", "trailing/", "/lead", "pct%2Fliteral", "sp ace?#frag", "ünï/cødé"]


@pytest.mark.parametrize("resource", RESOURCES)
def test_a_gateway_resource_with_a_slash_is_exported_and_deleted_over_rest(env: Env, resource: str) -> None:
    org = auth(env.keys.acme_org)
    thread_id = "res-" + quote(resource, safe="")
    base = "/api/resources/" + quote(resource, safe="")
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.acme_org, thread_id, resource, f"My code is {SECRET}.")
        usage = client.get(base + "/usage", headers=org)
        assert usage.status_code == 200, usage.text  # was 404 'Not Found'
        assert usage.json()["resource_id"] == resource
        assert [row["thread_id"] for row in usage.json()["per_thread"]] == [thread_id]
        exported = client.get(base + "/export", headers=org)
        assert exported.status_code == 200, exported.text
        assert SECRET in exported.text
        # another org's key, and a key bound to another resource of the same org: not found
        for other in (env.keys.globex, env.keys.alice, env.keys.bob):
            for method, path in (("GET", base + "/usage"), ("GET", base + "/export"), ("DELETE", base),
                                 ("POST", base + "/forget")):  # fmt: skip
                body = {"value": SECRET} if method == "POST" else None
                hidden = client.request(method, path, headers=auth(other), json=body)
                assert hidden.status_code == 404, (other, method, path, hidden.text)
                assert hidden.json()["error"]["type"] == "ResourceNotFoundError"
        assert SECRET in client.get(base + "/export", headers=org).text  # the others' forgets reached nothing
        forgotten = client.post(base + "/forget", headers=org, json={"value": SECRET})
        assert forgotten.status_code == 200, forgotten.text
        assert forgotten.json()["resource_id"] == resource
        assert SECRET not in client.get(base + "/export", headers=org).text
        deleted = client.delete(base, headers=org)
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["resource_id"] == resource
        assert client.get("/api/threads/" + quote(thread_id, safe=""), headers=org).status_code == 404
        assert client.get(base + "/export", headers=org).status_code == 404


def test_a_shorter_resource_is_not_reached_through_a_longer_id(env: Env) -> None:
    """'keep' stays whole when 'keep/export' (another resource) is deleted, and the other way round."""
    org = auth(env.keys.acme_org)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.acme_org, "short-1", "keep", "short resource")
        said(client, env.keys.acme_org, "long-1", "keep/export", "long resource")
        long = "/api/resources/" + quote("keep/export", safe="")
        assert client.delete(long, headers=org).json()["resource_id"] == "keep/export"
        kept = client.get("/api/resources/keep/export", headers=org)
        assert kept.status_code == 200, kept.text
        assert "short resource" in kept.text
        assert client.delete("/api/resources/keep", headers=org).json()["resource_id"] == "keep"


def test_trailing_slashes_on_resource_routes_still_redirect(env: Env) -> None:
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60, follow_redirects=True) as client:
        said(client, env.keys.alice, "ts-res-1", "alice", "hello there")
        for path in ("/api/resources/alice/usage/", "/api/resources/alice/export/"):
            answer = client.get(path, headers=alice)
            assert answer.status_code == 200, (path, answer.text)
        # a raw '/' the client wrote is the path's: '/api/resources/alice/' is resource 'alice'
        deleted = client.delete("/api/resources/alice/", headers=alice)
        assert deleted.status_code == 200, deleted.text
        assert deleted.json()["resource_id"] == "alice"


@pytest.mark.parametrize("thread_id", ["chat/messages", "u/1/context", "x/usage"])
def test_every_thread_route_names_a_thread_with_a_slash(env: Env, thread_id: str) -> None:
    """Not only GET and DELETE (b856066): every /api/threads/{id}/… route reads the thread the
    encoded id names, and 'chat%2Fmessages' is that thread, not thread 'chat''s messages."""
    alice = auth(env.keys.alice)
    head, _, _ = thread_id.partition("/")
    base = "/api/threads/" + quote(thread_id, safe="")
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.alice, head, "alice", "the shorter thread")
        said(client, env.keys.alice, thread_id, "alice", "the slashed thread")
        read = client.get(base, headers=alice)
        assert read.status_code == 200, read.text
        assert read.json()["id"] == thread_id  # was the shorter thread's messages, context or usage
        for suffix in ("/messages", "/context", "/observations", "/generations", "/usage", "/status"):
            answer = client.get(base + suffix, headers=alice)
            assert answer.status_code == 200, (suffix, answer.text)  # was 404 'Not Found'
        texts = [m["parts"][0]["text"] for m in client.get(base + "/messages", headers=alice).json()["messages"]]
        assert texts[0] == "the slashed thread"
        saved = client.post(base + "/messages", headers=alice,
                            json={"format": "openai", "messages": [{"role": "user", "content": "more"}]})
        assert saved.status_code == 201, saved.text
        assert saved.json()["messages"][0]["thread_id"] == thread_id
        for other in (env.keys.bob, env.keys.globex):
            for suffix in ("", "/messages", "/context", "/usage"):
                hidden = client.get(base + suffix, headers=auth(other))
                assert hidden.status_code == 404, (suffix, hidden.text)
        assert client.delete(base, headers=alice).json() == {"deleted": True}
        assert client.get("/api/threads/" + head, headers=alice).status_code == 200


def test_a_resource_id_read_as_a_scope_exports_no_other_resources_knowledge(env: Env) -> None:
    """Resource 'kn/thread:t1' is no knowledge scope: read as one it names thread t1 of resource
    'kn', and its export held the knowledge of resource 'kn' (every row on that scope's chain)."""
    org = auth(env.keys.acme_org)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.acme_org, "kn-own", "kn", "the other resource")
        kept = client.post("/api/knowledge", headers=org, json={"text": "KN-FACT-8812 is kn's", "resource_id": "kn"})
        assert kept.status_code == 201, kept.text
        assert "KN-FACT-8812" in client.get("/api/resources/kn/export", headers=org).text
        said(client, env.keys.acme_org, "kn-odd", "kn/thread:t1", "the odd resource")
        base = "/api/resources/" + quote("kn/thread:t1", safe="")
        exported = client.get(base + "/export", headers=org)
        assert exported.status_code == 200, exported.text
        assert "the odd resource" in exported.text
        assert "KN-FACT-8812" not in exported.text  # was there: resource kn's knowledge
        assert client.delete(base, headers=org).status_code == 200
        assert "KN-FACT-8812" in client.get("/api/resources/kn/export", headers=org).text


def test_a_trailing_slash_after_an_encoded_slash_never_reaches_another_thread(env: Env) -> None:
    """GET /api/threads/b%2Fmessages/ was redirected (307) to /api/threads/b/messages (Starlette
    builds the redirect from the decoded path): thread 'b''s messages, not thread 'b/messages'."""
    alice = auth(env.keys.alice)
    with httpx.Client(base_url=env.url, timeout=60) as client:
        said(client, env.keys.alice, "b", "alice", "in the short thread")
        said(client, env.keys.alice, "b/messages", "alice", "in the slashed thread")
        for method in ("GET", "DELETE"):
            answer = client.request(method, "/api/threads/b%2Fmessages/", headers=alice)
            assert answer.status_code == 404, (method, answer.status_code, answer.headers.get("location"))
        assert client.get("/api/threads/b", headers=alice).status_code == 200
        assert client.get("/api/threads/b%2Fmessages", headers=alice).json()["id"] == "b/messages"

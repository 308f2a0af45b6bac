"""A ``Knowledge`` left at the default embedder converts no one's vectors.

Since 146949f a drain re-embeds, a page at a time, the records another embedder indexed, so
switching embedders needs no manual step. But every process that opens the store drains (a search
drains first): ``obsmem serve --knowledge`` answering a search, a script, a tool. Each opened at
the default embedder turned the application's index (say MiniLM, or an embedder of its own) into
lexical vectors, and the application turned it back at its next drains: the records flip-flopped,
were embedded again and again, and between the two were found by their words only. Now only a
``Knowledge`` given its embedder (the application's choice) converts on drain; one at the default
indexes what it writes and leaves the rest; ``reindex()`` converts on request either way.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge
from tests.server.conftest import Env, open_env
from tests.server.live import auth

APP = LexicalHashEmbedder(256)  # the application's embedder (an embedder of its own, MiniLM ...)
ALICE = "org:acme/resource:alice"


async def _embedders(knowledge: Knowledge) -> dict[str, int]:
    counts: dict[str, int] = {}
    for vector in await knowledge.store.list_vectors():
        counts[vector.embedder] = counts.get(vector.embedder, 0) + 1
    return counts


@pytest.mark.anyio
async def test_a_knowledge_at_the_default_leaves_the_applications_vectors(knowledge: Knowledge) -> None:
    app = Knowledge(knowledge.store, embedder=APP)
    user = await app.node("User", "person", ALICE)
    for text in ("their dog is called Rex", "they keep bees", "they live in Oslo"):
        await app.append(user.id, text, ALICE, reason="said")
    await app.drain()
    assert await _embedders(app) == {APP.name: 3}

    tool = Knowledge(knowledge.store)  # a script, a command, a server left at the default
    assert [h.text for h in await tool.search("dog called Rex", ALICE)][:1] == ["their dog is called Rex"]
    await tool.append(user.id, "they drink tea", ALICE, reason="said")
    await tool.drain()
    await tool.drain()
    assert await _embedders(tool) == {APP.name: 3, tool.embedder.name: 1}  # what it wrote, only

    # the application takes the tool's vector into its own on its next pass through the store (a
    # restart: once per store object and process) or at once, on request
    assert await app.reindex() == 1
    assert await _embedders(app) == {APP.name: 4}
    assert await tool.reindex() == 4  # on request, a tool converts too
    assert await _embedders(tool) == {tool.embedder.name: 4}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    yield from open_env(tmp_path_factory.mktemp("embedder-guest"))


def test_the_servers_searches_leave_the_applications_vectors(env: Env) -> None:
    """``obsmem serve`` (its knowledge at the default) over a store the application embeds with
    its own model: the REST searches of every request leave the application's vectors alone."""
    served = env.live.service.knowledge
    assert isinstance(served, Knowledge)
    app = Knowledge(served.store, embedder=APP)

    async def written() -> None:
        user = await app.node("User", "person", ALICE)
        await app.append(user.id, "the gate code is on the fridge", ALICE, reason="said")
        await app.drain()

    env.live.call(written())
    with httpx.Client(base_url=env.url, headers=auth(env.keys.alice), timeout=60) as client:
        for _ in range(3):
            found = client.get("/api/knowledge/search", params={"q": "gate code fridge"})
            assert found.status_code == 200, found.text
    assert env.live.call(_embedders(app)).get(APP.name) == 1

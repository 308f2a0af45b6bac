"""One text makes at most :data:`~obsmem.knowledge.MAX_LINKS` nodes and mentions.

On main every distinct ``[[name]]`` of a text was looked up (one store read each) and, when
new, created as a node in the same write: one 10,000-character ``POST /knowledge`` (the REST
limit) made 919 nodes, and a pasted pandas notebook (``df[["a", "b"]]``) makes a node of every
column list. Now the first 64 distinct links of a text resolve, in order; the rest stay plain
text in the record, and a warning says how many were left unresolved.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem.knowledge import MAX_LINKS, Knowledge, extract_wikilinks

pytestmark = pytest.mark.anyio

RES = "org:acme/resource:alice"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str) -> AsyncIterator[Knowledge]:
    facade = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with facade:
        yield facade


async def test_a_text_links_at_most_max_links_nodes(knowledge: Knowledge, caplog: pytest.LogCaptureFixture) -> None:
    user = await knowledge.node("User", "person", RES)
    text = " ".join(f"[[topic {i}]]" for i in range(900))[:10_000]
    assert len(extract_wikilinks(text)) > 700
    with caplog.at_level(logging.WARNING, logger="obsmem"):
        record = await knowledge.append(user.id, text, RES, reason="pasted")
    assert MAX_LINKS == 64
    assert len(record.mentions) == MAX_LINKS  # on main: every link (more than 700)
    nodes = (await knowledge.store.dump_scope(RES)).nodes
    assert sorted(n.name for n in nodes) == sorted(["User", *(f"topic {i}" for i in range(MAX_LINKS))])
    assert record.text == text  # the links past the bound stay in the text
    assert any("left unresolved" in r.getMessage() for r in caplog.records)


async def test_exactly_max_links_all_resolve_silently(knowledge: Knowledge, caplog: pytest.LogCaptureFixture) -> None:
    user = await knowledge.node("User", "person", RES)
    known = await knowledge.node("topic 3", "thing", RES)
    text = " ".join(f"[[Topic {i % MAX_LINKS}]]" for i in range(3 * MAX_LINKS))  # repeats are one link
    with caplog.at_level(logging.WARNING, logger="obsmem"):
        record = await knowledge.append(user.id, text, RES, reason="notes")
    assert len(record.mentions) == MAX_LINKS and record.mentions[3] == known.id
    assert not any("left unresolved" in r.getMessage() for r in caplog.records)

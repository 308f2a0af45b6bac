"""The lexical search index on a database written before it, and after an erase (helper-168).

A knowledge database written by a version before the index (its tables as the migrations up to
the one that adds it left them) searches the same once the new code opens it: the migration
indexes its nodes and records. An erased record's text is gone from every table of the SQLite
file, the search index's own (its content and its trigrams) included.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.contract import RecordView

pytestmark = pytest.mark.anyio

ORG = "org:acme"
ALICE = "org:acme/resource:alice"
T1 = "org:acme/resource:alice/thread:t1"
TEXTS = ["Straße number 12", "likes Green TEA", "ﬁsh on fridays", "ΣΊΣΥΦΟΣ the king", "no match here"]
QUERIES = ["strasse", "tea", "fi", "σίσυφος", "number", "ea", "σ", "match king"]
SEARCH_TABLES_SQLITE = ("knowledge_search_vocab", "knowledge_search", "knowledge_search_rows")


async def _fill(knowledge: Knowledge) -> None:
    team = await knowledge.node("Team Fish", "topic", ORG, content="Shared ﬁles")
    user = await knowledge.node("User", "person", ALICE)
    for i, text in enumerate(TEXTS):
        await knowledge.append(team.id if i % 2 else user.id, text, ORG if i % 2 else ALICE, reason="x")


async def _answers(knowledge: Knowledge) -> list[list[tuple[str, str, float]]]:
    return [
        [(h.kind, h.text, h.score) for h in await knowledge.store.search_lexical(q, T1, view=RecordView(), limit=50)]
        for q in QUERIES
    ]


async def test_a_sqlite_database_from_before_the_index_searches_the_same(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    async with Knowledge.sqlite(path) as knowledge:
        await _fill(knowledge)
        before = await _answers(knowledge)
    assert sum(map(len, before)) >= 10  # the queries find things
    conn = sqlite3.connect(path)  # the file as the version before the index left it
    for table in SEARCH_TABLES_SQLITE:
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM _obsmem_knowledge_migrations WHERE name = 'm005_knowledge_search_index'")
    conn.commit()
    conn.close()
    async with Knowledge.sqlite(path) as knowledge:
        assert await _answers(knowledge) == before
        user = await knowledge.store.resolve_node("User", ALICE)
        assert user is not None
        await knowledge.append(user.id, "later fact: green light", ALICE, reason="x")  # and it keeps up
        hits = await knowledge.store.search_lexical("green", T1, limit=50)
        assert sorted(h.text for h in hits) == ["later fact: green light", "likes Green TEA"]


async def test_a_postgres_database_from_before_the_index_searches_the_same(postgres_url: str) -> None:
    async with Knowledge.postgres(postgres_url) as knowledge:
        await _fill(knowledge)
        before = await _answers(knowledge)
    assert sum(map(len, before)) >= 10
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE knowledge_search")
        conn.execute("DELETE FROM _obsmem_knowledge_migrations WHERE name = 'm004_knowledge_search_index'")
    async with Knowledge.postgres(postgres_url) as knowledge:
        assert await _answers(knowledge) == before
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # pg_trgm's index, on this server
        indexes = [row[0] for row in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'knowledge_search'")]
    assert any("gin_trgm_ops" in index for index in indexes), indexes


def _file_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


async def test_an_erased_record_leaves_no_text_in_the_search_index(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    secret = "Vault PASSPHRASE is Qx7ж9-Zanzibar-Orchid"
    # "ж9-": the only trigram of the file starting with a Cyrillic letter, so FTS5 stores its
    # bytes whole (a term shares no prefix with the term before it)
    trigram = "ж9-".encode()
    async with Knowledge.sqlite(path) as knowledge:
        user = await knowledge.node("User", "person", ALICE)
        for i in range(40):
            await knowledge.append(user.id, f"ordinary fact {i} about orchids", ALICE, reason="x")
        record = await knowledge.append(user.id, secret, ALICE, reason="x")
        assert [h.id for h in await knowledge.store.search_lexical("zanzibar", T1, limit=5)] == [record.id]
        assert secret.casefold().encode() in _file_bytes(path)  # the index holds the folded text
        assert trigram in _file_bytes(path)
        await knowledge.store.erase_records([record.id], ALICE, actor="me", reason="asked")
        assert await knowledge.store.search_lexical("zanzibar", T1, limit=5) == []
    data = _file_bytes(path)
    for form in (secret, secret.casefold()):
        assert form.encode() not in data
    assert trigram not in data  # an FTS5 delete leaves the row's trigrams in older segments until merged
    conn = sqlite3.connect(path)
    try:
        contents = [row[0] for row in conn.execute("SELECT hay FROM knowledge_search")]
        assert len(contents) == 41 and not any("zanzibar" in c for c in contents)
        assert conn.execute("SELECT count(*) FROM knowledge_search_rows WHERE id = ?", (record.id,)).fetchone()[0] == 0
        assert conn.execute(
            "SELECT count(*) FROM knowledge_search WHERE knowledge_search MATCH '\"zanzibar\" OR \"qx7\"'"
        ).fetchone()[0] == 0
        # the index is one merged segment: no older segment keeps the erased row's trigrams
        assert conn.execute("SELECT count(*) FROM knowledge_search_vocab WHERE term = 'qx7'").fetchone()[0] == 0
        conn.execute("INSERT INTO knowledge_search (knowledge_search, rank) VALUES ('integrity-check', 1)")
    finally:
        conn.close()

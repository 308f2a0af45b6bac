"""PostgreSQL, resource scope with threads shared: a replica deletes one of the user's threads
while another replica (its own caches) keeps serving the user's other thread. That replica's
reads (context, a turn's context, recall search, threads, cursor) show nothing of the deleted
thread after the delete, and no table holds its text. (The sibling's receipts keep naming the
deleted thread's id and group ids: ids, no text; see helper-181's report.)"""

from __future__ import annotations

import pytest

from obsmem import ContextWindow, Memory, Message
from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.errors import RecallNotFoundError
from obsmem.vectors.postgres import PostgresVectorIndex

from ..retrieval.helpers import START, dated_messages, replay, retrieval_config
from .scan import scan_postgres

pytestmark = pytest.mark.anyio


def _seen(context: ContextWindow) -> str:
    return " ".join(m.text for m in [*context.system_messages, *context.messages])


async def test_a_thread_deleted_by_another_replica_leaves_this_ones_reads(postgres_url: str) -> None:
    config = retrieval_config(scope="resource", vector=True).model_copy(
        update={"scope": "resource", "share_threads_in_resource": True})
    embedder = LexicalHashEmbedder()
    idx = lambda: PostgresVectorIndex(postgres_url, embedder.dimensions, space=embedder.name)  # noqa: E731
    async with Memory(postgres_url, config=config, clock=FakeClock(START), embedder=embedder, vector_index=idx()) as app, \
            Memory(postgres_url, config=config, clock=FakeClock(START), embedder=embedder, vector_index=idx()) as admin:
        await replay(app, "alice-2", "alice", dated_messages(24, "e"))
        await replay(app, "alice-1", "alice", dated_messages(24, "a"))
        before = _seen(await app.get_context("alice-1"))
        assert "alice-2" in before and "eK0" in before  # shared before the delete
        turn = await app.begin_turn(thread_id="alice-1", messages=[Message.user("hello")])
        await turn.end([Message.assistant("hi")])
        assert await admin.delete_thread("alice-2")
        after = _seen(await app.get_context("alice-1"))
        assert "alice-2" not in after and "eK0" not in after
        turn = await app.begin_turn(thread_id="alice-1", messages=[Message.user("again")])
        assert "alice-2" not in _seen(turn.context) and "eK0" not in _seen(turn.context)
        await turn.end([Message.assistant("ok")])
        found = await app.recall("alice-1", mode="search", query="Terraform billing marathon code eK0003", limit=20)
        assert {g.thread_id for g in found.groups} <= {"alice-1"}
        threads = await app.recall("alice-1", mode="threads", limit=50)
        assert {t.id for t in threads.threads} <= {"alice-1"}
        with pytest.raises(RecallNotFoundError):
            await app.recall("alice-1", cursor="em0003")
        await app.settled()
        assert scan_postgres(postgres_url, "eK00") == []

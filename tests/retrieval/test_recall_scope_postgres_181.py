"""Scope on PostgreSQL with two ``Memory`` objects over one database (two replicas of a
multi-tenant app): a user's thread never reads another user's messages or observations on any
read path (recall's ids, search, threads; the context; list_threads; usage), and in thread scope
a thread never reads its sibling's. Resource ids that hold SQL pattern characters ("_", "%") or
are a prefix of another must not match it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from obsmem import ContextWindow, Memory
from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.vectors.postgres import PostgresVectorIndex
from obsmem.errors import RecallNotFoundError

from .helpers import START, dated_messages, groups_of, replay, retrieval_config

pytestmark = pytest.mark.anyio

#: (thread, resource, message id prefix): "al_ce", "ali%" and "ali" would match "alice" as patterns.
USERS = [("alice-1", "alice", "a"), ("t-under", "al_ce", "u"), ("t-pct", "ali%", "p"), ("t-ali", "ali", "d"),
         ("alice-2", "alice", "e")]


@pytest.fixture(params=["resource", "thread"])
async def replicas(request: pytest.FixtureRequest, postgres_url: str) -> AsyncIterator[tuple[Memory, Memory, str]]:
    config = retrieval_config(scope=request.param, vector=True).model_copy(update={"scope": request.param})
    embedder = LexicalHashEmbedder()

    def index() -> PostgresVectorIndex:
        return PostgresVectorIndex(postgres_url, embedder.dimensions, space=embedder.name)

    async with Memory(postgres_url, config=config, clock=FakeClock(START), embedder=embedder, vector_index=index()) as one, \
            Memory(postgres_url, config=config, clock=FakeClock(START), embedder=embedder, vector_index=index()) as two:
        for n, (thread, resource, prefix) in enumerate(USERS):
            await replay(one if n % 2 else two, thread, resource, dated_messages(24, prefix))
        yield one, two, request.param


def _seen(context: ContextWindow) -> str:
    return " ".join(m.text for m in [*context.system_messages, *context.messages])


def _alice_text(memory_text: str) -> list[str]:
    return [mark for mark in ("aK0", "eK0", "alice-1", "alice-2") if mark in memory_text]


async def test_no_other_users_data_on_any_read_path(replicas: tuple[Memory, Memory, str]) -> None:
    one, two, scope = replicas
    record = await one.get_record("alice-1")
    assert record is not None and groups_of(record.active_observations)
    alice_group = groups_of(record.active_observations)[0].id
    for memory in (one, two):
        for caller in ("t-under", "t-pct", "t-ali"):
            for kwargs in ({"group_id": alice_group}, {"cursor": "am0003"}, {"target_thread_id": "alice-1"}):
                with pytest.raises(RecallNotFoundError):
                    await memory.recall(caller, **kwargs)  # type: ignore[arg-type]
            found = await memory.recall(caller, mode="search", query="Terraform billing marathon code aK0003", limit=20)
            assert {g.thread_id for g in found.groups} <= {caller}
            threads = await memory.recall(caller, mode="threads", limit=50)
            assert {t.id for t in threads.threads} <= {caller}
            context = await memory.get_context(caller)
            assert _alice_text(_seen(context)) == []
            assert _alice_text(await memory.get_observations(caller)) == []
        assert {t.id for t in await memory.list_threads("al_ce")} == {"t-under"}
        assert {t.id for t in await memory.list_threads("ali%")} == {"t-pct"}
        assert {t.id for t in await memory.list_threads("ali")} == {"t-ali"}
        assert {t.id for t in await memory.list_threads("alice")} == {"alice-1", "alice-2"}
        assert {t.id for t in await memory.list_threads("ali", newest_first=True)} == {"t-ali"}
        assert {t.id for t in await memory.list_threads("al_ce", newest_first=True)} == {"t-under"}


async def test_thread_scope_keeps_siblings_apart(replicas: tuple[Memory, Memory, str]) -> None:
    one, two, scope = replicas
    for memory in (one, two):
        context = await memory.get_context("alice-1")
        seen = _seen(context)
        assert "aK0" in seen
        if scope == "thread":
            assert "eK0" not in seen and "alice-2" not in seen
            assert "alice-2" not in await memory.get_observations("alice-1")
        threads = await memory.recall("alice-1", mode="threads", limit=50)
        assert {t.id for t in threads.threads} <= ({"alice-1", "alice-2"} if scope == "resource" else {"alice-1"})
        found = await memory.recall("alice-1", mode="search", query="Terraform billing marathon code eK0003", limit=20)
        assert {g.thread_id for g in found.groups} <= ({"alice-1", "alice-2"} if scope == "resource" else {"alice-1"})

"""The knowledge agents do linear work in what they are given (the project rule: no input makes any
code path superlinear).

Capture checked every proposal against every record already on the node, working out each
record's key and words again for each proposal; curate re-read every peer of every worklist record
and compared it with all of them again. Both are run here from the user's side, as the other agent
tests run them (an observation delta captured, the lane curated, on the in-memory knowledge
store), at two sizes, n and 4n facts, and the *work* of the agent's run is counted (Python calls
and lines, :mod:`tests.integrity.work_count`; setting the store up is not counted). Linear work
grows about 4×, quadratic about 16×; the bound is 8×. No time is asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TypeVar

from obsmem.clock import FakeClock
from obsmem.embeddings import LexicalHashEmbedder
from obsmem.knowledge import Knowledge, RecordView, Scope
from obsmem.knowledge.agents import AgentRun, AgentSettings, KnowledgeAgents
from obsmem.storage import open_store
from tests.integrity.work_count import GROWTH_BOUND, work
from tests.knowledge.agents.conftest import observation

T = TypeVar("T")
LIVE = RecordView(include_candidates=True)
N = 20  # facts: 4N traced stay well under a second; the quadratic original shows at this size


def _word(i: int, salt: int) -> str:
    """A made-up word of its own for each (i, salt): facts that share no telling word."""
    letters, n = "", i * 7 + salt
    for _ in range(4):
        letters += "bcdfghjklmnpqrstvwz"[n % 19] + "aeiou"[n // 19 % 5]
        n //= 95
    return letters


def _facts(n: int) -> str:
    """n facts, each stated briefly, then more fully, then briefly again (a restatement)."""
    lines = []
    for i in range(n):
        a, b, c = _word(i, 1), _word(i, 2), _word(i, 3)
        lines += [f"* 🔴 (08:00) User stated they enjoy {a} with {b}.",
                  f"* 🔴 (09:00) User stated they enjoy {a} with {b} near {c}.",
                  f"* 🔴 (10:00) User stated they enjoy {a} with {b}."]
    return observation(*lines)


@asynccontextmanager
async def _agents() -> AsyncIterator[tuple[KnowledgeAgents, Knowledge, Scope]]:
    clock = FakeClock()
    async with AsyncExitStack() as stack:
        knowledge = await stack.enter_async_context(Knowledge.in_memory(embedder=LexicalHashEmbedder(64),
                                                                        clock=clock))
        main = await stack.enter_async_context(open_store("memory://"))
        agents = KnowledgeAgents(knowledge, main, AgentSettings(), clock=clock)
        yield agents, knowledge, agents.scope("acme", "alice", "t1")


def _counted(n: int, prepare: Callable[[KnowledgeAgents, Scope, int], Awaitable[None]],
             act: Callable[[KnowledgeAgents, Scope, int], Awaitable[T]]) -> tuple[int, T, list[str]]:
    """(work of ``act`` alone, its result, the live texts after it), on a fresh store that
    ``prepare`` filled (not counted). One event loop runs all three steps."""
    loop = asyncio.new_event_loop()
    try:
        async def enter() -> tuple[AsyncExitStack, KnowledgeAgents, Knowledge, Scope]:
            stack = AsyncExitStack()
            agents, knowledge, scope = await stack.enter_async_context(_agents())
            await prepare(agents, scope, n)
            return stack, agents, knowledge, scope

        stack, agents, knowledge, scope = loop.run_until_complete(enter())
        results: list[T] = []
        count = work(lambda _: results.append(loop.run_until_complete(act(agents, scope, n))), "")

        async def live_and_exit() -> list[str]:
            user = await knowledge.store.resolve_node("User", scope.key)
            assert user is not None
            texts = [r.text for r in (await knowledge.store.list_about(user.id, scope.key, view=LIVE,
                                                                        limit=500)).items]
            await stack.aclose()
            return texts

        return count, results[0], loop.run_until_complete(live_and_exit())
    finally:
        loop.close()


async def _nothing(agents: KnowledgeAgents, scope: Scope, n: int) -> None:
    return None


async def _capture(agents: KnowledgeAgents, scope: Scope, n: int) -> AgentRun:
    return await agents.capture(_facts(n), scope, source_thread_id="t1")


async def _captured(agents: KnowledgeAgents, scope: Scope, n: int) -> None:
    await _capture(agents, scope, n)


async def _curate(agents: KnowledgeAgents, scope: Scope, n: int) -> AgentRun:
    return await agents.curate(scope, "t1", force=True)


def test_capture_work_grows_linearly_with_the_facts_in_a_delta() -> None:
    _counted(N // 4, _nothing, _capture)  # warm-up: imports and compiled patterns are not the input's work
    small, _, _ = _counted(N, _nothing, _capture)
    large, run, live = _counted(4 * N, _nothing, _capture)
    assert large / small < GROWTH_BOUND, f"capture work grew {large / small:.1f}× for 4× the facts"
    # Still right: each brief and each full statement written once, every restatement skipped.
    assert run.status == "ran" and len(run.written) == 2 * 4 * N and run.skipped == 4 * N
    assert len(live) == 2 * 4 * N and len(set(live)) == len(live)


def test_curate_work_grows_linearly_with_the_worklist() -> None:
    _counted(N // 4, _captured, _curate)
    small, _, _ = _counted(N, _captured, _curate)
    large, run, live = _counted(4 * N, _captured, _curate)
    assert large / small < GROWTH_BOUND, f"curate work grew {large / small:.1f}× for 4× the records"
    # Still right: each brief statement goes in favour of its fuller one, which stays.
    assert run.status == "ran" and len(run.removed) == 4 * N
    assert all(reason.startswith("duplicate of ") for _, reason in run.removed)
    assert len(live) == 4 * N and all(" near " in text for text in live)

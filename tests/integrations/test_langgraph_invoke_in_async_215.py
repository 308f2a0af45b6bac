"""LangGraph store (helper 215): ``agent.invoke`` called from async code (a blocking call inside
a coroutine, as in an async web handler), whose sync tools use the store from LangGraph's
threads. The store's calls go to its event loop, whose thread is held by that very invoke:
they waited for it for good and the run hung. Now such a call is given up, unstarted, and the
run fails with obsmem's error saying what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio

import obsmem.integrations.langgraph as langgraph_integration
from langchain.agents import create_agent
from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge
from obsmem.integrations.langgraph import KnowledgeBaseStore
from tests.integrations.test_langchain_review import recording
from tests.integrations.test_langgraph_sync_first_use_215 import remember, two_parallel_calls

langgraph_integration._LOOP_START_WAIT_S = 1.0  # the test's wait, not the 30 s a loop under load gets


async def main() -> None:
    async with Knowledge.in_memory() as knowledge:
        store = KnowledgeBaseStore(knowledge, scope="org:acme/resource:alice/thread:t1")
        agent = create_agent(recording(two_parallel_calls), tools=[remember], store=store)
        try:
            agent.invoke({"messages": [("user", "remember where I live")]})  # blocks this loop's thread
        except InvalidInputError as error:
            print("refused:", error)
        # the loop is free again: the same agent, run as it should be, works
        await agent.ainvoke({"messages": [("user", "remember where I live")]})
        print("stored:", sorted(item.key for item in await store.asearch(("memories",))))


asyncio.run(main())
"""


def test_invoke_from_async_code_fails_with_obsmems_error_instead_of_hanging() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("agent.invoke from async code hung (the store waited for its own loop)") from None
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: KnowledgeBaseStore: the event loop the store runs on did not take this call" in done.stdout
    assert "ainvoke/astream" in done.stdout
    assert "stored: ['city', 'food']" in done.stdout
    assert "never awaited" not in done.stderr

"""A LangGraph agent whose long-term memory (``store``) is obsmem's knowledge store: ten turns.

    OPENAI_API_KEY=... python examples/langgraph_store.py
    python examples/langgraph_store.py --base-url http://localhost:8000/v1 --model my-model

Needs ``pip install 'obsmem[langchain,langgraph]'``. The agent's tools write and search
LangGraph's store; the store keeps each item as a knowledge record in the user's scope, under a
resource ceiling, so another user's run can never read it.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from obsmem.integrations.langgraph import KnowledgeBaseStore
from obsmem.knowledge import Knowledge

FACTS = [
    "remember that my sister Anna lives in Lyon",
    "remember that I am allergic to peanuts",
    "what do you know about Anna?",
    "remember that my favourite museum is the Louvre",
    "what do you know about peanuts?",
    "remember that I fly to Lyon on May 3",
    "what do you know about Lyon?",
    "remember that Anna's birthday is in June",
    "what do you know about museum?",
    "what do you know about birthday?",
]


@tool
async def remember(fact: str, runtime: ToolRuntime) -> str:
    """Remember a fact about the user."""
    assert runtime.store is not None
    items = await runtime.store.asearch(("memories",), limit=1000)
    await runtime.store.aput(("memories",), f"fact-{len(items)}", {"text": fact})
    return f"remembered: {fact}"


@tool
async def recall(query: str, runtime: ToolRuntime) -> str:
    """Search what is remembered about the user."""
    assert runtime.store is not None
    items = await runtime.store.asearch(("memories",), query=query, limit=3)
    return "; ".join(item.value["text"] for item in items) or "nothing yet"


async def main(base_url: str | None, model: str, turns: int) -> None:
    key = os.environ.get("OPENAI_API_KEY", "not-needed")  # a local server needs none
    chat = ChatOpenAI(model=model, base_url=base_url, api_key=key)  # type: ignore[arg-type]
    async with Knowledge.in_memory(actor="langgraph-example") as knowledge:
        store = KnowledgeBaseStore(knowledge, scope="org:demo/resource:dana/thread:t1", ceiling="resource")
        agent = create_agent(chat, tools=[remember, recall], store=store,
                             system_prompt="Use remember and recall to keep facts about the user.")
        for text in (FACTS * 2)[:turns]:
            result = await agent.ainvoke({"messages": [HumanMessage(text)]})
            print(f"user: {text}\nagent: {result['messages'][-1].text}\n")
        hits = await knowledge.search("Anna", "org:demo/resource:dana")
        print("knowledge records about Anna:", [hit.text for hit in hits if hit.kind == "record"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.base_url, args.model, args.turns))

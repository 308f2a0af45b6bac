"""A LangChain v1 agent with obsmem's observational memory: ten turns, one tool.

    OPENAI_API_KEY=... python examples/langchain_agent.py
    python examples/langchain_agent.py --base-url http://localhost:8000/v1 --model my-model

Needs ``pip install 'obsmem[langchain]'``. Any OpenAI-compatible server works (``--base-url`` or
``OPENAI_BASE_URL``). The thresholds are small so that ten short turns are already observed.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from obsmem import Memory, MemoryConfig, ObservationConfig
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

QUESTIONS = [
    "Hi! I'm Dana and I'm planning a trip to Norway in March.",
    "What is the weather in Oslo right now?",
    "My budget is about 2000 euros, and I travel with my brother Sam.",
    "Sam is vegetarian, please keep that in mind.",
    "What is the weather in Bergen this week?",
    "We would like to see fjords and one museum.",
    "Can you remind me what my budget was?",
    "What is the weather in Tromso for the northern lights?",
    "We prefer trains over flights.",
    "Summarise the plan so far, please.",
]


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"{city}: -2 degrees, light snow"


async def main(base_url: str | None, model: str, turns: int) -> None:
    key = os.environ.get("OPENAI_API_KEY", "not-needed")  # a local server needs none
    chat = ChatOpenAI(model=model, base_url=base_url, api_key=key)  # type: ignore[arg-type]
    config = MemoryConfig(observation=ObservationConfig(message_tokens=300, buffer_tokens=False))
    async with Memory("memory://", config=config) as memory:
        agent = create_agent(
            chat, tools=[get_weather], system_prompt="You are a friendly travel planner.",
            middleware=[ObservationalMemoryMiddleware(memory, resource_id="dana")],
        )
        for question in (QUESTIONS * 2)[:turns]:
            thread: RunnableConfig = {"configurable": {"thread_id": "trip"}}
            result = await agent.ainvoke({"messages": [HumanMessage(question)]}, thread)
            print(f"user: {question}\nagent: {result['messages'][-1].text}\n")
        record = await memory.get_record("trip")
        print("observations:\n" + (record.active_observations if record else "(none yet)"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(main(args.base_url, args.model, args.turns))

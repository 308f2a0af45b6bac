"""A model call over a long checkpointed state reads the state's tool calls once, not once per
message sent: the middleware checked each message it sends as the state has it (is it still
what obsmem stores, after a forget?) by converting it with the whole history to name its tool,
so one model call read the history once per message of the context: quadratic in the thread's
unobserved messages (helper 189: a run grew from ~20 ms to ~1 s over 600 runs). Counted in
messages read, not time."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.integrations import langchain as integration
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import config, recording

pytestmark = pytest.mark.anyio


async def test_one_model_call_reads_the_state_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    model = recording(lambda messages: AIMessage(f"ok {len(messages)}"))
    read = [0]
    real = integration._call_names

    def counted(history: Any) -> dict[str, str]:
        items = list(history)
        read[0] += len(items)
        return real(items)

    # a threshold the 300 messages stay under: every one is in the context, sent each call
    memory_config = MemoryConfig(observation=ObservationConfig(message_tokens=100_000))
    async with Memory("memory://", config=memory_config) as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=InMemorySaver())
        for n in range(150):
            await agent.ainvoke({"messages": [("user", f"question {n}")]}, config("long"))
        monkeypatch.setattr(integration, "_call_names", counted)
        await agent.ainvoke({"messages": [("user", "one more")]}, config("long"))
        state = (await agent.aget_state(config("long"))).values["messages"]
        sent = model.requests[-1]
    assert len(state) == 302 and len(sent) >= 300  # the whole thread went to the model
    assert read[0] <= 4 * len(state), read[0]  # was ~ len(state) ** 2 (91,507 here)

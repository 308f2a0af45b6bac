"""LangChain: a run's ``configurable.user_id`` (or ``resource_id``) of 0, an int id as an app's
user table gives it (helper 199). Being falsy it was passed over and the thread id taken for the
resource: each conversation of user 0 had a resource of its own, so what the user's memory holds
across conversations (resource-scoped observations, knowledge) was split per thread. Since
57624ed an int thread id is taken by its text; the user's id is too."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from obsmem import Memory
from obsmem.integrations.langchain import ObservationalMemoryMiddleware
from tests.integrations.test_langchain_review import recording

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("key", ["user_id", "resource_id"])
@pytest.mark.parametrize("user", [0, 7], ids=["user 0", "user 7 (control)"])
async def test_an_int_user_id_is_the_threads_resource(key: str, user: int) -> None:
    model = recording(lambda messages: AIMessage("ok"))
    async with Memory("memory://") as memory:
        agent = create_agent(model, middleware=[ObservationalMemoryMiddleware(memory)], checkpointer=InMemorySaver())
        for thread in ["t1", "t2"]:
            await agent.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": thread, key: user}})
        resources = [(await memory.get_thread(t)).resource_id for t in ["t1", "t2"]]
    assert resources == [str(user), str(user)]

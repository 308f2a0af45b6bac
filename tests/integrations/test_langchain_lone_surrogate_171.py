"""LangChain: a message holding a lone surrogate (half an emoji, split by a client) (helper-171).

obsmem refuses text that is not Unicode with an ``InvalidInputError`` naming the part, as the
core and the other integrations do; the LangChain middleware raised ``UnicodeEncodeError`` from
hashing the message's id instead, before that check.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from obsmem import Memory
from obsmem.errors import InvalidInputError
from obsmem.integrations.langchain import ObservationalMemoryMiddleware

pytestmark = pytest.mark.anyio


class Answering(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "answering"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


async def test_a_lone_surrogate_is_refused_as_invalid_input() -> None:
    async with Memory("memory://") as memory:
        agent = create_agent(Answering(), middleware=[ObservationalMemoryMiddleware(memory, resource_id="u")])
        config = {"configurable": {"thread_id": "t1"}}
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            await agent.ainvoke({"messages": [("user", "half an emoji \ud83d here")]}, config)
        await agent.ainvoke({"messages": [("user", "a whole one 😀 here")]}, config)
        assert [m.text for m in await memory.list_messages("t1")] == ["a whole one 😀 here", "ok"]

"""pydantic-ai: what another turn saves while a run is between model calls (helper-141).

Two runs of one conversation at once (two tabs, a double submit, two replicas): while run A
observes between its tool step and its next model call, another turn saves its question (and
its answer) to the thread. A's next request was obsmem's whole unobserved tail, so it ended with
the other turn's messages: with its answer last, pydantic-ai refused the request (``UserError:
Processed history must end with a ModelRequest``) and run A failed; with its question last, A's
model answered the other turn's question. Now A's request ends with A's own newest message; the
other turn's messages stay in the thread for later runs.

The other turn's save is made from inside the observer (a user's model), so it lands exactly
between A's step and A's context read, every time.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.integrations.pydantic_ai import ObservationalMemory
from obsmem.models.testing import FunctionModel as ObsmemFunctionModel

pytestmark = pytest.mark.anyio

OTHER_QUESTION = "B: what is the capital of France?"
OTHER_ANSWER = "B's answer: Paris."
RECORD = "found the record in the archive of the city library, shelf 12, box 4, folder 7. " * 30


def _texts(call: list[pai.ModelMessage]) -> list[str]:
    return [str(p.content) for m in call for p in m.parts if isinstance(p, pai.UserPromptPart | pai.TextPart)]


@pytest.mark.parametrize("other", ["question", "question-and-answer"])
async def test_a_run_s_request_ends_with_its_own_newest_message(other: str) -> None:
    memory: Memory | None = None
    saved: list[bool] = []

    async def observe(messages: list[Message], settings: Any) -> str:
        if not saved:  # another turn of the thread saves while A observes
            saved.append(True)
            assert memory is not None
            theirs = [Message.user(OTHER_QUESTION)]
            if other == "question-and-answer":
                theirs.append(Message.assistant(OTHER_ANSWER))
            await memory.save_messages("t", theirs)
        return "<observations>\n* (10:00) User asked to look up an archive record.\n</observations>"

    calls: list[list[pai.ModelMessage]] = []

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        calls.append(list(messages))
        if not isinstance(messages[-1].parts[-1], pai.ToolReturnPart):
            if "Thanks!" in _texts(messages):
                return pai.ModelResponse(parts=[pai.TextPart("The record is on shelf 12.")])
            return pai.ModelResponse(parts=[pai.ToolCallPart("look", {"q": "archive"}, tool_call_id="a1")])
        return pai.ModelResponse(parts=[pai.TextPart("The record is on shelf 12.")])

    config = MemoryConfig(
        observation=ObservationConfig(message_tokens=150, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=4000),
    )
    memory = Memory(
        "memory://", config=config, observer=ObsmemFunctionModel(observe),
        reflector=ObsmemFunctionModel(lambda messages, settings: "<observations>\n* x\n</observations>"),
    )
    async with memory:
        agent = Agent(FunctionModel(model), capabilities=[ObservationalMemory(memory, resource_id="u")])

        @agent.tool_plain
        def look(q: str) -> str:
            return RECORD

        result = await agent.run("A: please look up the archive record, " + "with all details, " * 20,
                                 conversation_id="t")
        assert saved  # the other turn's save happened between A's model calls
        assert result.output == "The record is on shelf 12."
        last = calls[-1]
        assert isinstance(last[-1], pai.ModelRequest) and isinstance(last[-1].parts[-1], pai.ToolReturnPart)
        assert OTHER_QUESTION not in _texts(last) and OTHER_ANSWER not in _texts(last)
        # the other turn's messages stay in the thread, once, for later runs (sent, or observed)
        stored = [m.text for m in await memory.list_messages("t")]
        assert stored.count(OTHER_QUESTION) == 1 and "The record is on shelf 12." in stored
        assert (await agent.run("Thanks!", conversation_id="t")).output == "The record is on shelf 12."
        assert _texts(calls[-1])[-1] == "Thanks!"

"""pydantic-ai with obsmem: a deleted conversation stays deleted when its history was also
passed to another conversation (a branched chat) (helper-188).

A history message remembers the thread a save of it succeeded in (``obsmem_saved_in``), so that
after ``delete_thread`` the app's ``message_history`` does not store it again. Passing the same
messages to a second conversation (README: a history from another conversation is stored there
once) overwrote that mark with the second thread: after the first conversation was deleted, its
history passed back to it was stored there again and sent to the model, secret included.
"""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from obsmem import Memory
from obsmem.integrations.pydantic_ai import ObservationalMemory

pytestmark = pytest.mark.anyio

SECRET = "locker 5521"


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[pai.ModelMessage]] = []

    def __call__(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.calls.append(list(messages))
        return pai.ModelResponse(parts=[pai.TextPart(f"answer {len(self.calls)}")])


def _sent_text(call: list[pai.ModelMessage]) -> str:
    return " ".join(str(getattr(p, "content", "")) for m in call for p in m.parts)


async def test_a_deleted_conversation_whose_history_was_branched_is_not_stored_again() -> None:
    model = Recorder()
    async with Memory("memory://") as memory:
        capability = ObservationalMemory(memory, resource_id="u")
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[capability])
        history = (await agent.run(f"My {SECRET} is private.", conversation_id="main")).all_messages()
        await agent.run("Summarize this chat.", conversation_id="branch", message_history=history)
        assert SECRET in " ".join(m.text for m in await memory.list_messages("branch"))  # the branch's copy

        assert await memory.delete_thread("main")
        await agent.run("Start over.", conversation_id="main", message_history=history)
        assert [m.text for m in await memory.list_messages("main")] == ["Start over.", "answer 3"]
        assert SECRET not in _sent_text(model.calls[-1])

        # the branch still has what it stored, and is sent it, once
        await agent.run("And the branch?", conversation_id="branch", message_history=history)
        texts = [m.text for m in await memory.list_messages("branch")]
        assert texts.count(f"My {SECRET} is private.") == 1
        assert _sent_text(model.calls[-1]).count(SECRET) == 1

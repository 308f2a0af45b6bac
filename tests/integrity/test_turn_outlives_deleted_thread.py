"""A turn running in one web worker while another worker deletes its thread (the user erased the
chat) and a new chat begins under the same id (found by helper-138).

The running turn's next step showed the deleted question again (its context keeps the turn's
input in view) and saved its answer into the new chat, which never asked anything of the kind;
a tool result after the delete was refused as a call "never made". Now every later boundary of
the turn checks the thread is the one it began on (its created_at, resource and org) and raises
ThreadNotFoundError naming the delete, saving nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.errors import ThreadNotFoundError
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/chat.db"
    return str(request.getfixturevalue("postgres_url"))


async def _new_chat(worker: Memory, *, resource_id: str = "u") -> None:
    assert await worker.delete_thread("chat")
    fresh = await worker.begin_turn(thread_id="chat", resource_id=resource_id, messages=[Message.user("New chat")])
    await fresh.end([Message.assistant("Hello!")])


@pytest.mark.parametrize("resource_id", ["u", "someone-else"])
async def test_a_step_after_the_thread_was_deleted_and_started_again(url: str, resource_id: str) -> None:
    async with Memory(url) as worker1, Memory(url) as worker2:
        turn = await worker1.begin_turn(thread_id="chat", resource_id="u",
                                        messages=[Message.user("My secret plan is X. Weather?")])
        await _new_chat(worker2, resource_id=resource_id)
        with pytest.raises(ThreadNotFoundError, match="deleted since this turn began"):
            await turn.step([Message.assistant("It is sunny")])
        with pytest.raises(ThreadNotFoundError):
            await turn.step([])  # no context of the deleted chat either
        with pytest.raises(ThreadNotFoundError):
            await turn.end([Message.assistant("It is sunny")])
        assert [m.text for m in await worker2.list_messages("chat")] == ["New chat", "Hello!"]


async def test_a_tool_result_after_the_delete_is_refused_naming_the_delete(url: str) -> None:
    async with Memory(url) as worker1, Memory(url) as worker2:
        turn = await worker1.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user("Weather?")])
        await turn.step([Message(role="assistant", parts=[
            ToolCallPart(tool_call_id="c1", tool_name="weather", args={"city": "Oslo"})])])
        await _new_chat(worker2)
        with pytest.raises(ThreadNotFoundError, match="deleted since this turn began"):
            await turn.step([Message(role="tool", parts=[
                ToolResultPart(tool_call_id="c1", tool_name="weather", result="4C")])])
        assert [m.text for m in await worker2.list_messages("chat")] == ["New chat", "Hello!"]


async def test_a_deleted_thread_not_started_again_is_not_found(url: str) -> None:
    async with Memory(url) as worker1, Memory(url) as worker2:
        turn = await worker1.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user("Weather?")])
        assert await worker2.delete_thread("chat")
        with pytest.raises(ThreadNotFoundError, match="deleted since this turn began"):
            await turn.step([Message.assistant("It is sunny")])


async def test_a_turn_on_its_own_thread_goes_on(url: str) -> None:
    """The control: a thread nobody deleted (another worker writing to it meanwhile) is the same."""
    async with Memory(url) as worker1, Memory(url) as worker2:
        turn = await worker1.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user("Weather?")])
        await worker2.save_messages("chat", [Message.user("(another tab) hello")])
        context = await turn.step([Message.assistant("It is sunny")])
        await turn.end()
        assert any(m.text == "Weather?" for m in context.messages)
        assert [m.text for m in await worker2.list_messages("chat")][-1] == "It is sunny"

"""A forget while a turn's model is answering: the answer (saved by step or end after the forget)
said the value again, and was stored as given, so the thread held the forgotten value once more
(found by helper 218 through the gateway). What a turn saves after a forget of its thread (its
resource, the whole store) that began while it was open is now saved with the value forgotten;
a turn that begins after the forget stores what it is given (a user may say it again)."""

from __future__ import annotations

import json

import anyio
import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio
SECRET = "SECRET-4417"


def _holding(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def _forget_elsewhere(memory: Memory, **scope: str) -> None:
    """The forget as another request runs it: a task of its own, while the turn waits on its model."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(lambda: memory.forget(SECRET, **scope))


@pytest.mark.parametrize("at", ["step", "end"])
@pytest.mark.parametrize("scope", ["thread", "resource", "store"])
async def test_an_answer_in_flight_during_a_forget(at: str, scope: str) -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1",
                                       messages=[Message.user(f"My PIN is {SECRET}, note it")])  # fmt: skip
        await _forget_elsewhere(memory, **{"thread": {"thread_id": "t1"}, "resource": {"resource_id": "u1"},
                                           "store": {}}[scope])  # fmt: skip
        assert _holding(await memory.list_messages("t1")) == []  # the question: rewritten
        # (a text part holding the value goes, as forget removes it; the message keeps the rest)
        answer = Message(role="assistant", parts=[{"type": "text", "text": f"You said: My PIN is {SECRET}."},
                                                  {"type": "text", "text": "Noted."}])  # fmt: skip
        if at == "step":
            await turn.step([answer])
            await turn.end()
        else:
            await turn.end([answer])
        stored = await memory.list_messages("t1")
        assert _holding(stored) == []
        assert [(m.id, m.text) for m in stored] == [(answer.id, "Noted.")]  # the question held only the value


async def test_a_tool_call_and_its_result_in_flight() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"Look up {SECRET}")])
        await _forget_elsewhere(memory, thread_id="t1")
        call = Message(role="assistant", parts=[{"type": "tool-call", "tool_call_id": "c1", "tool_name": "lookup",
                                                  "args": {"pin": SECRET}}])  # fmt: skip
        await turn.step([call])
        await turn.step([Message(role="tool", parts=[{"type": "tool-result", "tool_call_id": "c1", "tool_name": "lookup",
                                                      "result": f"{SECRET} belongs to Ann"}])])  # fmt: skip
        await turn.end([Message.assistant(SECRET)])  # the answer is the value alone: deleted, as a forget deletes it
        stored = await memory.list_messages("t1")
        assert _holding(stored) == []
        assert [m.role for m in stored] == ["assistant", "tool"]  # (the question was the value: deleted)
        assert stored[0].tool_calls[0].args == "[forgotten]"
        assert stored[1].tool_results[0].result == "[forgotten]"
        # the answer's copy given back later (an app's history) is not stored: its id is noted
        later = await memory.begin_turn(thread_id="t1", messages=[call, Message.user("and now?")])
        await later.end()
        assert _holding(await memory.list_messages("t1")) == []


async def test_a_forget_of_another_thread_changes_nothing() -> None:
    async with Memory("memory://") as memory:
        await memory.create_thread("t2", resource_id="u1")
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hi")])
        await _forget_elsewhere(memory, thread_id="t2")
        await turn.end([Message.assistant(f"Your PIN is {SECRET}")])
        assert len(_holding(await memory.list_messages("t1"))) == 1


async def test_a_turn_begun_after_the_forget_stores_what_it_is_given() -> None:
    async with Memory("memory://") as memory:
        first = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"PIN {SECRET}")])
        await memory.forget(SECRET, thread_id="t1")
        await first.end([Message.assistant("ok")])
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user(f"Again: my PIN is {SECRET}")])
        await turn.end([Message.assistant(f"Noted: {SECRET}")])
        assert len(_holding(await memory.list_messages("t1"))) == 2


async def test_a_resumed_turn() -> None:
    async with Memory("memory://") as memory:
        began = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(f"PIN {SECRET}")])
        resumed = await memory.resume_turn(thread_id="t1", since_seq=began.began_seq)  # another worker's end
        await _forget_elsewhere(memory, thread_id="t1")
        await resumed.end([Message.assistant(f"You said {SECRET}")])
        await began.end()
        assert _holding(await memory.list_messages("t1")) == []


async def test_nothing_is_kept_once_the_turns_end() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("hi")])
        await memory.forget(SECRET, thread_id="t1")
        assert memory._forgets._noted  # held for the open turn
        await turn.end([Message.assistant("ok")])
        assert not memory._forgets._noted and not memory._forgets._open
        await memory.forget(SECRET, thread_id="t1")  # no turn open: nothing held
        assert not memory._forgets._noted


async def test_a_turn_never_ended_keeps_nothing_past_the_bound() -> None:
    from obsmem.storage.forgetting import ForgetsInFlight
    from obsmem.types import Thread

    now = [0.0]

    async def note(thread: Thread, ids: list[str]) -> None:
        pass

    forgets = ForgetsInFlight(note, hold_s=60.0, clock=lambda: now[0])
    abandoned = forgets.opened()
    forgets.forgot(SECRET, thread_id="t1")
    thread = Thread(id="t1", resource_id="u1")
    kept, changed = forgets.apply(abandoned, thread, [Message.user(f"PIN {SECRET}")])
    assert kept == [] and len(changed) == 1
    now[0] = 61.0
    later = forgets.opened()
    forgets.forgot("other", thread_id="t1")  # drops the first value and the turn opened before it
    assert [entry[4] for entry in forgets._noted] == ["other"] and list(forgets._open) == [later]
    said = Message.user(f"PIN {SECRET}")
    assert forgets.apply(abandoned, thread, [said]) == ([said], [])
    forgets.closed(later)
    assert not forgets._noted and not forgets._open

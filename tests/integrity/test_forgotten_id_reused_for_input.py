"""An app with its own message ids reuses the id of a message forget deleted or rewrote for a new
question (a per-conversation counter, a client retrying with the same id). An old copy of such a
message is never stored again (the forgotten value would come back), so the new question under that
id was dropped without a word and the model got a turn without its input. The turn now refuses it
(InvalidInputError naming the id, nothing stored) rather than answer without the question; history
sent back before the new input (an old copy of the forgotten message among it) still works."""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.errors import InvalidInputError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("forgotten", ["deleted", "rewritten"])
async def test_a_new_question_under_a_forgotten_id_is_refused(forgotten: str) -> None:
    async with Memory("memory://") as memory:
        said = (Message.user("my code is 4242-9191", id="q1") if forgotten == "deleted" else
                Message(role="user", id="q1", parts=[{"type": "text", "text": "Hi."},
                                                     {"type": "text", "text": "My code is 4242-9191"}]))
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("ok", id="a1")])
        await memory.forget("4242-9191", thread_id="t1")
        before = [(m.id, m.text) for m in await memory.list_messages("t1")]
        with pytest.raises(InvalidInputError, match="q1"):
            await memory.begin_turn(thread_id="t1", messages=[Message.user("what is the weather?", id="q1")])
        assert [(m.id, m.text) for m in await memory.list_messages("t1")] == before
        # With a new id it is the turn's input, shown and stored.
        turn = await memory.begin_turn(thread_id="t1", messages=[Message.user("what is the weather?", id="q2")])
        assert turn.context.messages[-1].text == "what is the weather?"
        await turn.end([Message.assistant("sunny", id="a2")])


async def test_history_sent_back_with_a_new_question_still_works() -> None:
    async with Memory("memory://") as memory:
        said = Message.user("my code is 4242-9191", id="q1")
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        answer = Message.assistant("ok", id="a1")
        await turn.end([answer])
        await memory.forget("4242-9191", thread_id="t1")
        turn = await memory.begin_turn(thread_id="t1", messages=[said, answer, Message.user("and now?", id="q2")])
        assert turn.context.messages[-1].text == "and now?"
        await turn.end([Message.assistant("fine", id="a2")])
        assert [m.id for m in await memory.list_messages("t1")] == ["a1", "q2", "a2"]

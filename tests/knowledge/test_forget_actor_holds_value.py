"""``Memory.forget`` whose audit actor (or reason) holds the value: the knowledge store refuses to
write the value into its audit log, and it used to refuse only when the forget reached the
knowledge store, after the messages and observations were already erased: the call raised, and
the memory was half forgotten. Now it is refused before anything is erased."""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge

pytestmark = pytest.mark.anyio


# (A value that obsmem's default words hold, "forgotten" in the reason "value forgotten", is
# forgotten: tests/integrity/test_forget_short_name_in_obsmems_words.py.)
@pytest.mark.parametrize(("value", "actor"), [("42", "agent-42"), ("key", "key:0a1b2c")])
async def test_a_forget_whose_audit_would_hold_the_value_erases_nothing(value: str, actor: str | None) -> None:
    async with Memory(knowledge=Knowledge.in_memory(actor="privacy-desk")) as memory:
        turn = await memory.begin_turn(
            thread_id="t1", resource_id="alice",
            messages=[Message.user(f"My locker code is 42, the key is forgotten at the desk; note {value}.")],
        )
        await turn.end([Message.assistant("Noted.")])
        before = [m.text for m in await memory.list_messages("t1")]
        assert value in before[0]
        with pytest.raises(InvalidInputError) as refused:
            await memory.forget(value, resource_id="alice", actor=actor)
        assert refused.value.argument == "actor"
        assert [m.text for m in await memory.list_messages("t1")] == before  # nothing erased
        # with an actor that does not hold it, the same forget works
        counts = await memory.forget(value, resource_id="alice", actor="privacy-officer")
        assert counts["messages"] >= 1
        assert all(value not in (m.text or "") for m in await memory.list_messages("t1"))

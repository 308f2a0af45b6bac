"""A turn resumed with since_seq after more than RESUME_WINDOW (64) messages of the thread were
saved since its calls: its late results must still go after its own calls (helper 220)."""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.turn import Turn
from tests.integrity.test_concurrent_reused_call_ids_212 import calls, placed, refusals, results

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("resumed", [False, True])
async def test_resumed_after_many_messages(memory: Memory, resumed: bool) -> None:
    turns: dict[str, Turn] = {}
    for run in "ABC":
        turns[run] = await memory.begin_turn(thread_id="chat", resource_id="u", messages=[Message.user(f"{run}?")])
        if run != "C":
            await turns[run].step([calls(run)])
    await turns["C"].step([Message.assistant(f"c {i}") for i in range(80)])
    if resumed:
        began = turns["A"].began_seq
        assert began is not None
        turns["A"] = await memory.resume_turn(thread_id="chat", since_seq=began)
    outcome = "ok"
    try:
        await turns["A"].step([results("A", 0, 1)])
        await turns["B"].step([results("B", 0, 1)])
    except Exception as e:  # noqa: BLE001
        outcome = repr(e)[:300]
    stored = await memory.list_messages("chat", limit=1000)
    assert refusals(stored) == []
    assert (outcome, placed(stored)) == ("ok", {run: {"call_0": f"{run}0", "call_1": f"{run}1"} for run in "AB"})

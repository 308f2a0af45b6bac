"""The volatile sections of a context (the current task, the suggested response, working
memory, …) are the same from step to step while memory has not worked: each step built them
afresh (two messages validated, digested and priced per context, twice a turn). They are now
built once and shared between contexts, read-only like the observation messages, and dropped
with the other renderings after an erase."""

from __future__ import annotations

import pytest

from obsmem.om.context import build_context, forget_rendered
from obsmem.storage.contract import ObservationRecord, ThreadState
from obsmem.tokens import TokenCounter

from .helpers import START, Conversation

OBS = "Date: Jun 14, 2025\n* 🔴 (09:00) User plans to fly to Lisbon on Friday (meaning Jun 13, 2025)."


def _record(task: str, response: str) -> ObservationRecord:
    return ObservationRecord(
        id="r", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1", active_observations=OBS,
        threads={"t1": ThreadState(cursor=0, current_task=task, suggested_response=response)},
    )


def _sections(context: object) -> dict[str, object]:
    return {m.metadata.get("obsmem"): m for m in context.messages if m.role == "system"}  # type: ignore[attr-defined]


def test_steps_share_the_volatile_sections_until_they_change() -> None:
    conv, counter = Conversation(), TokenCounter()
    record = _record("Book the hotel for the team in Lisbon", "Offer three hotels near the office")
    first = build_context(record, [conv.user("hi")], thread_id="t1", now=START, counter=counter)
    again = build_context(record, [conv.user("hi"), conv.assistant("hello")], thread_id="t1", now=START, counter=counter)
    for key in ("current-task", "suggested-response"):
        assert _sections(again)[key] is _sections(first)[key]  # built once, not per step
    assert first.receipt is not None and again.receipt is not None
    assert first.receipt.section_tokens["sections"] == again.receipt.section_tokens["sections"] > 0
    changed = build_context(
        _record("Book the train instead", "Offer three hotels near the office"), [conv.user("hi")],
        thread_id="t1", now=START, counter=counter,
    )  # fmt: skip
    assert "Book the train instead" in _sections(changed)["current-task"].text  # type: ignore[attr-defined]
    assert _sections(changed)["suggested-response"] is _sections(first)["suggested-response"]


def test_a_shared_section_cannot_be_changed_by_one_caller_for_the_next() -> None:
    record = _record("Book the hotel", "Offer options")
    shown = _sections(build_context(record, [], thread_id="t1", now=START))["current-task"]
    with pytest.raises(TypeError):
        shown.metadata["obsmem"] = "something else"  # type: ignore[attr-defined]
    assert _sections(build_context(record, [], thread_id="t1", now=START))["current-task"].metadata["obsmem"] == "current-task"  # type: ignore[attr-defined]


def test_an_erase_drops_the_shared_sections() -> None:
    task = "Pay the invoice zqxvorbleplum"
    one = _sections(build_context(_record(task, "Ok"), [], thread_id="t1", now=START))["current-task"]
    forget_rendered()  # what an erase runs (assembly.forget_kept_in_process)
    from obsmem.om import context as module

    assert not any(task in key[0] for key in module._VOLATILE)
    two = _sections(build_context(_record(task, "Ok"), [], thread_id="t1", now=START))["current-task"]
    assert two is not one and two.text == one.text  # type: ignore[attr-defined]

"""Hostile review of the forgotten-ids check in the stores' saves (commit 7bac317), from the
user's side, on every store and with two ``Memory`` objects over one database: one forgets while
the other saves back the conversation it holds, or runs a turn."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import ToolCallPart, ToolResultPart

from .forget_race import SECRET, forget_first, holding, said

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def pair(url: str) -> AsyncIterator[tuple[Memory, Memory]]:
    async with Memory(url) as app:
        if url == "memory://":
            yield app, app
            return
        async with Memory(url) as admin:
            yield app, admin


async def test_another_memory_forgets_while_a_save_is_on_its_way(pair: tuple[Memory, Memory]) -> None:
    app, admin = pair
    history = await said(app)
    undo = forget_first(app, admin)
    await app.save_messages("t1", [*history, Message.user("and more")])
    undo()
    stored = await admin.list_messages("t1")
    assert holding(stored) == []
    assert stored[-1].text == "and more"
    assert [m.text for m in stored if m.id == history[1].id] == ["Hi there."]


async def test_a_turn_after_another_memorys_forget_keeps_its_input(pair: tuple[Memory, Memory]) -> None:
    app, admin = pair
    history = await said(app)
    await admin.forget(SECRET, resource_id="u1")
    turn = await app.begin_turn(thread_id="t1", messages=[*history, Message.user("what now?")])
    assert turn.context.messages[-1].text == "what now?"
    assert holding([*turn.context.messages, *turn.context.raw_messages]) == []
    await turn.end([Message.assistant("Nothing.")])
    stored = await app.list_messages("t1")
    assert holding(stored) == []
    assert [m.text for m in stored][-2:] == ["what now?", "Nothing."]


def _calls(*ids: str) -> Message:
    return Message(role="assistant", parts=tuple(ToolCallPart(tool_call_id=i, tool_name="lookup", args={}) for i in ids))


def _result(call_id: str, text: str) -> Message:
    return Message(role="tool", parts=(ToolResultPart(tool_call_id=call_id, tool_name="lookup", result=text),))


async def test_a_late_result_racing_a_forget_does_not_put_the_value_back(pair: tuple[Memory, Memory]) -> None:
    """Two calls closed as unanswered by another tab; the first's late result holds the value.
    A forget lands between the second late result's read of the closing message and its rewrite:
    the rewrite must not write back the first result as it was before the forget."""
    app, admin = pair
    a = await app.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("Oslo and Rome?")])
    await a.step([_calls("oslo", "rome")])
    await app.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user("another tab")])  # closes both
    await a.step([_result("oslo", f"door code {SECRET}")])
    store = app.store
    read = store.list_messages
    armed, fired, reads = True, False, 0

    async def list_then_forget(thread_id: str, **kwargs: object) -> list[Message]:
        nonlocal fired, reads
        found = await read(thread_id, **kwargs)  # type: ignore[arg-type]
        if armed and kwargs.get("newest_first") and any(m.metadata.get("obsmem_answered_late") for m in found):
            reads += 1
        if reads == 2 and not fired:  # the read inside the late-result lease, just before the rewrite
            fired = True
            await admin.forget(SECRET, thread_id="t1")
        return found

    store.list_messages = list_then_forget  # type: ignore[method-assign]
    try:
        await a.step([_result("rome", "sunny")])
    finally:
        armed = False
        del store.list_messages
    assert fired
    stored = await admin.list_messages("t1")
    assert holding(stored) == []
    results = {p.tool_call_id: p.result for m in stored for p in m.tool_results}
    assert results["rome"] == "sunny"
    assert SECRET not in str(results["oslo"])

"""A tool call left without its result does not lock the thread: the next turn closes it.

Seen from the user's side: an agent asks for approval before a tool runs (pydantic-ai deferred
tools, OpenAI Agents ``needs_approval``, Agent Framework approvals) or a tool raises and the run
stops; the call is stored, its result never comes, and the user says something else. Before the
fix every later ``begin_turn`` on that thread raised ``InvalidInputError`` ("comes while tool
calls [...] still wait for their results"): the conversation was locked for good. Now a turn
whose input says something while calls wait puts one tool message before it that answers each
waiting call as unanswered (``is_error``, :data:`~obsmem.om.selection.UNANSWERED`): the stored
thread and every context stay a valid provider sequence, the model and the observer are told no
result came, and nothing stored is changed or lost.

Within a turn (``step``) a message between a call and its result is still refused: there the
result can still come, and the refusal catches an agent loop's bug.
"""

from __future__ import annotations

import pytest

from obsmem import InvalidInputError, Memory, Message
from obsmem.convert.openai import to_openai
from obsmem.om.selection import ANSWERED_LATE_KEY, UNANSWERED, answer_late, check_input_sequence, close_waiting_calls
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


def _call(*ids: str) -> Message:
    return Message(role="assistant", parts=tuple(ToolCallPart(tool_call_id=i, tool_name=f"tool_{i}") for i in ids))


def _result(*ids: str) -> Message:
    return Message(role="tool", parts=tuple(ToolResultPart(tool_call_id=i, tool_name=f"tool_{i}", result="ok") for i in ids))


def _closed(messages: list[Message]) -> list[tuple[str, list[str]]]:
    """Each message as (role, ids of the calls it answers as unanswered)."""
    return [
        (m.role, [r.tool_call_id for r in m.tool_results if r.result == UNANSWERED and r.is_error]) for m in messages
    ]


# -- the pure rule ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("existing", "new", "expected"),
    [
        pytest.param([_call("a")], [Message.user("never mind")], [("tool", ["a"]), ("user", [])], id="stored call"),
        pytest.param([_call("a", "b"), _result("a")], [Message.user("hm")], [("tool", ["b"]), ("user", [])],
                     id="one of a parallel pair answered"),  # fmt: skip
        pytest.param([_call("a", "b")], [_result("b"), Message.user("hm")],
                     [("tool", []), ("tool", ["a"]), ("user", [])], id="a result in the input first"),  # fmt: skip
        pytest.param([], [_call("x"), Message.user("again")], [("assistant", []), ("tool", ["x"]), ("user", [])],
                     id="a re-sent history's call"),  # fmt: skip
        pytest.param([_call("a")], [_result("a"), Message.user("thanks")], [("tool", []), ("user", [])],
                     id="answered: nothing added"),  # fmt: skip
        pytest.param([_call("a")], [Message.system("be brief"), Message.user("hm")],
                     [("system", []), ("tool", ["a"]), ("user", [])], id="system messages are skipped"),  # fmt: skip
        pytest.param([Message.user("hi")], [Message.user("again")], [("user", [])], id="nothing waits"),
        pytest.param([_call("a")], [_call("b"), Message.user("hm")],
                     [("tool", ["a"]), ("assistant", []), ("tool", ["b"]), ("user", [])], id="two in a row"),  # fmt: skip
    ],
)
def test_waiting_calls_are_closed_before_the_next_message(
    existing: list[Message], new: list[Message], expected: list[tuple[str, list[str]]]
) -> None:
    closed = close_waiting_calls(existing, new)
    assert _closed(closed) == expected
    check_input_sequence(existing, closed)  # what it returns is a valid sequence
    assert [m for m in closed if m.metadata.get("obsmem_unanswered")] == [m for m in closed if m not in new]


def test_a_result_whose_call_is_not_waiting_is_still_refused() -> None:
    with pytest.raises(InvalidInputError, match="ghost"):
        check_input_sequence([_call("a")], close_waiting_calls([_call("a")], [_result("ghost"), Message.user("hm")]))


# -- from the user's side ---------------------------------------------------------------------
async def test_a_new_turn_after_an_unanswered_call_goes_on() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("delete /tmp/x")])
        call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="del1", tool_name="delete_file", args={"path": "/tmp/x"}),))
        await turn.step([call])  # the framework asks the user for approval; it never comes
        await turn.end()

        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("never mind, what's the weather?")])
        roles = [m.role for m in turn.context.raw_messages]
        assert roles == ["user", "assistant", "tool", "user"], roles
        closing = turn.context.raw_messages[2]
        assert closing.tool_results[0].tool_call_id == "del1" and closing.tool_results[0].is_error
        # a valid Chat Completions request: the call is answered before the next user message
        wire = to_openai(turn.context.messages)
        at = next(i for i, m in enumerate(wire) if m.get("tool_calls"))
        assert wire[at + 1]["role"] == "tool" and wire[at + 1]["tool_call_id"] == "del1"
        await turn.step([Message.assistant("Sunny.")])
        await turn.end()
        stored = await memory.list_messages("t")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant"]
        assert stored[1].id == call.id  # nothing stored was changed


async def test_a_retried_turn_closes_the_call_once() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("run it")])
        await turn.step([_call("c1")])
        await turn.end()
        asked = Message.user("forget it")
        first = await memory.begin_turn(thread_id="t", messages=[asked])
        await first.end()
        again = await memory.begin_turn(thread_id="t", messages=[asked])  # the same message sent again
        await again.end()
        stored = await memory.list_messages("t")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user"]


async def test_within_a_turn_a_message_between_a_call_and_its_result_is_still_refused() -> None:
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("run it")])
        await turn.step([_call("c1")])
        with pytest.raises(InvalidInputError, match="c1"):
            await turn.step([Message.assistant("while we wait…")])
        await turn.step([_result("c1")])
        await turn.end()


async def test_an_approval_given_after_the_user_went_on_takes_the_unanswered_place() -> None:
    """The user went on (the call was closed as unanswered), then the app resumes the first run
    with the approval: the tool ran, and its real result is what memory keeps, right after its
    call. Before, the result was refused ("already answered"): the run failed after the tool had
    run and memory kept "may not have run"."""
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("delete /tmp/x")])
        call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="del1", tool_name="delete_file", args={}),))
        await turn.step([call])
        await turn.end()
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("never mind")])
        await turn.end([Message.assistant("OK, I won't.")])

        approved = Message(role="tool", parts=(ToolResultPart(tool_call_id="del1", tool_name="delete_file", result="deleted"),))
        turn = await memory.begin_turn(thread_id="t", messages=[approved])  # the resumed run
        context = await turn.step([Message.assistant("Done: /tmp/x is deleted.")])
        await turn.end()
        stored = await memory.list_messages("t")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user", "assistant", "assistant"]
        result = stored[2].tool_results[0]
        assert (result.tool_call_id, result.result, result.is_error) == ("del1", "deleted", False)
        wire = to_openai(context.messages)
        at = next(i for i, m in enumerate(wire) if m.get("tool_calls"))
        assert wire[at + 1] == {"role": "tool", "tool_call_id": "del1", "content": "deleted"}
        assert sum(1 for m in wire if m["role"] == "tool") == 1

        # the same result sent again (a framework re-sending its run) stores nothing and raises nothing
        turn = await memory.begin_turn(thread_id="t", messages=[approved, Message.user("thanks")])
        await turn.end()
        assert [m.role for m in await memory.list_messages("t")][-2:] == ["assistant", "user"]
        assert len(await memory.list_messages("t")) == 7


def test_late_results_are_put_in_place_by_a_pure_rule() -> None:
    closing = close_waiting_calls([_call("a", "b")], [Message.user("hm")])[0]
    late_a = Message(role="tool", parts=(ToolResultPart(tool_call_id="a", tool_name="tool_a", result="A!"),))
    other = _result("zzz")
    kept, updated = answer_late([_call("a", "b"), closing, Message.user("hm")], [late_a, other])
    assert kept == [other] and len(updated) == 1
    assert [(r.tool_call_id, r.result, r.is_error) for r in updated[0].tool_results] == [
        ("a", "A!", False), ("b", UNANSWERED, True),
    ]
    assert updated[0].id == closing.id and updated[0].metadata[ANSWERED_LATE_KEY] == ["a"]
    again, none = answer_late([updated[0]], [late_a])
    assert again == [] and none == []
    assert answer_late([Message.user("hi")], [late_a]) == ([late_a], [])


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_an_approval_sent_through_the_turn_that_made_the_call_takes_the_unanswered_place(
    url: str, tmp_path: object
) -> None:
    """The same approval, sent through the *first* turn (still open: the app kept its Turn while
    the user went on in a new one). On main that turn checked the result against its own,
    stale context, where the call still waited: the result was stored after the new user
    message, a second result for the call, and every later context held it as an orphan
    (``to_openai``: ``[user, assistant(call), tool, user, tool]``, which OpenAI refuses)."""
    store = url if url == "memory://" else f"sqlite:///{tmp_path}/m.db"
    async with Memory(store) as memory:
        first = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("deploy it")])
        await first.step([Message(role="assistant", parts=(ToolCallPart(tool_call_id="d1", tool_name="deploy"),))])
        second = await memory.begin_turn(thread_id="t", messages=[Message.user("meanwhile, the weather?")])
        approved = Message(role="tool", parts=(ToolResultPart(tool_call_id="d1", tool_name="deploy", result="deployed"),))
        context = await first.step([approved])
        stored = await memory.list_messages("t")
        assert [m.role for m in stored] == ["user", "assistant", "tool", "user"]  # on main: a 2nd tool message
        result = stored[2].tool_results[0]
        assert (result.tool_call_id, result.result, result.is_error) == ("d1", "deployed", False)
        for shown in (context.messages, (await second.step([Message.assistant("Sunny.")])).messages,
                      (await memory.get_context("t")).messages):
            wire = to_openai(shown)
            at = next(i for i, m in enumerate(wire) if m.get("tool_calls"))
            assert wire[at + 1] == {"role": "tool", "tool_call_id": "d1", "content": "deployed"}
            assert sum(1 for m in wire if m["role"] == "tool") == 1
        await first.end()
        await second.end()

"""A turn boundary that fails after saving its input can be retried (issue 13, item 5).

``begin_turn`` and ``step`` save their input, then run memory work and build the context; any of
those later reads or writes can fail. The application's answer is to call again with the same
Message objects (same ids): the retry must store nothing twice, keep the thread's order, record
the input's instructions, and return a context holding the input exactly once. The failure says
whether the input was saved (``input_saved``) and is an :class:`~obsmem.errors.ObsmemError`.

Failures are injected by a real SQLite store that raises on the Nth call of one method made after
the boundary's ``save_messages`` returned (or by ``save_messages`` itself, after it committed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.errors import ObsmemError, StorageError
from obsmem.om.context import load_instructions
from obsmem.storage import SQLiteStore

from tests.engine.helpers import FACTS, Conversation, fake_clock, small_config

pytestmark = pytest.mark.anyio


class FailingStore(SQLiteStore):
    """A real SQLite store that fails once, on the ``nth`` call of ``method`` made after the next
    ``save_messages`` returned. ``"save_messages"`` itself fails after committing its batch."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.method: str | None = None
        self.nth = 1
        self.error: type[Exception] = StorageError
        self.armed = False
        self.calls = 0
        self.failed = False

    def fail(self, method: str, *, nth: int = 1, error: type[Exception] = StorageError) -> None:
        self.method, self.nth, self.error = method, nth, error
        self.armed, self.calls, self.failed = False, 0, False
        if method == "save_messages":
            return
        if method == "read_window":
            # Windows are read with their marks (read_window_marked): here, without them, as a
            # store that cannot mark reads them. (This store overrides save_messages, so it
            # keeps no window: every boundary reads, and that read fails here.)
            self.read_window_marked = self.window_mark = None  # type: ignore[assignment]
        real = getattr(super(), method)

        async def failing(*args: Any, **kwargs: Any) -> Any:
            if self.armed and not self.failed:
                self.calls += 1
                if self.calls == self.nth:
                    self.failed = True
                    raise self.error(f"injected failure of {method}")
            return await real(*args, **kwargs)

        setattr(self, method, failing)

    async def save_messages(self, thread_id: str, messages: list[Message]) -> list[Message]:
        saved = await super().save_messages(thread_id, messages)
        self._saved()
        return saved

    def _saved(self) -> None:
        if self.method is not None and not self.failed:
            if self.method == "save_messages":
                self.failed = True
                raise self.error("injected failure of save_messages (after it committed)")
            self.armed = True


def one() -> list[Message]:
    return [Message.user("What is the capital of France?", id="in-user")]


def several() -> list[Message]:
    return [
        Message.system("Answer in one sentence.", id="in-system"),
        Message.user("What is the capital of France?", id="in-user"),
        Message.user("And of Italy?", id="in-user-2"),
    ]


# The calls a quiet begin_turn makes after saving its input (the instructions' compare-and-set
# only when the input holds a system message). The window is read before the save (it checks
# the input), so a quiet boundary reads nothing after it; memory work does (see
# test_begin_turn_retried_after_its_memory_work_failed).
AFTER_SAVE = ["save_messages", "get_messages", "update_thread"]
BEGIN_CASES = [
    pytest.param(method, inputs, id=f"{method}-{inputs.__name__}")
    for method in AFTER_SAVE
    for inputs in (one, several)
    if inputs is several or method not in ("update_thread", "get_messages")
]


async def history(memory: Memory) -> list[str]:
    return [m.id for m in await memory.list_messages("t1")]


def context_ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


async def open_memory(tmp_path: Path) -> tuple[Memory, FailingStore]:
    store = FailingStore(tmp_path / "retry.db")
    memory = Memory(store, clock=fake_clock())
    # An earlier turn, so the retry has history to keep in order.
    conv = Conversation()
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Hello there")])
    await turn.end([conv.assistant("Hi! How can I help?")])
    return memory, store


def assert_says_saved(error: ObsmemError, method: str) -> None:
    """``input_saved`` and the error's note say whether the input was stored. A save that failed
    may or may not have committed: it reads False ("not known to be saved"); a retry is safe."""
    saved = method != "save_messages"
    assert getattr(error, "input_saved", None) is saved
    note = " ".join(getattr(error, "__notes__", []))
    assert ("after its input was saved" if saved else "before its input was saved") in note
    assert ("same Message objects" in note) is saved


async def fail_once(call: Callable[[], Awaitable[Any]]) -> ObsmemError:
    with pytest.raises(ObsmemError) as caught:
        await call()
    return caught.value


@pytest.mark.parametrize(("method", "inputs"), BEGIN_CASES)
async def test_begin_turn_retried_after_a_failure_stores_the_input_once(
    tmp_path: Path, method: str, inputs: Callable[[], list[Message]]
) -> None:
    memory, store = await open_memory(tmp_path)
    before = await history(memory)
    messages = inputs()
    ids = [m.id for m in messages]
    store.fail(method)

    error = await fail_once(lambda: memory.begin_turn(thread_id="t1", messages=messages))
    assert store.failed, f"{method} was never called after the save"
    assert_says_saved(error, method)

    turn = await memory.begin_turn(thread_id="t1", messages=messages)
    assert await history(memory) == before + ids
    shown = context_ids(turn.context.messages)
    for message_id in ids:
        assert shown.count(message_id) == 1, (message_id, shown)
    if any(m.role == "system" for m in messages):
        thread = await memory.get_thread("t1")
        recorded = await load_instructions(memory.store, thread)
        assert recorded is not None and [m.id for m in recorded] == ["in-system"]
    await turn.end()
    await memory.aclose()
    await store.close()


async def test_begin_turn_failing_before_the_save_says_nothing_was_saved(tmp_path: Path) -> None:
    memory, store = await open_memory(tmp_path)
    before = await history(memory)
    store.fail("get_messages")  # reads before the save (the re-sent copies) fail too
    store.armed = True
    error = await fail_once(lambda: memory.begin_turn(thread_id="t1", messages=several()))
    assert getattr(error, "input_saved", None) is False
    assert await history(memory) == before
    turn = await memory.begin_turn(thread_id="t1", messages=several())
    assert await history(memory) == before + [m.id for m in several()]
    await turn.end()
    await memory.aclose()
    await store.close()


async def test_an_untyped_failure_after_the_save_comes_out_typed(tmp_path: Path) -> None:
    memory, store = await open_memory(tmp_path)
    before = await history(memory)
    store.fail("get_messages", error=RuntimeError)
    error = await fail_once(lambda: memory.begin_turn(thread_id="t1", messages=several()))
    assert isinstance(error, StorageError)
    assert getattr(error, "input_saved", None) is True
    turn = await memory.begin_turn(thread_id="t1", messages=several())
    assert await history(memory) == before + [m.id for m in several()]
    await turn.end()
    await memory.aclose()
    await store.close()


async def test_messages_built_again_are_new_messages(tmp_path: Path) -> None:
    """By design: a retry must reuse the Message objects (or pass explicit ids). Two messages
    built separately with the same text are two messages; nothing is de-duplicated by content."""
    memory, store = await open_memory(tmp_path)
    before = await history(memory)
    store.fail("save_messages")
    first = Message.user("hi")
    await fail_once(lambda: memory.begin_turn(thread_id="t1", messages=[first]))
    again = Message.user("hi")
    turn = await memory.begin_turn(thread_id="t1", messages=[again])
    assert await history(memory) == before + [first.id, again.id]
    await turn.end()
    await memory.aclose()
    await store.close()


def one_response() -> list[Message]:
    return [Message.assistant("Paris.", id="out-answer")]


def call_and_result() -> list[Message]:
    conv = Conversation()
    call = conv.call("c1", city="Paris").model_copy(update={"id": "out-call"})
    result = conv.result("c1", {"temp": 21}).model_copy(update={"id": "out-result"})
    return [call, result]


STEP_CASES = [
    pytest.param(method, responses, id=f"{method}-{responses.__name__}")
    for method in ("save_messages", "read_window")
    for responses in (one_response, call_and_result)
]


@pytest.mark.parametrize(("method", "responses"), STEP_CASES)
async def test_step_retried_after_a_failure_stores_the_responses_once(
    tmp_path: Path, method: str, responses: Callable[[], list[Message]]
) -> None:
    memory, store = await open_memory(tmp_path)
    turn = await memory.begin_turn(thread_id="t1", messages=one())
    before = await history(memory)
    messages = responses()
    ids = [m.id for m in messages]
    store.fail(method)

    error = await fail_once(lambda: turn.step(messages))
    assert store.failed, f"{method} was never called after the save"
    assert_says_saved(error, method)
    assert turn.steps == 0

    context = await turn.step(messages)
    assert await history(memory) == before + ids
    shown = context_ids(context.messages)
    for message_id in ids:
        assert shown.count(message_id) == 1, (message_id, shown)
    assert turn.steps == 1
    await turn.end()
    await memory.aclose()
    await store.close()


async def test_a_tool_result_retried_alone_is_accepted(tmp_path: Path) -> None:
    """The call's result, saved by the failed step, must not make its retry 'already answered'."""
    memory, store = await open_memory(tmp_path)
    turn = await memory.begin_turn(thread_id="t1", messages=one())
    call, result = call_and_result()
    await turn.step([call])
    before = await history(memory)
    store.fail("read_window")
    error = await fail_once(lambda: turn.step([result]))
    assert getattr(error, "input_saved", None) is True
    context = await turn.step([result])
    assert await history(memory) == before + [result.id]
    assert context_ids(context.messages).count(result.id) == 1
    # A new turn retried with the same result (say, after the process restarted) is accepted too.
    store.fail("read_window")
    await fail_once(lambda: turn.step([Message.user("ok", id="later")]))
    again = await memory.begin_turn(thread_id="t1", messages=[Message.user("ok", id="later")])
    assert await history(memory) == [*before, result.id, "later"]
    await again.end()
    await memory.aclose()
    await store.close()


async def test_a_retried_step_keeps_its_input_raw_when_observation_runs(tmp_path: Path) -> None:
    """The responses a failed step saved are still the step's input on its retry: the actor has
    not seen them, so the observation the retry runs leaves them raw."""
    store = FailingStore(tmp_path / "retry.db")
    memory = Memory(store, config=small_config(message_tokens=400), clock=fake_clock())
    conv = Conversation()
    question = "Plan my week in Munich: " + " ".join(FACTS * 4)
    asked = conv.user(question)
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[asked])
    call = conv.call("c1", city="Munich")
    result = conv.result("c1", {"forecast": [f"day {n}: sunny, 21 degrees, light wind" for n in range(30)]})
    store.fail("read_window")
    await fail_once(lambda: turn.step([call, result]))

    context = await turn.step([call, result])
    assert turn.outcomes and any(o.applied for o in turn.outcomes), "the retry was meant to observe"
    raw = context_ids(context.raw_messages)
    assert raw.count(call.id) == 1 and raw.count(result.id) == 1, raw
    assert await history(memory) == [asked.id, call.id, result.id]
    await turn.end()
    await memory.aclose()
    await store.close()


async def test_begin_turn_failing_to_create_its_thread_says_nothing_was_saved(tmp_path: Path) -> None:
    memory, store = await open_memory(tmp_path)
    store.fail("create_thread")
    store.armed = True
    error = await fail_once(lambda: memory.begin_turn(thread_id="t2", resource_id="u1", messages=one()))
    assert getattr(error, "input_saved", None) is False
    turn = await memory.begin_turn(thread_id="t2", resource_id="u1", messages=one())
    assert [m.id for m in await memory.list_messages("t2")] == ["in-user"]
    await turn.end()
    await memory.aclose()
    await store.close()


@pytest.mark.parametrize("method", ["get_head", "update_record", "list_messages"])
async def test_begin_turn_retried_after_its_memory_work_failed(tmp_path: Path, method: str) -> None:
    """A begin_turn whose window is over the threshold observes after saving its input; a
    failure of that work leaves the input saved, and the retry stores it once, in its place."""
    store = FailingStore(tmp_path / "retry.db")
    memory = Memory(store, config=small_config(message_tokens=400), clock=fake_clock())
    conv = Conversation()
    turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("Plan my week in Munich.")])
    # save_messages runs no memory work (end() would start it): the next boundary finds the
    # window over the threshold.
    await turn.end()
    await memory.save_messages("t1", [conv.assistant("Here is the plan: " + " ".join(FACTS * 8))])
    before = await history(memory)
    store.fail(method)
    asked = Message.user("And the weekend?", id="in-weekend")
    error = await fail_once(lambda: memory.begin_turn(thread_id="t1", messages=[asked]))
    assert store.failed, f"{method} was never called after the save"
    assert_says_saved(error, method)

    turn = await memory.begin_turn(thread_id="t1", messages=[asked])
    assert any(o.applied for o in turn.outcomes), "the retry was meant to observe"
    assert await history(memory) == [*before, asked.id]
    assert context_ids(turn.context.messages).count(asked.id) == 1
    await turn.end()
    await memory.aclose()
    await store.close()

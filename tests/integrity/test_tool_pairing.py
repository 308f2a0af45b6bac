"""A tool call is never separated from its result (issue 12, item 3).

In every context an actor gets, each tool result is preceded by its call and each call older than
the newest assistant message by its result: in synchronous and buffered modes, with parallel
calls whose results arrive in separate steps, and across reflections. The property test drives
random interleavings through a real Memory and checks every context against the OpenAI (Chat
Completions, Responses) and Anthropic ordering rules. Invalid input (a result whose call was never
seen, a message between a call and its result) is refused with a typed InvalidInputError before
anything is saved.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem import InvalidInputError, Memory, MemoryConfig, Message, ObservationConfig, ObsmemError, ReflectionConfig
from obsmem.models.testing import FunctionModel
from obsmem.om.context import ContextWindow
from obsmem.om.selection import check_input_sequence
from obsmem.storage.contract import BufferedChunk
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

from tests.convert.validators import assert_valid_for_providers, provider_problems
from tests.engine.helpers import Conversation, fake_clock

pytestmark = pytest.mark.anyio

WEATHER = "Paris: sunny, 24 degrees, light wind from the west, humidity 40 percent. "


def calls(conv: Conversation, *ids: str, text: str | None = None) -> Message:
    at = conv._next()
    parts: list[Any] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(tool_call_id=i, tool_name="search", args={"q": i}) for i in ids]
    return Message(id=f"c{conv.count}", role="assistant", parts=tuple(parts), created_at=at)


def results(conv: Conversation, *answers: tuple[str, str]) -> Message:
    at = conv._next()
    parts = tuple(ToolResultPart(tool_call_id=i, tool_name="search", result=value) for i, value in answers)
    return Message(id=f"r{conv.count}", role="tool", parts=parts, created_at=at)


def valid(context: ContextWindow | list[Message]) -> None:
    messages = context.messages if isinstance(context, ContextWindow) else context
    assert_valid_for_providers(messages, allow_pending_calls=True)


def sync_config(message_tokens: int = 400, observation_tokens: int = 100_000) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
    )


def buffered_config(message_tokens: int = 400, observation_tokens: int = 100_000) -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=message_tokens, buffer_tokens=100),
        reflection=ReflectionConfig(observation_tokens=observation_tokens),
    )


# -- the two regressions the issue reported ---------------------------------------------------


async def test_a_buffer_taken_while_a_parallel_call_waits_never_orphans_its_result() -> None:
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    conv = Conversation()
    async with memory:
        turn = await memory.begin_turn(
            thread_id="t1", resource_id="u1",
            messages=[conv.user("Please look up the weather in Paris and in Rome for my trip next week. " * 3)],
        )
        valid(turn.context.messages)
        valid(await turn.step([calls(conv, "c1", "c2")]))
        valid(await turn.step([results(conv, ("c1", WEATHER * 4))]))
        await memory.settled()  # a buffer started here must not end between c2 and its result
        valid(await turn.step([results(conv, ("c2", "Rome: cloudy, 19 degrees. " * 30))]))
        valid(await turn.step([conv.assistant("Paris is sunny, Rome cloudy.")]))
        await turn.end()
        valid((await memory.get_context("t1")).messages)


async def test_a_large_first_result_of_parallel_calls_is_not_observed_without_the_second() -> None:
    memory = Memory("memory://", config=sync_config(), clock=fake_clock())
    conv = Conversation()
    async with memory:
        turn = await memory.begin_turn(
            thread_id="t1", resource_id="u1",
            messages=[conv.user("Please look up the weather in Paris and in Rome for my trip next week. " * 3)],
        )
        valid(await turn.step([calls(conv, "c1", "c2")]))
        valid(await turn.step([results(conv, ("c1", WEATHER * 40))]))
        valid(await turn.step([results(conv, ("c2", "Rome: cloudy, 19 degrees. " * 30))]))
        valid(await turn.step([conv.assistant("Paris is sunny, Rome cloudy.")]))
        await turn.end()


async def test_reflections_keep_calls_and_results_together() -> None:
    memory = Memory("memory://", config=buffered_config(300, observation_tokens=400), clock=fake_clock())
    conv = Conversation()
    async with memory:
        for n in range(12):
            turn = await memory.begin_turn(
                thread_id="t1", resource_id="u1",
                messages=[conv.user(f"Question {n}: what is the weather in city {n}? I fly there on Friday.")],
            )
            valid(turn.context.messages)
            ids = (f"a{n}", f"b{n}")
            valid(await turn.step([calls(conv, *ids, text="Checking both sources.")]))
            valid(await turn.step([results(conv, (ids[1], WEATHER * 3))]))
            valid(await turn.step([results(conv, (ids[0], WEATHER * 2))]))
            valid(await turn.step([conv.assistant(f"City {n} will be sunny and warm on Friday.")]))
            await turn.end()
            await memory.settled()
        generations = await memory.list_generations("t1")
        assert len(generations) > 1, "the run reflected at least once"
        valid((await memory.get_context("t1")).messages)


async def test_a_stored_chunk_that_ends_between_a_call_and_its_result_is_dropped_not_activated() -> None:
    """A record written before this rule (a chunk over a call and only one of its results) must not
    orphan the other result: the chunk is dropped and its messages are observed again."""
    memory = Memory("memory://", config=buffered_config(), clock=fake_clock())
    conv = Conversation()
    async with memory:
        thread = await memory.create_thread("t1", "u1")
        question = conv.user("Weather in Paris and Rome for next week, please. " * 4)
        step = calls(conv, "c1", "c2")
        first, second = results(conv, ("c1", WEATHER * 6)), results(conv, ("c2", "Rome: cloudy. " * 30))
        saved = await memory.save_messages("t1", [question, step, first, second, conv.assistant("Sunny and cloudy.")])
        head = await memory.engine.head(thread)
        old = BufferedChunk(
            id="chunk_old", cycle_id="buf_old", thread_id="t1", observations="* 🟡 (09:01) User asked about weather.",
            observation_tokens=10, message_ids=tuple(m.id for m in saved[:3]),
            message_tokens=sum(memory.counter.count_message(m) for m in saved[:3]),
            first_seq=saved[0].seq or 0, last_seq=saved[2].seq or 0,
        )
        await memory.store.update_record(
            head.model_copy(update={"buffered_chunks": (old,), "version": head.version + 1}),
            expected_version=head.version,
        )
        turn = await memory.begin_turn(thread_id="t1", messages=[conv.user("Thanks! And Berlin? " * 20)])
        valid(turn.context)
        record = await memory.get_record("t1")
        assert record is not None and all(c.id != "chunk_old" for c in record.buffered_chunks)
        valid(await turn.step([conv.assistant("Berlin is windy.")]))
        await turn.end()


# -- random interleavings through a real Memory ----------------------------------------------


@dataclass
class Round:
    """One model step that calls tools in parallel, and how their results come back."""

    sizes: list[int]  # result sizes (repetitions of WEATHER), one per call
    groups: list[list[int]]  # results delivered per step call, in this order
    one_message: list[bool]  # per group: all its results in one tool message, or one message each
    settle: list[bool]  # per group: let background buffers land before the next step
    text: bool  # the calling message also says something


@dataclass
class Script:
    buffered: bool
    message_tokens: int
    observation_tokens: int
    turns: list[tuple[int, list[Round], int]] = field(default_factory=list)  # user size, rounds, answer size


@st.composite
def rounds(draw: st.DrawFn) -> Round:
    n = draw(st.integers(1, 3))
    order = draw(st.permutations(list(range(n))))
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
    groups = [list(order[a:b]) for a, b in itertools.pairwise([0, *cuts, n])]
    return Round(
        sizes=[draw(st.sampled_from([1, 4, 20, 60])) for _ in range(n)],
        groups=groups,
        one_message=[draw(st.booleans()) for _ in groups],
        settle=[draw(st.booleans()) for _ in groups],
        text=draw(st.booleans()),
    )


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    script = Script(
        buffered=draw(st.booleans()),
        message_tokens=draw(st.sampled_from([300, 500, 900])),
        observation_tokens=draw(st.sampled_from([300, 600, 2000])),
    )
    for _ in range(draw(st.integers(1, 5))):
        script.turns.append(
            (draw(st.sampled_from([1, 3, 25])), draw(st.lists(rounds(), max_size=3)), draw(st.sampled_from([1, 8])))
        )
    return script


async def run_script(script: Script) -> None:
    config = (buffered_config if script.buffered else sync_config)(script.message_tokens, script.observation_tokens)
    memory = Memory("memory://", config=config, clock=fake_clock())
    conv = Conversation()
    call_ids = (f"call_{i}" for i in itertools.count())

    def check(context: ContextWindow, where: str) -> None:
        messages = context.messages
        problems = {k: v for k, v in provider_problems(messages, allow_pending_calls=True).items() if v}
        assert not problems, f"{where}: {problems}\n{[(m.role, m.id) for m in messages]}"

    async with memory:
        for t, (user_size, turn_rounds, answer_size) in enumerate(script.turns):
            user = conv.user(f"Turn {t}: plan my trip to Lisbon on Friday and check the weather. " * user_size)
            turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[user])
            check(turn.context, f"turn {t} begin")
            for r, spec in enumerate(turn_rounds):
                ids = [next(call_ids) for _ in spec.sizes]
                check(await turn.step([calls(conv, *ids, text="Let me check." if spec.text else None)]), f"{t}.{r} call")
                for g, group in enumerate(spec.groups):
                    answers = [(ids[i], f"{ids[i]}: " + WEATHER * spec.sizes[i]) for i in group]
                    batch = [results(conv, *answers)] if spec.one_message[g] else [results(conv, a) for a in answers]
                    check(await turn.step(batch), f"{t}.{r} results {g}")
                    if spec.settle[g]:
                        await memory.settled()
                        check(await memory.get_context("t1"), f"{t}.{r} settled {g}")
            check(await turn.step([conv.assistant("Lisbon on Friday: sunny. " * answer_size)]), f"turn {t} answer")
            await turn.end()
            await memory.settled()
            check(await memory.get_context("t1"), f"turn {t} end")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_every_context_is_valid_for_openai_and_anthropic(script: Script) -> None:
    asyncio.run(run_script(script))


# -- invalid input is refused before it is saved -----------------------------------------------


def _call(*ids: str) -> Message:
    return Message(role="assistant", parts=tuple(ToolCallPart(tool_call_id=i, tool_name="search") for i in ids))


def _result(*ids: str) -> Message:
    return Message(role="tool", parts=tuple(ToolResultPart(tool_call_id=i, tool_name="search", result="ok") for i in ids))


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        pytest.param([], [Message.user("hi")], id="plain"),
        pytest.param([Message.user("hi")], [_call("a"), _result("a"), Message.assistant("done")], id="call+result"),
        pytest.param([_call("a", "b")], [_result("b")], id="one of two"),
        pytest.param([_call("a", "b"), _result("b")], [_result("a"), Message.assistant("ok")], id="the other one"),
        pytest.param([_call("a")], [Message(role="user", parts=(
            ToolResultPart(tool_call_id="a", tool_name="search", result=1), TextPart(text="and then?")))],
            id="result carried in the next user message"),
        pytest.param([_call("lost"), Message.user("moved on")], [Message.user("again")], id="old orphan tolerated"),
        pytest.param([], [Message.system("be brief"), Message.user("hi")], id="system message"),
    ],
)
def test_valid_input_sequences_pass(existing: list[Message], new: list[Message]) -> None:
    check_input_sequence(existing, new)


@pytest.mark.parametrize(
    ("existing", "new", "says"),
    [
        pytest.param([Message.user("hi")], [_result("ghost")], "ghost", id="result without a call"),
        pytest.param([_call("a")], [Message.user("what now?")], "a", id="user message after an unanswered call"),
        pytest.param([_call("a", "b"), _result("a")], [Message.assistant("done")], "b", id="assistant before a result"),
        pytest.param([_call("a"), _result("a")], [_result("a")], "a", id="answered twice"),
        pytest.param([], [_call("a"), Message.user("hm")], "a", id="inside the new messages"),
        pytest.param([_call("a")], [_call("b")], "a", id="a new call before the old one is answered"),
    ],
)
def test_invalid_input_sequences_raise(existing: list[Message], new: list[Message], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        check_input_sequence(existing, new)


async def test_the_engine_checks_new_messages_against_the_stored_tail() -> None:
    """What ``Turn`` calls before it saves: the stored tail's waiting calls decide."""
    memory = Memory("memory://", config=sync_config(), clock=fake_clock())
    conv = Conversation()
    async with memory:
        thread = await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [conv.user("weather?"), calls(conv, "c1", "c2"), results(conv, ("c1", "x"))])
        with pytest.raises(InvalidInputError, match="c2"):
            await memory.engine.check_input(thread, [conv.user("never mind")])
        with pytest.raises(InvalidInputError, match="ghost"):
            await memory.engine.check_input(thread, [results(conv, ("ghost", "boo"))])
        await memory.engine.check_input(thread, [results(conv, ("c2", "y")), conv.assistant("both done")])


async def test_a_step_that_failed_after_saving_does_not_leave_a_stale_tail() -> None:
    """A step whose memory work raised (failure_policy="throw") after its messages were saved:
    the next step is checked against what is stored, not against the last context the turn
    returned (which still ended at the call). Before, the call's result, saved by the failed
    step, was unknown to the check and the next message was refused as coming before it."""

    failures = [RuntimeError("observer down")]

    async def failing(messages: Any, settings: Any) -> str:
        if failures:
            raise failures.pop()
        return "<observations>\n* 🟢 (10:00) User asked about the weather in Paris.\n</observations>"

    conv = Conversation()
    memory = Memory(
        "memory://", config=sync_config(message_tokens=200), observer=FunctionModel(failing),
        reflector="offline", clock=fake_clock(), failure_policy="throw",
    )
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[conv.user("What is the weather?")])
        await turn.step([calls(conv, "w1")])
        with pytest.raises(ObsmemError):  # the result pushes the window past the threshold
            await turn.step([results(conv, ("w1", WEATHER * 20))])
        stored = await memory.list_messages("t1")
        assert stored[-1].tool_results, "the failed step saved the result"
        context = await turn.step([conv.assistant("It is sunny in Paris.")])  # refused before
        valid(context)
        await turn.end()

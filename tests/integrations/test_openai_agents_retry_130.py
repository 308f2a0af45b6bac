"""OpenAI Agents SDK: a run that failed at its model call (the provider down), run again with the
same input. The SDK had saved the failed run's input (``add_items`` before the first model call),
and the rerun saved it again; and since the SDK sends what the session returns plus the run's
input, the model got the question twice. A rerun of a failed input is stored once (sent once with
model_input_filter; without it, the SDK adds the run's input to the stored context, so the model
gets it twice that once: no stored question is hidden, helper-134); a different question after a
failed run keeps both, in order."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message
from agents.testing.model import ModelStep

from obsmem import Memory
from obsmem.integrations.openai_agents import ObsmemSession

pytestmark = pytest.mark.anyio

RUN = RunConfig(tracing_disabled=True)


class Provider:
    """A scripted model that fails while ``down`` and records the input of every call."""

    def __init__(self) -> None:
        self.down = False
        self.inputs: list[list[dict[str, Any]]] = []
        self.model = ScriptedModel([ModelStep.respond(self._respond) for _ in range(30)])

    def _respond(self, call: Any) -> list[Any]:
        self.inputs.append([dict(i) for i in call.input] if isinstance(call.input, list) else call.input)
        if self.down:
            raise ConnectionError("provider down")
        return [assistant_message(f"answer {len(self.inputs)}")]


def _questions(items: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item.get("role") != "user":
            continue
        content = item.get("content")
        out.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
    return out


async def _stored(memory: Memory, thread: str) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in await memory.list_messages(thread)]


async def test_a_question_run_again_after_a_failed_run_is_stored_once() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r1", resource_id="u")
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=RUN)
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "What does he eat?", session=session, run_config=RUN)
        assert (await _stored(memory, "oa-r1"))[-1] == ("user", "What does he eat?")  # kept

        provider.down = False
        again = ObsmemSession(memory, session_id="oa-r1", resource_id="u")  # a new request's session too
        await Runner.run(agent, "What does he eat?", session=again, run_config=RUN)
        # Without model_input_filter the SDK sends the session's items (the stored question
        # included: a question is never hidden) and then the run's input: twice, this once.
        assert _questions(provider.inputs[-1]) == ["Where does Rex walk?", "What does he eat?", "What does he eat?"]
        await Runner.run(agent, "And how old is he?", session=again, run_config=RUN)
        assert _questions(provider.inputs[-1]) == ["Where does Rex walk?", "What does he eat?", "And how old is he?"]
        assert await _stored(memory, "oa-r1") == [
            ("user", "Where does Rex walk?"), ("assistant", "answer 1"),
            ("user", "What does he eat?"), ("assistant", "answer 3"),
            ("user", "And how old is he?"), ("assistant", "answer 4"),
        ]


async def test_with_the_input_filter_the_retried_question_is_sent_once() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r2", resource_id="u")
        run = RunConfig(tracing_disabled=True, call_model_input_filter=session.model_input_filter)
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=run)
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "What does he eat?", session=session, run_config=run)
        provider.down = False
        await Runner.run(agent, "What does he eat?", session=session, run_config=run)
        assert _questions(provider.inputs[-1]) == ["Where does Rex walk?", "What does he eat?"]
        assert [t for r, t in await _stored(memory, "oa-r2") if r == "user"] == [
            "Where does Rex walk?", "What does he eat?",
        ]


async def test_another_question_after_a_failed_run_keeps_both_in_order() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r3", resource_id="u")
        await Runner.run(agent, "Where does Rex walk?", session=session, run_config=RUN)
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "What does he eat?", session=session, run_config=RUN)
        provider.down = False
        await Runner.run(agent, "Is he vaccinated?", session=session, run_config=RUN)
        assert _questions(provider.inputs[-1])[-1] == "Is he vaccinated?"  # the newest question is last
        await Runner.run(agent, "Thanks!", session=session, run_config=RUN)
        assert _questions(provider.inputs[-1]) == [
            "Where does Rex walk?", "What does he eat?", "Is he vaccinated?", "Thanks!",
        ]
        assert [t for r, t in await _stored(memory, "oa-r3") if r == "user"] == [
            "Where does Rex walk?", "What does he eat?", "Is he vaccinated?", "Thanks!",
        ]


async def test_the_same_question_after_its_answer_is_a_new_question() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r4", resource_id="u")
        await Runner.run(agent, "Tell me a joke.", session=session, run_config=RUN)
        await Runner.run(agent, "Tell me a joke.", session=session, run_config=RUN)
        assert _questions(provider.inputs[-1]) == ["Tell me a joke.", "Tell me a joke."]
        assert [t for r, t in await _stored(memory, "oa-r4") if r == "user"] == ["Tell me a joke."] * 2


async def test_a_streamed_run_retried_after_a_failure_stores_the_question_once() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)

    async def stream(question: str, session: ObsmemSession) -> None:
        result = Runner.run_streamed(agent, question, session=session, run_config=RUN)
        async for _ in result.stream_events():
            pass

    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r5", resource_id="u")
        await stream("Where does Rex walk?", session)
        provider.down = True
        with pytest.raises(ConnectionError):
            await stream("What does he eat?", session)
        provider.down = False
        await stream("What does he eat?", session)
        # sent twice this once (see the first test), stored once
        assert _questions(provider.inputs[-1]) == ["Where does Rex walk?", "What does he eat?", "What does he eat?"]
        assert [t for r, t in await _stored(memory, "oa-r5") if r == "user"] == [
            "Where does Rex walk?", "What does he eat?",
        ]


async def test_the_app_reading_the_session_still_gets_the_unanswered_question() -> None:
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r6", resource_id="u")
        provider.down = True
        with pytest.raises(ConnectionError):
            await Runner.run(agent, "What does he eat?", session=session, run_config=RUN)
        assert [i.get("content") for i in await session.get_items()] == [
            [{"type": "input_text", "text": "What does he eat?"}],
        ]


async def test_a_question_the_app_stored_is_sent_to_a_run_with_no_new_input() -> None:
    """The app saves the user's message itself (``session.add_items``: a webhook, say) and runs the
    agent on the session with no new input: the model gets that message, the newest input."""
    provider = Provider()
    agent = Agent(name="a", instructions="Be brief.", model=provider.model)
    async with Memory("memory://") as memory:
        session = ObsmemSession(memory, session_id="oa-r7", resource_id="u")
        await session.add_items([{"role": "user", "content": "Where does Rex walk?"}])
        await Runner.run(agent, [], session=session, run_config=RUN)
        assert _questions(provider.inputs[-1]) == ["Where does Rex walk?"]

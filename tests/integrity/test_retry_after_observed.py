"""A turn whose model call failed is retried as documented: ``begin_turn`` again with the same
Message objects (the app's system prompt and the user's question). Meanwhile memory work
(another process, a worker, an idle buffer) observed the unanswered question. The retry's
context left the question out when the batch held more than the question (the system prompt
too): the model was asked to answer nothing. The question alone was kept in view. The current
input is always visible to the model."""

from __future__ import annotations

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig

pytestmark = pytest.mark.anyio

CONFIG = MemoryConfig(observation=ObservationConfig(message_tokens=300, buffer_tokens=False))


@pytest.mark.parametrize("with_system", [True, False], ids=["system-and-question", "question-alone"])
async def test_a_retried_turn_shows_its_question_after_memory_observed_it(with_system: bool) -> None:
    async with Memory("memory://", config=CONFIG) as memory:
        system = Message.system("You help.")
        for i in range(3):
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[
                system, Message.user(f"Fact {i}: my dog Rex likes walking number {i} in the park by the lake.")])
            await turn.step([Message.assistant(f"Noted {i}.")])
            await turn.end()
        question = Message.user("What does Rex eat?")
        batch = [system, question] if with_system else [question]
        failed = await memory.begin_turn(thread_id="t", resource_id="u", messages=batch)
        await failed.end()  # the model call failed: the app retries the turn
        await memory.observe("t")  # memory work observed the unanswered question meanwhile
        assert (await memory.status("t")).unobserved_messages == 0

        retried = await memory.begin_turn(thread_id="t", resource_id="u", messages=batch)

        shown = [m.id for m in retried.context.messages]
        assert shown.count(question.id) == 1, [(m.role, m.text[:40]) for m in retried.context.messages]
        assert [m.id for m in await memory.list_messages("t")].count(question.id) == 1
        await retried.end()


async def test_history_sent_again_without_a_new_question_does_not_bring_an_old_one_back() -> None:
    """Only an unanswered question given again is the turn's: the whole history sent again with
    nothing new (an answered question observed long ago among it) shows no old question again."""
    async with Memory("memory://", config=CONFIG) as memory:
        sent: list[Message] = []
        for i in range(3):
            question = Message.user(f"Fact {i}: my dog Rex likes walking number {i} in the park by the lake.")
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[*sent, question])
            answer = Message.assistant(f"Noted {i}.")
            await turn.step([answer])
            await turn.end()
            sent += [question, answer]
        await memory.observe("t")
        assert (await memory.status("t")).unobserved_messages == 0

        again = await memory.begin_turn(thread_id="t", resource_id="u", messages=sent)

        assert not [m for m in again.context.messages if m.role == "user" and m.text.startswith("Fact")]
        await again.end()

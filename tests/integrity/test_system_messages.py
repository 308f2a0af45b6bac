"""The application's own instructions survive (issue 12, item 2, the context half).

System messages an application passes (to ``begin_turn``, ``step``, ``end`` or
``save_messages``) are its instructions: the system messages of the most recent call that
passed any lead every later context of the thread, before obsmem's own messages, exactly as
stored (the newest version of each id), and are never observed. On main they were stored and
then silently skipped by the context builder: the actor never saw them.

Everything here goes through :class:`~obsmem.Memory` with the offline observer and reflector,
thresholds low enough that observation and reflection both run, and a fake clock.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.clock import FakeClock
from obsmem.om.context import ContextWindow, is_obsmem_message
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult

pytestmark = pytest.mark.anyio

START = datetime(2025, 6, 16, 9, 0, tzinfo=UTC)
PROMPT = "You are Pia, the travel desk assistant of Helio GmbH. Always answer in British English."
SECOND = "Policy: never book flights that leave before 07:00."


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=300, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=300),
    )


NAMES = ["Alex", "Mia", "Jonas", "Lena", "Omar", "Sofia", "Kenji", "Ines", "Tomas", "Priya", "Yusuf", "Clara"]
CITIES = ["Munich", "Lisbon", "Oslo", "Porto", "Vienna", "Krakow", "Lyon", "Ghent", "Turin", "Bergen", "Malmo", "Graz"]
FOODS = ["ramen", "bacalhau", "pierogi", "schnitzel", "tapas", "fondue", "pho", "dumplings", "risotto", "tacos"]


def fact(i: int) -> str:
    """A different fact every time, so the offline observer writes a new line for each."""
    name, city, food = NAMES[i % len(NAMES)], CITIES[(i * 5) % len(CITIES)], FOODS[(i * 3) % len(FOODS)]
    return f"My colleague {name} ({i}) moved to {city} last year and now cooks {food} every Sunday."


FACTS = [fact(i) for i in range(8)]


class Chat:
    """Messages stamped by a fake clock that moves one minute per message."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.n = 0

    def _at(self) -> datetime:
        self.clock.advance(60)
        self.n += 1
        return self.clock.now()

    def user(self, text: str) -> Message:
        return Message.user(text, id=f"u{self.n + 1}", created_at=self._at())

    def assistant(self, text: str) -> Message:
        return Message.assistant(text, id=f"a{self.n + 1}", created_at=self._at())

    def system(self, text: str, id: str) -> Message:
        return Message.system(text, id=id, created_at=self._at())


def instructions_of(context: ContextWindow) -> list[str]:
    """The leading system messages that are not obsmem's own."""
    leading: list[str] = []
    for message in context.messages:
        if message.role != "system" or is_obsmem_message(message):
            break
        leading.append(message.text)
    return leading


async def test_an_app_system_prompt_leads_every_context_across_observation_and_reflection() -> None:
    """The prompt passed once, at the first begin_turn, is the first message of every context the
    actor gets afterwards — while it is raw, after observation moved the cursor past it, and after
    reflection — exactly once, and never inside an observation (main: gone from the first context
    on; the builder skipped every system message)."""
    clock = FakeClock(START)
    chat = Chat(clock)
    contexts: list[ContextWindow] = []
    async with Memory("memory://", config=config(), clock=clock) as memory:
        for i in range(30):
            first = [chat.system(PROMPT, "app-prompt")] if i == 0 else []
            turn = await memory.begin_turn(
                thread_id="t", resource_id="u", messages=[*first, chat.user(f"{fact(i)} Any tips for visiting?")]
            )
            contexts.append(turn.context)
            contexts.append(await turn.step([chat.assistant(f"Noted. Tip {i}: book early, and keep receipts.")]))
            await turn.end()
            contexts.append(await memory.get_context("t"))
        generations = await memory.list_generations("t")
        record = await memory.get_record("t")
    assert record is not None and record.cursor("t") > 1, "observation ran"
    assert len(generations) > 1, "reflection ran"
    assert any(c.has_observations for c in contexts)
    missing = [i for i, c in enumerate(contexts) if instructions_of(c) != [PROMPT]]
    assert missing == []
    for context in contexts:
        assert context.messages[0].id == "app-prompt"
        assert sum(PROMPT in m.text for m in context.messages) == 1
        assert context.prefix_text.startswith(PROMPT)
    for generation in generations:
        assert "Pia" not in generation.active_observations
        assert "British English" not in generation.active_observations


async def test_instructions_come_before_the_observations_and_the_prefix_stays_byte_stable() -> None:
    """Order: the app's instructions, obsmem's preamble and observation chunks, the volatile
    sections, the continuation reminder, the raw tail; the cacheable prefix (instructions and
    observations) is byte-identical across the steps of a turn."""
    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), clock=clock) as memory:
        turn = await memory.begin_turn(
            thread_id="t", resource_id="u",
            messages=[chat.system(PROMPT, "p1"), chat.system(SECOND, "p2"), chat.user(FACTS[0])],
        )
        await turn.end([chat.assistant("Good to know.")])
        for text in FACTS[1:]:
            turn = await memory.begin_turn(thread_id="t", messages=[chat.user(text)])
            await turn.end([chat.assistant("Noted, thanks for telling me.")])
        turn = await memory.begin_turn(thread_id="t", messages=[chat.user("Which seat do I like?")])
        first = turn.context
        second = await turn.step([chat.assistant("Let me check your preferences.")])
        await turn.end()
    assert first.has_observations
    for context in (first, second):
        assert [m.id for m in context.messages[:2]] == ["p1", "p2"]
        assert context.messages[2].metadata.get("obsmem") == "preamble"
        assert [m.text for m in context.instructions] == [PROMPT, SECOND]
    assert first.prefix_text == second.prefix_text
    assert first.prefix_text.startswith(f"{PROMPT}\n\n{SECOND}\n\n")


async def test_system_messages_passed_again_replace_the_instructions() -> None:
    """The system messages of the most recent call that passed any are the instructions; an
    earlier set is not shown any more, and a re-saved id shows its newest text."""
    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), clock=clock) as memory:
        turn = await memory.begin_turn(
            thread_id="t", resource_id="u", messages=[chat.system(PROMPT, "p1"), chat.user(FACTS[0])]
        )
        assert instructions_of(turn.context) == [PROMPT]
        await turn.end([chat.assistant("Good to know.")])
        for text in FACTS[1:4]:
            turn = await memory.begin_turn(thread_id="t", messages=[chat.user(text)])
            await turn.end([chat.assistant("Noted, thanks for telling me.")])
        assert instructions_of(await memory.get_context("t")) == [PROMPT]
        turn = await memory.begin_turn(thread_id="t", messages=[chat.system(SECOND, "p2"), chat.user("Hi again.")])
        assert instructions_of(turn.context) == [SECOND]
        await turn.end([chat.assistant("Hello!")])
        await memory.save_messages("t", [chat.system(SECOND + " Trains are fine.", "p2")])
        assert instructions_of(await memory.get_context("t")) == [SECOND + " Trains are fine."]


async def test_system_messages_never_reach_the_observer() -> None:
    """The instructions are not conversation: no observer request ever holds them."""
    seen: list[ObservationRequest] = []

    class Recording:
        name = "recording"

        def __init__(self) -> None:
            self.inner = OfflineObserver()

        async def observe(self, request: ObservationRequest) -> ObservationResult:
            seen.append(request)
            return await self.inner.observe(request)

    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), observer=Recording(), clock=clock) as memory:
        for i in range(16):
            first = [chat.system(PROMPT, "p1")] if i == 0 else []
            turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[*first, chat.user(fact(i))])
            await turn.end([chat.assistant(f"Noted ({i}).")])
    assert seen
    assert all(m.role != "system" and PROMPT not in m.text for r in seen for m in r.messages)


def test_the_instructions_rule_is_documented_in_the_context_module() -> None:
    from obsmem.om import context

    doc = " ".join((context.__doc__ or "").split())
    assert "The application's instructions" in doc
    assert "most recent call that passed any" in doc


async def test_a_prompt_sent_anew_every_turn_is_recorded_once_and_leads_every_context() -> None:
    """Most applications send their system prompt with every call (a new message each time). The
    thread records it once (no write per turn); every context leads with it exactly once, also
    after observation moved the cursor past it; a changed prompt is recorded and shown."""
    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), clock=clock) as memory:
        versions: list[int] = []
        for i in range(20):
            turn = await memory.begin_turn(
                thread_id="t", resource_id="u", messages=[chat.system(PROMPT, f"prompt-{i}"), chat.user(fact(i))]
            )
            assert instructions_of(turn.context) == [PROMPT], i
            assert instructions_of(await turn.step([chat.assistant(f"Noted, tip {i}.")])) == [PROMPT], i
            await turn.end()
            versions.append((await memory.get_thread("t")).version)
        record = await memory.get_record("t")
        assert record is not None and record.cursor("t") > 1, "observation ran"
        assert len(set(versions)) == 1, versions  # recorded by the first turn only
        turn = await memory.begin_turn(thread_id="t", messages=[chat.system(SECOND, "changed"), chat.user("Hi.")])
        assert instructions_of(turn.context) == [SECOND]
        await turn.end([chat.assistant("Hello!")])
        assert (await memory.get_thread("t")).version > versions[-1]
        assert instructions_of(await memory.get_context("t")) == [SECOND]


async def test_system_messages_sent_again_with_a_new_one_are_all_instructions() -> None:
    """A framework that keeps every system message in its state (LangChain) sends the earlier
    one again (same id: a copy of a stored message) with a new one: both are the call's
    instructions, in the order sent. Before, a copy did not count: the new one replaced it."""
    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), clock=clock) as memory:
        prompt = chat.system(PROMPT, "p1")
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[prompt, chat.user(FACTS[0])])
        await turn.end([chat.assistant("Good to know.")])
        turn = await memory.begin_turn(thread_id="t", messages=[prompt, chat.system(SECOND, "p2"), chat.user("Hi again.")])
        assert instructions_of(turn.context) == [PROMPT, SECOND]
        await turn.end([chat.assistant("Hello!")])
        assert instructions_of(await memory.get_context("t")) == [PROMPT, SECOND]
        assert [m.text for m in await memory.get_instructions("t")] == [PROMPT, SECOND]
        assert await memory.get_instructions("no-such-thread") == []
        # the stored thread holds each system message once
        assert [m.id for m in await memory.list_messages("t") if m.role == "system"] == ["p1", "p2"]


async def test_a_stored_system_prompt_sent_again_becomes_the_instructions_again() -> None:
    """An app that switches its prompt back (A, then B, then A again: A's stored message sent
    again) or edits a prompt in place (same id, new text) gets what it sent. Before, the
    instructions record refused any set whose newest message was older than the recorded one's,
    so a copy of A (older than B) never came back, and the edited A was stored but B stayed."""
    clock = FakeClock(START)
    chat = Chat(clock)
    async with Memory("memory://", config=config(), clock=clock) as memory:
        first, second = chat.system(PROMPT, "p1"), chat.system(SECOND, "p2")
        calls: list[tuple[list[Message], list[str]]] = [
            ([first], [PROMPT]),
            ([second], [SECOND]),
            ([first], [PROMPT]),  # switched back: A's stored message sent again
            ([], [PROMPT]),
            ([second, first], [SECOND, PROMPT]),
            ([first, first], [PROMPT]),
            ([chat.system(PROMPT + " Be brief.", "p1")], [PROMPT + " Be brief."]),  # edited in place
        ]
        for number, (sent, expected) in enumerate(calls):
            turn = await memory.begin_turn(
                thread_id="t", resource_id="u", messages=[*sent, chat.user(f"Question {number}.")]
            )
            assert instructions_of(turn.context) == expected, number
            await turn.end([chat.assistant("Fine.")])
            assert instructions_of(await memory.get_context("t")) == expected, number


APP_PROMPTS = {
    "working-memory first": "<working-memory>\nAPP-RULE-2: customer tier is gold\n</working-memory>\nYou are SupportBot.",
    "current-task tag": "<current-task>APP-RULE-3: help the user reset their router</current-task>",
    "ends with observations": (
        "You are SupportBot. APP-RULE-4: be brief.\nKnown facts from our CRM:\n<observations>\nplan=gold\n</observations>"
    ),
    "observations first": "<observations>APP-RULE-5: the customer's CRM notes</observations>\nAnswer briefly.",
}


@pytest.mark.parametrize("prompt", list(APP_PROMPTS.values()), ids=list(APP_PROMPTS))
async def test_an_app_prompt_shaped_like_obsmem_sections_is_kept(prompt: str) -> None:
    """An app that injects its own memory or CRM block in tags obsmem also uses: its prompt was
    taken for obsmem's text (as after a wire round trip) and dropped: the model never saw it."""
    async with Memory("memory://", config=config()) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="r",
                                       messages=[Message.system(prompt), Message.user("hello, I need help")])
        rule = "APP-RULE-" + prompt.split("APP-RULE-")[1][:1]
        assert any(rule in m.text for m in turn.context.messages), "the model does not see the app's prompt"
        await turn.end([Message.assistant("Happy to help.")])
        assert [m.text for m in await memory.get_instructions("t")] == [prompt]
        turn = await memory.begin_turn(thread_id="t", messages=[Message.user("still there?")])
        assert turn.context.messages[0].text == prompt, "the prompt leads the next context"
        await turn.end([Message.assistant("Yes.")])


@pytest.mark.parametrize("tag", ["my-app-tag", "observations-0", "preamble"])
async def test_a_user_message_whose_metadata_says_obsmem_but_is_not_obsmems_is_kept(tag: str) -> None:
    """The marker counts only on a message with obsmem's own id (README: "with ids of their
    thread"); an app's message carrying the key with a string value was silently thrown away."""
    async with Memory("memory://", config=config()) as memory:
        question = Message.user("My flight is LH 123, can you check it?", metadata={"obsmem": tag})
        turn = await memory.begin_turn(thread_id="t", resource_id="r", messages=[question])
        assert any(m.id == question.id for m in turn.context.messages), "the model does not see the question"
        await turn.end([Message.assistant("Checking.")])
        assert [m.id for m in await memory.list_messages("t")][0] == question.id, "the question was not stored"

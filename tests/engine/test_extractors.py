"""Extractors, thread titles and working memory through the engine."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import ConfigError, Extractor, Memory
from obsmem.models.testing import ScriptedModel
from obsmem.om.extractors import slugify

from .helpers import Conversation, fake_clock, replay, small_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("name", "slug"),
    [("Favourite Food", "favourite-food"), ("user's mood", "users-mood"), ("  Plan 2025 ", "plan-2025"),
     ('"Quoted" name', "quoted-name")],
)
def test_slug_rules(name: str, slug: str) -> None:
    assert slugify(name) == slug


@pytest.mark.parametrize("name", ["current task", "observations", "User", "123 start", "!!!"])
def test_reserved_or_invalid_slugs_are_rejected(name: str) -> None:
    with pytest.raises(ConfigError, match="observation.extract"):
        Memory("memory://", extractors=[Extractor(name=name, instructions="x")])


def test_duplicate_slugs_are_rejected() -> None:
    with pytest.raises(ConfigError, match="share the slug"):
        Memory("memory://", extractors=[Extractor(name="Mood", instructions="a"), Extractor(name="mood", instructions="b")])


async def test_hook_extractor_value_is_stored_and_shown_to_the_actor() -> None:
    seen: list[dict[str, Any]] = []

    async def count_lines(payload: dict[str, Any]) -> str:
        seen.append(payload)
        return f"{len(str(payload['current']).splitlines())} lines"

    memory = Memory("memory://", config=small_config(), clock=fake_clock(),
                    extractors=[Extractor(name="line count", instructions="count", mode="hook", on_extracted=count_lines)])
    async with memory:
        await replay(memory, Conversation(), 12)
        record = await memory.get_record("t1")
        assert record is not None
        assert record.threads["t1"].extracted["line-count"].endswith("lines")
        context = await memory.get_context("t1")
        assert any("<line-count>" in m.text for m in context.system_messages)
        assert seen


async def test_generated_title_is_set_but_a_pinned_title_is_never_overwritten() -> None:
    output = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:01) User stated they plan a trip.\n</observations>\n<thread-title>Trip planning</thread-title>"
    for pinned in (False, True):
        memory = Memory("memory://", config=small_config(thread_title=True), observer=ScriptedModel([output], repeat_last=True),
                        reflector="offline", clock=fake_clock())
        async with memory:
            await memory.create_thread("t1", "u1", title="My own title")
            if pinned:
                thread = await memory.get_thread("t1")
                await memory.store.update_thread(thread.model_copy(update={"title_pinned": True}), expected_version=thread.version)
            await replay(memory, Conversation(), 12)
            thread = await memory.get_thread("t1")
            assert thread.title == ("My own title" if pinned else "Trip planning")
            record = await memory.get_record("t1")
            assert record is not None and record.threads["t1"].thread_title == "Trip planning"


async def test_offline_working_memory_is_maintained() -> None:
    memory = Memory("memory://", config=small_config(manage_working_memory=True), clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 16)
        text = await memory.get_working_memory("t1")
        assert text is not None and text.startswith("## Key facts")
        assert "Munich" in text
        context = await memory.get_context("t1")
        assert any("<working-memory>" in m.text for m in context.system_messages)


async def test_current_task_and_suggested_response_are_shown_last() -> None:
    output = ("<observations>\nDate: Jun 15, 2025\n* 🔴 (09:01) User asked for a hotel.\n</observations>\n"
              "<current-task>\nFind a hotel in Lisbon\n</current-task>\n<suggested-response>\nOffer three options\n</suggested-response>")
    memory = Memory("memory://", config=small_config(), observer=ScriptedModel([output], repeat_last=True),
                    reflector="offline", clock=fake_clock())
    async with memory:
        await replay(memory, Conversation(), 12)
        context = await memory.get_context("t1")
        names = [m.metadata.get("obsmem") for m in context.system_messages]
        assert names[-2:] == ["current-task", "suggested-response"]
        assert "Find a hotel in Lisbon" in context.system_messages[-2].text

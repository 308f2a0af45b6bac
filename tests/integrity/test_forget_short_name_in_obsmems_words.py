"""Forgetting a short name that obsmem's own words hold by chance.

With a knowledge store, a forget refused any value its audit event's actor or reason held, so the
audit log would not keep it; but the default reason is "value forgotten" and the default actor
"obsmem" ("obsmem-cli" on the command line), matched as the knowledge store matches (case and
punctuation folded): ``memory.forget("Val")``, "Em", "Ten" or ``obsmem forget Li --knowledge …``
raised InvalidInputError and nothing was forgotten, though the user had said nothing about
obsmem. A default word holding the value is now replaced by a mark holding none; an actor or
reason the caller gives is still refused when it holds the value (the audit log would keep it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app
from obsmem.errors import InvalidInputError
from obsmem.knowledge import Knowledge
from obsmem.knowledge.lifecycle import NEUTRAL_WORD

RESOURCE = "org:default/resource:alice"


async def _seeded(memory: Memory) -> None:
    await memory.create_thread("t1", "alice")
    await memory.save_messages("t1", [Message.user("Val, Em and Ten called about the roof."),
                                      Message.user("The weather is fine.")])  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["Val", "Em", "Ten"])
async def test_a_name_in_obsmems_words_is_forgotten(tmp_path: Path, value: str) -> None:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'm.db'}", knowledge=knowledge) as memory:
            await _seeded(memory)
            counts = await memory.forget(value, resource_id="alice")
            assert counts["messages"] == 1
            assert [m.text for m in await memory.list_messages("t1")] == ["The weather is fine."]
        events = (await knowledge.store.list_activity(RESOURCE, threads=True)).items
        forgets = [e for e in events if e.action == "value-forgotten"]
        assert forgets, [e.action for e in events]
        assert all(value.lower() not in f"{e.actor} {e.reason}".lower() for e in forgets)
        assert any(NEUTRAL_WORD in (e.actor, e.reason) for e in forgets)
    finally:
        await knowledge.close()


@pytest.mark.anyio
async def test_an_actor_the_caller_gives_holding_it_is_still_refused(tmp_path: Path) -> None:
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'm.db'}", knowledge=knowledge) as memory:
            await _seeded(memory)
            with pytest.raises(InvalidInputError, match="actor"):
                await memory.forget("Val", resource_id="alice", actor="valerie@acme")
            assert len(await memory.list_messages("t1")) == 2  # refused before anything went
    finally:
        await knowledge.close()


def test_the_command_forgets_li(tmp_path: Path) -> None:
    db, graph = tmp_path / "m.db", tmp_path / "k.db"

    async def seed() -> None:
        async with Memory(f"sqlite:///{db}", knowledge=Knowledge.sqlite(graph)) as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [Message.user("Li called."), Message.user("Fine weather.")])
            assert memory.knowledge is not None
            await memory.knowledge.node("User", "person", RESOURCE)  # the knowledge store's file
            await memory.knowledge.close()

    asyncio.run(seed())
    result = CliRunner().invoke(app, ["forget", "Li", "--resource", "alice", "--yes", "--store", str(db),
                                      "--knowledge", str(graph)])  # fmt: skip
    assert result.exit_code == 0, result.output

    async def texts() -> list[str]:
        async with Memory(f"sqlite:///{db}") as memory:
            return [m.text for m in await memory.list_messages("t1")]

    assert asyncio.run(texts()) == ["Fine weather."]


@pytest.mark.anyio
async def test_the_word_forgotten_itself(tmp_path: Path) -> None:
    """Before, "the audit's reason is the library's: such a value cannot be forgotten"."""
    async with Memory(knowledge=Knowledge.in_memory(actor="privacy-desk")) as memory:
        await memory.create_thread("t1", "alice")
        await memory.save_messages("t1", [Message.user("the key is forgotten at the desk"), Message.user("ok")])
        assert (await memory.forget("forgotten", resource_id="alice"))["messages"] == 1
        assert [m.text for m in await memory.list_messages("t1")] == ["ok"]

"""An app's data part (structured data it stores with a message, never sent to a model) is matched
string by string, keys included, as tool arguments and metadata are (forgetting's module rule): a
value the app stored as a key ({"Zaphod Quux": "vip"}) stayed after 4db14e0, which matched a data
part's values only (right for obsmem's own markers, whose keys are obsmem's names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.types import DataPart, TextPart

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("data", [{"Zaphod Quux": "vip"}, {"guests": {"Zaphod Quux": 2}}, {"name": "Zaphod Quux"}])
async def test_a_value_an_app_stored_as_a_key_goes(tmp_path: Path, kind: str, data: dict[str, object]) -> None:
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "u1")
        said = Message(role="user", parts=(TextPart(text="book the table"), DataPart(name="app-booking", data=data)))
        await memory.save_messages("t1", [said, Message.assistant("Booked.")])
        counts = await memory.forget("Zaphod Quux", thread_id="t1")
        assert counts["parts"] == 1, counts
        assert not any("Zaphod" in m.model_dump_json() for m in await memory.list_messages("t1"))


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_data_part_named_by_the_value_goes(tmp_path: Path, kind: str) -> None:
    # as a tool named by it has its arguments forgotten
    async with Memory("memory://" if kind == "memory" else f"sqlite:///{tmp_path / 'm.db'}") as memory:
        await memory.create_thread("t1", "u1")
        said = Message(role="user", parts=(TextPart(text="noted"), DataPart(name="prefs-ZaphodQuux", data={"tea": True})))
        await memory.save_messages("t1", [said, Message.assistant("Ok.")])
        counts = await memory.forget("ZaphodQuux", thread_id="t1")
        assert counts["parts"] == 1, counts
        assert not any("ZaphodQuux" in m.model_dump_json() for m in await memory.list_messages("t1"))

"""The message ids ``memory.forget`` notes on a thread (``metadata["obsmem"]["forgotten"]``) are
what keeps a copy of a forgotten message, saved back by the app, from bringing the value back.
A later forget cleaned the thread's metadata of its value by dropping every top-level entry that
held it, ids and keys included: a value that is part of a noted id (a PIN inside a message id),
or a value said in the thread's title beside a message whose id holds it, dropped obsmem's whole
entry, the noted ids (and the recorded instructions) with it, and the old copy came back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio
SECRET = "4242-9191"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'memory.db'}"


def _holding(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if SECRET in json.dumps(m.model_dump(mode="json"))]


async def test_a_later_forget_of_a_value_inside_a_noted_id_keeps_the_ids(url: str) -> None:
    async with Memory(url) as memory:
        said = Message(id="msg_5555aaaa", role="user", parts=[{"type": "text", "text": SECRET}])
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[said])
        await turn.end([Message.assistant("Noted.")])
        await memory.forget(SECRET, thread_id="t1")
        await memory.forget("5555", thread_id="t1")  # another value, one that the noted id holds
        assert "msg_5555aaaa" in json.dumps((await memory.get_thread("t1")).metadata)
        await memory.save_messages("t1", [said])  # the app's old history, saved back
        turn = await memory.begin_turn(thread_id="t1", messages=[said, Message.user("next")])
        await turn.end([Message.assistant("ok")])
        assert _holding(await memory.list_messages("t1")) == []


async def test_a_title_holding_the_value_does_not_take_the_ids_along(url: str) -> None:
    async with Memory(url) as memory:
        await memory.create_thread("t1", "u1", title=f"about {SECRET}", metadata={"tag": "keep", "note": SECRET})
        said = Message(id=f"msg_{SECRET}", role="user", parts=[{"type": "text", "text": f"mine is {SECRET}"}])
        system = Message.system("Be brief.")
        turn = await memory.begin_turn(thread_id="t1", messages=[system, said])
        await turn.end([Message.assistant("Noted.")])
        counts = await memory.forget(SECRET, thread_id="t1")
        assert counts["threads"] == 1
        thread = await memory.get_thread("t1")
        assert thread.title is None and "note" not in thread.metadata and thread.metadata["tag"] == "keep"
        assert said.id in thread.metadata["obsmem"]["forgotten"]
        assert system.id in json.dumps(thread.metadata["obsmem"]), "the recorded instructions stay"
        await memory.save_messages("t1", [said])
        assert _holding(await memory.list_messages("t1")) == []


async def test_forgetting_a_word_of_obsmems_own_keys_keeps_them(url: str) -> None:
    async with Memory(url) as memory:
        said = Message.user(f"code {SECRET}")
        turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.system("Be brief."), said])
        await turn.end([Message.assistant("Noted.")])
        await memory.forget(SECRET, thread_id="t1")
        counts = await memory.forget("forgotten", thread_id="t1")  # a word the user said, or not
        assert counts["threads"] == 0, "the thread's own metadata holds ids, not the user's text"
        await memory.save_messages("t1", [said])
        assert _holding(await memory.list_messages("t1")) == []

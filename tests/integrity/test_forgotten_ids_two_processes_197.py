"""A forget of more than 1,000 messages of a thread (past what the thread's row keeps of their ids)
in one process, while another process keeps saving the app's old history back (PostgreSQL and
SQLite, each a store two processes share): no copy brings the name back, during or after."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from obsmem import Memory, Message

pytestmark = pytest.mark.anyio

NAME = "Zaphod Quux"
SAID = 1_100

_HISTORY = f"""
from obsmem import Message
def history():
    return [Message(id=f"msg_zq{{i:05d}}", role="user", parts=[{{"type": "text", "text": f"Note {{i}}: I am {NAME}."}}])
            for i in range({SAID})]
"""

_SAVER = _HISTORY + textwrap.dedent("""
    import asyncio, sys
    from obsmem import Memory
    async def main(url, rounds):
        async with Memory(url, max_turn_wait=None) as memory:
            h = history()
            print("ready", flush=True)
            for _ in range(rounds):
                await memory.save_messages("t1", h)
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""")


def _history() -> list[Message]:
    scope: dict[str, object] = {}
    exec(_HISTORY, scope)  # noqa: S102 (the same history the other process saves)
    return scope["history"]()  # type: ignore[operator,no-any-return]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'm.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_a_forget_past_the_list_while_another_process_saves_copies_back(url: str, tmp_path: Path) -> None:
    history = _history()
    async with Memory(url, max_turn_wait=None) as memory:
        await memory.create_thread("t1", "u1")
        for start in range(0, len(history), 250):
            await memory.save_messages("t1", history[start : start + 250])
        script = tmp_path / "saver.py"
        script.write_text(_SAVER)
        saver = subprocess.Popen([sys.executable, str(script), url, "6"], stdout=subprocess.PIPE, text=True)
        try:
            assert saver.stdout is not None and saver.stdout.readline().strip() == "ready"
            counts = await memory.forget(NAME, thread_id="t1")
            assert counts["messages"] == SAID
            assert await asyncio.to_thread(saver.wait, 300) == 0
        finally:
            if saver.poll() is None:
                saver.kill()
        await memory.save_messages("t1", history)  # and once more, after both
        assert [m.id for m in await memory.list_messages("t1") if NAME in (m.text or "")] == []

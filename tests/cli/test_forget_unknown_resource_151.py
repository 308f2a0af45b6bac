"""``obsmem forget VALUE --resource ID`` with an ID the store holds no thread of (a typo: 'alice '
for 'alice') said "forgot ... 0 messages" and nothing else, exit 0, while alice's copies of the
value stayed: the user took it for done. It now says, as ``delete-resource`` does, that the
store holds no thread of that resource (check the id)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _seed(db: Path) -> None:
    async def run() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread("t1", "alice")
            await memory.save_messages("t1", [Message.user("my code is 4711")])

    asyncio.run(run())


def test_forget_in_a_resource_the_store_does_not_hold_says_so(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["forget", "4711", "--resource", "alice ", "--yes", "--store", str(db)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "0 messages" in result.stdout
    assert "holds no thread of resource 'alice '" in " ".join(result.stdout.split()), result.stdout


def test_forget_in_a_resource_it_holds_has_no_such_note(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _seed(db)
    result = runner.invoke(app, ["forget", "4711", "--resource", "alice", "--yes", "--store", str(db)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "1 message" in result.stdout and "holds no thread" not in result.stdout, result.stdout
    again = runner.invoke(app, ["forget", "4711", "--resource", "alice", "--yes", "--store", str(db)], env=WIDE)
    assert again.exit_code == 0 and "0 messages" in again.stdout and "holds no thread" not in again.stdout, again.stdout

"""``obsmem threads --resource R --newest``: R's threads most recently active first (the listing
was oldest first only), a page at a time with a pasteable next-page line; R's threads only."""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message
from obsmem.cli import app

runner = CliRunner()


def _seed(db: Path) -> str:
    url = f"sqlite:///{db}"

    async def seed() -> None:
        async with Memory(url) as memory:
            for thread_id, resource in (("a1", "alice"), ("b1", "bob"), ("a2", "alice"), ("a3", "alice"), ("a4", "alice")):
                await memory.create_thread(thread_id, resource)
            await memory.save_messages("a2", [Message.user("back to a2")])
            await memory.save_messages("b1", [Message.user("bob, most recent of all")])

    asyncio.run(seed())
    return url


def _listed(output: str) -> list[str]:
    return re.findall(r"^\s*([ab]\d)\s", output, flags=re.MULTILINE)


def test_newest_first_page_by_page(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    whole = runner.invoke(app, ["threads", "--store", url, "--resource", "alice", "--newest"])
    assert whole.exit_code == 0, whole.output
    assert _listed(whole.output) == ["a2", "a4", "a3", "a1"]
    assert "more threads follow" not in whole.output
    seen: list[str] = []
    args = ["threads", "--store", url, "--resource", "alice", "--newest", "--limit", "3"]
    for _ in range(5):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        seen += _listed(result.output)
        found = re.search(r"more threads follow: (.*) \(with your --store\)", result.output)
        if found is None:
            break
        args = ["threads", "--store", url, *shlex.split(found.group(1))[2:]]  # the line, pasted
        assert "--newest" in args and "--before" in args
    assert seen == ["a2", "a4", "a3", "a1"]
    # the default order is unchanged
    assert _listed(runner.invoke(app, ["threads", "--store", url, "--resource", "alice"]).output) == ["a1", "a2", "a3", "a4"]


def test_what_does_not_go_with_newest(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    for args, says in (
        (["--newest"], "--resource"),
        (["--resource", "alice", "--before", "3"], "--before goes with --newest"),
        (["--resource", "alice", "--newest", "--before", "not-a-mark"], "--before: not a mark"),
    ):
        result = runner.invoke(app, ["threads", "--store", url, *args])
        assert result.exit_code != 0 and says in result.output, (args, result.output)

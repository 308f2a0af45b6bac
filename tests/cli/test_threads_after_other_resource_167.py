"""``obsmem threads --resource R --after T`` where T is another resource's thread is refused.

It listed R's threads from where T stands among all threads (alice's a1 and a2 silently skipped
after bob's b1), though the refusal it prints for a missing --after thread says "or of another
resource" (helper-167)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory
from obsmem.cli import app

runner = CliRunner()


def _seed(db: Path) -> str:
    url = f"sqlite:///{db}"

    async def seed() -> None:
        async with Memory(url) as memory:
            for thread_id, resource in (("a1", "alice"), ("b1", "bob"), ("a2", "alice"), ("a3", "alice")):
                await memory.create_thread(thread_id, resource)

    asyncio.run(seed())
    return url


def test_another_resources_thread_is_refused_as_after(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    result = runner.invoke(app, ["threads", "--store", url, "--resource", "alice", "--after", "b1"])
    assert result.exit_code == 1, result.output
    assert "no thread 'b1' to continue after" in result.output
    assert " a2 " not in result.output and " a3 " not in result.output


def test_its_own_thread_pages_on(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    result = runner.invoke(app, ["threads", "--store", url, "--resource", "alice", "--after", "a1"])
    assert result.exit_code == 0, result.output
    assert " a2 " in result.output and " a3 " in result.output and " b1 " not in result.output
    everyone = runner.invoke(app, ["threads", "--store", url, "--after", "b1"])  # no --resource: any thread
    assert everyone.exit_code == 0 and " a2 " in everyone.output, everyone.output

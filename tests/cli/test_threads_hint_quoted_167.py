"""``obsmem threads``: the "more threads follow" line is a command a user pastes into a shell.

It printed the thread (and resource) ids bare: a thread ``a one`` gave ``--after a one`` (the
shell passes ``a``, refused as no such thread), and a thread ``f$(id)`` gave ``--after f$(id)``,
which the shell runs as a command substitution when pasted. Each id in that line is now quoted
for a POSIX shell (ANSI-C ``$'...'`` quoting where it holds a control or invisible character,
never the raw character), so pasting the line shows the next page."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory
from obsmem.cli import app

runner = CliRunner()
IDS = ["a one", "b\x1b[31mred", "c\u202eevil", "d[bold]x[/bold]", "e'; echo pwned", "f$(echo pwned)", "g\\x41"]
RESOURCE = "r x"


def _seed(db: Path) -> str:
    url = f"sqlite:///{db}"

    async def seed() -> None:
        async with Memory(url) as memory:
            for thread_id in [*IDS, "z"]:
                await memory.create_thread(thread_id, RESOURCE)

    asyncio.run(seed())
    return url


def _shell_words(text: str) -> list[str]:
    """The words a POSIX shell (bash) makes of ``text``, nothing run but printf."""
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {text}"], capture_output=True, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_pasting_the_hint_shows_every_next_page(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    seen: list[str] = []
    after: list[str] = []
    for _ in range(len(IDS) + 2):
        result = runner.invoke(app, ["threads", "--store", url, "--limit", "1", *after])
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\u202e" not in result.output
        hints = [line for line in result.output.splitlines() if line.startswith("more threads follow: ")]
        if not hints:
            break
        command = hints[0].removeprefix("more threads follow: ").removesuffix(" (with your --store)")
        assert "pwned" not in subprocess.run(["bash", "-c", f"true {command}; echo"], capture_output=True,
                                             text=True).stdout  # fmt: skip
        words = _shell_words(command)
        assert words[:2] == ["obsmem", "threads"]
        seen.append(words[words.index("--after") + 1])
        after = ["--resource", words[words.index("--resource") + 1]] if "--resource" in words else []
        after += ["--after", seen[-1]]
    assert seen == IDS


def test_the_resource_in_the_hint_is_quoted_too(tmp_path: Path) -> None:
    url = _seed(tmp_path / "m.db")
    result = runner.invoke(app, ["threads", "--store", url, "--resource", RESOURCE, "--limit", "2"])
    assert result.exit_code == 0, result.output
    hint = next(line for line in result.output.splitlines() if line.startswith("more threads follow: "))
    words = _shell_words(hint.removeprefix("more threads follow: ").removesuffix(" (with your --store)"))
    assert words[words.index("--resource") + 1] == RESOURCE
    assert words[words.index("--after") + 1] == IDS[1]
    assert shlex.join(words[:2]) == "obsmem threads"

"""What the CLI prints of text must read as the text: escaping for the terminal and for Rich adds
nothing a person then sees. A Windows path ending in a backslash (``C:\\Users\\bob\\``) showed its
last backslash twice (Rich's markup escape adds one for a tag that may follow, and none did), and
two error lines showed Rich's escaping itself (``\\[bold]``): their id was escaped for Rich, then
the whole line again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory, Message, ToolCallPart, ToolResultPart
from obsmem.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "400"}


def test_a_trailing_backslash_is_shown_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def seed() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread("C:\\share\\", "alice", title="build dir C:\\out\\")
            await memory.save_messages("C:\\share\\", [
                Message.user("Where is it? C:\\Users\\bob\\"),
                Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="ls", args="C:\\tmp\\"),)),
                Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="ls", result="D:\\data\\"),)),
            ])  # fmt: skip

    asyncio.run(seed())
    result = runner.invoke(app, ["show", "C:\\share\\", "--store", str(db)], env=WIDE)
    assert result.exit_code == 0, result.output
    for shown in ("C:\\Users\\bob\\", "C:\\out\\", "D:\\data\\", "C:\\share\\"):
        assert shown in result.output, (shown, result.output)
        assert shown + "\\" not in result.output, (shown, result.output)
    listed = runner.invoke(app, ["threads", "--store", str(db)], env=WIDE)
    assert listed.exit_code == 0, listed.output
    assert "C:\\share\\ " in listed.output and "C:\\share\\\\" not in listed.output, listed.output


def test_an_error_naming_an_id_shows_it_as_typed(tmp_path: Path) -> None:
    refused = runner.invoke(app, ["keys", "create", "--org", "acme/[bold]x[/bold]", "--store", str(tmp_path / "k.db")],
                            env=WIDE)  # fmt: skip
    assert refused.exit_code == 1
    assert "acme/[bold]x[/bold]" in refused.output, refused.output
    db = tmp_path / "m.db"

    async def seed() -> None:
        async with Memory(f"sqlite:///{db}") as memory:
            await memory.create_thread("t1", "alice")

    asyncio.run(seed())
    after = runner.invoke(app, ["threads", "--store", str(db), "--resource", "alice", "--after", "[red]gone[/red]"],
                          env=WIDE)  # fmt: skip
    assert after.exit_code == 1
    assert "'[red]gone[/red]'" in after.output, after.output


def test_a_candidates_scope_ending_in_a_backslash_keeps_the_line_whole(tmp_path: Path) -> None:
    """``knowledge pending`` names the scope of a resource's thread's candidate dimmed: a thread id
    ending in a backslash must neither show the dim tag's text nor lose its backslash."""
    from obsmem.knowledge import Knowledge, TrustState

    path = tmp_path / "k.db"
    scope = "org:acme/resource:alice"
    thread_scope = f"{scope}/thread:C:\\share\\"

    async def main() -> None:
        async with Knowledge.sqlite(path) as knowledge:
            node = await knowledge.node("Bob", "person", thread_scope)
            await knowledge.append(node.id, "likes tea", thread_scope, reason="said so", trust=TrustState.CANDIDATE)

    asyncio.run(main())
    result = runner.invoke(app, ["knowledge", "pending", "-k", str(path), "--scope", scope], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "thread:C:\\share\\\n" in result.output and "[/dim]" not in result.output, result.output

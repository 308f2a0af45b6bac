"""What every ``obsmem`` command group shares: ``-h`` as well as ``--help``, and help (status 0)
when the group is called without a command, where click would answer with a usage error."""

from __future__ import annotations

from typing import Any

import typer

__all__ = ["HELP_OPTIONS", "print_help_when_bare"]

#: The context settings of every group; subcommands inherit them from their parent's context.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def print_help_when_bare(ctx: typer.Context) -> None:
    """In a group callback (``invoke_without_command=True``): no command given → help, exit 0."""
    if ctx.invoked_subcommand is None:
        text = ctx.get_help()  # typer's rich help prints itself and returns ""
        if text:
            typer.echo(text)
        raise typer.Exit()

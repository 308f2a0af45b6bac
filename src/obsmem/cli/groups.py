"""What every ``obsmem`` command group shares: ``-h`` as well as ``--help``, help (status 0)
when the group is called without a command, where click would answer with a usage error, and
command lists with one summary per command."""

from __future__ import annotations

import inspect
from typing import Any

import typer

__all__ = ["HELP_OPTIONS", "one_line_summaries", "print_help_when_bare"]

#: The context settings of every group; subcommands inherit them from their parent's context.
HELP_OPTIONS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}


def print_help_when_bare(ctx: typer.Context) -> None:
    """In a group callback (``invoke_without_command=True``): no command given → help, exit 0."""
    if ctx.invoked_subcommand is None:
        text = ctx.get_help()  # typer's rich help prints itself and returns ""
        if text:
            typer.echo(text)
        raise typer.Exit()


def one_line_summaries(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its groups, at any depth, a summary for the command
    list: the first paragraph of its help, its line breaks made spaces. Typer's rich help keeps
    the docstring's line breaks there, so a summary broke where the source line did."""
    for command in app.registered_commands:
        text = command.help or (command.callback.__doc__ if command.callback else None)
        if command.short_help is None and text:
            command.short_help = " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
    for group in app.registered_groups:
        if group.typer_instance is not None:
            one_line_summaries(group.typer_instance)

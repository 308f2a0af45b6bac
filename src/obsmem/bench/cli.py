"""``obsmem bench …``: the quality harness's commands."""

from __future__ import annotations

import typer

bench_app = typer.Typer(help="Measure what memory keeps: LoCoMo, LongMemEval, fact survival.", no_args_is_help=True)

"""``obsmem knowledge``: review what the knowledge agents captured.

``pending`` lists the candidates a scope sees (newest first) with the agent's reason (for a
resource scope, also those capture stored at its threads, with their scope);
``approve`` / ``reject`` decide one record (from a resource scope, one of its threads' too) (``--tombstone``: the value may never be captured
again); ``activity`` shows the audit log. Each decision is one audited mutation with
``--actor`` (default ``reviewer``) as its actor. ``reindex`` re-embeds the records another
embedder indexed, and embeds those without a vector (:meth:`Knowledge.reindex`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape as escape_markup

from obsmem import ObsmemError
from obsmem.cli.groups import HELP_OPTIONS, print_help_when_bare
from obsmem.cli.render import escape_id, one_line
from obsmem.cli.stores import fail, open_knowledge
from obsmem.cli.worker import EMBEDDERS
from obsmem.knowledge import Knowledge, Record

__all__ = ["knowledge_app"]

T = TypeVar("T")

knowledge_app = typer.Typer(
    help="Review the knowledge store: pending candidates, approve, reject, the audit log.",
    context_settings=HELP_OPTIONS, invoke_without_command=True,
)  # fmt: skip
console = Console(emoji=False)  # ':white_check_mark:' in a candidate prints as written

GraphOption = Annotated[
    str, typer.Option("--knowledge", "-k", metavar="PATH|URL", help="The knowledge store: a SQLite file or postgresql:// URL.")
]
ScopeOption = Annotated[
    str, typer.Option(help="The scope to act from, e.g. org:default/resource:alice/thread:t1.")
]
ActorOption = Annotated[str, typer.Option(help="Who decides (written to the audit log).")]


def _line(text: str) -> str:
    """Stored text (a record's, a reason) on one line, safe for Rich: a newline, a control
    character or a line or paragraph separator in it is shown as an escape, so it never starts
    a line that reads like another candidate or audit event."""
    return escape_id(text)


@knowledge_app.callback()
def _group(ctx: typer.Context) -> None:
    """Review the knowledge store: pending candidates, approve, reject, the audit log."""
    print_help_when_bare(ctx)


def _open(location: str, actor: str) -> Knowledge:
    return open_knowledge(location, actor=actor, existing=True)  # review reads: a missing file is a typo


def _run(location: str, actor: str, work: Callable[[Knowledge], Awaitable[T]]) -> T:
    async def main() -> T:
        async with _open(location, actor) as knowledge:
            return await work(knowledge)

    try:
        return asyncio.run(main())
    except ObsmemError as exc:
        raise fail(str(exc)) from exc


@knowledge_app.command()
def pending(knowledge: GraphOption, scope: ScopeOption, limit: Annotated[int, typer.Option(min=1)] = 50) -> None:
    """List the candidates SCOPE sees, newest first, with the reason each was captured."""

    async def work(graph: Knowledge) -> None:
        page = await graph.review.pending(scope, limit=limit, threads=True)  # a resource's threads' too
        for record in page.items:
            reason = str(record.metadata.get("reason", ""))
            # Rich's own escape here: a tag follows the text (a scope ending in a backslash keeps
            # the doubled one that keeps [/dim] a tag; escape_id leaves it out)
            where = f"  [dim]{escape_markup(one_line(record.scope))}[/dim]" if record.scope != scope else ""
            console.print(f"{_line(record.id)}  {_line(record.text)}  [dim]({_line(reason)})[/dim]{where}",
                          soft_wrap=True, highlight=False)  # fmt: skip
        console.print(f"{len(page.items)} pending", highlight=False)

    _run(knowledge, "reviewer", work)


@knowledge_app.command()
def approve(
    record_id: Annotated[str, typer.Argument(metavar="RECORD_ID")], knowledge: GraphOption, scope: ScopeOption,
    reason: Annotated[str, typer.Option(help="Why (audited).")] = "approved", actor: ActorOption = "reviewer",
) -> None:
    """Approve a candidate: reads (and the remind agent) return it from now on."""

    async def work(graph: Knowledge) -> Record:
        return await graph.review.approve(record_id, await graph.review.deciding_scope(record_id, scope),
                                          reason=reason)

    record = _run(knowledge, actor, work)
    console.print(f"approved {escape_id(record.id)}", highlight=False)


@knowledge_app.command()
def reject(
    record_id: Annotated[str, typer.Argument(metavar="RECORD_ID")], knowledge: GraphOption, scope: ScopeOption,
    reason: Annotated[str, typer.Option(help="Why (audited).")] = "rejected", actor: ActorOption = "reviewer",
    tombstone: Annotated[bool, typer.Option(help="Also refuse this value if it is captured again.")] = False,
) -> None:
    """Reject a candidate (with --tombstone, the value can never be captured again)."""

    async def work(graph: Knowledge) -> Record:
        return await graph.review.reject(record_id, await graph.review.deciding_scope(record_id, scope),
                                         reason=reason, tombstone=tombstone)

    record = _run(knowledge, actor, work)
    console.print(f"rejected {escape_id(record.id)}" + (" (tombstoned)" if tombstone else ""), highlight=False)


@knowledge_app.command()
def activity(knowledge: GraphOption, scope: ScopeOption, limit: Annotated[int, typer.Option(min=1)] = 50) -> None:
    """The audit log SCOPE sees, newest first: action, actor, subject and reason."""

    async def work(graph: Knowledge) -> None:
        for event in (await graph.store.list_activity(scope, limit=limit)).items:
            console.print(f"{event.created_at:%Y-%m-%d %H:%M:%S}  {event.action.value:<17} {escape_id(event.actor):<10} "
                          f"{_line(event.subject_id)}  {_line(event.reason)}", soft_wrap=True, highlight=False)  # fmt: skip

    _run(knowledge, "reviewer", work)


@knowledge_app.command()
def reindex(
    knowledge: GraphOption,
    scope: Annotated[
        str | None, typer.Option(help="Only the records stored at this scope or below it (default: all).")
    ] = None,
    embedder: Annotated[
        str,
        typer.Option(help="The embedder your application's Knowledge uses: lexical (LexicalHashEmbedder(), "
                          "Knowledge's own default), minilm (MiniLMEmbedder()), or default (default_embedder(): "
                          "MiniLM when the embeddings extra is installed, else lexical)."),  # fmt: skip
    ] = "lexical",
) -> None:
    """Re-embed the records another embedder indexed, and embed those that have no vector (the
    vectors table emptied or restored without them), so search finds them by meaning again."""
    if embedder not in EMBEDDERS:
        raise typer.BadParameter(f"{embedder!r} is not one of {', '.join(map(repr, EMBEDDERS))}.",
                                 param_hint="'--embedder'")  # fmt: skip

    async def work(graph: Knowledge) -> tuple[int, str]:
        index = Knowledge(graph.store, embedder=EMBEDDERS[embedder](), actor=graph.actor)
        return await index.reindex(scope=scope), index.embedder.name

    count, name = _run(knowledge, "reviewer", work)
    # (a record removed meanwhile loses its vector instead: counted all the same)
    console.print(f"re-indexed {count} record{'' if count == 1 else 's'} with {escape_id(name)}", highlight=False)

"""``obsmem bench …``: the quality harness's commands. Each parses options, calls one library
function in :mod:`obsmem.bench`, and draws the result; no measuring happens here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from obsmem.bench.agent import AGENT_SYSTEMS, RATES, AgentReport, AgentSettings, run_agent_bench
from obsmem.bench.agent_conversations import MIN_TURNS, generate_conversations
from obsmem.bench.injection import ROLE_SETUPS, InjectionReport, run_injection
from obsmem.bench.knowledge import run_knowledge_bench
from obsmem.bench.locomo import load_locomo
from obsmem.cli.groups import HELP_OPTIONS, print_help_when_bare
from obsmem.cli.render import counted, escape
from obsmem.cli.stores import database_file
from obsmem.bench.longmemeval import load_longmemeval
from obsmem.bench.retention import RetentionCase, RetentionSettings
from obsmem.bench.run import RetentionCurve, RetentionReport, run_curve, run_retention
from obsmem.bench.survival import SurvivalReport, run_survival
from obsmem import ChatModel, ObsmemError
from obsmem.models import infer_model

__all__ = ["bench_app"]

bench_app = typer.Typer(
    help="Measure what memory keeps (LoCoMo, LongMemEval, agent sessions, fact survival) and what hostile text reaches.", context_settings=HELP_OPTIONS,
    invoke_without_command=True,
)  # fmt: skip
console = Console(emoji=False)  # an error quoting ':smile:' (a --model spec) prints it as written
T = TypeVar("T")

#: The environment variable ``bench locomo`` reads its data path from when ``--data`` is not given.
LOCOMO_ENV = "OBSMEM_LOCOMO"
LOCOMO_SOURCE = (
    "LoCoMo is not bundled: download data/locomo10.json from https://github.com/snap-research/locomo "
    f"and pass --data PATH, or set {LOCOMO_ENV}=PATH."
)



class MissingLocomoData(typer.BadParameter):
    """``bench locomo`` without ``--data`` and without ``OBSMEM_LOCOMO``: a usage error (status 2)."""

    def format_message(self) -> str:
        return f"Missing option '--data'. {self.message}"


@bench_app.callback()
def _bench(ctx: typer.Context) -> None:
    """Measure what memory keeps: LoCoMo, LongMemEval, fact survival."""
    print_help_when_bare(ctx)

MessageTokens = Annotated[int, typer.Option(min=1, help="Observe when unobserved tokens reach this.")]
ObservationTokens = Annotated[int, typer.Option(min=1, help="Reflect when observations reach this.")]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Actor model (provider:model) for real question answering; needs its key."),
]
JudgeOption = Annotated[str | None, typer.Option(help="Judge model (default: the --model).")]
MemoryModelOption = Annotated[
    str | None, typer.Option(help="Observer/Reflector model (default: the offline ones).")
]
def _writable(path: Path | None) -> Path | None:
    """``--json``: checked before the run (which may take long), not when it is over."""
    if path is not None and (path.is_dir() or not path.absolute().parent.is_dir()):
        problem = "is a folder" if path.is_dir() else "is in a folder that does not exist"
        raise typer.BadParameter(f"{path} {problem}; name a file in an existing folder")
    taken = database_file(path) if path is not None else None
    if taken is not None:
        raise typer.BadParameter(f"{path} {taken}, which the report would overwrite; name a new file")
    return path


JsonOption = Annotated[
    Path | None, typer.Option("--json", help="Write every number and question here.", callback=_writable)
]
BudgetsOption = Annotated[
    str | None,
    typer.Option(help="A curve instead of one point: MESSAGE:OBSERVATION token pairs, comma-separated "
                      "(e.g. 500:1000,1000:2000,2000:4000); reports the area under retention vs compression."),
]


def _budgets(text: str) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    for item in (piece.strip() for piece in text.split(",")):
        if not item:
            continue
        message, _, observation = item.partition(":")
        if not (message.isdigit() and observation.isdigit()) or int(message) < 1 or int(observation) < 1:
            raise typer.BadParameter(f"expected MESSAGE:OBSERVATION token pairs, got {item!r}",
                                     param_hint="--budgets")  # fmt: skip
        pairs.append((int(message), int(observation)))
    if not pairs:
        raise typer.BadParameter("give at least one MESSAGE:OBSERVATION pair", param_hint="--budgets")
    return pairs


def _curve(cases: list[RetentionCase], dataset: str, budgets: list[tuple[int, int]],
           memory_model: str | None, out: Path | None) -> None:  # fmt: skip
    curve = _run(
        lambda advance: run_curve(cases, budgets, dataset=dataset, memory_model=_model(memory_model),
                                  on_progress=advance),  # fmt: skip
        "Replaying at each budget",
    )
    _print_curve(curve)
    if out is not None:
        out.write_text(json.dumps({**curve.to_json(), "reports": [r.to_json() for r in curve.reports]},
                                  indent=2), encoding="utf-8")  # fmt: skip
        console.print(f"wrote {escape(str(out))}", highlight=False)


def _print_curve(curve: RetentionCurve) -> None:
    table = Table(title=f"{curve.dataset}: retention (bag / line %) at each budget")
    table.add_column("budget", justify="left")
    systems = [name for name in curve.points[0].systems if name != "full"]
    for name in systems:
        table.add_column(name, justify="right")
    for point in curve.points:
        table.add_row(f"{point.message_tokens}:{point.observation_tokens}", *(
            f"{bag:.1f} / {line:.1f} @ {c:.1f}×" for c, bag, line in (point.systems[n] for n in systems)
        ))  # fmt: skip
    table.add_section()
    table.add_row("area (mean over log2 compression)",
                  *(f"{curve.area(n, 'bag'):.1f} / {curve.area(n):.1f}" for n in systems))  # fmt: skip
    console.print(table)
    full = curve.points[0].systems["full"]
    console.print(f"full context: {full[1]:.1f} % / line {full[2]:.1f} %")
    for point, report in zip(curve.points, curve.reports, strict=True):
        if report.chance:
            console.print(f"chance floor at {point.message_tokens}:{point.observation_tokens}: " + ", ".join(
                f"{row.system} {row.retained_pct:.1f} % / line {row.line_pct:.1f} %" for row in report.chance
            ))


def _run(work: Callable[[Callable[[int, int], None]], Coroutine[Any, Any, T]], label: str) -> T:
    """Run ``work`` under a progress bar; an obsmem error ends the command with its message."""
    with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:  # fmt: skip
        task = progress.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            return asyncio.run(work(advance))
        except ObsmemError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            raise typer.Exit(1) from exc


def _model(spec: str | None) -> ChatModel | None:
    if spec is None:
        return None
    try:
        return infer_model(spec)
    except ObsmemError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from exc


def _retention(
    cases: list[RetentionCase], dataset: str, message_tokens: int, observation_tokens: int,
    model: str | None, judge: str | None, memory_model: str | None, out: Path | None,
) -> None:
    try:
        settings = RetentionSettings(
            message_tokens=message_tokens, observation_tokens=observation_tokens,
            memory_model=_model(memory_model),
        )
        settings.memory_config()  # an invalid threshold fails here, before any replay
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc)) from exc
    actor = _model(model)
    grader = _model(judge) or actor
    report = _run(
        lambda advance: run_retention(cases, settings, dataset=dataset, on_progress=advance,
                                      actor=actor, judge=grader),  # fmt: skip
        "Replaying conversations" if actor is None else "Replaying and answering",
    )
    _print_retention(report)
    if out is not None:
        out.write_text(json.dumps(report.to_json(), indent=2), encoding="utf-8")
        console.print(f"wrote {escape(str(out))}", highlight=False)


def _print_retention(report: RetentionReport) -> None:
    settings = report.settings
    table = Table(title=f"{report.dataset}: is the answer still in the context? "
                        f"(--message-tokens {settings.message_tokens} "
                        f"--observation-tokens {settings.observation_tokens})")  # fmt: skip
    for column in ("category", "system", "n", "retained %", "line %", "recall", "tokens", "compression"):
        table.add_column(column, justify="left" if column in ("category", "system") else "right")
    evidence = any(row.evidence_recall is not None for row in report.rows)
    if evidence:
        table.add_column("evidence recall", justify="right")
    last = None
    for row in report.rows:
        if last is not None and row.category != last:
            table.add_section()
        last = row.category
        cells = [
            escape(row.category), escape(row.system), str(row.questions), f"{row.retained_pct:.1f}",
            f"{row.line_pct:.1f}", f"{row.mean_recall:.3f}", f"{row.context_tokens:,.0f}", f"{row.compression:.1f}×",
        ]
        if evidence:
            cells.append("" if row.evidence_recall is None else f"{row.evidence_recall:.3f}")
        table.add_row(*cells, style="bold" if row.system == "obsmem" else None)
    console.print(table)
    if report.chance:
        console.print("chance floor (questions scored against other conversations' contexts): " + ", ".join(
            f"{row.system} {row.retained_pct:.1f} % / line {row.line_pct:.1f} %" for row in report.chance
        ))
    if report.qa:
        actor, judge = escape(report.qa[0].actor), escape(report.qa[0].judge)
        qa = Table(title=f"question answering — actor {actor}, judge {judge}")
        for column in ("system", "questions", "accuracy %", "actor input tokens", "actor output tokens",
                       "actor s (median)", "judge s (median)"):  # fmt: skip
            qa.add_column(column, justify="left" if column == "system" else "right")
        for s in report.qa_summary():
            qa.add_row(
                escape(s.system), str(s.questions), f"{s.accuracy_pct:.1f}", f"{s.actor_input_tokens:,.0f}",
                f"{s.actor_output_tokens:,.0f}", f"{s.actor_seconds:.2f}", f"{s.judge_seconds:.2f}",
            )
        console.print(qa)
    console.print(f"{counted(len(report.built), 'conversation')}, "
                  f"{counted(len(report.results), 'scored question')}, {report.seconds:.1f} s")  # fmt: skip


@bench_app.command()
def locomo(
    data: Annotated[
        Path | None,
        typer.Option(envvar=LOCOMO_ENV, show_envvar=True,
                     help="A LoCoMo JSON file, e.g. locomo10.json (read in place, never copied)."),
    ] = None,
    conversations: Annotated[
        str | None, typer.Option(help="Comma-separated sample ids (default: all).")
    ] = None,
    message_tokens: MessageTokens = 2_000,
    observation_tokens: ObservationTokens = 4_000,
    model: ModelOption = None,
    judge: JudgeOption = None,
    memory_model: MemoryModelOption = None,
    budgets: BudgetsOption = None,
    json_out: JsonOption = None,
) -> None:
    """Replay LoCoMo conversations and check which answers survive in each system's context."""
    if data is None:
        raise MissingLocomoData(LOCOMO_SOURCE)
    chosen = [c.strip() for c in conversations.split(",") if c.strip()] if conversations else None
    try:
        cases = [conversation.case() for conversation in load_locomo(data, chosen)]
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data/--conversations") from exc
    if budgets is not None:
        _curve(cases, "LoCoMo", _budgets(budgets), memory_model, json_out)
        return
    _retention(cases, "LoCoMo", message_tokens, observation_tokens, model, judge, memory_model, json_out)


@bench_app.command()
def knowledge(
    data: Annotated[
        Path | None,
        typer.Option(envvar=LOCOMO_ENV, show_envvar=True,
                     help="A LoCoMo JSON file, e.g. locomo10.json (read in place, never copied)."),
    ] = None,
    conversations: Annotated[
        str | None, typer.Option(help="Comma-separated sample ids (default: all).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Run the LLM knowledge agents with this model (default: offline agents).")
    ] = None,
    json_out: JsonOption = None,
) -> None:
    """Facts the knowledge agents capture from LoCoMo: recall and precision against the QA
    evidence, duplicates per fact, contradictions left live, tokens per agent."""
    if data is None:
        raise MissingLocomoData(LOCOMO_SOURCE)
    chosen = [c.strip() for c in conversations.split(",") if c.strip()] if conversations else None
    try:
        rows = asyncio.run(run_knowledge_bench(data, conversations=chosen, model=model))
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data/--conversations/--model") from exc
    table = Table("conversation", "facts", "records", "recall", "precision", "dup/fact", "contradictions", "tokens",
                  title=f"Knowledge capture ({'offline agents' if model is None else escape(model)})")
    for row in rows:
        score = row.score
        table.add_row(escape(row.conversation), str(score.facts), str(score.records), f"{score.recall:.2f}",
                      f"{score.precision:.2f}", f"{score.duplicates_per_fact:.2f}", str(score.contradictions_live),
                      str(sum(score.tokens.values())))
    if rows:
        facts = sum(r.score.facts for r in rows)
        records = sum(r.score.records for r in rows)
        recall = sum(r.score.recall * r.score.facts for r in rows) / facts if facts else 0.0
        precision = sum(r.score.precision * r.score.records for r in rows) / records if records else 0.0
        table.add_row("all", str(facts), str(records), f"{recall:.2f}", f"{precision:.2f}", "",
                      str(sum(r.score.contradictions_live for r in rows)),
                      str(sum(sum(r.score.tokens.values()) for r in rows)))
    console.print(table)
    if json_out is not None:
        json_out.write_text(json.dumps([row.as_dict() for row in rows], indent=2), encoding="utf-8")
        console.print(f"wrote {escape(str(json_out))}", highlight=False)


@bench_app.command()
def longmemeval(
    data: Annotated[Path, typer.Option(help="A LongMemEval JSON file (longmemeval_s, _m or oracle).")],
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N questions.")] = None,
    message_tokens: MessageTokens = 2_000,
    observation_tokens: ObservationTokens = 4_000,
    model: ModelOption = None,
    judge: JudgeOption = None,
    memory_model: MemoryModelOption = None,
    json_out: JsonOption = None,
) -> None:
    """Replay LongMemEval haystacks; score the answer and its has_answer evidence turns."""
    try:
        cases = load_longmemeval(data, limit=limit)
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from exc
    _retention(cases, "LongMemEval", message_tokens, observation_tokens, model, judge, memory_model, json_out)


@bench_app.command()
def survival(
    facts: Annotated[int, typer.Option(min=1, help="How many distinct facts to seed.")] = 30,
    generations: Annotated[int, typer.Option(min=1, help="How many reflections to measure.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the synthetic conversation.")] = 7,
    message_tokens: MessageTokens = 1_000,
    observation_tokens: ObservationTokens = 2_000,
    model: Annotated[str | None, typer.Option("--model", help="Also measure this LLM reflector.")] = None,
    json_out: JsonOption = None,
) -> None:
    """Seed facts, force reflection generations, and report the share still present after each."""
    reflectors: list[ChatModel | None] = [None]
    if model is not None:
        reflectors.append(_model(model))
    reports: list[SurvivalReport] = []
    for reflector in reflectors:
        label = "Reflecting (offline)" if reflector is None else f"Reflecting ({reflector.name})"

        async def measure(
            advance: Callable[[int, int], None], reflector: ChatModel | None = reflector
        ) -> SurvivalReport:
            return await run_survival(
                facts=facts, generations=generations, seed=seed, reflector=reflector,
                message_tokens=message_tokens, observation_tokens=observation_tokens,
                on_generation=lambda point: advance(point.generation, generations),
            )

        reports.append(_run(measure, label))
    table = Table(title=f"Fact survival: {facts} facts, {generations} reflection generations")
    table.add_column("generation", justify="right")
    for report in reports:
        table.add_column(f"{escape(report.reflector)} present", justify="right")
        table.add_column(f"{escape(report.reflector)} tokens", justify="right")
    for index in range(generations):
        row = [str(index + 1)]
        for report in reports:
            point = report.points[index]
            share = f"{point.present}/{point.total} ({100 * point.share:.0f}%)"
            row += [share, f"{point.observation_tokens:,}"]
        table.add_row(*row)
    console.print(table)
    for report in reports:
        lost = sorted({value for point in report.points for value in point.missing})
        if lost:
            console.print(escape(f"{report.reflector} lost: {', '.join(lost)}"), highlight=False)
    if json_out is not None:
        json_out.write_text(json.dumps([r.to_json() for r in reports], indent=2), encoding="utf-8")
        console.print(f"wrote {escape(str(json_out))}", highlight=False)


@bench_app.command()
def agent(
    seed: Annotated[int, typer.Option(help="Seed of the generated conversations.")] = 15,
    conversations: Annotated[int, typer.Option(min=1, help="How many conversations (domains in turn).")] = 4,
    turns: Annotated[
        int | None, typer.Option(min=MIN_TURNS, help="User turns per conversation (default: 200–800, seeded).")
    ] = None,
    message_tokens: MessageTokens = 2_000,
    observation_tokens: ObservationTokens = 4_000,
    model: Annotated[
        str | None, typer.Option("--model", help="Observer/Reflector model (default: the offline ones).")
    ] = None,
    json_out: JsonOption = None,
) -> None:
    """Replay generated assistant sessions (tools, changing facts, tasks, decisions, dates) and
    check, at checkpoints, what the context an agent gets still holds."""
    try:
        settings = AgentSettings(message_tokens=message_tokens, observation_tokens=observation_tokens,
                                 memory_model=_model(model))  # fmt: skip
        settings.memory_config()
        generated = generate_conversations(seed, conversations, turns=turns)
    except ObsmemError as exc:
        raise typer.BadParameter(str(exc)) from exc
    report = _run(lambda advance: run_agent_bench(generated, settings, on_progress=advance), "Replaying sessions")
    _print_agent(report)
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {escape(str(json_out))}", highlight=False)


def _print_agent(report: AgentReport) -> None:
    settings = report.settings
    table = Table(title=f"Agent sessions: what the context holds at checkpoints "
                        f"(--message-tokens {settings.message_tokens} "
                        f"--observation-tokens {settings.observation_tokens})")  # fmt: skip
    table.add_column("rate", justify="left")
    for system in AGENT_SYSTEMS:
        table.add_column(system, justify="right")
    for name, label in RATES:
        cells = []
        for system in AGENT_SYSTEMS:
            value = report.row(system).rates[name]
            cells.append("–" if value is None else f"{value:.1f}")
        table.add_row(label, *cells, style="bold" if name in ("latest_value", "stale_leak", "decision") else None)
    table.add_section()
    table.add_row("compression", *(f"{report.row(s).compression:.1f}×" for s in AGENT_SYSTEMS))
    console.print(table)
    counts = report.row("obsmem").counts
    console.print(f"{counted(len(report.conversations), 'conversation')}, "
                  f"{counted(sum(len(c.messages) for c in report.conversations), 'message')}, probes: "
                  + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; {report.seconds:.1f} s")  # fmt: skip


@bench_app.command()
def injection(
    roles: Annotated[
        str, typer.Option(help="Comma-separated role setups: offline, echo, quote, forge (and naive, "
                               "the raw-concatenation baseline the detectors must flag).")
    ] = ",".join(ROLE_SETUPS),
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N payloads.")] = None,
    store: Annotated[str, typer.Option(help="memory (fast) or sqlite (a temporary file per setup).")] = "memory",
    json_out: JsonOption = None,
) -> None:
    """Try every injection payload in every channel; report what reaches system messages."""
    setups = [r.strip() for r in roles.split(",") if r.strip()]
    if store not in ("memory", "sqlite"):
        raise typer.BadParameter(f"expected memory or sqlite, got {store!r}", param_hint="--store")
    kind: Literal["memory", "sqlite"] = "sqlite" if store == "sqlite" else "memory"
    report = _run(
        lambda advance: run_injection(setups=setups, limit=limit, store=kind, on_progress=advance), "Injecting"
    )
    _print_injection(report)
    if json_out is not None:
        json_out.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False), encoding="utf-8")
        console.print(f"wrote {escape(str(json_out))}", highlight=False)


def _print_injection(report: InjectionReport) -> None:
    table = Table(title=f"Injection: {report.payloads} payloads × channels (user, tool, file, name, thread-id)")
    for column in ("role setup", "tried", "reached %", "unquoted in system message %", "control-section forgery %",
                   "cross-thread reach %", "observations", "reflections"):  # fmt: skip
        table.add_column(column, justify="left" if column == "role setup" else "right")
    for setup in report.setups:
        table.add_row(
            setup.setup, str(len(setup.tried)), f"{100 * setup.share('reached'):.1f}",
            f"{100 * setup.share('unquoted'):.1f}",
            f"{100 * setup.share('control'):.1f}", f"{100 * setup.share('cross_thread'):.1f}",
            str(setup.observations), str(setup.reflections),
        )
    console.print(table)

"""Mutation testing of the pure core: does the test suite notice when the rules change?

mutmut (3.x) rewrites one operator, constant or argument at a time in the modules listed under
``[mutmut] only_mutate`` in ``setup.cfg`` (thresholds, activation, degenerate detection,
parsing, selection) and runs the tests of ``pytest_add_cli_args_test_selection`` against each
mutant. A mutant the tests do not notice *survived*. The score of a module is

    (killed + timed out) / (all mutants − excluded mutants)

and the target is at least 95 % per module. Excluded are the *equivalent* mutants (no input can
tell them from the original) and the *message-only* ones (they change nothing but the text of an
error message). Message-only mutants inside a ``raise`` are recognised automatically: the
original and the mutant have the same syntax tree once the raised exception's message arguments
are blanked (for ``ConfigError`` every argument but the first, the option name, which callers
read; for other exceptions every argument) and its ``allowed=`` hint is dropped. Every other
exclusion is listed, with the reason, in ``tests/mutation/EXCLUDED.md``, matched by module,
function and the changed source lines (so renumbered mutants still match).

mutmut mutates files in place, so it never runs in your checkout: the script makes a detached git
worktree of ``--ref`` (default ``HEAD``) in ``--workdir`` (default
``$TMPDIR/obsmem-mutation``), copies this checkout's ``setup.cfg`` into it (keeping only the test
paths that exist at that ref), optionally copies extra paths from this checkout over it
(``--overlay``: e.g. new tests against an older ref), and runs mutmut there with
``--max-children`` workers (default 1: the suite shares the machine). mutmut keeps its results
in ``<workdir>/mutants``: a second run reuses them for unchanged functions. Delete the
worktree with ``git worktree remove --force <workdir>`` to start over.

Run (about 15 minutes per thousand mutants on one core)::

    .venv/bin/pip install mutmut            # 3.x, test-only; not a project dependency
    .venv/bin/python benchmarks/mutation.py                      # HEAD, its own tests
    .venv/bin/python benchmarks/mutation.py --ref 160fafa --workdir /tmp/mut-before
    .venv/bin/python benchmarks/mutation.py --ref 160fafa --overlay tests/safety --workdir /tmp/mut-after
    .venv/bin/python benchmarks/mutation.py --report-only --workdir /tmp/mut-after   # table again
    .venv/bin/python benchmarks/mutation.py --module obsmem.om.selection --overlay tests/safety
    .venv/bin/python benchmarks/mutation.py --module obsmem.om.selection --overlay tests/safety --survivors

``--module`` (repeatable) runs and reports only that module's mutants (mutmut reruns every one of
them); ``--survivors`` reruns only those that did not die in the last run in ``--workdir`` (after
new tests: with ``--overlay`` they are copied in first, and mutmut maps new tests to functions).

It prints one row per module and every surviving mutant that is not excluded (with its diff),
writes ``<workdir>/mutation-report.json``, and exits 1 when a module scores under
``--min-score`` (default 95).
"""

from __future__ import annotations

import argparse
import ast
import configparser
import copy
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXCLUDED_FILE = REPO / "tests" / "mutation" / "EXCLUDED.md"
KILLED = {"killed", "timeout"}


@dataclass
class Mutant:
    name: str  # mutmut's key, e.g. obsmem.thresholds.x_parse_duration__mutmut_4
    status: str
    module: str = ""
    function: str = ""  # e.g. parse_duration or TokenRange.__post_init__
    removed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    exclusion: str = ""  # "", "equivalent", "message-only", "message-only (auto)"
    occurrence: int = 1  # which occurrence of its first removed line in the function (1-based)

    @property
    def signature(self) -> tuple[str, str, str, str]:
        return (self.module, self.function, " ⏎ ".join(self.removed), " ⏎ ".join(self.added))


# --------------------------------------------------------------------------------------------
# Setting up and running mutmut
# --------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def prepare(workdir: Path, ref: str, overlay: list[str]) -> None:
    if not workdir.exists():
        git("worktree", "add", "--detach", str(workdir), ref)
    else:
        head = git("rev-parse", "HEAD", cwd=workdir).strip()
        wanted = git("rev-parse", f"{ref}^{{commit}}").strip()
        if head != wanted:
            sys.exit(f"{workdir} is at {head[:10]}, not {ref}; remove it (git worktree remove --force) first")
    for path in overlay:
        source, target = REPO / path, workdir / path
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    if not config.has_section("mutmut"):
        sys.exit("setup.cfg has no [mutmut] section")
    selection = config.get("mutmut", "pytest_add_cli_args_test_selection").split()
    present = [p for p in selection if (workdir / p).exists()]
    config.set("mutmut", "pytest_add_cli_args_test_selection", "\n" + "\n".join(present))
    target_cfg = configparser.ConfigParser()
    target_cfg.read(workdir / "setup.cfg")
    if target_cfg.has_section("mutmut"):
        target_cfg.remove_section("mutmut")
    target_cfg.add_section("mutmut")
    for key, value in config.items("mutmut"):
        target_cfg.set("mutmut", key, value)
    with open(workdir / "setup.cfg", "w") as handle:
        target_cfg.write(handle)
    missing = sorted(set(selection) - set(present))
    if missing:
        print(f"test paths not present at {ref} (skipped): {', '.join(missing)}")


def run_mutmut(workdir: Path, children: int, names: list[str]) -> None:
    """Run mutmut; ``names`` (mutant names or fnmatch patterns) restricts it to those and reruns them."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(
        [sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *names], cwd=workdir, env=env,
        check=True,
    )


# --------------------------------------------------------------------------------------------
# Reading the results
# --------------------------------------------------------------------------------------------

_RESULT = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+?)\s*$")
_KEY = re.compile(r"^(?P<module>.+?)\.x(?:ǁ(?P<cls>[^ǁ]+)ǁ(?P<method>.+?)|_(?P<function>.+?))__mutmut_(?P<n>\d+)$")


def results(workdir: Path) -> list[Mutant]:
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=workdir, check=True,
        capture_output=True, text=True,
    ).stdout
    mutants = []
    for line in out.splitlines():
        match = _RESULT.match(line)
        if match and "__mutmut_" in match["name"]:
            mutants.append(Mutant(match["name"], match["status"]))
    return mutants


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    found[item.name] = item
    return found


class _BlankMessages(ast.NodeTransformer):
    """Blank what only an error message reads (see the module docstring)."""

    def visit_Raise(self, node: ast.Raise) -> ast.Raise:
        call = node.exc
        if isinstance(call, ast.Call):
            name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
            keep = 1 if name == "ConfigError" else 0
            call.args = [*call.args[:keep], *(ast.Constant("MSG") for _ in call.args[keep:])]
            call.keywords = [k for k in call.keywords if k.arg != "allowed"]
            for keyword in call.keywords:
                keyword.value = ast.Constant("MSG")
        return node


def _normalised(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    clone = copy.deepcopy(node)
    clone.name = "f"
    return ast.dump(_BlankMessages().visit(clone))


def describe(workdir: Path, mutants: list[Mutant]) -> None:
    """Fill in module, function and the changed lines of every mutant, and the auto exclusions."""
    by_module: dict[str, list[Mutant]] = defaultdict(list)
    for mutant in mutants:
        match = _KEY.match(mutant.name)
        if not match:
            continue
        mutant.module = match["module"]
        mutant.function = f"{match['cls']}.{match['method']}" if match["cls"] else match["function"]
        by_module[mutant.module].append(mutant)
    for module, members in by_module.items():
        path = next(
            p for p in (workdir / "mutants" / "src" / (module.replace(".", "/") + ext) for ext in (".py", "/__init__.py"))
            if p.exists()
        )
        source = path.read_text()
        lines = source.split("\n")  # sliced by line numbers: get_source_segment re-splits per call
        functions = _functions(ast.parse(source))
        for mutant in members:
            local = mutant.name.rsplit(".", 1)[1]
            orig = functions.get(re.sub(r"__mutmut_\d+$", "__mutmut_orig", local))
            mutated = functions.get(local)
            if orig is None or mutated is None:
                continue
            plain = mutant.function.rsplit(".", 1)[-1]
            before, after = (
                re.sub(r"def \S+?\(", f"def {plain}(", "\n".join(lines[node.lineno - 1 : node.end_lineno]), count=1)
                .split("\n")
                for node in (orig, mutated)
            )
            first_removed: int | None = None
            for line in difflib.unified_diff(before, after, lineterm="", n=0):
                if line.startswith("@@") and first_removed is None:
                    first_removed = int(line.split()[1].lstrip("-").split(",")[0]) - 1
                if line.startswith(("---", "+++", "@@")):
                    continue
                (mutant.removed if line.startswith("-") else mutant.added).append(line[1:].strip())
            if mutant.removed and first_removed is not None:
                target = mutant.removed[0]
                mutant.occurrence = sum(b.strip() == target for b in before[: first_removed + 1])
            if mutant.status not in KILLED and _normalised(orig) == _normalised(mutated):
                mutant.exclusion = "message-only (auto)"


# --------------------------------------------------------------------------------------------
# The exclusion list
# --------------------------------------------------------------------------------------------

_HEADING = re.compile(r"^###\s+(?P<module>[\w.]+)\s*$")
_ITEM = re.compile(
    r"^- \*\*(?P<function>[^*]+)\*\* · (?P<kind>equivalent|message-only)\b(?: · occurrence (?P<occurrence>\d+))?"
)
Signature = tuple[str, str, str, str, int | None]
_CODE = re.compile(r"^\s+- `(?P<code>.*)`\s*$")


def read_exclusions(path: Path) -> dict[Signature, str]:
    """``(module, function, original, mutant, occurrence or None) → kind`` from ``path``."""
    exclusions: dict[Signature, str] = {}
    module = ""
    item: tuple[str, str, int | None] | None = None
    codes: list[str] = []

    def flush() -> None:
        if item is not None:
            if len(codes) != 2:
                sys.exit(f"{path}: {item[0]} needs exactly two code lines (original, mutant), got {codes}")
            exclusions[(module, item[0], codes[0], codes[1], item[2])] = item[1]

    for line in path.read_text().splitlines():
        if heading := _HEADING.match(line):
            flush()
            module, item, codes = heading["module"], None, []
        elif found := _ITEM.match(line):
            flush()
            occurrence = int(found["occurrence"]) if found["occurrence"] else None
            item, codes = (found["function"].strip(), found["kind"], occurrence), []
        elif (code := _CODE.match(line)) and item is not None:
            codes.append(code["code"])
    flush()
    return exclusions


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(
    mutants: list[Mutant], exclusions: dict[Signature, str], min_score: float
) -> tuple[int, list[dict[str, object]]]:
    used: set[Signature] = set()
    for mutant in mutants:
        if mutant.status in KILLED or mutant.exclusion:
            continue
        for key in ((*mutant.signature, mutant.occurrence), (*mutant.signature, None)):
            if key in exclusions:
                mutant.exclusion = exclusions[key]
                used.add(key)
                break
    rows: list[dict[str, object]] = []
    failing = False
    print(f"\n{'module':<28}{'mutants':>8}{'killed':>8}{'timeout':>8}{'survived':>9}{'excluded':>9}{'score':>9}")
    for module in sorted({m.module for m in mutants if m.module}):
        mine = [m for m in mutants if m.module == module]
        status = Counter(m.status for m in mine)
        excluded = [m for m in mine if m.exclusion]
        killed = status["killed"] + status["timeout"]
        survived = len(mine) - killed - len(excluded)
        score = 100.0 * killed / max(1, len(mine) - len(excluded))
        failing |= score < min_score
        rows.append({
            "module": module, "mutants": len(mine), "killed": status["killed"], "timeout": status["timeout"],
            "survived": survived, "excluded": len(excluded),
            "excluded_auto_message": sum(m.exclusion == "message-only (auto)" for m in excluded),
            "score": round(score, 1),
        })
        print(f"{module:<28}{len(mine):>8}{status['killed']:>8}{status['timeout']:>8}{survived:>9}"
              f"{len(excluded):>9}{score:>8.1f}%")
    alive = [m for m in mutants if m.status not in KILLED and not m.exclusion]
    if alive:
        print(f"\n{len(alive)} surviving mutant(s) not excluded:")
        for mutant in alive:
            print(f"\n{mutant.name} ({mutant.status})")
            if mutant.occurrence > 1:
                print(f"  (occurrence {mutant.occurrence} of its first line in {mutant.function})")
            for line in mutant.removed:
                print(f"  - {line}")
            for line in mutant.added:
                print(f"  + {line}")
    present = {(m.module, m.function) for m in mutants}
    stale = {key for key in set(exclusions) - used if key[:2] in present}
    if stale:
        print(f"\n{len(stale)} exclusion(s) in {EXCLUDED_FILE.name} matched no surviving mutant "
              "(killed now, or the code changed):")
        for module, function, original, mutated, _ in sorted(stale, key=str):
            print(f"  {module} {function}: `{original}` -> `{mutated}`")
    return (1 if failing else 0), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="HEAD", help="commit to mutate (default HEAD)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "obsmem-mutation")
    parser.add_argument("--overlay", action="append", default=[], help="path copied from this checkout")
    parser.add_argument("--max-children", type=int, default=1)
    parser.add_argument("--min-score", type=float, default=95.0)
    parser.add_argument("--report-only", action="store_true", help="only read the results already there")
    parser.add_argument(
        "--module", action="append", default=[],
        help="only this module (e.g. obsmem.om.selection; repeatable): its mutants are (re)run and reported",
    )
    parser.add_argument(
        "--survivors", action="store_true",
        help="rerun only the mutants that did not die in the last run (of --module, if given), e.g. after new tests",
    )
    args = parser.parse_args()
    workdir = args.workdir.resolve()

    def selected(mutant: Mutant) -> bool:
        return not args.module or mutant.name.split(".x", 1)[0] in args.module

    if not args.report_only:
        prepare(workdir, args.ref, args.overlay)
        names = [f"{module}.*" for module in args.module]
        if args.survivors:
            names = [m.name for m in results(workdir) if selected(m) and m.status not in KILLED]
            print(f"rerunning {len(names)} mutant(s) that did not die")
        if names or not args.survivors:
            run_mutmut(workdir, args.max_children, names)
    mutants = [m for m in results(workdir) if selected(m)]
    describe(workdir, mutants)
    code, rows = report(mutants, read_exclusions(EXCLUDED_FILE), args.min_score)
    report_file = workdir / "mutation-report.json"
    overlay = args.overlay
    if args.report_only and report_file.exists():  # the overlay of the run being reported
        overlay = json.loads(report_file.read_text()).get("overlay", overlay)
    report_file.write_text(json.dumps({
        "ref": git("rev-parse", "HEAD", cwd=workdir).strip(), "overlay": overlay, "modules": rows,
        "survivors": [m.__dict__ for m in mutants if m.status not in KILLED and not m.exclusion],
        "excluded": [m.__dict__ for m in mutants if m.exclusion],
    }, indent=2, ensure_ascii=False))
    sys.exit(code)


if __name__ == "__main__":
    main()

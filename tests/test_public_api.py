"""The public faces: sorted __all__s, every name importable and documented, every error exported,
the layering contracts hold, and no two modules import each other (TYPE_CHECKING imports included)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import pkgutil
import subprocess
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

import obsmem
import obsmem.errors

#: The documented sub-packages; each is a face like ``obsmem`` itself.
SUB_FACES = ["obsmem.models", "obsmem.embeddings", "obsmem.vectors", "obsmem.knowledge"]


def test_all_is_sorted_and_complete() -> None:
    assert obsmem.__all__ == sorted(obsmem.__all__)
    public = {name for name in vars(obsmem) if not name.startswith("_") or name == "__version__"}
    public -= {"annotations"}
    modules = {name for name in public if type(getattr(obsmem, name)).__name__ == "module"}
    assert set(obsmem.__all__) == public - modules


# -- every face: sorted, resolvable, no private names, documented -------------------------------------


def _undocumented(face: types.ModuleType) -> list[str]:
    """Public classes and functions of ``face`` without a docstring of their own.

    A dataclass without one gets its signature as ``__doc__``; that does not count.
    """
    missing = []
    for name in face.__all__:
        obj = getattr(face, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        doc = obj.__doc__
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            generated = obj.__name__ + str(inspect.signature(obj)).replace(" -> None", "")
            doc = None if doc == generated else doc
        if not doc or not doc.strip():
            missing.append(name)
    return missing


@pytest.mark.parametrize("face_name", ["obsmem", *SUB_FACES])
def test_face_all_is_sorted_and_has_no_private_names(face_name: str) -> None:
    face = importlib.import_module(face_name)
    assert face.__all__ == sorted(face.__all__)
    assert len(set(face.__all__)) == len(face.__all__)
    assert [name for name in face.__all__ if name.startswith("_") and name != "__version__"] == []


@pytest.mark.parametrize("face_name", ["obsmem", *SUB_FACES])
def test_face_every_name_resolves(face_name: str) -> None:
    face = importlib.import_module(face_name)
    unresolved = [name for name in face.__all__ if not hasattr(face, name)]
    assert unresolved == []
    # ``from face import *`` is how a user sees it: every name arrives (lazy ones included).
    namespace: dict[str, object] = {}
    exec(f"from {face_name} import *", namespace)  # noqa: S102
    assert set(face.__all__) <= set(namespace)


@pytest.mark.parametrize("face_name", SUB_FACES)
def test_face_exports_every_obsmem_class_and_function_it_holds(face_name: str) -> None:
    face = importlib.import_module(face_name)
    held = {
        name
        for name, obj in vars(face).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", "").startswith("obsmem")
    }
    assert held - set(face.__all__) == set()


@pytest.mark.parametrize("face_name", ["obsmem", *SUB_FACES])
def test_face_every_class_and_function_has_a_docstring(face_name: str) -> None:
    missing = _undocumented(importlib.import_module(face_name))
    assert missing == [], f"{face_name}: no docstring on {', '.join(missing)}"


def test_the_docstring_check_notices_a_generated_dataclass_doc() -> None:
    @dataclasses.dataclass
    class Bare:
        x: int

    face = types.ModuleType("face")
    face.__all__ = ["Bare", "documented"]  # type: ignore[attr-defined]

    def documented() -> None:
        """Documented."""

    face.Bare = Bare  # type: ignore[attr-defined]
    face.documented = documented  # type: ignore[attr-defined]
    assert _undocumented(face) == ["Bare"]


# -- errors ------------------------------------------------------------------------------------------


def _all_obsmem_modules() -> Iterable[str]:
    for info in pkgutil.walk_packages(obsmem.__path__, prefix="obsmem."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # importing __main__ would run the command
            yield info.name


def _subclasses(cls: type[BaseException]) -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def test_every_error_a_user_may_catch_is_exported() -> None:
    for name in _all_obsmem_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:  # an optional dependency that is not installed
            if (exc.name or "").startswith("obsmem"):
                raise
    errors = {cls for cls in _subclasses(obsmem.ObsmemError) if cls.__module__.startswith("obsmem")}
    assert len(errors) >= 30
    assert sorted(cls.__name__ for cls in errors if getattr(obsmem, cls.__name__, None) is not cls) == []
    assert {cls.__name__ for cls in errors} <= set(obsmem.__all__)
    assert set(obsmem.errors.__all__) <= set(obsmem.__all__)
    # one exceptions module: every error lives in obsmem.errors, so `from obsmem.errors import *` has them all
    assert {cls.__module__ for cls in errors} == {"obsmem.errors"}


# -- a custom Observer and Reflector need only the public face --------------------------------------


class _EchoObserver:
    """Writes one dated line per message, using only names from ``obsmem``."""

    name = "echo"

    async def observe(self, request: obsmem.ObservationRequest) -> obsmem.ObservationResult:
        lines = [f"* 🟡 (echo) {message.text}" for message in request.messages if message.text]
        return obsmem.ObservationResult(observations="Date: Jan 1, 2025\n" + "\n".join(lines))


class _FirstLinesReflector:
    """Keeps the date line and the first two observation lines."""

    name = "first-lines"

    def __init__(self) -> None:
        self.requests: list[obsmem.ReflectionRequest] = []

    async def reflect(self, request: obsmem.ReflectionRequest) -> obsmem.ReflectionResult:
        self.requests.append(request)
        kept = [line for line in request.observations.splitlines() if line.strip()][:3]
        return obsmem.ReflectionResult(observations="\n".join(kept))


def test_a_custom_observer_and_reflector_need_only_the_public_face() -> None:
    observer, reflector = _EchoObserver(), _FirstLinesReflector()
    assert isinstance(observer, obsmem.Observer) and isinstance(reflector, obsmem.Reflector)
    config = obsmem.MemoryConfig(
        observation=obsmem.ObservationConfig(message_tokens=60, buffer_tokens=False),
        reflection=obsmem.ReflectionConfig(observation_tokens=80, buffer_activation=None),
    )

    async def run() -> str:
        memory = obsmem.Memory("memory://", config=config, observer=observer, reflector=reflector)
        async with memory:
            for n in range(8):
                text = f"Note {n}: the locker code is {4000 + n}, next to the blue door on floor {n}."
                messages = [obsmem.Message.user(text)]
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=messages)
                await turn.step([obsmem.Message.assistant(f"Saved code {4000 + n}.")])
                await turn.end()
            record = await memory.get_record("t1")
            assert record is not None
            return record.active_observations

    observations = asyncio.run(run())
    assert "(echo) Note 0: the locker code is 4000" in observations
    assert reflector.requests and reflector.requests[0].observations.count("(echo)") > 2


# -- layering and cycles -----------------------------------------------------------------------------


def test_import_linter_contracts_hold() -> None:
    root = Path(__file__).resolve().parents[1]
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def import_cycles(package: str) -> list[list[str]]:
    """Every set of modules of ``package`` that import each other, directly or around a loop.

    Imports under ``if TYPE_CHECKING:`` and inside functions count: a circle a type checker or a
    late import needs is still a circle. The sets are the strongly connected components of the
    module import graph with more than one module (Tarjan's algorithm, iteratively).
    """
    graph = grimp.build_graph(package, cache_dir=None, exclude_type_checking_imports=False)
    edges: Mapping[str, set[str]] = {
        module: graph.find_modules_directly_imported_by(module) & graph.modules for module in graph.modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def test_no_import_cycles_between_obsmem_modules() -> None:
    cycles = import_cycles("obsmem")
    assert len(cycles) == 0, "modules that import each other (TYPE_CHECKING included): " + "; ".join(
        " <-> ".join(cycle) for cycle in cycles
    )


def test_the_cycle_count_sees_type_checking_and_indirect_cycles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclepkg import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclepkg.a import thing\n"
    )
    (package / "c.py").write_text("import cyclepkg.d\n")
    (package / "d.py").write_text("import cyclepkg.e\n")
    (package / "e.py").write_text("def late():\n    import cyclepkg.c\n")
    (package / "f.py").write_text("import cyclepkg.a\n")  # imports into a cycle, is not part of one
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclepkg") == [
        ["cyclepkg.a", "cyclepkg.b"],
        ["cyclepkg.c", "cyclepkg.d", "cyclepkg.e"],
    ]


def test_py_typed_is_shipped() -> None:
    assert (Path(obsmem.__file__).parent / "py.typed").exists()

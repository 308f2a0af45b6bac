"""``obsmem worker --health``: connections that never send a request (a port scanner, a slow
client) are closed after a while and never pin the worker's threads; the probes go on."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from pathlib import Path

from tests.worker.test_health import _start

IDLE = 40


def _closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Threads:")).split()[1])


def test_idle_connections_are_closed_and_hold_no_thread(tmp_path: Path) -> None:
    proc, base = _start(f"sqlite:///{tmp_path / 'h.db'}")
    host, port = base.removeprefix("http://").rsplit(":", 1)
    idle: list[socket.socket] = []
    try:
        with urllib.request.urlopen(base + "/livez", timeout=10) as response:
            assert response.status == 200
        baseline = _threads(proc.pid)
        for _ in range(IDLE):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.setblocking(False)
            idle.append(sock)
        assert _threads(proc.pid) < baseline + IDLE  # not a thread for each of them
        open_ones = list(idle)
        for _ in range(1200):  # bounded, never a timing assertion: before, none was ever closed
            open_ones = [s for s in open_ones if not _closed_by_server(s)]
            if not open_ones:
                break
            time.sleep(0.05)
        assert open_ones == []
        with urllib.request.urlopen(base + "/livez", timeout=10) as response:
            assert response.status == 200 and json.loads(response.read())["alive"] is True
    finally:
        for sock in idle:
            sock.close()
        proc.terminate()
        proc.wait(timeout=60)

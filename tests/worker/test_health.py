"""Issue 22 §6: ``obsmem worker --health [HOST:]PORT`` answers liveness and readiness over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _start(store: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "obsmem.cli", "worker", "--store", store, "--poll", "0.05", "--health", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("health: "):
            return proc, line.split()[1].removesuffix("/livez")
    raise AssertionError(f"no health line; exit {proc.wait()}")


def _until(url: str, status: int) -> tuple[int, dict[str, object]]:
    answer = _get(url)
    for _ in range(600):  # the worker's first poll; bounded, never a timing assertion
        if answer[0] == status:
            break
        time.sleep(0.05)
        answer = _get(url)
    return answer


def test_health_says_alive_and_ready_with_a_working_store(tmp_path: Path) -> None:
    proc, base = _start(f"sqlite:///{tmp_path / 'h.db'}")
    try:
        status, body = _get(base + "/livez")
        assert status == 200 and body["alive"] is True
        status, body = _until(base + "/readyz", 200)
        assert status == 200 and body["ready"] is True and body["last_store_error"] is None
        assert _get(base + "/nope")[0] == 404
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_health_says_alive_but_not_ready_when_the_store_is_down() -> None:
    proc, base = _start("postgresql://app:Sent1nel@127.0.0.1:1/obsmem?connect_timeout=1")
    try:
        status, body = _until(base + "/readyz", 503)
        assert status == 503 and body["ready"] is False
        assert _get(base + "/livez")[0] == 200
        for _ in range(600):
            if body["last_store_error"]:
                break
            time.sleep(0.05)
            status, body = _get(base + "/readyz")
        assert "Sent1nel" not in json.dumps(body) and body["last_store_error"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)

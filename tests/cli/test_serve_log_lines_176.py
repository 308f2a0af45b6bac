"""``obsmem serve`` logs memory work that failed, naming the thread: a REST client chooses thread
ids, and the API takes bidi controls and tag characters in them (it refuses only controls,
whitespace and '/'). Those reached the operator's terminal raw in the server's log (a thread id
'live\\u202eorp' read as 'live' reversed, tag characters hid text). The server's log lines now spell
them, as the worker's do (``\\u202e``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

THREAD = "t\u202eevil\U000e0041x"


def _post(base: str, path: str, body: dict[str, object]) -> dict[str, object] | None:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            document: dict[str, object] = json.loads(answer.read())
            return document
    except urllib.error.HTTPError:  # the memory model is down: a turn may answer 502
        return None


def test_serve_log_lines_show_a_thread_id_spelled(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"observation": {"message_tokens": 300}}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # a memory model nobody answers (a closed local port): memory work fails and is logged
    server = subprocess.Popen(
        [sys.executable, "-m", "obsmem", "serve", "--dev", "--port", str(port), "--store", str(tmp_path / "s.db"),
         "--config", str(config), "--model", "openai-compatible:m@http://127.0.0.1:9/v1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OPENAI_API_KEY": "x", "COLUMNS": "400"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "/openapi.json", timeout=1).close()
                break
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                time.sleep(0.1)
        assert _post(base, "/api/threads", {"id": THREAD, "resource_id": "alice"}) is not None
        thread = urllib.parse.quote(THREAD, safe="")
        for _ in range(2):
            turn = _post(base, f"/api/threads/{thread}/turns",
                         {"format": "openai", "messages": [{"role": "user", "content": "hello world " * 200}]})
            if turn is not None:
                _post(base, f"/api/turns/{turn['turn_id']}/end",
                      {"format": "openai", "messages": [{"role": "assistant", "content": "ok " * 200}]})
        time.sleep(3)  # the background work's failure is logged
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=30)
    assert "failed" in stderr and "t\\u202eevil\\U000e0041x" in stderr, ascii(stderr)
    assert "\u202e" not in stderr and "\U000e0041" not in stderr, ascii(stderr)

"""Issue 22 §4: a password never reaches what obsmem prints, logs or raises.

The worker runs as an operator runs it (``python -m obsmem.cli worker``, a real process), with a
sentinel password in the store URL (user info and ``?password=``) and in a model's base URL;
every byte it writes is searched for the sentinel. Third-party loggers (httpx) stay quiet.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from obsmem import ConfigError, Memory, Message
from obsmem.cli import app
from obsmem.cli.stores import describe_store, mask_password
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.redact import redact_secrets
from obsmem.storage import SQLiteStore, open_store

SENTINEL = "Sent1nelPassw0rd"


@pytest.mark.parametrize("text", [
    f"postgresql://app:{SENTINEL}@db.internal:5432/obsmem",
    f"postgres://app@db.internal/obsmem?sslmode=require&password={SENTINEL}",
    f"host=db.internal user=app password={SENTINEL} dbname=obsmem",
    f"host=db.internal password='{SENTINEL} x' dbname=obsmem",
    f"openai-compatible:m@http://user:{SENTINEL}@127.0.0.1:8000/v1",
    f"postgresql://app:{SENTINEL}@with@at@db/obsmem",
    f"postgresql://app:{SENTINEL}/slash@db/obsmem",
    f"failed: could not reach 'mysql://root:{SENTINEL}@h/db' (code 2)",
])  # fmt: skip
def test_redaction_hides_every_form_of_password(text: str) -> None:
    redacted = redact_secrets(text)
    assert SENTINEL not in redacted
    assert redact_secrets(redacted) == redacted  # idempotent
    assert mask_password(text) == redacted  # the CLI's old name is the same function


def test_redaction_keeps_what_an_operator_needs() -> None:
    assert redact_secrets("postgresql://app:pw@db:5432/obsmem") == "postgresql://app@db:5432/obsmem"
    assert redact_secrets("postgresql://app@db/obsmem?password=pw&sslmode=require") == (
        "postgresql://app@db/obsmem?password=***&sslmode=require"
    )
    assert redact_secrets("http://host:8000/v1") == "http://host:8000/v1"


@pytest.mark.parametrize("url", [
    f"mysql://root:{SENTINEL}@db/obsmem",
    f"host=db user=app password={SENTINEL}",
    f"postgresq://app:{SENTINEL}@db/obsmem",
])  # fmt: skip
def test_a_bad_store_url_is_not_echoed_with_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_store(url)
    assert SENTINEL not in str(info.value)
    result = CliRunner().invoke(app, ["migrate", "--store", url])
    assert result.exit_code == 1
    assert SENTINEL not in result.output


def test_describe_store_hides_a_query_password() -> None:
    store = open_store(f"postgresql://app@127.0.0.1:1/obsmem?password={SENTINEL}")
    assert SENTINEL not in describe_store(store)
    assert SENTINEL not in repr(store)


def test_a_model_spec_error_never_echoes_the_credential(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["worker", "--store", str(tmp_path / "w.db"), "--exit-when-idle",
                                      "--model", f"nosuchprovider:m@http://u:{SENTINEL}@127.0.0.1:1/v1"])
    assert result.exit_code == 1 and "nosuchprovider" in result.output  # refused for its model spec
    assert SENTINEL not in result.output


def _run_worker(args: list[str], env: dict[str, str], *, until: str | None = None) -> str:
    """Run ``obsmem worker`` in a real process; with ``until``, stop it (SIGTERM) once a line
    holding ``until`` appears. Returns everything it wrote (stdout and stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "obsmem.cli", "worker", *args], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if until is not None and until in line:
                proc.terminate()
                break
        lines.extend(proc.communicate(timeout=120)[0].splitlines(keepends=True))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(lines)


def test_worker_output_against_an_unreachable_postgres_holds_no_password() -> None:
    url = f"postgresql://app:{SENTINEL}@127.0.0.1:1/obsmem?connect_timeout=1&password={SENTINEL}"
    output = _run_worker(["--store", url, "--poll", "0.05"], {}, until="retrying")
    assert "retrying" in output  # the store's failure was reported ...
    assert "store: postgresql://app@127.0.0.1:1/obsmem" in output  # ... and where it is, without the password
    assert SENTINEL not in output


class _ChatStub(BaseHTTPRequestHandler):
    """A loopback OpenAI-compatible endpoint that answers every chat with a short observation."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.dumps({
            "id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "<observations>\n* 🔴 (10:00) User set the Kestrel budget.\n</observations>"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def chat_stub() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _ChatStub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=400, buffer_tokens=0.25, block_after=3.0),
        reflection=ReflectionConfig(observation_tokens=5_000),
    )


async def _queue_work(db: Path) -> int:
    async with SQLiteStore(db) as store:
        memory = Memory(store, config=_config(), clock=FakeClock(), background="queue")
        async with memory:
            for n in range(10):
                text = f"Turn {n}: the Kestrel{n} budget is {n * 100} euros, review on day {n}."
                turn = await memory.begin_turn(thread_id="t1", resource_id="u1", messages=[Message.user(text)])
                await turn.step([Message.assistant(f"Noted {n * 100} euros for Kestrel{n}.")])
                await turn.end()
        return len(await store.list_work())


def test_worker_calling_a_model_with_credentials_in_its_url_logs_no_secret(
    tmp_path: Path, chat_stub: int
) -> None:
    db, snapshot = tmp_path / "app.db", tmp_path / "config.json"
    snapshot.write_text(json.dumps(_config().snapshot()))
    assert asyncio.run(_queue_work(db)) > 0
    env = {"OPENAI_COMPATIBLE_BASE_URL": f"http://user:{SENTINEL}@127.0.0.1:{chat_stub}/v1",
           "OPENAI_COMPATIBLE_API_KEY": SENTINEL}  # fmt: skip
    output = _run_worker(["--store", f"sqlite:///{db}", "--config", str(snapshot), "--model", "openai-compatible:m",
                          "--exit-when-idle", "--poll", "0.01"], env)  # fmt: skip
    assert "worker done" in output and " 0 completed" not in output, output
    assert "HTTP Request" not in output  # httpx's INFO lines are not raised by obsmem
    assert SENTINEL not in output


def test_model_errors_never_echo_a_credential_in_the_base_url() -> None:
    from obsmem.models import infer_model

    with pytest.raises(ConfigError) as info:
        infer_model(f"nosuchprovider:m@http://u:{SENTINEL}@127.0.0.1:1/v1")
    assert SENTINEL not in str(info.value)
    # the base URL keeps its credentials (the spec splits at the URL's start), and no repr shows them
    chat = infer_model(f"openai-compatible:m@http://u:{SENTINEL}@127.0.0.1:1/v1", env={})
    assert SENTINEL not in repr(chat) and SENTINEL not in repr(getattr(chat, "endpoint", ""))


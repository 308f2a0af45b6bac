"""Issue 13, item 5 (part): provider answers are bounded, keys never leak, stores are private and typed.

Every test here talks to obsmem the way a user does (a model or embedder against a real local
HTTP server, a store opened by path, the recall tool) and failed on main before the fix.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.embeddings.openai import OpenAIEmbedder
from obsmem.errors import ModelError, ModelRequestError, StorageError
from obsmem.models.anthropic import AnthropicModel
from obsmem.models.base import ModelRequest
from obsmem.models.openai import OpenAIChatModel
from obsmem.models.retry import is_transient
from obsmem.models.transport import Endpoint
from obsmem.storage import open_store
from obsmem.storage.sqlite.store import SQLiteStore
from obsmem.types import TextPart

KEY = "sk-proj-SECRETsecret0123456789abcdWXYZ"
FLOOD_BYTES = 64 * 1024 * 1024
LIMIT = 1024 * 1024
# The kernel's socket buffers hold a few MB the client never read; anything near the flood is a miss.
SLACK = 16 * 1024 * 1024


# -- a server that floods ----------------------------------------------------------------------


class Flood:
    """Answers every POST with ``FLOOD_BYTES`` of one shape, counting what the client took."""

    def __init__(self, shape: str, *, declare: bool = False) -> None:
        self.shape = shape
        self.declare = declare  # send content-length (else the body ends when the connection does)
        self.sent = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _chunks(self) -> Iterator[bytes]:
        if self.shape == "sse":
            delta = {"choices": [{"index": 0, "delta": {"content": "flood " * 40}, "finish_reason": None}]}
            event = f"data: {json.dumps(delta)}\n\n".encode()
            block = event * (65536 // len(event) + 1)
        elif self.shape == "anthropic":
            text = {"type": "text_delta", "text": "flood " * 40}
            delta = {"type": "content_block_delta", "index": 0, "delta": text}
            event = f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode()
            start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            yield f"event: content_block_start\ndata: {json.dumps(start)}\n\n".encode()
            block = event * (65536 // len(event) + 1)
        else:  # one JSON body, never-ending string inside
            yield b'{"choices": [{"message": {"content": "'
            block = b"a" * 65536
        while True:
            yield block

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        flood = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                json_body = flood.shape == "json"
                self.send_header("content-type", "application/json" if json_body else "text/event-stream")
                if flood.declare:
                    self.send_header("content-length", str(FLOOD_BYTES))
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    for chunk in flood._chunks():
                        if flood.sent >= FLOOD_BYTES:
                            break
                        chunk = chunk[: FLOOD_BYTES - flood.sent]
                        self.wfile.write(chunk)
                        flood.sent += len(chunk)
                except OSError:  # the client hung up: what a bounded reader does
                    pass
                self.close_connection = True

        return Handler

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _ask() -> list[Message]:
    return [Message(role="user", parts=[TextPart(text="hi")], thread_id="t", resource_id="r")]


async def _save(memory: Memory, thread_id: str = "t") -> None:
    await memory.create_thread(thread_id, resource_id="r")
    await memory.save_messages(thread_id, [{"role": "user", "parts": [{"type": "text", "text": "hello"}]}])


def _too_large(error: BaseException, names: str) -> None:
    assert isinstance(error, ModelRequestError), type(error)
    assert not is_transient(error), "a flood repeats: retrying it only costs more"
    assert names in str(error)


@pytest.mark.anyio
@pytest.mark.parametrize(("stream", "declare"), [(True, False), (True, True), (False, False), (False, True)])
async def test_a_flooding_chat_server_is_cut_at_the_response_limit(stream: bool, declare: bool) -> None:
    with Flood("sse" if stream else "json", declare=declare) as server:
        model = OpenAIChatModel(
            "m", Endpoint("openai", server.url), stream=stream, max_response_bytes=LIMIT, timeout_s=30
        )
        with pytest.raises(ModelError) as caught:
            await model.request(_ask())
    _too_large(caught.value, "max_response_bytes")
    assert str(LIMIT) in str(caught.value) or "1 MB" in str(caught.value)
    assert server.sent < SLACK, f"the client read {server.sent} bytes of a {LIMIT}-byte limit"


@pytest.mark.anyio
async def test_a_flooding_anthropic_stream_is_cut_too() -> None:
    with Flood("anthropic") as server:
        model = AnthropicModel(
            "claude-x", Endpoint("anthropic", server.url), max_response_bytes=LIMIT, timeout_s=30
        )
        with pytest.raises(ModelError) as caught:
            await model.request(_ask())
    _too_large(caught.value, "max_response_bytes")
    assert server.sent < SLACK


def test_the_default_response_limit_is_documented_and_bounded() -> None:
    from obsmem.models.transport import DEFAULT_MAX_RESPONSE_BYTES

    assert DEFAULT_MAX_RESPONSE_BYTES == 8 * 1024 * 1024
    model = OpenAIChatModel("m", Endpoint("openai", "http://127.0.0.1:9"))
    assert model.max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES


@pytest.mark.anyio
async def test_streamed_output_past_max_output_tokens_is_cut() -> None:
    """A server that ignores ``max_tokens`` is stopped by the client, long before the byte limit."""
    with Flood("sse") as server:
        model = OpenAIChatModel("m", Endpoint("openai", server.url), timeout_s=30)
        with pytest.raises(ModelError) as caught:
            await model.request(_ask(), ModelRequest(max_output_tokens=200))
    _too_large(caught.value, "max_output_tokens")
    assert server.sent < SLACK


@pytest.mark.anyio
@pytest.mark.parametrize("declare", [False, True])
async def test_a_flooding_embeddings_server_is_cut(declare: bool) -> None:
    with Flood("json", declare=declare) as server:
        embedder = OpenAIEmbedder(
            "text-embedding-3-small",
            base_url=server.url,
            api_key=KEY,
            max_response_bytes=LIMIT,
            max_retries=0,
        )
        async with embedder:
            with pytest.raises(ModelError) as caught:
                await embedder.embed(["hello"])
    _too_large(caught.value, "max_response_bytes")
    assert server.sent < SLACK


# -- keys ---------------------------------------------------------------------------------------


def test_endpoint_repr_hides_the_key() -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    endpoint = Endpoint("openai", "https://api.openai.com/v1", headers, "OPENAI_API_KEY")
    anthropic = Endpoint("anthropic", "https://api.anthropic.com", {"x-api-key": KEY}, "ANTHROPIC_API_KEY")
    for shown in (repr(endpoint), str(endpoint), repr(anthropic)):
        assert KEY not in shown
        assert KEY[8:-4] not in shown
    assert "api.openai.com" in repr(endpoint)


class _Echo401:
    """Answers 401 with a body that quotes the key it was given, as some gateways do."""

    def __init__(self) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                given = self.headers.get("authorization") or self.headers.get("x-api-key") or ""
                body = json.dumps({"error": {"message": f"Incorrect API key provided: {given}"}}).encode()
                self.send_response(401)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def __enter__(self) -> _Echo401:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _leaks(error: BaseException) -> list[str]:
    """Where ``KEY`` shows in the error's text or in any local of its traceback (and causes')."""
    found = []
    chain: BaseException | None = error
    while chain is not None:
        if KEY in str(chain):
            found.append(f"message of {type(chain).__name__}")
        chain = chain.__cause__ or chain.__context__
    rendered = "".join(traceback.TracebackException.from_exception(error, capture_locals=True).format())
    if KEY in rendered:
        lines = [line.strip() for line in rendered.splitlines() if KEY in line]
        found.append(f"traceback locals: {lines[:3]}")
    return found


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_a_401_echoing_the_key_does_not_leak_it(stream: bool) -> None:
    with _Echo401() as server:
        model = OpenAIChatModel(
            "m",
            Endpoint("openai", server.url, {"authorization": f"Bearer {KEY}"}, "OPENAI_API_KEY"),
            stream=stream,
        )
        with pytest.raises(ModelRequestError) as caught:
            await model.request(_ask())
    assert "Incorrect API key" in str(caught.value)
    assert _leaks(caught.value) == []


@pytest.mark.anyio
async def test_an_anthropic_401_does_not_leak_the_key() -> None:
    with _Echo401() as server:
        endpoint = Endpoint("anthropic", server.url, {"x-api-key": KEY}, "ANTHROPIC_API_KEY")
        model = AnthropicModel("claude-x", endpoint)
        with pytest.raises(ModelRequestError) as caught:
            await model.request(_ask())
    assert _leaks(caught.value) == []


@pytest.mark.anyio
async def test_an_embeddings_401_does_not_leak_the_key() -> None:
    with _Echo401() as server:
        async with OpenAIEmbedder("text-embedding-3-small", base_url=server.url, api_key=KEY) as embedder:
            with pytest.raises(ModelRequestError) as caught:
                await embedder.embed(["hello"])
    assert "Incorrect API key" in str(caught.value)
    assert _leaks(caught.value) == []


# -- the SQLite file ----------------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most common umask (022), whatever the test runner's is."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.anyio
@pytest.mark.usefixtures("open_umask")
async def test_the_default_database_is_private(_isolated_home: Path) -> None:
    store = open_store()
    try:
        memory = Memory(store)
        await _save(memory)
        db = _isolated_home / "obsmem.db"
        assert _mode(_isolated_home) == 0o700
        assert _mode(db) == 0o600
        for suffix in ("-wal", "-shm"):
            side = db.with_name(db.name + suffix)
            assert side.exists()
            assert _mode(side) == 0o600, suffix
        await memory.aclose()
    finally:
        await store.close()


@pytest.mark.anyio
@pytest.mark.usefixtures("open_umask")
async def test_a_new_database_in_an_existing_folder_is_private_the_folder_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    store = SQLiteStore(folder / "m.db")
    try:
        await store.list_threads("r")
    finally:
        await store.close()
    assert _mode(folder) == 0o755  # not ours to change
    assert _mode(folder / "m.db") == 0o600


@pytest.mark.anyio
async def test_an_empty_database_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "obsmem.db"
    path.touch()  # truncated by a crash, a bad copy, a failed restore …
    store = SQLiteStore(path)
    try:
        with pytest.raises(StorageError) as caught:
            await store.list_threads("r")
    finally:
        await store.close()
    assert str(path) in str(caught.value)
    assert path.stat().st_size == 0  # left as found, for the user to look at


@pytest.mark.anyio
async def test_a_new_database_still_opens_and_reopens(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "obsmem.db"
    for _ in range(2):
        store = SQLiteStore(path)
        try:
            assert await store.list_threads("r") == []
        finally:
            await store.close()


@pytest.mark.anyio
async def test_a_corrupted_json_column_is_a_storage_error_naming_the_row(tmp_path: Path) -> None:
    path = tmp_path / "obsmem.db"
    memory = Memory(f"sqlite:///{path}")
    await _save(memory, "t1")
    await memory.aclose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE messages SET parts = '{not json'")
    store = SQLiteStore(path)
    try:
        with pytest.raises(StorageError) as caught:
            await store.list_messages("t1")
    finally:
        await store.close()
    assert "messages" in str(caught.value)
    assert "parts" in str(caught.value)


# -- the recall tool ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "args",
    [
        {"page": 1e400},
        {"page": -1e400},
        {"page": float("nan")},
        {"limit": 1e400},
        {"char_offset": "1e400"},
        {"page": 10**400},
        {"cursor": "msg\x00id"},
        {"query": "a\x00b", "mode": "search"},
        {"thread_id": "t\x00"},
        {"group_id": "\x00"},
    ],
)
async def test_hostile_recall_arguments_come_back_as_errors(args: dict[str, Any]) -> None:
    memory = Memory("memory://", config=MemoryConfig(retrieval=True))
    await _save(memory)
    answer = await memory.call_recall_tool("t", args)
    await memory.aclose()
    assert "error" in answer, answer


@pytest.mark.anyio
async def test_a_nul_cursor_on_postgresql_is_an_error_answer(postgres_url: str) -> None:
    memory = Memory(postgres_url, config=MemoryConfig(retrieval=True))
    try:
        await _save(memory)
        for args in ({"cursor": "msg\x00id"}, {"thread_id": "t\x00"}, {"query": "x\x00", "mode": "search"}):
            answer = await memory.call_recall_tool("t", args)
            assert "error" in answer, (args, answer)
    finally:
        await memory.aclose()


@pytest.mark.anyio
async def test_a_nul_id_on_postgresql_is_a_storage_error_not_a_driver_error(postgres_url: str) -> None:
    store = open_store(postgres_url)
    try:
        try:
            found = await store.get_messages(["a\x00b"])
        except StorageError:
            return
        assert found == []
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_corrupted_postgres_work_payload_is_a_storage_error() -> None:
    from obsmem.storage.postgres.work import _item

    row = (1, "observe", "t", "{not json", 0, 0, 0, None, None, None, None)
    with pytest.raises(StorageError) as caught:
        _item(row)
    assert "work" in str(caught.value)


@pytest.mark.anyio
async def test_a_corrupted_postgres_document_is_a_storage_error_naming_the_table(postgres_url: str) -> None:
    import psycopg

    memory = Memory(postgres_url)
    try:
        await _save(memory, "t1")
    finally:
        await memory.aclose()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("UPDATE messages SET doc = '{not json'")
    store = open_store(postgres_url)
    try:
        with pytest.raises(StorageError) as caught:
            await store.list_messages("t1")
    finally:
        await store.close()
    assert "messages" in str(caught.value)


@pytest.mark.anyio
async def test_an_explicit_migrate_may_initialise_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    path.touch()
    async with SQLiteStore(path) as store:
        assert await store.migrate() != []
        assert await store.list_threads("r") == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, "8MB", True])
def test_a_response_limit_that_is_not_a_size_is_refused(bad: object) -> None:
    from obsmem.errors import ConfigError

    with pytest.raises(ConfigError):
        OpenAIChatModel("m", Endpoint("openai", "http://127.0.0.1:9"), max_response_bytes=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        AnthropicModel("m", Endpoint("anthropic", "http://127.0.0.1:9"), max_response_bytes=bad)  # type: ignore[arg-type]

"""Slow headers: ``obsmem serve`` closes a connection whose request headers do not all arrive
within ``--header-timeout-s`` (a "slowloris" client holds a connection, a file descriptor, for as
long as it trickles header bytes; uvicorn bounds only idle connections between requests). Seen
from the user's side: a real ``obsmem serve`` process and raw sockets.

No timing is asserted: each read waits at most ``WAIT_S`` (30 s) for the server to close the
connection, with a header timeout of 1 s, so a server without the bound fails the test.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.test_body_limits import ROOT, WAIT_S, Server, _closed_after, _head, _read_response, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve(tmp_path_factory.mktemp("headers"), "--header-timeout-s", "1", "--timeout-keep-alive-s", "60")


def _connect(server: Server) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=WAIT_S)


def test_headers_that_stop_arriving_close_the_connection(server: Server) -> None:
    """On main: the server waited for the rest of the headers as long as the client liked (the
    read gave up after 30 s with the connection still open)."""
    with _connect(server) as sock:
        sock.sendall(b"POST /api/threads HTTP/1.1\r\nHost: test\r\n")  # and never the rest
        assert _closed_after(sock), "the connection was still open"


def test_headers_trickled_a_byte_at_a_time_close_the_connection(server: Server) -> None:
    """Each byte resets nothing: the bound runs from the request's first byte."""
    head = _head("/api/threads", {"Authorization": f"Bearer {server.key}", "X-Padding": "p" * 200})
    with _connect(server) as sock:
        sock.settimeout(0.2)
        closed = False
        for byte in head[:-4]:  # never the blank line that ends the headers
            try:
                sock.sendall(bytes([byte]))
                closed = sock.recv(1) == b""
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            if closed:
                break
            time.sleep(0.05)
        assert closed, "the server took every trickled header byte (about 11 s of them)"


def test_a_connection_that_never_sends_a_byte_is_closed(server: Server) -> None:
    """On main: an opened connection with nothing sent was kept open (uvicorn's keep-alive
    timeout starts only after a first response)."""
    with _connect(server) as sock:
        assert _closed_after(sock), "the connection was still open"


def test_slow_headers_of_a_second_request_on_a_kept_alive_connection_close_it(server: Server) -> None:
    with _connect(server) as sock:
        sock.sendall(_head("/health", {}, method="GET"))
        status, _, _ = _read_response(sock)
        assert status == 200
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: te")
        assert _closed_after(sock), "the connection was still open"


def test_prompt_requests_are_served_as_before(server: Server) -> None:
    """A request whose headers come at once is untouched, and so is a body after them (the body
    has its own bound, --body-timeout-s); a connection kept alive serves several requests."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60) as client:
        made = client.post("/api/threads", json={"id": "t-prompt"})
        assert made.status_code == 201, made.text
        time.sleep(1.5)  # idle past the header bound between requests: the keep-alive bound applies there
        assert client.get("/api/threads/t-prompt").status_code == 200


def test_the_option_is_documented() -> None:
    readme = " ".join((Path(ROOT) / "README.md").read_text().split())
    assert "--header-timeout-s" in readme

"""A TCP proxy in front of PostgreSQL that loses the reply to one COMMIT, or goes down (not collected).

Armed (``arm(marker)``), the next transaction on any connection that wrote a statement holding
``marker`` and then sends ``COMMIT`` is committed by the server, and then the connection is cut
before the client reads the server's answer: the client sees a lost connection during COMMIT of
a transaction that *was* applied. Deterministic, unlike killing a backend at the right moment.
Plaintext only (open the URL with ``sslmode=disable``).
"""

from __future__ import annotations

import socket
import struct
import threading
from urllib.parse import urlsplit, urlunsplit

__all__ = ["CommitCutter"]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _command(kind: bytes, body: bytes) -> bytes:
    """The SQL of a simple query (``Q``) or a parse (``P``: name, then the query), upper-cased."""
    if kind == b"Q":
        return body.rstrip(b"\0").strip().upper()
    if kind == b"P":
        fields = body.split(b"\0")
        return fields[1].strip().upper() if len(fields) > 1 else b""
    return b""


class CommitCutter:
    def __init__(self, server_url: str) -> None:
        parts = urlsplit(server_url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._parts = parts
        self._marker: bytes | None = None
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._down = False
        self.cuts = 0
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def down(self) -> None:
        """The server goes away: every connection is cut and new ones are refused (until ``up``)."""
        with self._lock:
            self._down = True
            self._listener.close()
            for sock in self._open:
                for close in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
                    try:
                        close()
                    except OSError:
                        pass
            self._open.clear()

    def up(self) -> None:
        """The server is back, on the same port."""
        listener = socket.create_server(("127.0.0.1", self.port))
        with self._lock:
            self._listener, self._down = listener, False
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def url(self) -> str:
        netloc = self._parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_new = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        query = "&".join(q for q in [self._parts.query, "sslmode=disable"] if q)
        return urlunsplit(self._parts._replace(netloc=netloc_new, query=query))

    def arm(self, marker: str) -> None:
        with self._lock:
            self._marker = marker.encode()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # down
            server = socket.create_connection(self._target)
            with self._lock:
                if self._down or listener is not self._listener:  # went down meanwhile: cut this one too
                    client.close()
                    server.close()
                    continue
                self._open.extend([client, server])
            threading.Thread(target=self._serve, args=(client, server), daemon=True).start()

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        pending = threading.Event()  # a COMMIT whose answer must not reach the client
        done = threading.Event()
        threading.Thread(target=self._answers, args=(server, client, pending, done), daemon=True).start()
        try:
            # The startup message has no type byte (and may be an SSLRequest first).
            while True:
                length = struct.unpack("!I", _recv_exact(client, 4))[0]
                body = _recv_exact(client, length - 4)
                server.sendall(struct.pack("!I", length) + body)
                code = struct.unpack("!I", body[:4])[0]
                if code not in (80877103, 80877104):  # SSLRequest / GSSENCRequest: the real startup follows
                    break
            wrote = False
            while not done.is_set():
                kind = _recv_exact(client, 1)
                length = struct.unpack("!I", _recv_exact(client, 4))[0]
                body = _recv_exact(client, length - 4)
                with self._lock:
                    marker = self._marker
                    if marker is not None and marker in body:
                        wrote = True
                    command = _command(kind, body)
                    cut = command == b"COMMIT" and wrote
                    if cut:
                        self._marker = None
                        self.cuts += 1
                    if command in (b"COMMIT", b"ROLLBACK"):
                        wrote = False
                if cut:
                    pending.set()
                server.sendall(kind + struct.pack("!I", length) + body)
        except (ConnectionError, OSError):
            pass
        finally:
            done.set()
            for sock in (client, server):
                try:
                    sock.close()
                except OSError:
                    pass

    @staticmethod
    def _answers(server: socket.socket, client: socket.socket, pending: threading.Event, done: threading.Event) -> None:
        try:
            first = server.recv(1)  # the answer to an SSLRequest is one byte ('N'), else a message follows
            if not first:
                raise ConnectionError("closed")
            client.sendall(first)
            if first == b"N" or first == b"S":
                pass
            else:
                length = struct.unpack("!I", _recv_exact(server, 4))[0]
                client.sendall(struct.pack("!I", length) + _recv_exact(server, length - 4))
            while not done.is_set():
                kind = _recv_exact(server, 1)
                length = struct.unpack("!I", _recv_exact(server, 4))[0]
                body = _recv_exact(server, length - 4)
                if pending.is_set():
                    if kind == b"Z":  # the server answered the COMMIT (it is applied): cut, unanswered
                        break
                    continue
                client.sendall(kind + struct.pack("!I", length) + body)
        except (ConnectionError, OSError):
            pass
        finally:
            done.set()
            for sock in (client, server):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    sock.close()
                except OSError:
                    pass

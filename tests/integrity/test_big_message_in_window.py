"""A pasted multi-megabyte log waiting in the window does not stall every later turn's event loop.

Found by measuring (``benchmarks/event_loop.py --chars 20000000``: heartbeat gaps of 0.5 s): while
a huge message is still unobserved (its observation runs in the background for minutes with the
offline observer, or the thresholds are high), every later boundary read the window again
(decoding the row) and hashed the whole text on the event loop's thread several times over (the
token cache's key, the receipt's message digest) and ran the reminder pattern over it (a log
holds ``<``): about 53 ms of the loop's CPU per short turn for a 5 MB log (about 2 ms now). The text is hashed once
per stored copy now (a SQL store's read hashes it on its worker thread), the pattern's answer
is kept on the part, and a window of up to 8 M characters is kept between boundaries.

The check is deterministic, as in ``test_event_loop.py``: the routines that are linear in the text
(the hashes, the pattern search) are watched, and none may run on the loop's thread over a
large text during the turns after the one that saved it, and the SQLite store does not decode
the log's row again (a window that large was not kept, so each boundary read it afresh, and
decoding holds the interpreter lock whatever thread does it).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import obsmem.om.text.own as own
import obsmem.storage.postgres.store as postgres_store
import obsmem.storage.sqlite.store as sqlite_store
from obsmem import Memory, MemoryConfig, ObservationConfig, Message

pytestmark = pytest.mark.anyio

LINE = "2026-12-05 09:14:02 <worker-3> GET /api/orders?id=12 -> 200 in 14 ms\n"
BIG = 2_000_000  # characters of the pasted log
HEAVY = 500_000  # a hash or search over this much, on the loop, is what stalls it


class _Hasher:
    def __init__(self, inner: Any, note: Any) -> None:
        self._inner, self._note = inner, note

    def update(self, data: bytes) -> None:
        self._note(len(data))
        self._inner.update(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Hashlib:
    """``hashlib`` as an obsmem module sees it, noting large inputs hashed on the loop's thread."""

    def __init__(self, note: Any) -> None:
        self._note = note

    def _make(self, name: str) -> Any:
        def make(data: bytes = b"", **kwargs: Any) -> _Hasher:
            self._note(len(data))
            return _Hasher(getattr(hashlib, name)(data, **kwargs), self._note)

        return make

    def __getattr__(self, name: str) -> Any:
        if name in ("sha256", "blake2b", "sha1", "md5"):
            return self._make(name)
        return getattr(hashlib, name)


class _Json:
    """``json`` as the SQLite store sees it, noting large texts decoded (on any thread: decoding
    holds the interpreter lock, so the loop waits for it wherever it runs)."""

    def __init__(self, note: Any) -> None:
        self._note = note

    def loads(self, text: Any, *args: Any, **kwargs: Any) -> Any:
        self._note(len(text))
        return json.loads(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)


class _Pattern:
    def __init__(self, inner: Any, note: Any) -> None:
        self._inner, self._note = inner, note

    def search(self, text: str, *args: Any) -> Any:
        self._note(len(text))
        return self._inner.search(text, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextmanager
def linear_work_on_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The sizes of every hash and reminder-pattern search of ``HEAVY`` or more that ran on this
    (the loop's) thread inside the block, and of every stored row of that size the SQLite or
    PostgreSQL store decoded (on any thread)."""
    loop_thread = threading.get_ident()
    found: list[int] = []

    def note(size: int) -> None:
        if size >= HEAVY and threading.get_ident() == loop_thread:
            found.append(size)

    fake = _Hashlib(note)
    decoding = _Json(lambda size: found.append(size) if size >= HEAVY else None)  # any thread: it holds the GIL
    monkeypatch.setattr(sqlite_store, "json", decoding)
    monkeypatch.setattr(postgres_store, "json", decoding)
    for name, module in list(sys.modules.items()):
        if name.startswith("obsmem") and getattr(module, "hashlib", None) is hashlib:
            monkeypatch.setattr(module, "hashlib", fake)
    monkeypatch.setattr(own, "_OPEN_START", _Pattern(own._OPEN_START, note))
    yield found


@pytest.mark.parametrize("store", ["sqlite", "memory", "postgres"])
async def test_later_turns_do_not_rework_a_big_waiting_message_on_the_loop(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # PostgreSQL has no window marks: it reads the window at every boundary (12 hashes and
    # searches of the log on the loop over the 3 later turns before its rows were kept decoded)
    urls = {"sqlite": f"sqlite:///{tmp_path / 'obsmem.db'}", "memory": "memory://"}
    url = urls[store] if store in urls else request.getfixturevalue("postgres_url")
    # thresholds above the log: it stays in the window, unobserved, as while its observation runs
    config = MemoryConfig(observation=ObservationConfig(message_tokens=2_000_000))
    async with Memory(url, config=config) as memory:
        log = "here is my log:\n" + LINE * (BIG // len(LINE))
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(log)])
        await turn.step([Message.assistant("Reading it.")])
        await turn.end()
        await memory.settled()  # that turn's own work after its end is not the later turns'
        with linear_work_on_loop(monkeypatch) as on_loop:
            for i in range(3):
                turn = await memory.begin_turn(
                    thread_id="t", resource_id="u", messages=[Message.user(f"and what about line {i}?")]
                )
                assert any(m.text.startswith("here is my log:") for m in turn.context.messages)
                await turn.step([Message.assistant("Looking.")])
                await turn.end()
    assert on_loop == [], f"{len(on_loop)} hashes/searches/decodes of the {BIG:,}-character log in later turns"


async def test_the_watch_sees_linear_work_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: hashing and searching a large text here is seen."""
    text = LINE * (BIG // len(LINE))
    with linear_work_on_loop(monkeypatch) as on_loop:
        import obsmem.om.receipts as receipts

        receipts.message_digest(Message.user(text))
        own._OPEN_START.search(text)
        sqlite_store.json.loads(json.dumps(text))
    assert len(on_loop) == 3, on_loop

"""Issue 13, item 5 (the rest): knowledge times never overflow, vector files are private, LiteLLM is bounded.

* Knowledge: a fact time or a read time at the edge of what Python can hold (``9999-12-31``, an
  offset that pushes year 1 or 9999 out of range, a year-long period ending after 9999) is
  either stored and read back or refused with an obsmem error naming the argument; before the
  fix several were ``OverflowError``/``AttributeError``/``TypeError``.
* The vector index's SQLite file is created like the store's: folder 0700, file, ``-wal`` and
  ``-shm`` 0600, whatever the umask; an existing empty file is refused.
* A LiteLLM answer is bounded by ``max_response_bytes`` and a request's ``max_output_tokens``;
  a streamed one is cut while it is read.

Each test failed on main before the fix.
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import sys
import types
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem.errors import ObsmemError, ResponseTooLargeError, StorageError
from obsmem.knowledge import Knowledge, RecordView
from obsmem.models.base import ModelRequest
from obsmem.models.retry import is_transient
from obsmem.types import Message
from obsmem.vectors import SQLiteVectorIndex

SCOPE = "org:acme/resource:alice"
_LAST = datetime.max.replace(tzinfo=UTC)


# -- knowledge: extreme and invalid times ---------------------------------------------------------


def _named(error: BaseException, argument: str) -> None:
    assert isinstance(error, ObsmemError), f"{type(error).__module__}.{type(error).__name__}: {error}"
    assert argument in str(error), f"{type(error).__name__} does not name {argument!r}: {error}"


@pytest.fixture(params=["memory", "sqlite"])
async def knowledge(
    request: pytest.FixtureRequest, tmp_path: Path, anyio_backend: str
) -> AsyncIterator[Knowledge]:
    facade = Knowledge.in_memory() if request.param == "memory" else Knowledge.sqlite(tmp_path / "k.db")
    async with facade:
        yield facade


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("when", "start", "end"),
    [
        ("9999-12-31", datetime(9999, 12, 31, tzinfo=UTC), None),
        (date(9999, 12, 31), datetime(9999, 12, 31, tzinfo=UTC), None),
        ("9999-12", datetime(9999, 12, 1, tzinfo=UTC), None),
        ("9999", datetime(9999, 1, 1, tzinfo=UTC), None),
        ("0001-01-01", datetime(1, 1, 1, tzinfo=UTC), None),
        ("9999-12-31T23:59:59.999999Z", _LAST, None),
        # a period that ends after Python's last instant ends at that instant
        ("2026/9999-12-31", datetime(2026, 1, 1, tzinfo=UTC), _LAST),
        ("9999-12-31/9999-12-31", datetime(9999, 12, 31, tzinfo=UTC), _LAST),
        ("2026-07/9999", datetime(2026, 7, 1, tzinfo=UTC), _LAST),
    ],
)
async def test_a_legal_fact_time_at_the_end_of_the_calendar_is_stored_and_read_back(
    knowledge: Knowledge, when: Any, start: datetime, end: datetime | None
) -> None:
    node = await knowledge.node("Jane", "person", SCOPE)
    record = await knowledge.append(node.id, "Jane retires", SCOPE, reason="test", when=when)
    assert record.when is not None
    assert (record.when.start, record.when.end) == (start, end)
    stored = await knowledge.store.get_record(record.id, SCOPE)
    assert stored is not None and stored.when == record.when
    covered = await knowledge.store.list_about(node.id, SCOPE, view=RecordView(as_of=start))
    assert [r.id for r in covered.items] == [record.id]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "when",
    [
        "0001-01-01T00:00:00+05:00",  # before year 1 in UTC
        "9999-12-31T23:00:00-05:00",  # after year 9999 in UTC
        datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))),
        datetime(1, 1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        "10000-01-01",
        "9999-13",
        "0000",
        5,
        1e400,
        b"2026-01-01",
        ["2026"],
    ],
)
async def test_a_fact_time_out_of_range_or_of_the_wrong_type_names_when(
    knowledge: Knowledge, when: Any
) -> None:
    node = await knowledge.node("Jane", "person", SCOPE)
    with pytest.raises(Exception) as caught:
        await knowledge.append(node.id, "Jane retires", SCOPE, reason="test", when=when)
    _named(caught.value, "when")
    with pytest.raises(Exception) as caught:
        await knowledge.capture(
            node.id,
            "Jane retires",
            context=SCOPE,
            proposed_level="resource",
            ceiling="org",
            reason="t",
            when=when,
        )
    _named(caught.value, "when")


@pytest.mark.anyio
@pytest.mark.parametrize("argument", ["as_of", "as_known_at"])
@pytest.mark.parametrize("value", ["2026-01-01", date(2026, 1, 1), 0, math.inf, object()])
async def test_a_read_time_that_is_not_a_datetime_names_the_argument(argument: str, value: Any) -> None:
    with pytest.raises(Exception) as caught:
        RecordView(**{argument: value})
    _named(caught.value, argument)


@pytest.mark.anyio
@pytest.mark.parametrize("argument", ["as_of", "as_known_at"])
async def test_a_naive_read_time_is_utc_like_a_naive_fact_time(knowledge: Knowledge, argument: str) -> None:
    node = await knowledge.node("Jane", "person", SCOPE)
    record = await knowledge.append(node.id, "Jane moved", SCOPE, reason="test", when="2026-07-01")
    given: dict[str, Any] = {
        argument: datetime(9999, 12, 31, 23, 59)
    }  # naive: a TypeError on comparison before
    view = RecordView(**given)
    assert [r.id for r in (await knowledge.store.list_about(node.id, SCOPE, view=view)).items] == [record.id]
    given = {argument: datetime(1, 1, 1)}
    early = RecordView(**given)
    assert (await knowledge.store.list_about(node.id, SCOPE, view=early)).items == []


@pytest.mark.anyio
async def test_outbox_times_at_the_edges_never_overflow(knowledge: Knowledge) -> None:
    node = await knowledge.node("Jane", "person", SCOPE)
    await knowledge.append(node.id, "Jane moved", SCOPE, reason="test")
    store = knowledge.store
    claimed = await store.claim_outbox("w1", lease_seconds=1e300)
    assert claimed
    # the claimant's lease decides expiry: one longer than time never expires, even at its end
    assert await store.claim_outbox("w2", lease_seconds=1e300, now=_LAST) == []
    await store.release_outbox("w1", [e.id for e in claimed], retry_at=datetime(9999, 12, 31))  # naive: UTC
    assert await store.claim_outbox("w2", now=datetime(9999, 12, 30, tzinfo=UTC)) == []
    assert await store.claim_outbox("w2", now=datetime(9999, 12, 31, 0, 0, 1)) != []
    for bad in (-1.0, math.nan, math.inf, "60", None):
        with pytest.raises(Exception) as caught:
            await store.claim_outbox("w3", lease_seconds=bad)  # type: ignore[arg-type]
        _named(caught.value, "lease_seconds")
    for argument in ("now", "retry_at"):
        for value in ("2026-01-01", 0, date(2026, 1, 1)):
            with pytest.raises(Exception) as caught:
                if argument == "now":
                    await store.claim_outbox("w3", now=value)  # type: ignore[arg-type]
                else:
                    await store.release_outbox("w3", ["x"], retry_at=value)  # type: ignore[arg-type]
            _named(caught.value, argument)


_OFFSETS = st.sampled_from(
    [
        None,
        UTC,
        timezone(timedelta(hours=14)),
        timezone(timedelta(hours=-12)),
        timezone(timedelta(hours=23, minutes=59)),
    ]
)
_ISO_DATES = st.dates().map(date.isoformat)
_TIMES = st.one_of(
    st.dates(),
    st.datetimes(timezones=_OFFSETS),
    _ISO_DATES,
    st.datetimes(timezones=_OFFSETS).map(datetime.isoformat),
    st.tuples(_ISO_DATES, _ISO_DATES).map("/".join),
    st.tuples(st.dates(), st.integers(0, 13)).map(lambda p: f"{p[0].year:04d}-{p[1]:02d}"),
    st.dates().map(lambda d: f"{d.year:04d}"),
    st.text(max_size=30),
    st.from_regex(r"\A[0-9]{1,6}(-[0-9]{1,3}){0,2}(T[0-9:.]{1,12}(Z|[+-][0-9]{2}:[0-9]{2})?)?\Z"),
    st.integers(),
    st.floats(),
    st.none(),
    st.builds(object),
)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(when=_TIMES, as_of=_TIMES, as_known_at=_TIMES)
def test_any_time_given_to_knowledge_is_used_or_refused_naming_its_argument(
    when: Any, as_of: Any, as_known_at: Any
) -> None:
    import anyio

    async def run() -> None:
        async with Knowledge.in_memory() as knowledge:
            node = await knowledge.node("Jane", "person", SCOPE)
            record = None
            try:
                record = await knowledge.append(node.id, "fact", SCOPE, reason="t", when=when)
            except Exception as exc:  # noqa: BLE001 - judged
                _named(exc, "when")
            for argument, value in (("as_of", as_of), ("as_known_at", as_known_at)):
                try:
                    view = RecordView(**{argument: value})
                except Exception as exc:  # noqa: BLE001 - judged
                    _named(exc, argument)
                    continue
                page = await knowledge.store.list_about(node.id, SCOPE, view=view)
                assert all(r.id == getattr(record, "id", None) for r in page.items)

    anyio.run(run)


# -- the vector index's file ----------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000, 0o002])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


@pytest.mark.anyio
async def test_a_new_vector_index_file_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    folder = tmp_path / "made" / "by-obsmem"
    path = folder / "vectors.db"
    index = await SQLiteVectorIndex.open(path, dimensions=4)
    try:
        await index.upsert("a", np.array([1.0, 0.0, 0.0, 0.0]))
        assert _mode(folder) == 0o700
        assert _mode(folder.parent) == 0o700
        assert _mode(path) == 0o600
        for suffix in ("-wal", "-shm"):
            side = path.with_name(path.name + suffix)
            assert side.exists(), suffix
            assert _mode(side) == 0o600, suffix
    finally:
        await index.close()
    assert sorted(p.name for p in folder.iterdir()) == ["vectors.db"]  # no staging file left


@pytest.mark.anyio
async def test_a_vector_index_in_an_existing_folder_leaves_the_folder_alone(
    tmp_path: Path, umask: int
) -> None:
    os.chmod(tmp_path, 0o755)
    index = await SQLiteVectorIndex.open(tmp_path / "v.db", dimensions=2)
    try:
        await index.upsert("a", np.array([1.0, 0.0]))
    finally:
        await index.close()
    assert _mode(tmp_path) == 0o755
    assert _mode(tmp_path / "v.db") == 0o600


@pytest.mark.anyio
async def test_an_empty_vector_index_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    path.touch()
    with pytest.raises(StorageError) as caught:
        await SQLiteVectorIndex.open(path, dimensions=2)
    assert str(path) in str(caught.value)
    assert path.stat().st_size == 0


@pytest.mark.anyio
async def test_a_new_vector_index_keeps_its_large_pages(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    index = await SQLiteVectorIndex.open(path, dimensions=2)
    try:
        await index.upsert("a", np.array([1.0, 0.0]))
    finally:
        await index.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192


def test_the_file_helpers_live_in_the_foundation_and_the_old_name_still_imports() -> None:
    from obsmem.files import prepare_database_file
    from obsmem.storage.sqlite.store import prepare_database_file as old

    assert old is prepare_database_file


# -- LiteLLM --------------------------------------------------------------------------------------


class _FakeLiteLLM(types.ModuleType):
    """Stands in for the ``litellm`` package: ``acompletion`` answers with ``text`` (or floods)."""

    def __init__(self, text: str = "", *, flood: bool = False) -> None:
        super().__init__("litellm")
        self.text = text
        self.flood = flood
        self.calls: list[dict[str, Any]] = []
        self.chunks_read = 0
        self.closed = False

    async def acompletion(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if kwargs.get("stream"):
            return self._stream()
        return _Dumped(
            {
                "model": "m",
                "choices": [
                    {"message": {"role": "assistant", "content": self.text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 5},
            }
        )

    async def _stream(self) -> AsyncIterator[_Dumped]:
        try:
            pieces = (
                iter(lambda: "flood " * 100, None) if self.flood else iter([self.text[:3], self.text[3:]])
            )
            for piece in pieces:
                self.chunks_read += 1
                delta = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                yield _Dumped(delta)
            yield _Dumped({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            yield _Dumped({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}})
        finally:
            self.closed = True


class _Dumped:
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def model_dump(self) -> dict[str, Any]:
        return self._data


@pytest.fixture
def fake_litellm(monkeypatch: pytest.MonkeyPatch) -> Iterator[_FakeLiteLLM]:
    fake = _FakeLiteLLM()
    monkeypatch.setitem(sys.modules, "litellm", fake)
    yield fake


def _ask() -> list[Message]:
    return [Message.user("hi")]


def _model(**kwargs: Any) -> Any:
    from obsmem.models.litellm import LiteLLMModel

    return LiteLLMModel("gpt-x", **kwargs)


def _too_large(error: BaseException, setting: str) -> None:
    assert isinstance(error, ResponseTooLargeError), type(error)
    assert error.setting == setting
    assert setting in str(error)
    assert not is_transient(error)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_a_litellm_answer_within_the_limits_comes_back_whole(
    fake_litellm: _FakeLiteLLM, stream: bool
) -> None:
    fake_litellm.text = "héllo wörld"
    response = await _model(stream=stream).request(_ask(), ModelRequest(max_output_tokens=10))
    assert response.text == "héllo wörld"
    assert response.usage.output_tokens == 5
    assert fake_litellm.calls[0]["max_tokens"] == 10
    assert bool(fake_litellm.calls[0].get("stream")) is stream


def test_the_litellm_default_response_limit_is_the_shared_default(fake_litellm: _FakeLiteLLM) -> None:
    from obsmem.errors import ConfigError
    from obsmem.models.transport import DEFAULT_MAX_RESPONSE_BYTES

    assert _model().max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES
    for bad in (0, -1, 1.5, "8MB", True):
        with pytest.raises(ConfigError):
            _model(max_response_bytes=bad)


@pytest.mark.anyio
async def test_a_litellm_answer_past_max_response_bytes_is_refused(fake_litellm: _FakeLiteLLM) -> None:
    fake_litellm.text = "é" * 600  # 1,200 bytes
    with pytest.raises(ObsmemError) as caught:
        await _model(max_response_bytes=1000).request(_ask())
    _too_large(caught.value, "max_response_bytes")
    assert (await _model(max_response_bytes=1200).request(_ask())).text == "é" * 600


@pytest.mark.anyio
async def test_a_litellm_answer_far_past_max_output_tokens_is_refused(fake_litellm: _FakeLiteLLM) -> None:
    fake_litellm.text = "word " * 20_000
    with pytest.raises(ObsmemError) as caught:
        await _model().request(_ask(), ModelRequest(max_output_tokens=200))
    _too_large(caught.value, "max_output_tokens")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("settings", "limit", "setting"),
    [
        (ModelRequest(), 64 * 1024, "max_response_bytes"),
        (ModelRequest(max_output_tokens=200), None, "max_output_tokens"),
        (ModelRequest(extra={"stream": True}), 64 * 1024, "max_response_bytes"),
    ],
)
async def test_a_flooding_litellm_stream_is_cut_while_it_is_read(
    fake_litellm: _FakeLiteLLM, settings: ModelRequest, limit: int | None, setting: str
) -> None:
    fake_litellm.flood = True
    model = _model(stream="stream" not in settings.extra, max_response_bytes=limit)
    with pytest.raises(ObsmemError) as caught:
        await model.request(_ask(), settings)
    _too_large(caught.value, setting)
    assert fake_litellm.chunks_read < 1000  # 600 bytes a chunk: stopped near the limit, not never
    assert fake_litellm.closed

"""In resource scope, a turn reads what memory has not observed yet, not the resource's history.

The other threads of a resource are read at every boundary with sharing on (their unobserved
messages are shown in the context and count toward the threshold), and at every observation
cycle without. On main they were read from the smallest cursor of any thread on: one quiet
thread observed long ago (or not at all) made every turn read the whole resource, the current
thread's own observed history included, so a conversation of n turns read O(n²) messages.

Counted, not timed: the messages every store read hands back during the last turns of a
conversation, for a history four times as long. What was observed is never read again, so the
count stays flat (here, the unobserved tail is the same size for both). On main, with sharing on,
the last 30 turns read 9,910 messages after 40 turns and 26,055 after 160 (memory store), 7,868
and 24,160 (SQLite), 9,910 and 33,441 (PostgreSQL); now about 2,000 to 2,400 for both. Without
sharing the other threads are read at observation cycles only; that case held on main too and
is kept as a guard.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig, ReflectionConfig
from obsmem.storage import MemoryStore, SQLiteStore, Store
from obsmem.storage.postgres.store import PostgresStore

from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401

pytestmark = pytest.mark.anyio

MEASURED_TURNS = 30  # two observation cycles or more


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[str], Store]]:
    made: list[Store] = []

    def make(name: str) -> Store:
        store: Store
        if request.param == "memory":
            store = MemoryStore()
        elif request.param == "sqlite":
            store = SQLiteStore(tmp_path / f"{name}.db")
        else:
            url = request.getfixturevalue("postgres_url")
            store = PostgresStore(url, max_size=5)
        made.append(store)
        return store

    yield make


class MessagesRead:
    """Counts the messages every read of a store hands back (lists of messages, or a tuple
    holding one: a window read), wrapped on the instance as a user's probe would."""

    def __init__(self, store: Store) -> None:
        self.count = 0
        for name in dir(type(store)):
            if name.startswith(("list_", "get_", "read_")) and inspect.iscoroutinefunction(getattr(type(store), name)):
                setattr(store, name, self._wrap(getattr(store, name)))

    def _wrap(self, method: Callable[..., Any]) -> Callable[..., Any]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            self.count += _messages_in(result)
            return result

        return counted


def _messages_in(value: object) -> int:
    if isinstance(value, Message):
        return 1
    if isinstance(value, list | tuple):
        return sum(_messages_in(v) for v in value)
    return 0


def _user(i: int) -> str:
    return f"turn {i}: please check the customs form for the Lisbon shipment and the invoice {i * 7} " * 3


async def _read_in_last_turns(store: Store, history_turns: int, *, shared: bool) -> int:
    config = MemoryConfig(
        scope="resource", share_threads_in_resource=shared,
        observation=ObservationConfig(message_tokens=2_000, buffer_tokens=False),
        reflection=ReflectionConfig(observation_tokens=1_000_000),
    )
    async with Memory(store, config=config) as memory:
        # A second thread of the user's, quiet since its one exchange.
        turn = await memory.begin_turn(thread_id="tea", resource_id="u1", messages=[Message.user("I like green tea.")])
        await turn.end([Message.assistant("Noted: green tea.")])
        probe: MessagesRead | None = None
        for i in range(history_turns + MEASURED_TURNS):
            if i == history_turns:
                await memory.settled()
                probe = MessagesRead(store)
            turn = await memory.begin_turn(thread_id="work", resource_id="u1", messages=[Message.user(_user(i))])
            await turn.step([Message.assistant(f"Done {i}: the invoice {i * 7} is filed.")])
            await turn.end()
        await memory.settled()
        assert probe is not None
        record = await memory.get_record("work")
        assert record is not None and record.cursor("work") > 0, "the work thread was observed"
        return probe.count


@pytest.mark.parametrize("shared", [True, False], ids=["sharing", "no-sharing"])
async def test_a_turn_in_resource_scope_does_not_read_the_observed_history(
    make_store: Callable[[str], Store], shared: bool
) -> None:
    short = await _read_in_last_turns(make_store("short"), 40, shared=shared)
    long = await _read_in_last_turns(make_store("long"), 160, shared=shared)
    assert long <= 1.5 * short, (
        f"the last {MEASURED_TURNS} turns read {short} messages after 40 turns and {long} after 160: "
        "a turn reads the resource's observed history"
    )

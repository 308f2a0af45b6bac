"""Bounded (helper-128): the inspector's usage page counted each thread's generations by listing
them (``list_generations(limit=200)``: up to 200 whole records a thread, observations and all,
to print one number), and a thread of 250 generations showed "200". The head's generation
number is the count (generations are numbered from 0 and only ever removed all together), so
the page now reads no generation to count them, and shows 250. Work is counted in generation
records the store hands out, never timed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from obsmem.storage.contract import ObservationRecord
from tests.server.ui_env import UiEnv, open_ui_env

THREAD = "gens128"
GENERATIONS = 250


async def _seed(ui: UiEnv) -> None:
    """A thread of alice's with ``GENERATIONS`` generations (reflections), written to the store."""
    memory = ui.memory
    thread = await memory.create_thread(THREAD, "alice", org_id="acme")
    lineage = memory.engine.lineage(thread)
    first = ObservationRecord(
        id="gen128-0", lineage=lineage, scope="thread", thread_id=THREAD, resource_id="alice",
        active_observations="* 🟡 (09:00) generation 0", observation_tokens=8,
    )  # fmt: skip
    created = await memory.store.create_record(first)
    assert created.applied and created.record is not None
    head = created.record
    for n in range(1, GENERATIONS):
        text = f"* 🟡 (09:00) generation {n}"
        successor = head.model_copy(update={"id": f"gen128-{n}", "active_observations": text})
        written = await memory.store.create_generation(head, successor, expected_version=head.version)
        assert written.applied and written.record is not None
        head = written.record


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    with open_ui_env(tmp_path_factory.mktemp("ui-usage128"), turns=1) as env:
        env.live.call(_seed(env))
        yield env


class GenerationsRead:
    """Counts the generation records ``store.list_generations`` hands out while active."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.records = 0

    def __enter__(self) -> GenerationsRead:
        real = type(self.store).list_generations

        async def counted(*args: Any, **kwargs: Any) -> Any:
            found = await real(self.store, *args, **kwargs)
            self.records += len(found)
            return found

        self.store.list_generations = counted
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.list_generations


def test_the_usage_page_counts_generations_without_listing_them(ui: UiEnv) -> None:
    assert len(ui.live.call(ui.memory.list_generations(THREAD, limit=1000))) == GENERATIONS
    with GenerationsRead(ui.memory.store) as read:
        with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.alice}, timeout=60) as client:
            shown = client.get("/ui/usage")
    assert shown.status_code == 200
    row = shown.text[shown.text.index(f">{THREAD}</a>") :].split("</tr>")[0]
    cells = [cell.split(">", 1)[1].split("<", 1)[0] for cell in row.split("<td")[1:]]
    assert str(GENERATIONS) in cells, cells  # was "200": the listing's cap
    assert read.records == 0, read.records  # was 200 (this thread) + the demo thread's


def test_the_generations_page_says_how_many_there_are(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.alice}, timeout=60) as client:
        shown = client.get(f"/ui/threads/{THREAD}/generations")
    assert shown.status_code == 200
    # was "The newest 50 of 200+ generations; the From and To lists below hold them all"
    said = f"The newest 50 of {GENERATIONS} generations; the From and To lists below hold the newest 200"
    assert said in shown.text

"""A live server holding the demo conversation, for the inspector's browser tests, the
screenshots (benchmarks/ui_screenshots.py) and the page timings (benchmarks/ui_pages.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from obsmem import Memory, MemoryConfig, Message
from obsmem.demo.conversation import demo_conversation
from obsmem.knowledge import Knowledge
from obsmem.server import ServerSettings, Service
from tests.integrations.agent_model import small_memory_config
from tests.server.live import Keys, LiveServer, auth, live_server, make_keys

__all__ = ["CHROMIUM", "DEMO_THREAD", "UiEnv", "load_demo", "open_ui_env", "sign_in"]

CHROMIUM = "/usr/bin/chromium"
DEMO_THREAD = "demo-thread"


@dataclass
class UiEnv:
    live: LiveServer
    keys: Keys
    candidates: list[str]

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def memory(self) -> Memory:
        return self.live.service.memory


def _own(message: Message) -> Message:
    """The demo message without the demo's own thread and resource (it joins this thread)."""
    return message.model_copy(update={"thread_id": None, "resource_id": None})


def _steps(responses: tuple[Message, ...]) -> list[list[Message]]:
    steps: list[list[Message]] = []
    for message in map(_own, responses):
        if message.role == "tool" and steps:
            steps[-1].append(message)
        else:
            steps.append([message])
    return steps


async def load_demo(memory: Memory, thread_id: str, resource_id: str, org_id: str, *, turns: int) -> None:
    """The first ``turns`` turns of the bundled demo conversation, driven through the Turn API."""
    await memory.create_thread(thread_id, resource_id, title="Nadia (demo)", org_id=org_id)
    for demo_turn in demo_conversation()[:turns]:
        turn = await memory.begin_turn(thread_id=thread_id, messages=[_own(demo_turn.user)])
        for step in _steps(demo_turn.responses):
            await turn.step(step)
        await turn.end()
    await memory.settled()


@contextmanager
def open_ui_env(
    path: Path, *, turns: int = 40, config: MemoryConfig | None = None, **memory_options: Any
) -> Iterator[UiEnv]:
    """A live server over a SQLite store holding ``turns`` demo turns; ``memory_options`` go to
    ``Memory`` (an ``observer=`` model, say)."""
    service = Service.open(
        f"sqlite:///{path / 'memory.db'}", settings=ServerSettings(), knowledge=Knowledge.sqlite(path / "knowledge.db"),
        config=config or small_memory_config(retrieval=True), max_turn_wait=None, **memory_options,
    )  # fmt: skip
    keys = make_keys(service)
    with live_server(service) as live:
        live.call(load_demo(service.memory, DEMO_THREAD, "alice", "acme", turns=turns))
        candidates = []
        with httpx.Client(base_url=live.url, headers=auth(keys.alice)) as client:
            for text in ("Nadia prefers aisle seats", "Nadia's cat is called Pixel", "Nadia dislikes Lisbon",
                         "Nadia drinks oat milk"):
                made = client.post("/api/knowledge", json={"text": text, "subject": "Nadia", "candidate": True})
                made.raise_for_status()
                candidates.append(made.json()["id"])
        yield UiEnv(live, keys, candidates)


def sign_in(page: Any, base: str, key: str) -> None:
    """Sign in through the login form, typing the key as a user would."""
    page.goto(base + "/ui/login")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/ui/threads")

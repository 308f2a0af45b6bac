"""A resource whose observer backs off (a revoked key, ``failure_policy="warn"``): one thread's
backlog made it fail, and the backoff is stored on the resource's record. Another thread of the
resource with nothing due (a new conversation, a few messages) has no observation to skip: its
turns must not report one (an outcome "backing off", an ``observation-backoff-skipped`` event at
every boundary), as they did not before the backoff skip at turn boundaries (2ba7cf0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from obsmem import EngineEvent, Memory, Message
from obsmem.config import MemoryConfig, ObservationConfig
from obsmem.errors import ModelRequestError
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


def _revoked(messages: list[Message], settings: Any) -> str:
    raise ModelRequestError("401: invalid API key")


@pytest.mark.parametrize("share", [False, True])
async def test_a_thread_with_nothing_due_reports_no_skipped_observation(tmp_path: Path, share: bool) -> None:
    events: list[EngineEvent] = []
    model = FunctionModel(_revoked, name="test:revoked")
    memory = Memory(
        f"sqlite:///{tmp_path / 'memory.db'}",
        config=MemoryConfig(
            scope="resource", share_threads_in_resource=share,
            observation=ObservationConfig(message_tokens=3_000),
        ),
        observer=model, reflector=model, max_turn_wait=0.01, failure_policy="warn", on_event=events.append,
    )
    async with memory:
        await memory.create_thread("busy", "alice")
        backlog: list[Message] = []
        for i in range(150):
            backlog += [Message.user(f"Question {i} about the shipment to Lisbon?"), Message.assistant(f"Answer {i}.")]
        await memory.store.save_messages("busy", backlog)
        for i in range(3):
            turn = await memory.begin_turn(thread_id="busy", resource_id="alice", messages=[Message.user(f"q{i}")])
            await turn.end([Message.assistant("ok")])
            await memory.settled()
        assert any(e.kind == "observation-backoff" for e in events), [e.kind for e in events]

        seen = len(events)
        turn = await memory.begin_turn(thread_id="quiet", resource_id="alice", messages=[Message.user("hello")])
        await turn.step([Message.assistant("hi, how can I help?")])
        await turn.end()
        await memory.settled()
        assert [m.text for m in turn.context.messages if m.role != "system"][-2:] == ["hello", "hi, how can I help?"]
        assert not any("backing off" in (o.reason or "") for o in turn.outcomes), turn.outcomes
        assert "observation-backoff-skipped" not in [e.kind for e in events[seen:] if e.thread_id == "quiet"]

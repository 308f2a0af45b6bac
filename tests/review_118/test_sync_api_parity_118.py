"""SyncMemory is "the same API, blocking" (README): a web app on it needs the async API's calls.

Before, a threaded app had no ``resume_turn`` (README: "a turn continued in another process, a
worker of a web app, ``memory.resume_turn(thread_id=…, since_seq=turn.began_seq)``"), no
``turn.began_seq`` to pass it, no ``settled()`` to wait for memory work, and no
``get_observations``, ``get_instructions``, ``capture_knowledge``, ``redacted`` or ``turn``.
They are all forwarded now (the calls with their rows in tests/integrity/entry_points.py,
where every public argument is fuzzed).
"""

from __future__ import annotations

from pathlib import Path

from obsmem import Memory, SyncMemory
from obsmem.sync import SyncTurn
from obsmem.turn import Turn

from ..engine.helpers import Conversation, chat_turns, fake_clock

#: Memory's public names that are not calls for an application (the TurnContexts protocol a
#: Turn asks its memory for contexts through), and aclose (SyncMemory.close).
NOT_FORWARDED = {"aclose", "context_for", "context_from", "speculative_context"}


def test_every_turn_attribute_has_a_blocking_counterpart() -> None:
    wanted = {name for name in dir(Turn) if not name.startswith("_")} - {"start", "resume"}
    assert sorted(name for name in wanted if not hasattr(SyncTurn, name)) == []  # before: began_seq


def test_every_public_memory_call_has_a_blocking_counterpart() -> None:
    wanted = {name for name in dir(Memory) if not name.startswith("_")} - NOT_FORWARDED
    assert sorted(name for name in wanted if not hasattr(SyncMemory, name)) == []


def test_a_turn_begun_by_one_worker_is_resumed_and_ended_by_another(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    conv = Conversation()
    with SyncMemory(url) as first, SyncMemory(url) as second:  # two workers of one web app
        turn = first.begin_turn(thread_id="t", resource_id="u", messages=[conv.user("Weather in Lisbon?")])
        turn.step([conv.call("c1", city="Lisbon")])
        began = turn.began_seq
        assert began is not None
        resumed = second.resume_turn(thread_id="t", since_seq=began)  # type: ignore[attr-defined]
        resumed.end([conv.result("c1", {"temp": 21}), conv.assistant("21 degrees in Lisbon.")])
        assert [m.role for m in first.list_messages("t")] == ["user", "assistant", "tool", "assistant"]


def test_settled_waits_for_the_memory_work_turns_left_running() -> None:
    conv = Conversation()
    from obsmem import MemoryConfig, ObservationConfig, ReflectionConfig

    config = MemoryConfig(observation=ObservationConfig(message_tokens=400, buffer_tokens=0.5),
                          reflection=ReflectionConfig(observation_tokens=2000))
    with SyncMemory("memory://", config=config, clock=fake_clock()) as memory:
        for user_text, reply in chat_turns(12):
            turn = memory.begin_turn(thread_id="t", resource_id="u", messages=[conv.user(user_text)])
            turn.step([conv.assistant(reply)])
            turn.end()
        memory.settled()  # before: AttributeError
        assert memory.memory.background.pending == 0  # nothing left running behind the caller
        assert memory.get_record("t") is not None

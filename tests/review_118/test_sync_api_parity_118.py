"""SyncMemory is "the same API, blocking" (README): a web app on it needs the async API's calls.

Before, a threaded app had no ``resume_turn`` (README: "a turn continued in another process, a
worker of a web app, ``memory.resume_turn(thread_id=…, since_seq=turn.began_seq)``"), no
``turn.began_seq`` to pass it, no ``settled()`` to wait for memory work, and no
``get_observations``, ``get_instructions``, ``capture_knowledge``, ``redacted`` or ``turn``.
"""

from __future__ import annotations

from pathlib import Path

from obsmem import Memory, Message, SyncMemory
from obsmem.sync import SyncTurn
from obsmem.turn import Turn

from ..engine.helpers import Conversation, chat_turns, fake_clock, small_config

#: Memory's public names that are not calls for an application (the TurnContexts protocol a
#: Turn asks its memory for contexts through), and aclose (SyncMemory.close).
NOT_FORWARDED = {"aclose", "context_for", "context_from", "speculative_context"}


def test_every_public_memory_call_has_a_blocking_counterpart() -> None:
    wanted = {name for name in dir(Memory) if not name.startswith("_")} - NOT_FORWARDED
    assert sorted(name for name in wanted if not hasattr(SyncMemory, name)) == []
    turn_wanted = {name for name in dir(Turn) if not name.startswith("_")} - {"start", "resume"}
    assert sorted(name for name in turn_wanted if not hasattr(SyncTurn, name)) == []


def test_a_turn_begun_by_one_worker_is_resumed_and_ended_by_another(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/m.db"
    conv = Conversation()
    with SyncMemory(url) as first, SyncMemory(url) as second:  # two workers of one web app
        turn = first.begin_turn(thread_id="t", resource_id="u", messages=[conv.user("Weather in Lisbon?")])
        turn.step([conv.call("c1", city="Lisbon")])
        began = turn.began_seq
        assert began is not None
        resumed = second.resume_turn(thread_id="t", since_seq=began)
        resumed.end([conv.result("c1", {"temp": 21}), conv.assistant("21 degrees in Lisbon.")])
        assert [m.role for m in first.list_messages("t")] == ["user", "assistant", "tool", "assistant"]


def test_settled_observations_and_the_turn_context_manager() -> None:
    conv = Conversation()
    with SyncMemory("memory://", config=small_config(), clock=fake_clock()) as memory:
        for user_text, reply in chat_turns(12):
            with memory.turn(thread_id="t", resource_id="u", messages=[conv.user(user_text)]) as turn:
                turn.step([conv.assistant(reply)])
        memory.settled()
        record = memory.get_record("t")
        assert record is not None and memory.get_observations("t") == record.active_observations
        assert memory.get_instructions("t") == []
        assert memory.redacted("plain text") == "plain text"
        assert [m.role for m in memory.list_messages("t")][:2] == ["user", "assistant"]


def test_capture_knowledge_is_forwarded(tmp_path: Path) -> None:
    from obsmem.knowledge import Knowledge

    knowledge = Knowledge.sqlite(str(tmp_path / "k.db"))
    with SyncMemory(f"sqlite:///{tmp_path}/m.db", knowledge=knowledge) as memory:
        memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("I live in Lisbon")]).end()
        assert isinstance(memory.capture_knowledge("t"), list)

"""A Turn sits below Memory: it is given an engine, a store and a :class:`TurnContexts`, and never
imports or holds ``Memory`` (import-linter's layers and tests/test_public_api.py's cycle count
check the imports; these tests check that a turn runs with no Memory at all)."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Sequence

import pytest

import obsmem.turn
from obsmem.clock import FakeClock
from obsmem.config import MemoryConfig
from obsmem.om.context import ContextWindow
from obsmem.om.engine import Engine
from obsmem.om.offline import OfflineObserver, OfflineReflector
from obsmem.storage import MemoryStore
from obsmem.storage.contract import ObservationRecord
from obsmem.tokens import TokenCounter
from obsmem.turn import Turn, TurnContexts
from obsmem.types import Message, TextPart, Thread, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio


class RecordingContexts:
    """A TurnContexts that says which of its two reads the turn asked for."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def context_for(self, thread: Thread) -> ContextWindow:
        self.calls.append(f"for:{thread.id}")
        return ContextWindow(messages=[])

    async def context_from(
        self, thread: Thread, record: ObservationRecord | None, unobserved: Sequence[Message]
    ) -> ContextWindow:
        self.calls.append(f"from:{thread.id}:{len(unobserved)}")
        return ContextWindow(messages=list(unobserved))


def test_turn_never_imports_memory() -> None:
    tree = ast.parse(inspect.getsource(obsmem.turn))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    assert not {name for name in imported if name and name.startswith(("obsmem.memory", "obsmem.sync"))}


async def test_a_turn_runs_on_an_engine_a_store_and_a_context_port() -> None:
    counter, store = TokenCounter(), MemoryStore()
    engine = Engine(
        store=store,
        observer=OfflineObserver(count_tokens=counter.count_text),
        reflector=OfflineReflector(count_tokens=counter.count_text),
        config=MemoryConfig(),
        counter=counter,
        clock=FakeClock(),
    )
    thread = await store.create_thread(Thread(id="t1", resource_id="r1"))
    contexts = RecordingContexts()
    port: TurnContexts = contexts
    turn = await Turn.start(thread, [Message.user("hello")], engine=engine, store=store, contexts=port)
    assert [m.text for m in turn.context.messages] == ["hello"]
    call = Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="search"),))
    await turn.step([call])  # a call waiting for its result: the context comes from the stored state
    result = Message(role="tool", parts=(ToolResultPart(tool_call_id="c1", tool_name="search", result="ok"),))
    await turn.step([result])
    await turn.step([Message(role="assistant", parts=(TextPart(text="done"),))])
    await turn.end()
    assert contexts.calls == ["from:t1:1", "for:t1", "from:t1:3", "from:t1:4"]
    assert len(await store.list_messages("t1")) == 4  # every message saved once
    assert turn.steps == 3 and turn.ended

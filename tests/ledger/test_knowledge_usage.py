"""The knowledge agents' model calls reach the cost ledger (issue 18), under the agent's role."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.knowledge import Knowledge
from obsmem.models import register_provider
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.models.registry import _PROVIDERS
from obsmem.models.testing import FunctionModel

pytestmark = pytest.mark.anyio


def answer(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
    return ModelResponse("Nothing to record.", usage=Usage(input_tokens=400, output_tokens=5))


@pytest.fixture
def ledger_provider() -> Iterator[None]:
    register_provider("ledgertest", lambda spec, env, client: FunctionModel(answer, name=f"ledgertest:{spec.model}"))
    yield
    _PROVIDERS.pop("ledgertest", None)


async def test_agent_calls_are_recorded_with_the_agents_role(ledger_provider: Any) -> None:
    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False},
                          knowledge={"model": "ledgertest:agent"})
    async with Knowledge.in_memory() as knowledge:
        async with Memory("memory://", config=config, knowledge=knowledge) as memory:
            for text in ["My phone number is +49 151 5550 7720, call me after six.",
                         "I moved to Lisbon last spring and I work at the harbour office."]:
                turn = await memory.begin_turn(thread_id="t1", resource_id="alice", messages=[Message.user(text)])
                await turn.end([Message.assistant("Noted.")])
            await memory.observe("t1")
            await memory.settled()
            report = await memory.usage(resource_id="alice")
    agents = [row for row in report.rows if row.model == "ledgertest:agent"]
    assert agents, report
    assert {row.role for row in agents} <= {"capture", "curate", "learn", "remind", "knowledge"}
    assert all(row.input_tokens == 400 * row.calls for row in agents)

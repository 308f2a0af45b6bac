"""Microsoft Agent Framework: two users' sessions with the same id (each provider with its own
resource id, over one memory) never see each other, one after the other or at once (helper 214).
A guard: this held before it was written."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_framework import Agent
from agent_framework import Message as AFMessage

from obsmem import Memory
from obsmem.errors import InvalidInputError
from obsmem.integrations.agent_framework import ObservationalMemoryProvider
from tests.integrations.test_agent_framework_hostile_192 import STREAMS, _run
from tests.integrations.test_agent_framework_review import QUIET

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("at_once", [False, True])
@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client_kind", list(STREAMS))
async def test_the_same_session_id_of_two_users_is_never_shared(
    client_kind: str, stream: bool, store: str, at_once: bool, tmp_path: Path
) -> None:
    async def model(sent: list[AFMessage]) -> AFMessage:
        await asyncio.sleep(0.01)
        return AFMessage("assistant", [f"seen: {' | '.join(m.text for m in sent)}"])

    client = STREAMS[client_kind](model)
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path}/m.db"
    async with Memory(url, config=QUIET) as memory:
        alice = ObservationalMemoryProvider(memory, resource_id="alice")
        bob = ObservationalMemoryProvider(memory, resource_id="bob")
        alice_agent = Agent(client, "APP", context_providers=[alice])
        bob_agent = Agent(client, "APP", context_providers=[bob])
        alice_session = alice_agent.create_session(session_id="c1")
        bob_session = bob_agent.create_session(session_id="c1")
        if at_once:
            runs = await asyncio.gather(_run(alice_agent, "alice secret", alice_session, stream),
                                        _run(bob_agent, "bob secret", bob_session, stream), return_exceptions=True)
            refused = [r for r in runs if isinstance(r, BaseException)]
            assert len(refused) == 1 and isinstance(refused[0], InvalidInputError), runs
        else:
            await _run(alice_agent, "alice secret", alice_session, stream)
            with pytest.raises(InvalidInputError):
                await _run(bob_agent, "bob secret", bob_session, stream)
            with pytest.raises(InvalidInputError):
                await _run(bob_agent, "bob with alice's session", alice_session, stream)
        for sent in client.calls:  # each model call held one user's words only
            text = " ".join(m.text for m in sent)
            assert not ("alice" in text and "bob" in text), text
        owner = (await memory.get_thread("c1")).resource_id
        other = bob if owner == "alice" else alice
        with pytest.raises(InvalidInputError):
            await other.get_messages("c1")
        with pytest.raises(InvalidInputError):
            await other.save_messages("c1", [AFMessage("user", ["injected"])])
        texts = " ".join(m.text for m in await memory.list_messages("c1"))
        assert "injected" not in texts
        assert ("alice" in texts) != ("bob" in texts)

"""With the privacy boundary on, the prompt-cache key obsmem sends OpenAI for a thread is keyed,
not a plain hash of the thread id (helper-126's open item).

The key groups one thread's observer calls on one cache, so it must be stable per thread; but on
main it was ``sha256(thread_id)`` unsalted, and a thread id is often personal (an e-mail
address, which ``redact_pii=["email"]`` keeps out of the text): anyone holding the requests could
hash a list of addresses and find whose thread it was. Under the boundary it is now an HMAC under
the privacy key. A real local HTTP server plays OpenAI.
"""

from __future__ import annotations

import hashlib

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from tests.models.providers.test_openai_wire import model as openai_model
from tests.models.wire_server import MemoryModelPlayer, WireServer

pytestmark = pytest.mark.anyio

THREAD = "alice@example.com/chat-1"


async def test_the_prompt_cache_key_does_not_reveal_the_thread_id() -> None:
    with WireServer() as server:
        server.responder = MemoryModelPlayer()
        config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False},
                              privacy=PrivacyConfig(key="k", redact_pii=["email"]))
        async with Memory("memory://", config=config, observer=openai_model(server)) as memory:
            for round_ in range(2):
                for n in range(2):
                    turn = await memory.begin_turn(thread_id=THREAD, resource_id="alice@example.com",
                                                   messages=[Message.user(f"round {round_} turn {n} " + "word " * 30)])
                    await turn.end([Message.assistant("Noted.")])
                await memory.observe(THREAD)
        keys = [r.body.get("prompt_cache_key") for r in server.requests]
    assert len(keys) >= 2 and len(set(keys)) == 1 and keys[0], keys  # stable per thread
    plain = hashlib.sha256(THREAD.encode()).hexdigest()[:24]
    assert plain not in keys[0] and "alice" not in keys[0], keys[0]  # on main: obsmem-observer-<plain>

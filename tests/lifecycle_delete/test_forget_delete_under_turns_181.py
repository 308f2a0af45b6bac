"""PostgreSQL, two ``Memory`` objects over one database (an app replica running a user's turns,
an admin replica): a forget or a delete_resource lands while the app's turns (and the memory work
they start) are on their way. Afterwards no table holds the forgotten value, nor any text of the
conversation the delete removed."""

from __future__ import annotations

import asyncio
import random

import pytest

from obsmem import Memory, MemoryConfig, Message

from .scan import scan_postgres

pytestmark = pytest.mark.anyio
SECRET = "ZEBRAQUUX181"
FILLER = ("We talked about the weather in Lisbon and the train schedule for Monday.",
          "I need to buy groceries: apples, bread, oat milk and coffee beans.",
          "My sister Ana is visiting next weekend, she likes hiking in Sintra.",
          "Remind me to call the dentist about the appointment on Thursday at 3pm.")


def _config() -> MemoryConfig:
    return MemoryConfig(observation={"message_tokens": 120, "buffer_tokens": False}, reflection={"observation_tokens": 300})


async def _turns(memory: Memory, thread: str, history: list[Message], start: int, count: int, *,
                 whole_history: bool, code: str = "") -> None:
    for i in range(start, start + count):
        said = Message.user(f"Turn {i} {code}{i:03d}: {FILLER[i % len(FILLER)]}")
        sent = [*history, said] if whole_history else [said]
        async with memory.turn(thread_id=thread, resource_id="u1", messages=sent) as turn:
            reply = Message.assistant(f"Noted turn {i}. {FILLER[(i + 1) % len(FILLER)]}")
            await turn.step([reply])
        history += [said, reply]


@pytest.mark.parametrize("seed", range(4))
async def test_a_forget_while_a_stateless_client_resends_its_history(postgres_url: str, seed: int) -> None:
    rng = random.Random(seed)
    async with Memory(postgres_url, config=_config()) as app, Memory(postgres_url, config=_config()) as admin:
        history: list[Message] = []
        await _turns(app, "t1", history, 0, 3, whole_history=True)
        history[2] = Message(id=history[2].id, role="user", created_at=history[2].created_at,
                             parts=[*history[2].parts, {"type": "text", "text": f"My locker code is {SECRET}."}])
        await app.save_messages("t1", [history[2]])  # the client's copy holds the value, as stored
        await _turns(app, "t1", history, 3, 3, whole_history=True)

        async def forget_soon() -> None:
            await asyncio.sleep(rng.uniform(0, 0.3))
            await admin.forget(SECRET, resource_id="u1")

        await asyncio.gather(_turns(app, "t1", history, 6, 6, whole_history=True), forget_soon())
        await app.settled()
        await admin.settled()
        assert scan_postgres(postgres_url, SECRET) == []


@pytest.mark.parametrize("seed", range(4))
async def test_a_delete_resource_while_turns_run(postgres_url: str, seed: int) -> None:
    rng = random.Random(seed)
    async with Memory(postgres_url, config=_config()) as app, Memory(postgres_url, config=_config()) as admin:
        await _turns(app, "t1", [], 0, 6, whole_history=False, code="OLDX")
        ended_before: list[int] = list(range(6))
        started_delete = asyncio.Event()

        async def app_side() -> None:
            for i in range(6, 14):
                try:
                    await _turns(app, "t1", [], i, 1, whole_history=False, code="OLDX")
                except Exception:  # noqa: BLE001 - the thread went under the turn
                    pass
                if not started_delete.is_set():
                    ended_before.append(i)

        async def delete_soon() -> None:
            await asyncio.sleep(rng.uniform(0, 0.3))
            started_delete.set()
            await admin.delete_resource("u1")

        await asyncio.gather(app_side(), delete_soon())
        await app.settled()
        await admin.settled()
        left = [f"OLDX{i:03d}" for i in ended_before if scan_postgres(postgres_url, f"OLDX{i:03d}")]
        assert left == [], scan_postgres(postgres_url, left[0])[:3] if left else None

"""One worker process of the multiprocess lifecycle test (run as a script, not collected).

    python mp_worker.py <sqlite path or store URL> <worker number> <turns>

Opens its own ``Memory`` on the shared store (``sqlite:///<path>``, or the URL as given, e.g.
``postgresql://…``) with the offline observer, small thresholds and
buffering on, runs ``turns`` turns on the shared thread (a user message ``p{n}-u{i}`` and an
assistant reply ``p{n}-a{i}``), waits for its background work and closes. Prints one JSON line
with what it did; exits non-zero on any error.

A synchronous observation that lost the compare-and-set to other processes on every attempt no
longer raises (the turn goes on, the messages stay pending: see
tests/integrity/test_observation_contention.py). The worker still repeats a call that raises
:class:`~obsmem.errors.ObservationError` (saving a message again is idempotent by id) and counts
it in ``contention_retries``, which should stay 0. Anything else, or five in a row, fails the run.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from obsmem import Memory, MemoryConfig, Message, ObservationConfig, ReflectionConfig
from obsmem.errors import ObservationError
from obsmem.types import TextPart

T = TypeVar("T")
THREAD = "shared"
RESOURCE = "u1"

FACTS = [
    "I live in Munich with my partner Alex.",
    "My daughter Mia is seven years old.",
    "I work as a data engineer at Helio.",
    "My budget for the trip is 2400 euros.",
    "I prefer window seats on flights.",
]


def config() -> MemoryConfig:
    return MemoryConfig(
        observation=ObservationConfig(message_tokens=600, buffer_tokens=0.2, buffer_on_idle=True),
        reflection=ReflectionConfig(observation_tokens=1200),
    )


def store_url(target: str) -> str:
    return target if "://" in target else f"sqlite:///{target}"


async def main(target: str, worker: int, turns: int) -> dict[str, object]:
    events: dict[str, int] = {}
    retries = [0]

    async def again_on_contention(call: Callable[[], Awaitable[T]]) -> T:
        for attempt in range(5):
            try:
                return await call()
            except ObservationError:
                if attempt == 4:
                    raise
                retries[0] += 1
        raise AssertionError("unreachable")

    def count(event: object) -> None:
        kind = getattr(event, "kind", "?")
        events[kind] = events.get(kind, 0) + 1

    started = time.perf_counter()
    memory = Memory(store_url(target), config=config(), on_event=count)
    try:
        for i in range(turns):
            fact = FACTS[(i + worker) % len(FACTS)]
            user = Message(
                id=f"p{worker}-u{i}", role="user",
                parts=(TextPart(text=f"{fact} Process {worker} asks question {i}: how does step {i} work?"),),
            )
            turn = await again_on_contention(
                lambda user=user: memory.begin_turn(thread_id=THREAD, resource_id=RESOURCE, messages=[user])
            )
            reply = Message(
                id=f"p{worker}-a{i}", role="assistant",
                parts=(TextPart(text=f"Step {i} moves table t{i} for process {worker}, verifies row counts "
                                     f"and switches reads; it takes about {10 + i % 50} minutes."),),
            )
            await again_on_contention(lambda turn=turn, reply=reply: turn.step([reply]))
            await turn.end()
        await memory.settled()
        errors = [repr(e) for e in memory.background.errors]
    finally:
        await memory.aclose()
    return {"worker": worker, "turns": turns, "events": events, "background_errors": errors,
            "contention_retries": retries[0],
            "seconds": round(time.perf_counter() - started, 2)}


if __name__ == "__main__":
    db, number, count_turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(asyncio.run(main(db, number, count_turns))))

"""Without the OpenTelemetry API installed, telemetry is a no-op and memory works the same."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    sys.modules["opentelemetry"] = None  # as if the package were not installed: importing it fails
    from obsmem import Memory, MemoryConfig, Message, telemetry
    from obsmem.calls import ModelCall, notify
    from datetime import UTC, datetime

    async def main():
        config = MemoryConfig(observation={"message_tokens": 200}, reflection={"observation_tokens": 300})
        async with Memory("memory://", config=config) as memory:
            for i in range(20):
                turn = await memory.begin_turn(
                    thread_id="t1", resource_id="r1",
                    messages=[Message.user(f"question {i}: tell me about the garden, the beans and the tomatoes")],
                )
                await turn.step([Message.assistant(f"answer {i}: plant beans next to the tomatoes, water daily")])
                await turn.end()
            record = await memory.get_record("t1")
            assert record is not None and record.active_observations, "memory observed as usual"
        notify(ModelCall(role="observer", model="m", started_at=datetime.now(UTC), latency_s=0.1))
        assert not telemetry.enabled()
        assert telemetry.span("a") is telemetry.span("b", {"x": 1}), "one shared no-op span: nothing allocated"
        with telemetry.span("a") as span:
            span.set("k", "v")
            span.fail(RuntimeError("x"))
        telemetry.record_event("buffer-start", {})
        telemetry.record_boundary("step", 0.1, 0.0)
        print("NOOP-OK", sys.modules["opentelemetry"])

    asyncio.run(main())
    """
)


def test_without_opentelemetry_memory_works_and_telemetry_does_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "NOOP-OK None" in done.stdout
    assert "Traceback" not in done.stderr and "OpenTelemetry" not in done.stderr


def test_the_hash_option_can_come_from_the_environment() -> None:
    script = (
        "from obsmem import telemetry; import hashlib; "
        "assert telemetry.ids('t1', 'r1') == {'obsmem.thread_id': hashlib.sha256(b'st1').hexdigest()[:16], "
        "'obsmem.resource_id': hashlib.sha256(b'sr1').hexdigest()[:16]}; print('HASH-OK')"
    )
    env = {**os.environ, "OBSMEM_OTEL_HASH_IDS": "1", "OBSMEM_OTEL_HASH_SALT": "s"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HASH-OK" in done.stdout

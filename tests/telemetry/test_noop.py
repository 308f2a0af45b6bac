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


LATE_SDK = textwrap.dedent(
    """
    import asyncio
    from datetime import UTC, datetime
    from obsmem import Memory, Message, telemetry
    from obsmem.calls import ModelCall, notify

    async def turn(memory, i):
        t = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user(f"question {i}")])
        await t.step([Message.assistant(f"answer {i}")])
        await t.end()

    async def main():
        async with Memory("memory://") as memory:
            await turn(memory, 0)  # the API is installed, no SDK yet: nothing to record into
            assert telemetry.enabled() and not telemetry.recording()
            assert telemetry.span("a") is telemetry.span("b"), "no provider: the shared no-op span"

            # The application sets its SDK up after obsmem has run: what follows is recorded.
            from opentelemetry import metrics, trace
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)  # tracing only, so far
            assert telemetry.recording()
            await turn(memory, 1)
            notify(ModelCall(role="observer", model="m", started_at=datetime.now(UTC), latency_s=0.1))
            names = sorted(span.name for span in exporter.get_finished_spans())
            assert names == ["chat m", "obsmem.begin_turn", "obsmem.end", "obsmem.step"], names
            reader = InMemoryMetricReader()
            metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
            await turn(memory, 2)
            data = reader.get_metrics_data()
            recorded = {
                metric.name
                for resource in data.resource_metrics for scope in resource.scope_metrics for metric in scope.metrics
            }
            assert "obsmem.turn.overhead" in recorded, recorded
        print("LATE-SDK-OK")

    asyncio.run(main())
    """
)


def test_with_the_api_but_no_sdk_nothing_is_made_and_an_sdk_set_later_records() -> None:
    """With ``opentelemetry-api`` installed (many packages bring it) and no SDK, the API's proxies
    would record nothing: obsmem makes no span objects and no metric calls then. An SDK the
    application sets up later (after obsmem has run turns) gets obsmem's spans and metrics."""
    done = subprocess.run([sys.executable, "-c", LATE_SDK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LATE-SDK-OK" in done.stdout

"""OpenTelemetry spans and metrics of a real Memory (issue 21), read from the SDK's in-memory export.

The span tree of a turn (what each span's parent is):

* ``obsmem.begin_turn``, ``obsmem.step``, ``obsmem.end``: roots here (in an application they sit
  under whatever span the caller has open);
* ``obsmem.observe`` / ``obsmem.reflect`` (synchronous work) and ``obsmem.activate``: under the
  boundary that ran them (``begin_turn`` or ``step``);
* ``obsmem.buffer`` (a background buffer, ``obsmem.kind`` observation or reflection): under the
  boundary that started the background task (the task copies the context it was created in);
* ``chat <model>``: under the observe / reflect / buffer span whose model call it was;
* ``obsmem.agent`` (``obsmem.agent``: capture, remind, curate, learn): remind under the boundary
  building the context, capture under the observation it captures, curate and learn under the
  reflection that triggered them;
* ``obsmem.recall``: under whatever span the caller has open.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from obsmem import Memory, MemoryConfig, Message, calls, telemetry
from obsmem.knowledge import Knowledge
from obsmem.models.base import ModelRequest
from obsmem.models.metered import MeteredModel
from obsmem.models.testing import FunctionModel
from obsmem.om.outcomes import EngineEvent

from .conftest import Otel

pytestmark = pytest.mark.anyio

SENTINEL = "QZXSENTINEL4471"
TURNS = 100


class _FailOnce:
    """The observer's first call fails (a provider error): its warning is a log record at WARNING."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, messages: list[Message], settings: ModelRequest | None) -> str:
        if not self.failed:
            self.failed = True
            raise RuntimeError("the provider failed")
        return _observer(messages, settings)


def _observer(messages: list[Message], settings: ModelRequest | None) -> str:
    # The observer repeats the sentinel: observations are derived from message text and must
    # stay out of spans and logs as much as the messages themselves.
    return (
        "<observations>\nDate: Jun 15, 2025\n"
        f"* 🔴 (10:00) User asked about {SENTINEL} and the garden plans, the beans and the tomatoes.\n"
        "</observations>"
    )


def _reflector(messages: list[Message], settings: ModelRequest | None) -> str:
    return f"<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User keeps asking about {SENTINEL}.\n</observations>"


@dataclass
class Run:
    spans: list[ReadableSpan]
    calls: list[calls.ModelCall]
    events: list[EngineEvent]
    records: list[logging.LogRecord]
    metrics_before: dict[str, float] = field(default_factory=dict)

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next((s for s in self.spans if s.context.span_id == span.parent.span_id), None)

    def parent_names(self, name: str) -> Counter[str | None]:
        return Counter((p.name if (p := self.parent(s)) is not None else None) for s in self.named(name))


async def _conversation(
    otel: Otel, caplog: pytest.LogCaptureFixture, *, buffered: bool, knowledge: bool = False
) -> Run:
    seen: list[calls.ModelCall] = []
    events: list[EngineEvent] = []
    calls.add_listener(seen.append)
    observation: Any = {"message_tokens": 300}
    if not buffered:
        observation["buffer_tokens"] = False
    config = MemoryConfig(observation=observation, reflection={"observation_tokens": 400})
    memory = Memory(
        "memory://", config=config, on_event=events.append,
        observer=MeteredModel(FunctionModel(_FailOnce() if buffered else _observer, name="test:observer"),
                              role="observer"),
        reflector=MeteredModel(FunctionModel(_reflector, name="test:reflector"), role="reflector"),
        knowledge=Knowledge.in_memory() if knowledge else None,
    )
    caplog.set_level(logging.DEBUG, logger="obsmem")
    try:
        async with memory:
            for i in range(TURNS):
                turn = await memory.begin_turn(
                    thread_id="t1", resource_id="r1",
                    messages=[Message.user(f"{SENTINEL} question {i}: what should I plant next to the tomatoes?")],
                )
                await turn.step([Message.assistant(f"{SENTINEL} answer {i}: beans, watered daily, loose soil.")])
                await turn.end()
            # Every run's work done (the knowledge agents after the last reflection too), not only
            # what finishes within close_timeout: on a loaded machine the last ones took longer.
            await memory.settled()
    finally:
        calls.remove_listener(seen.append)
    return Run(otel.spans, seen, events, list(caplog.records))


def _texts(span: ReadableSpan) -> Iterable[str]:
    yield span.name
    for value in (span.attributes or {}).values():
        yield str(value)
    for event in span.events:
        yield event.name
        yield from (str(v) for v in (event.attributes or {}).values())
    if span.status.description:
        yield span.status.description


def _assert_no_sentinel(run: Run) -> None:
    assert run.spans
    leaked = [s.name for s in run.spans if any(SENTINEL in text for text in _texts(s))]
    assert leaked == [], f"message text in spans: {leaked[:5]}"
    loud = [r for r in run.records if r.levelno >= logging.INFO]
    for record in loud:
        assert SENTINEL not in record.getMessage(), record.getMessage()
        assert all(SENTINEL not in str(value) for value in vars(record).values()), record.name
    assert all(r.name == "obsmem" or r.name.startswith("obsmem.") for r in run.records)


def _token_sums(spans: Iterable[ReadableSpan], key: str) -> Counter[str]:
    sums: Counter[str] = Counter()
    for s in spans:
        attributes = s.attributes or {}
        value = attributes.get(key, 0)
        assert isinstance(value, int)
        sums[str(attributes["obsmem.role"])] += value
    return sums


async def test_a_100_turn_run_emits_the_span_tree_and_token_totals_of_its_model_calls(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    before = {role: otel.total("obsmem.model.tokens", obsmem__role=role) for role in ("observer", "reflector")}
    run = await _conversation(otel, caplog, buffered=False, knowledge=True)
    names = Counter(s.name for s in run.spans)

    # One span per boundary, each a root here.
    for boundary in ("obsmem.begin_turn", "obsmem.step", "obsmem.end"):
        assert names[boundary] == TURNS
        assert run.parent_names(boundary) == Counter({None: TURNS})

    # Every model call a listener saw is one chat span, under the operation that made it.
    by_role = Counter(c.role for c in run.calls)
    assert by_role["observer"] >= 10 and by_role["reflector"] >= 2, by_role
    chats = [s for s in run.spans if s.name.startswith("chat ")]
    assert len(chats) == len(run.calls)
    assert names["obsmem.observe"] == by_role["observer"]
    assert names["obsmem.reflect"] == by_role["reflector"]
    assert run.parent_names("chat test:observer") == Counter({"obsmem.observe": by_role["observer"]})
    assert run.parent_names("chat test:reflector") == Counter({"obsmem.reflect": by_role["reflector"]})
    assert set(run.parent_names("obsmem.observe")) <= {"obsmem.begin_turn", "obsmem.step"}
    assert set(run.parent_names("obsmem.reflect")) <= {"obsmem.begin_turn", "obsmem.step"}

    # The knowledge agents: remind per context built at begin_turn, curate and learn per reflection.
    agents = Counter(str((s.attributes or {})["obsmem.agent"]) for s in run.named("obsmem.agent"))
    assert agents["remind"] == TURNS and agents["curate"] == agents["learn"] == by_role["reflector"]
    for s in run.named("obsmem.agent"):
        parent = run.parent(s)
        assert parent is not None
        kind = (s.attributes or {})["obsmem.agent"]
        expected = {"remind": {"obsmem.begin_turn"}, "capture": {"obsmem.observe", "obsmem.reflect"},
                    "curate": {"obsmem.reflect"}, "learn": {"obsmem.reflect"}}[str(kind)]
        assert parent.name in expected, (kind, parent.name)

    # GenAI attributes: token sums per role equal the ModelCalls' (and the metric's increase).
    for key, field_name in (("gen_ai.usage.input_tokens", "input_tokens"),
                            ("gen_ai.usage.output_tokens", "output_tokens")):
        expected_sums = Counter[str]()
        for call in run.calls:
            expected_sums[call.role] += getattr(call, field_name)
        assert _token_sums(chats, key) == expected_sums
    for role in ("observer", "reflector"):
        spent = sum(c.input_tokens + c.output_tokens for c in run.calls if c.role == role)
        assert spent > 0
        assert otel.total("obsmem.model.tokens", obsmem__role=role) - before[role] == spent
    for s in chats:
        attributes = s.attributes or {}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] in ("test:observer", "test:reflector")
        assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert attributes["obsmem.thread_id"] == "t1" and attributes["obsmem.resource_id"] == "r1"
        assert s.kind == trace.SpanKind.CLIENT
        assert s.start_time is not None and s.end_time is not None and s.end_time >= s.start_time

    # Operation spans carry ids, trigger and numbers.
    for s in run.named("obsmem.observe"):
        attributes = s.attributes or {}
        assert attributes["obsmem.thread_id"] == "t1" and attributes["obsmem.resource_id"] == "r1"
        assert attributes["obsmem.trigger"] == "threshold" and attributes["obsmem.applied"] is True
        assert isinstance(attributes["obsmem.input_tokens"], int) and attributes["obsmem.input_tokens"] > 0
        assert isinstance(attributes["obsmem.output_tokens"], int) and attributes["obsmem.output_tokens"] > 0
    waited = [s for s in run.named("obsmem.step") if (s.attributes or {}).get("obsmem.waited")]
    assert waited, "a synchronous observation is a wait of its boundary"

    _assert_no_sentinel(run)


async def test_buffered_work_traces_under_the_boundary_that_started_it_and_counts_buffers(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    started = otel.total("obsmem.buffers.started", obsmem__kind="observation")
    activated = otel.total("obsmem.buffers.activated", obsmem__kind="observation")
    dropped = otel.total("obsmem.buffers.dropped")
    failures = otel.total("obsmem.failures")
    run = await _conversation(otel, caplog, buffered=True)
    kinds = Counter(e.kind for e in run.events)
    assert kinds["buffer-start"] > 0 and kinds["activation"] > 0
    buffers = [s for s in run.named("obsmem.buffer") if (s.attributes or {})["obsmem.kind"] == "observation"]
    assert len(buffers) >= kinds["buffer-start"]
    assert set(run.parent_names("obsmem.buffer")) <= {"obsmem.begin_turn", "obsmem.step", "obsmem.end"}
    chat_parents = run.parent_names("chat test:observer") + run.parent_names("chat test:reflector")
    assert set(chat_parents) <= {"obsmem.observe", "obsmem.reflect", "obsmem.buffer"}
    assert sum(chat_parents.values()) == len(run.calls)
    # The metrics count what the engine reported.
    assert otel.total("obsmem.buffers.started", obsmem__kind="observation") - started == kinds["buffer-start"]
    chunks = sum(e.data["chunks"] for e in run.events if e.kind == "activation")
    assert otel.total("obsmem.buffers.activated", obsmem__kind="observation") - activated == chunks
    assert otel.total("obsmem.buffers.dropped") - dropped >= kinds["buffer-dropped"]
    assert kinds["buffer-failed"] == 1  # the observer's first call failed
    assert otel.total("obsmem.failures") - failures == 1
    assert any(r.levelno >= logging.WARNING for r in run.records), "the scan saw the failure's warning"
    _assert_no_sentinel(run)


async def test_turn_metrics_count_overhead_and_waits(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    def count(name: str) -> float:
        data = otel.reader.get_metrics_data()
        assert data is not None
        return sum(
            float(getattr(point, "count"))
            for resource in data.resource_metrics for scope in resource.scope_metrics for metric in scope.metrics
            if metric.name == name for point in metric.data.data_points
        )

    overhead, waits, waited = count("obsmem.turn.overhead"), count("obsmem.turn.wait.duration"), otel.total(
        "obsmem.turn.waited"
    )
    run = await _conversation(otel, caplog, buffered=False)
    assert count("obsmem.turn.overhead") - overhead == 3 * TURNS  # one per begin_turn, step and end
    boundaries = {name: sorted(run.named(name), key=lambda s: s.start_time or 0)
                  for name in ("obsmem.begin_turn", "obsmem.step", "obsmem.end")}
    waiting = [s for spans in boundaries.values() for s in spans if (s.attributes or {}).get("obsmem.waited")]
    assert waiting and count("obsmem.turn.wait.duration") - waits == len(waiting)
    turns_waiting = sum(
        1 for begin, step in zip(boundaries["obsmem.begin_turn"], boundaries["obsmem.step"], strict=True)
        if (begin.attributes or {}).get("obsmem.waited") or (step.attributes or {}).get("obsmem.waited")
    )
    assert 0 < turns_waiting < TURNS
    assert otel.total("obsmem.turn.waited") - waited == turns_waiting


async def test_a_model_call_is_a_genai_span_under_the_current_span(otel: Otel) -> None:
    from datetime import UTC, datetime

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller, calls.call_scope(role="observer", thread_id="t9"):
        calls.notify(calls.ModelCall(
            role="observer", model="openai:gpt-x", started_at=datetime(2025, 1, 1, tzinfo=UTC), latency_s=1.5,
            thread_id="t9", resource_id="r9", input_tokens=100, cached_input_tokens=40, cache_write_tokens=5,
            output_tokens=20, finish_reason="length",
        ))
        calls.notify(calls.ModelCall(
            role="observer", model="openai:gpt-x", started_at=datetime(2025, 1, 1, tzinfo=UTC), latency_s=0.25,
            outcome="timeout", error_type="TimeoutError",
        ))
    ok, failed = [s for s in otel.spans if s.name == "chat openai:gpt-x"]
    assert ok.parent is not None and ok.parent.span_id == caller.get_span_context().span_id
    assert ok.start_time == int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1e9)
    assert ok.end_time == ok.start_time + 1_500_000_000
    assert dict(ok.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "openai:gpt-x",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 40, "gen_ai.usage.cache_creation.input_tokens": 5,
        "gen_ai.response.finish_reasons": ("length",), "obsmem.role": "observer", "obsmem.call.outcome": "ok",
        "obsmem.thread_id": "t9", "obsmem.resource_id": "r9",
    }
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "TimeoutError"


async def test_ids_are_hashed_when_configured(otel: Otel) -> None:
    from datetime import UTC, datetime

    telemetry.configure(hash_ids=True, salt="pepper")
    with telemetry.span("obsmem.recall", telemetry.ids("thread-secret", "alice@example.com")):
        calls.notify(calls.ModelCall(
            role="observer", model="m", started_at=datetime.now(UTC), latency_s=0.1,
            thread_id="thread-secret", resource_id="alice@example.com",
        ))
    expected = {"obsmem.thread_id": telemetry.hash_id("thread-secret"),
                "obsmem.resource_id": telemetry.hash_id("alice@example.com")}
    assert expected["obsmem.thread_id"] == __import__("hashlib").sha256(b"pepperthread-secret").hexdigest()[:16]
    assert len(otel.spans) == 2
    for s in otel.spans:
        attributes = s.attributes or {}
        assert {k: attributes[k] for k in expected} == expected
        assert not any("secret" in str(v) or "alice" in str(v) for v in attributes.values())
    assert telemetry.log_fields("thread-secret")["obsmem_thread_id"] == expected["obsmem.thread_id"]


async def test_a_failing_observer_marks_its_span_and_counts_the_failure_and_backoff(otel: Otel) -> None:
    failures = otel.total("obsmem.failures", obsmem__operation="observation")
    backoffs = otel.total("obsmem.backoffs", obsmem__role="observation")

    def broken(messages: list[Message], settings: ModelRequest | None) -> str:
        raise RuntimeError(f"upstream quoted {SENTINEL}")

    config = MemoryConfig(observation={"message_tokens": 100, "buffer_tokens": False})
    memory = Memory("memory://", config=config, failure_policy="warn",
                    observer=MeteredModel(FunctionModel(broken, name="test:broken"), role="observer"))
    async with memory:
        for i in range(6):
            turn = await memory.begin_turn(thread_id="t1", resource_id="r1",
                                           messages=[Message.user(f"question {i} " + "word " * 40)])
            await turn.end()
    observes = [s for s in otel.spans if s.name == "obsmem.observe"]
    assert observes and all(s.status.status_code == trace.StatusCode.ERROR for s in observes)
    assert all(not s.status.description for s in otel.spans), "no exception text in a span's status"
    assert all(SENTINEL not in t for s in otel.spans for t in _texts(s))
    chats = [s for s in otel.spans if s.name == "chat test:broken"]
    assert chats and all((s.attributes or {})["error.type"] == "RuntimeError" for s in chats)
    assert otel.total("obsmem.failures", obsmem__operation="observation") - failures == len(observes)
    assert otel.total("obsmem.backoffs", obsmem__role="observation") - backoffs >= 1


async def test_recall_has_a_span_with_counts(otel: Otel) -> None:
    memory = Memory("memory://", config=MemoryConfig(retrieval=True))
    async with memory:
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=[Message.user("hello there")])
        await turn.end()
        ids = [m.id for m in await memory.list_messages("t1")]
        with trace.get_tracer("test").start_as_current_span("tool call") as tool:
            result = await memory.recall("t1", cursor=ids[0], limit=5)
        await memory.recall("t1", mode="threads")
    first, threads = [s for s in otel.spans if s.name == "obsmem.recall"]
    assert first.parent is not None and first.parent.span_id == tool.get_span_context().span_id
    attributes = first.attributes or {}
    assert attributes["obsmem.recall.mode"] == "messages"
    assert attributes["obsmem.recall.messages"] == len(result.messages) >= 1
    assert attributes["obsmem.thread_id"] == "t1"
    assert (threads.attributes or {})["obsmem.recall.mode"] == "threads"
    assert (threads.attributes or {})["obsmem.recall.threads"] == 1


async def test_model_call_spans_sum_to_the_cost_ledger_of_a_real_memory(otel: Otel) -> None:
    # No wrapper of ours: Memory meters its own model calls (the cost ledger) and the same
    # ModelCall records become the chat spans.
    config = MemoryConfig(
        observation={"message_tokens": 300, "buffer_tokens": False}, reflection={"observation_tokens": 400}
    )
    memory = Memory("memory://", config=config, observer=FunctionModel(_observer, name="test:observer"),
                    reflector=FunctionModel(_reflector, name="test:reflector"))
    async with memory:
        for i in range(70):
            turn = await memory.begin_turn(
                thread_id="t1", resource_id="r1",
                messages=[Message.user(f"question {i}: what should I plant next to the tomatoes and the beans?")],
            )
            await turn.step([Message.assistant(f"answer {i}: beans, watered daily, loose soil, some sun.")])
            await turn.end()
        await memory.settled()
        report = await memory.usage(thread_id="t1")
    chats = [s for s in otel.spans if s.name.startswith("chat ")]
    rows = {str(row.role): row for row in report.by("role")}
    assert set(rows) == {"observer", "reflector"}
    for role, row in rows.items():
        mine = [s for s in chats if (s.attributes or {})["obsmem.role"] == role]
        assert len(mine) == row.calls > 0
        assert _token_sums(mine, "gen_ai.usage.input_tokens")[role] == row.input_tokens
        assert _token_sums(mine, "gen_ai.usage.output_tokens")[role] == row.output_tokens
        parents = {p.name for s in mine if (p := next((q for q in otel.spans
                                                         if s.parent and q.context.span_id == s.parent.span_id), None))}
        assert parents == {"obsmem.observe" if role == "observer" else "obsmem.reflect"}


async def test_telemetry_can_be_turned_off_with_the_api_installed(otel: Otel) -> None:
    telemetry.configure(enabled=False)
    try:
        assert not telemetry.enabled()
        with telemetry.span("obsmem.step", telemetry.ids("t1")) as span:
            span.set("obsmem.messages", 1)
        assert span is telemetry.span("other")
    finally:
        telemetry.configure(enabled=True)
    with telemetry.span("obsmem.step", telemetry.ids("t1")):
        pass
    assert [s.name for s in otel.spans] == ["obsmem.step"]


async def test_a_worker_traces_the_same_operations(otel: Otel) -> None:
    # Memory queues its memory work (background="queue"); a Worker on the same store runs it.
    # Its spans are the same (observe / buffer with the observer's chat spans under them); with no
    # turn around them they are roots here (the worker's own item has no span yet).
    from obsmem.storage import MemoryStore
    from obsmem.worker import Worker

    store = MemoryStore()
    config = MemoryConfig(observation={"message_tokens": 300}, reflection={"observation_tokens": 100_000})
    async with Memory(store, config=config, background="queue", observer=FunctionModel(_observer)) as memory:
        for i in range(30):
            turn = await memory.begin_turn(
                thread_id="t1", resource_id="r1",
                messages=[Message.user(f"{SENTINEL} question {i}: what should I plant next to the tomatoes?")],
            )
            await turn.step([Message.assistant(f"{SENTINEL} answer {i}: beans, watered daily, loose soil.")])
            await turn.end()
    before = {s.context.span_id for s in otel.spans}
    worker = Worker(store, config=config, observer=FunctionModel(_observer, name="test:worker-observer"),
                    poll_interval_s=0.01)
    await worker.run(exit_when_idle=True)
    spans = [s for s in otel.spans if s.context.span_id not in before]
    chats = [s for s in spans if s.name == "chat test:worker-observer"]
    assert chats, "the worker observed"
    by_id = {s.context.span_id: s for s in spans}
    for chat in chats:
        assert chat.parent is not None and by_id[chat.parent.span_id].name in ("obsmem.observe", "obsmem.buffer")
        assert (chat.attributes or {})["obsmem.role"] == "observer"
        assert (chat.attributes or {})["obsmem.thread_id"] == "t1"
    assert all(SENTINEL not in t for s in spans for t in _texts(s))


def test_each_record_function_feeds_its_instrument(otel: Otel) -> None:
    """The public ``record_*`` helpers, called directly: each adds what it says to its instrument
    (and ``enabled=False`` turns every one of them off)."""
    names = ("obsmem.buffers.started", "obsmem.turn.waited", "obsmem.turn.overhead", "obsmem.turn.wait.duration",
             "obsmem.turn.wait_exceeded")  # fmt: skip

    def totals() -> dict[str, float]:
        return {
            "reflection buffers": otel.total("obsmem.buffers.started", obsmem__kind="reflection"),
            "observation buffers": otel.total("obsmem.buffers.started", obsmem__kind="observation"),
            **{name: otel.total(name) for name in names[1:]},
        }

    before = totals()
    telemetry.record_buffer_started("reflection")
    telemetry.record_event("buffer-start", {})
    telemetry.record_event("turn-wait-exceeded", {"waited_s": 0.5})
    telemetry.record_turn_waited()
    telemetry.record_boundary("step", 0.75, 0.5)  # 0.25 s of overhead, 0.5 s of waiting
    telemetry.record_boundary("end", 0.25, 0.0)  # no wait: no wait recorded
    after = totals()
    assert {key: after[key] - before[key] for key in after} == pytest.approx({
        "reflection buffers": 1, "observation buffers": 1, "obsmem.turn.waited": 1,
        "obsmem.turn.overhead": 0.5, "obsmem.turn.wait.duration": 0.5, "obsmem.turn.wait_exceeded": 1,
    })  # fmt: skip

    telemetry.configure(enabled=False)
    telemetry.record_buffer_started("reflection")
    telemetry.record_turn_waited()
    telemetry.record_boundary("step", 1.0, 1.0)
    telemetry.record_event("turn-wait-exceeded", {})
    assert totals() == after

"""One OpenTelemetry SDK setup for the whole test process (global providers can be set once).

The tracer provider exports to :class:`Collector`, which keeps spans only while a telemetry test
runs (the ``otel`` fixture turns it on and clears it), so the rest of the suite, which runs in the
same process after these tests, does not pile spans up in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from obsmem import telemetry


class Collector(SpanExporter):
    def __init__(self) -> None:
        self.on = False
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.on:
            self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.spans.clear()


@dataclass
class Otel:
    collector: Collector
    reader: InMemoryMetricReader

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.collector.spans)

    def metric_points(self) -> dict[str, list[tuple[dict[str, object], float]]]:
        """Every metric's data points as (attributes, value): a sum's value, a histogram's sum."""
        points: dict[str, list[tuple[dict[str, object], float]]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                if scope.scope.name != "obsmem":
                    continue
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = getattr(point, "sum")  # a histogram
                        points.setdefault(metric.name, []).append((dict(point.attributes or {}), float(value)))
        return points

    def total(self, name: str, **where: object) -> float:
        return sum(
            value for attributes, value in self.metric_points().get(name, [])
            if all(attributes.get(key.replace("__", ".")) == wanted for key, wanted in where.items())
        )


@pytest.fixture(scope="session")
def _providers() -> Iterator[Otel]:
    collector = Collector()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(collector))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    assert telemetry.enabled()
    yield Otel(collector, reader)


@pytest.fixture
def otel(_providers: Otel) -> Iterator[Otel]:
    """The SDK's spans and metrics, recorded for this test only (metrics are cumulative: a test
    compares the totals after its run with those before)."""
    _providers.collector.spans.clear()
    _providers.collector.on = True
    try:
        yield _providers
    finally:
        _providers.collector.on = False
        _providers.collector.spans.clear()
        telemetry.configure(hash_ids=False, salt="", enabled=True)

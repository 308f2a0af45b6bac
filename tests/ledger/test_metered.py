"""MeteredModel / MeteredEmbedder: one ModelCall per request, success or failure, scoped."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from obsmem import calls
from obsmem.calls import ModelCall, call_scope
from obsmem.embeddings import LexicalHashEmbedder, MeteredEmbedder
from obsmem.embeddings.base import EmbeddingMatrix
from obsmem.errors import ModelRequestError
from obsmem.models import ModelByInputTokens
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.models.metered import MeteredModel, metered
from obsmem.models.testing import FunctionModel, ScriptedModel
from obsmem.types import Message

pytestmark = pytest.mark.anyio

HELLO = [Message.user("hello")]


async def test_a_call_is_reported_with_its_usage_scope_and_outcome() -> None:
    seen: list[ModelCall] = []
    heard: list[ModelCall] = []
    calls.add_listener(heard.append)
    usage = Usage(input_tokens=120, output_tokens=9, cached_input_tokens=100, cache_write_tokens=4)
    model = MeteredModel(
        ScriptedModel([ModelResponse("ok", usage=usage), ModelRequestError("refused"), TimeoutError()],
                      name="openai:gpt-4o-mini"),
        role="observer", sinks=(seen.append,),
    )
    try:
        with call_scope(thread_id="t1", resource_id="r1", operation="buffer"):
            await model.request(HELLO)
            with pytest.raises(ModelRequestError):
                await model.request(HELLO)
        with call_scope(role="curate"), pytest.raises(TimeoutError):
            await model.request(HELLO)
    finally:
        calls.remove_listener(heard.append)
    assert heard == seen  # the sinks first, then every process-wide listener
    ok, error, timeout = seen
    assert (ok.role, ok.model, ok.kind, ok.thread_id, ok.resource_id, ok.operation) == (
        "observer", "openai:gpt-4o-mini", "chat", "t1", "r1", "buffer")
    assert (ok.input_tokens, ok.cached_input_tokens, ok.cache_write_tokens, ok.output_tokens) == (120, 100, 4, 9)
    assert ok.outcome == "ok" and ok.finish_reason == "stop" and ok.latency_s >= 0 and ok.started_at.tzinfo
    assert (error.outcome, error.error_type, error.input_tokens) == ("error", "ModelRequestError", 0)
    assert (timeout.outcome, timeout.role, timeout.thread_id) == ("timeout", "curate", None)


async def test_a_cancelled_call_is_reported_cancelled() -> None:
    seen: list[ModelCall] = []
    started = asyncio.Event()

    async def slow(messages: list[Message], settings: ModelRequest | None) -> str:
        started.set()
        await asyncio.sleep(60)
        return "late"

    model = MeteredModel(FunctionModel(slow, name="test:slow"), role="reflector", sinks=(seen.append,))
    task = asyncio.create_task(model.request(HELLO))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [c.outcome for c in seen] == ["cancelled"]


async def test_tiers_are_metered_per_tier_and_metering_is_not_doubled() -> None:
    seen: list[ModelCall] = []
    small = FunctionModel(lambda m, s: "small", name="openai:gpt-4o-mini")
    large = FunctionModel(lambda m, s: "large", name="openai:gpt-4o")
    tiers = metered(ModelByInputTokens({50: small, 100_000: large}), role="observer", sinks=(seen.append,))
    await tiers.request(HELLO)
    await tiers.request([Message.user("a longer request than fifty tokens, surely " * 20)])
    assert [c.model for c in seen] == ["openai:gpt-4o-mini", "openai:gpt-4o"]
    once = MeteredModel(small, role="observer")
    again = metered(once, role="observer", sinks=(seen.append,))
    assert isinstance(again, MeteredModel) and again.wrapped is small and again.sinks == (seen.append,)
    await again.request(HELLO)
    assert len(seen) == 3


class _Failing:
    name = "failing-embedder"
    dimensions = 8

    async def embed(self, texts: Sequence[str]) -> EmbeddingMatrix:
        raise ModelRequestError("no")


async def test_embeddings_are_metered() -> None:
    seen: list[ModelCall] = []
    embedder = MeteredEmbedder(LexicalHashEmbedder(), sinks=(seen.append,), count_tokens=lambda t: len(t.split()))
    with call_scope(thread_id="t1", resource_id="r1"):
        vectors = await embedder.embed(["one two three", "four"])
    assert vectors.shape[0] == 2 and np.isfinite(vectors).all()
    [call] = seen
    assert (call.kind, call.role, call.model, call.input_tokens, call.thread_id) == (
        "embedding", "embedding", embedder.name, 4, "t1")
    failing = MeteredEmbedder(_Failing(), sinks=(seen.append,))
    with pytest.raises(ModelRequestError):
        await failing.embed(["x"])
    assert (seen[-1].outcome, seen[-1].error_type, seen[-1].input_tokens) == ("error", "ModelRequestError", 0)

"""OpenAIEmbedder over real HTTP against a local server speaking OpenAI's embeddings format."""

from __future__ import annotations

import numpy as np
import pytest

from obsmem.clock import FakeClock
from obsmem.embeddings import OpenAIEmbedder
from obsmem.embeddings.openai import parse_retry_after
from obsmem.errors import (
    ConfigError,
    MissingCredentialsError,
    ModelOutputError,
    ModelRequestError,
    ModelUnavailableError,
)

from .conftest import FakeOpenAI, Reply, text_vector

pytestmark = pytest.mark.anyio


def embedder(server: FakeOpenAI, **options: object) -> OpenAIEmbedder:
    settings: dict[str, object] = {
        "model": "local-embed",
        "dimensions": 8,
        "api_key": "sk-test",
        "backoff_s": 0.0,
    }
    settings.update(options)
    return OpenAIEmbedder(base_url=server.base_url, **settings)  # type: ignore[arg-type]


def expected_rows(texts: list[str], dimensions: int = 8) -> np.ndarray:
    rows = np.array([text_vector(t, dimensions) for t in texts], dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def test_request_is_openai_wire_format_and_rows_follow_index(openai_server: FakeOpenAI) -> None:
    async with embedder(openai_server) as client:
        texts = ["alpha", "beta", "gamma"]
        matrix = await client.embed(texts)
    request = openai_server.requests[0]
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body == {"model": "local-embed", "input": texts, "encoding_format": "float"}
    assert matrix.dtype == np.float32 and matrix.shape == (3, 8)
    np.testing.assert_allclose(matrix, expected_rows(texts), atol=1e-6)  # server answered in reverse order


async def test_batches_split_and_empty_texts_give_zero_rows(openai_server: FakeOpenAI) -> None:
    async with embedder(openai_server, batch_size=2) as client:
        texts = ["one", "", "two", "three", "   ", "four", "five"]
        matrix = await client.embed(texts)
    assert [r.body["input"] for r in openai_server.requests] == [["one", "two"], ["three", "four"], ["five"]]
    assert not matrix[1].any() and not matrix[4].any()
    non_empty = [0, 2, 3, 5, 6]
    np.testing.assert_allclose(matrix[non_empty], expected_rows([texts[i] for i in non_empty]), atol=1e-6)


async def test_shortened_dimensions_are_sent_for_text_embedding_3(openai_server: FakeOpenAI) -> None:
    async with embedder(openai_server, model="text-embedding-3-small", dimensions=16) as client:
        matrix = await client.embed(["hello"])
    assert openai_server.requests[0].body["dimensions"] == 16
    assert matrix.shape == (1, 16)
    assert client.name == "openai-text-embedding-3-small-16"


async def test_429_with_retry_after_is_retried_then_succeeds(openai_server: FakeOpenAI) -> None:
    openai_server.script(
        Reply(429, {"error": {"message": "Rate limit reached", "type": "requests"}}, {"retry-after-ms": "1"})
    )
    async with embedder(openai_server, max_retries=1) as client:
        matrix = await client.embed(["retry me"])
    assert len(openai_server.requests) == 2
    np.testing.assert_allclose(matrix, expected_rows(["retry me"]), atol=1e-6)


async def test_429_without_retries_left_is_unavailable_with_retry_after(openai_server: FakeOpenAI) -> None:
    openai_server.script(Reply(429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "7"}))
    async with embedder(openai_server, max_retries=0) as client:
        with pytest.raises(ModelUnavailableError, match="Rate limit reached") as caught:
            await client.embed(["x"])
    assert caught.value.status_code == 429
    assert caught.value.retry_after == 7.0


async def test_500_twice_exhausts_retries(openai_server: FakeOpenAI) -> None:
    openai_server.script(Reply(500, b"upstream exploded"), Reply(503, {"error": {"message": "overloaded"}}))
    async with embedder(openai_server, max_retries=1) as client:
        with pytest.raises(ModelUnavailableError, match="503: overloaded") as caught:
            await client.embed(["x"])
    assert caught.value.status_code == 503
    assert len(openai_server.requests) == 2


async def test_retries_wait_on_the_injected_clock(openai_server: FakeOpenAI) -> None:
    """backoff_s × 2^attempt between tries, through the clock: nothing really sleeps."""
    openai_server.script(Reply(500, b"boom"), Reply(503, b"busy"), Reply(409, b"conflict"))
    clock = FakeClock()
    async with embedder(openai_server, max_retries=3, backoff_s=0.5, clock=clock) as client:
        matrix = await client.embed(["x"])
    assert clock.sleeps == [0.5, 1.0, 2.0]
    assert len(openai_server.requests) == 4
    np.testing.assert_allclose(matrix, expected_rows(["x"]), atol=1e-6)


async def test_retry_after_is_a_floor_and_every_wait_is_capped_at_30_s(openai_server: FakeOpenAI) -> None:
    openai_server.script(
        Reply(429, {"error": {"message": "slow"}}, {"retry-after-ms": "1"}),
        Reply(429, {"error": {"message": "slower"}}, {"retry-after": "12"}),
        Reply(429, {"error": {"message": "slowest"}}, {"retry-after": "200"}),
    )
    clock = FakeClock()
    async with embedder(openai_server, max_retries=3, backoff_s=0.5, clock=clock) as client:
        await client.embed(["x"])
    assert clock.sleeps == [0.5, 12.0, 30.0]


async def test_a_retry_after_past_the_retry_deadline_fails_at_once(openai_server: FakeOpenAI) -> None:
    openai_server.script(Reply(429, {"error": {"message": "come back tomorrow"}}, {"retry-after": "86400"}))
    clock = FakeClock()
    async with embedder(openai_server, max_retries=3, backoff_s=0.5, clock=clock) as client:
        with pytest.raises(ModelUnavailableError, match="86400"):
            await client.embed(["x"])
    assert clock.sleeps == []


async def test_a_refused_connection_is_retried_then_unavailable() -> None:
    clock = FakeClock()
    client = OpenAIEmbedder("m", dimensions=8, base_url="http://127.0.0.1:9/v1", max_retries=2, clock=clock)
    async with client:
        with pytest.raises(ModelUnavailableError, match="check base_url"):
            await client.embed(["x"])
    assert clock.sleeps == [0.5, 1.0]


def test_negative_backoff_is_refused() -> None:
    with pytest.raises(ConfigError, match="backoff_s"):
        OpenAIEmbedder("m", dimensions=8, base_url="http://localhost:1/v1", backoff_s=-1.0)


@pytest.mark.parametrize("status", [400, 401, 404])
async def test_permanent_statuses_are_request_errors_without_retry(
    openai_server: FakeOpenAI, status: int
) -> None:
    openai_server.script(Reply(status, {"error": {"message": "Incorrect API key provided"}}))
    async with embedder(openai_server, max_retries=3) as client:
        with pytest.raises(ModelRequestError, match="Incorrect API key provided") as caught:
            await client.embed(["x"])
    assert caught.value.status_code == status
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{not json", "not JSON"),
        ({"object": "list"}, "no 'data' list"),
        ({"data": []}, "0 embeddings for 1 inputs"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, "size 2, expected 8"),
        ({"data": [{"index": 5, "embedding": [1.0] * 8}]}, "bad index"),
        ({"data": [{"index": 0, "embedding": ["a"] * 8}]}, "non-numbers"),
    ],
)
async def test_malformed_answers_are_output_errors(
    openai_server: FakeOpenAI, body: bytes | dict[str, object], problem: str
) -> None:
    openai_server.script(Reply(200, body))  # type: ignore[arg-type]
    async with embedder(openai_server, max_retries=2) as client:
        with pytest.raises(ModelOutputError, match=problem):
            await client.embed(["x"])
    assert len(openai_server.requests) == 1  # a malformed answer is not retried


async def test_timeout_is_unavailable(openai_server: FakeOpenAI) -> None:
    openai_server.script(Reply(200, {"data": []}, delay_s=1.0))
    async with embedder(openai_server, timeout_s=0.1, max_retries=0) as client:
        with pytest.raises(ModelUnavailableError, match="timed out"):
            await client.embed(["x"])


async def test_connection_cut_mid_body_is_unavailable(openai_server: FakeOpenAI) -> None:
    openai_server.script(Reply(200, {"data": [{"index": 0, "embedding": [0.0] * 8}]}, cut_after_headers=True))
    async with embedder(openai_server, max_retries=0) as client:
        with pytest.raises(ModelUnavailableError, match="Could not reach"):
            await client.embed(["x"])


async def test_unreachable_server_is_unavailable() -> None:
    client = OpenAIEmbedder("m", dimensions=8, base_url="http://127.0.0.1:9/v1", max_retries=0)
    async with client:
        with pytest.raises(ModelUnavailableError, match="check base_url"):
            await client.embed(["x"])


async def test_no_request_for_only_empty_texts(openai_server: FakeOpenAI) -> None:
    async with embedder(openai_server) as client:
        matrix = await client.embed(["", " "])
    assert matrix.shape == (2, 8) and not matrix.any()
    assert openai_server.requests == []


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        OpenAIEmbedder()


def test_key_and_base_url_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:1234/v1/")
    client = OpenAIEmbedder()
    assert client.api_key == "sk-env"
    assert client.base_url == "http://localhost:1234/v1"
    assert client.dimensions == 1536


def test_unknown_model_needs_dimensions() -> None:
    with pytest.raises(ConfigError, match="dimensions"):
        OpenAIEmbedder("nomic-embed-text", base_url="http://localhost:11434/v1")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected

"""A failing provider never holds a call for minutes (issue 12, item 6, the provider side).

Two regressions, both over a real local socket, with waits measured on the injected
:class:`~obsmem.clock.FakeClock` (the retry loop sleeps only through it, so the fake clock's
monotonic time is exactly the time the loop spent waiting):

* a refused connection to a model server on this machine was retried eight times (about four
  minutes of backoff) before anyone heard of it; now it is retried at most once;
* a server answering 429 with ``retry-after: 20`` was waited out for as long as the schedule
  allowed; now every retry schedule has a deadline (``RetryPolicy.max_total_s``) that no wait
  crosses: a wait that would end past it fails at once with ``ModelUnavailableError``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from tests.engine.helpers import fake_clock
from tests.models.wire_server import Reply, WireServer

from obsmem import Memory, ObservationError
from obsmem.clock import FakeClock
from obsmem.errors import ModelUnavailableError
from obsmem.models import Endpoint, ModelRequest, ModelResponse, OpenAIChatModel, WrapperModel
from obsmem.models.retry import RetryingModel, RetryPolicy
from obsmem.types import Message

pytestmark = pytest.mark.anyio

HELLO = [Message.system("be brief"), Message.user("hi")]
RATE_LIMITED = Reply(
    status=429, headers={"retry-after": "20"}, json={"error": {"message": "Rate limit reached"}}
)
HISTORY = [Message.user("I live in Munich."), Message.assistant("Noted.")]


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer() as running:
        yield running


def closed_port() -> int:
    """A port on this machine where nothing listens (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class CountingModel(WrapperModel):
    """Counts the attempts that reach the provider."""

    def __init__(self, wrapped: OpenAIChatModel) -> None:
        super().__init__(wrapped)
        self.attempts = 0

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        self.attempts += 1
        return await self.wrapped.request(messages, settings)


def openai_at(base_url: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", Endpoint("openai", base_url, {}, "OPENAI_API_KEY"), timeout_s=5)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_refused_connection_to_a_local_server_fails_after_at_most_one_retry(host: str) -> None:
    model = CountingModel(openai_at(f"http://{host}:{closed_port()}/v1"))
    clock = FakeClock()
    with pytest.raises(ModelUnavailableError, match="connection failed"):
        await RetryingModel(model, clock=clock).request(HELLO)
    assert model.attempts <= 2, f"{model.attempts} attempts against a port nobody listens on"
    assert len(clock.sleeps) <= 1
    assert clock.monotonic() <= RetryPolicy().initial_delay_s * (1 + RetryPolicy().jitter)


async def test_memory_hears_of_a_refused_local_model_server_at_once_and_keeps_the_messages() -> None:
    model = CountingModel(openai_at(f"http://127.0.0.1:{closed_port()}/v1"))
    clock = fake_clock()
    async with Memory("memory://", observer=model, reflector="offline", clock=clock) as memory:
        thread = await memory.create_thread("t1", "u1")
        await memory.save_messages(thread.id, HISTORY)
        with pytest.raises(ObservationError, match="stay pending"):
            await memory.observe("t1")
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
    assert model.attempts <= 2
    assert clock.monotonic() <= 2.0, f"waited {clock.monotonic():g} s for a server that is not running"


async def test_a_retry_after_past_the_deadline_fails_at_once_instead_of_sleeping(server: WireServer) -> None:
    server.responder = lambda request: RATE_LIMITED
    clock = FakeClock()
    policy = RetryPolicy(max_total_s=30.0)
    with pytest.raises(ModelUnavailableError) as caught:
        await RetryingModel(openai_at(server.url + "/v1"), policy, clock).request(HELLO)
    # 0 s: 429 (retry-after 20) -> wait 20 s; 20 s: 429 again -> 20 more would end at 40 s > 30 s: give up
    assert clock.sleeps == [20.0]
    assert clock.monotonic() <= 30.0
    assert len(server.requests) == 2
    assert caught.value.status_code == 429
    assert "30" in str(caught.value) and "20" in str(caught.value)


async def test_the_default_schedule_never_waits_past_its_deadline(server: WireServer) -> None:
    server.responder = lambda request: Reply(
        status=429, headers={"retry-after": "60"}, json={"error": {"message": "Rate limit reached"}}
    )
    clock = FakeClock()
    policy = RetryPolicy()
    assert policy.max_total_s is not None
    with pytest.raises(ModelUnavailableError):
        await RetryingModel(openai_at(server.url + "/v1"), clock=clock).request(HELLO)
    assert clock.monotonic() <= policy.max_total_s
    assert len(server.requests) == len(clock.sleeps) + 1


async def test_memory_observation_under_a_persistent_429_ends_within_the_deadline(server: WireServer) -> None:
    # retry-after 60: the old schedule waited 60 s six times, then ~64 and 120 s (over 8 minutes)
    server.responder = lambda request: Reply(
        status=429, headers={"retry-after": "60"}, json={"error": {"message": "Rate limit reached"}}
    )
    clock = fake_clock()
    observer = openai_at(server.url + "/v1")
    async with Memory("memory://", observer=observer, reflector="offline", clock=clock) as memory:
        thread = await memory.create_thread("t1", "u1")
        await memory.save_messages(thread.id, HISTORY)
        with pytest.raises(ObservationError, match="stay pending") as caught:
            await memory.observe("t1")
        assert isinstance(caught.value.__cause__, ModelUnavailableError)
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == 0
    bound = RetryPolicy().max_total_s
    assert bound is not None and clock.monotonic() <= bound
    assert all(slept >= 60.0 for slept in clock.sleeps), "the server's retry-after is still honoured"

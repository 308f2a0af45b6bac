"""``observation.max_tokens_per_batch``: a large unobserved window is observed in batches.

Each batch is one observer request of at most that many message tokens (a single run between
two safe cuts that is larger on its own is one batch), batches end only where a tool call stays
with its result, and they commit in order, so every message is observed exactly once.
"""

from __future__ import annotations

import pytest

from obsmem import Memory
from obsmem.om.offline import OfflineObserver
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.om.selection import observation_batches
from obsmem.tokens import TokenCounter

from .helpers import Conversation, fake_clock, small_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("cuts", "counts", "end", "max_tokens", "expected"),
    [
        pytest.param([1, 2, 3, 4], [10, 10, 10, 10], 4, 100, [(0, 4)], id="fits: one batch"),
        pytest.param([1, 2, 3, 4], [10, 10, 10, 10], 4, 20, [(0, 2), (2, 4)], id="two full batches"),
        pytest.param([1, 2, 3, 4], [10, 10, 10, 10], 4, 25, [(0, 2), (2, 4)], id="never over the limit"),
        pytest.param([1, 2, 3, 4], [10, 10, 10, 10], 4, 10, [(0, 1), (1, 2), (2, 3), (3, 4)], id="one each"),
        pytest.param([1, 2, 3], [5, 50, 5], 3, 20, [(0, 1), (1, 2), (2, 3)], id="an oversized message alone"),
        pytest.param([1, 3, 4], [10, 10, 10, 10], 4, 15, [(0, 1), (1, 3), (3, 4)], id="a call stays with its result"),
        pytest.param([2, 4], [10, 10, 10, 10], 4, 15, [(0, 2), (2, 4)], id="runs larger than the limit"),
        pytest.param([1, 2, 3, 4, 5], [10] * 5, 3, 20, [(0, 2), (2, 3)], id="only up to end"),
        pytest.param([1, 2, 3, 4], [10, 10, 10, 10], 4, 40, [(0, 4)], id="exactly the limit"),
        pytest.param([], [], 0, 10, [], id="nothing"),
    ],
)
def test_observation_batches(
    cuts: list[int], counts: list[int], end: int, max_tokens: int, expected: list[tuple[int, int]]
) -> None:
    assert observation_batches(cuts, counts, end, max_tokens) == expected


class RecordingObserver(OfflineObserver):
    def __init__(self, counter: TokenCounter) -> None:
        super().__init__(count_tokens=counter.count_text)
        self.counter = counter
        self.requests: list[ObservationRequest] = []

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        self.requests.append(request)
        return await super().observe(request)


async def observe_window(max_tokens_per_batch: int, conv: Conversation | None = None) -> tuple[Memory, RecordingObserver]:
    counter = TokenCounter()
    observer = RecordingObserver(counter)
    config = small_config(message_tokens=400, max_tokens_per_batch=max_tokens_per_batch)
    memory = Memory("memory://", config=config, observer=observer, counter=counter, clock=fake_clock())
    conv = conv or Conversation()
    await memory.create_thread("t1", "u1")
    messages = []
    for i in range(6):
        messages.append(conv.user(f"Fact {i}: I moved to Munich in {2010 + i} and I like the river walks there."))
        messages.append(conv.assistant(f"Noted fact {i}: Munich since {2010 + i}, and the walks by the river."))
    await memory.save_messages("t1", messages)
    return memory, observer


async def test_a_window_larger_than_the_batch_limit_takes_several_observer_requests() -> None:
    memory, observer = await observe_window(max_tokens_per_batch=80)
    async with memory:
        outcome = await memory.observe("t1")
        stored = await memory.list_messages("t1")
        total = sum(memory.counter.count_message(m) for m in stored)
        assert total > 3 * 80, "the window is several batches large"
        assert len(observer.requests) > 1, "observation.max_tokens_per_batch is honoured"
        for request in observer.requests:
            assert sum(memory.counter.count_message(m) for m in request.messages) <= 80
        seen = [m.id for request in observer.requests for m in request.messages]
        assert seen == [m.id for m in stored], "every message once, in order"
        assert outcome.applied and outcome.messages == len(stored) and outcome.input_tokens == total
        record = await memory.get_record("t1")
        assert record is not None and record.cursor("t1") == stored[-1].seq
        # Each batch saw what the earlier ones wrote.
        assert observer.requests[0].previous_observations == ""
        assert observer.requests[1].previous_observations.strip()


async def test_a_window_within_the_batch_limit_is_one_request() -> None:
    memory, observer = await observe_window(max_tokens_per_batch=10_000)
    async with memory:
        await memory.observe("t1")
        assert len(observer.requests) == 1


async def test_batches_never_split_a_tool_call_from_its_result() -> None:
    counter = TokenCounter()
    observer = RecordingObserver(counter)
    memory = Memory("memory://", config=small_config(message_tokens=400, max_tokens_per_batch=60),
                    observer=observer, counter=counter, clock=fake_clock())
    conv = Conversation()
    async with memory:
        await memory.create_thread("t1", "u1")
        await memory.save_messages("t1", [
            conv.user("What is the weather in Oslo and in Bergen this weekend?"),
            conv.call("c1", city="Oslo"),
            conv.result("c1", {"forecast": "rain", "temp_c": 9}),
            conv.call("c2", city="Bergen"),
            conv.result("c2", {"forecast": "sun", "temp_c": 12}),
            conv.assistant("Oslo: rain, 9 °C. Bergen: sun, 12 °C. Bring a jacket for Oslo."),
        ])
        await memory.observe("t1")
        assert len(observer.requests) > 1
        for request in observer.requests:
            calls = {c.tool_call_id for m in request.messages for c in m.tool_calls}
            results = {r.tool_call_id for m in request.messages for r in m.tool_results}
            assert calls == results, "a call and its result are observed together"

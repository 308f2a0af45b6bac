"""The cost ledger from the user's side (issue 18): a real Memory, scripted models with usage.

Every memory model call is recorded with role, model, tokens (cached and cache-write included),
latency and outcome; ``Memory.usage`` sums them per day, role and model with a cost estimate.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message
from obsmem.calls import UsageReport
from obsmem.config import BudgetConfig, ModelPriceConfig
from obsmem.errors import ModelRequestError
from obsmem.models.base import ModelRequest, ModelResponse, Usage
from obsmem.models.testing import FunctionModel
from obsmem.om.outcomes import EngineEvent
from obsmem.profiles import model_price

pytestmark = pytest.mark.anyio

OBSERVATIONS = (
    "<observations>\nDate: Jun 15, 2025\n"
    "* 🔴 (10:00) User plans the garden: beans next to the tomatoes, watered daily, loose soil.\n"
    "</observations>"
)
CONFIG = MemoryConfig(
    observation={"message_tokens": 300, "buffer_tokens": False}, reflection={"observation_tokens": 400}
)


class Billing:
    """A model function that answers with a usage of its own per call, and remembers it."""

    def __init__(self, text: str, base: int) -> None:
        self.text = text
        self.base = base
        self.usages: list[Usage] = []

    def __call__(self, messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
        n = len(self.usages)
        usage = Usage(input_tokens=self.base + 10 * n, output_tokens=50 + n, cached_input_tokens=self.base // 2 + n,
                      cache_write_tokens=n % 3)
        self.usages.append(usage)
        lines = "".join(
            f"* 🔴 (10:{n % 60:02d}) Note {n}.{k}: the user planted row {n * 10 + k} with beans and tomatoes.\n"
            for k in range(6)
        )
        return ModelResponse(f"<observations>\nDate: Jun 15, 2025\n{lines}</observations>", usage=usage)


async def converse(memory: Memory, thread_id: str, resource_id: str, turns: int) -> None:
    for i in range(turns):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id,
            messages=[Message.user(f"question {i}: what should I plant next to the tomatoes in the garden?")],
        )
        await turn.step([Message.assistant(f"answer {i}: beans, watered daily, in loose and rich soil.")])
        await turn.end()


def total(usages: list[Usage]) -> Usage:
    summed = Usage()
    for usage in usages:
        summed = summed + usage
    return summed


def memory_with(store: Any = "memory://", **kwargs: Any) -> tuple[Memory, Billing, Billing]:
    observer = Billing(OBSERVATIONS, 1000)
    reflector = Billing(OBSERVATIONS, 3000)
    memory = Memory(
        store, config=kwargs.pop("config", CONFIG),
        observer=FunctionModel(observer, name="openai:gpt-4o-mini"),
        reflector=FunctionModel(reflector, name="anthropic:claude-sonnet-4-5"), **kwargs,
    )
    return memory, observer, reflector


async def test_usage_totals_equal_the_responses_usage_per_role() -> None:
    memory, observer, reflector = memory_with()
    async with memory:
        await converse(memory, "t1", "r1", 40)
        await memory.settled()
        report = await memory.usage(thread_id="t1")
    assert isinstance(report, UsageReport)
    assert len(observer.usages) >= 3 and len(reflector.usages) >= 1
    by_role = {row.role: row for row in report.by("role")}
    assert set(by_role) == {"observer", "reflector"}
    for role, billing in (("observer", observer), ("reflector", reflector)):
        row, expected = by_role[role], total(billing.usages)
        assert row.calls == len(billing.usages) and row.failed == 0
        assert (row.input_tokens, row.cached_input_tokens, row.cache_write_tokens, row.output_tokens) == (
            expected.input_tokens, expected.cached_input_tokens, expected.cache_write_tokens, expected.output_tokens
        )
        assert row.latency_s >= 0
    [observer_row] = [r for r in report.rows if r.role == "observer"]
    assert observer_row.model == "openai:gpt-4o-mini"
    assert observer_row.day == datetime.now(UTC).strftime("%Y-%m-%d")


async def test_the_cost_estimate_uses_the_price_table_and_counts_unpriced_calls() -> None:
    memory, observer, reflector = memory_with()
    async with memory:
        await converse(memory, "t1", "r1", 40)
        report = await memory.usage(resource_id="r1")
    price_o = model_price("openai:gpt-4o-mini")
    price_r = model_price("anthropic:claude-sonnet-4-5")
    assert price_o is not None and price_r is not None
    expected = sum(price_o.cost(u.input_tokens, u.cached_input_tokens, u.cache_write_tokens, u.output_tokens)
                   for u in observer.usages)
    expected += sum(price_r.cost(u.input_tokens, u.cached_input_tokens, u.cache_write_tokens, u.output_tokens)
                    for u in reflector.usages)
    assert report.total().cost_usd == pytest.approx(expected)
    assert report.total().unpriced_calls == 0
    # By hand for one call at gpt-4o-mini: uncached input 0.15, cached 0.075, output 0.60 per 1M.
    u = observer.usages[0]
    assert price_o.cost(u.input_tokens, u.cached_input_tokens, u.cache_write_tokens, u.output_tokens) == \
        pytest.approx(((u.input_tokens - u.cached_input_tokens) * 0.15 + u.cached_input_tokens * 0.075
                       + u.output_tokens * 0.60) / 1e6)

    unknown = Memory("memory://", config=CONFIG, model=FunctionModel(Billing(OBSERVATIONS, 100), name="acme:mystery"))
    async with unknown:
        await converse(unknown, "t1", "r1", 20)
        row = (await unknown.usage()).total()
    assert row.calls > 0 and row.unpriced_calls == row.calls and row.cost_usd == 0.0
    priced = Memory("memory://", config=MemoryConfig(
        observation={"message_tokens": 300, "buffer_tokens": False}, reflection={"observation_tokens": 400},
        prices={"acme:mystery": ModelPriceConfig(input=1.0, output=2.0)},
    ), model=FunctionModel(Billing(OBSERVATIONS, 100), name="acme:mystery"))
    async with priced:
        await converse(priced, "t1", "r1", 20)
        row = (await priced.usage()).total()
    assert row.unpriced_calls == 0
    assert row.cost_usd == pytest.approx((row.input_tokens * 1.0 + row.output_tokens * 2.0) / 1e6)


async def test_a_failing_call_is_recorded_with_its_outcome() -> None:
    def fail(messages: list[Message], settings: ModelRequest | None) -> ModelResponse:
        raise ModelRequestError("the request was refused")

    memory = Memory("memory://", config=CONFIG, model=FunctionModel(fail, name="openai:gpt-4o-mini"),
                    failure_policy="continue")
    async with memory:
        await memory.create_thread("t1", "r1")
        await memory.save_messages("t1", [Message.user("hello there, my beans need water " * 20)])
        outcome = await memory.observe("t1")
        assert outcome.error is not None
        report = await memory.usage(thread_id="t1")
    total_row = report.total()
    assert total_row.calls >= 1 and total_row.failed == total_row.calls
    assert total_row.input_tokens == 0 and total_row.output_tokens == 0


async def test_thread_resource_and_time_filters_isolate() -> None:
    memory, _, _ = memory_with()
    async with memory:
        await converse(memory, "a1", "alice", 20)
        await converse(memory, "b1", "bob", 20)
        await converse(memory, "b2", "bob", 20)
        a = (await memory.usage(resource_id="alice")).total()
        b = (await memory.usage(resource_id="bob")).total()
        b1 = (await memory.usage(thread_id="b1")).total()
        b2 = (await memory.usage(thread_id="b2")).total()
        everything = (await memory.usage()).total()
        later = (await memory.usage(since=datetime.now(UTC) + timedelta(seconds=1))).total()
        earlier = (await memory.usage(until=datetime.now(UTC) - timedelta(days=1))).total()
        today = (await memory.usage(since=datetime.now(UTC).date())).total()
    assert a.calls > 0 and b1.calls > 0 and b2.calls > 0
    assert b.calls == b1.calls + b2.calls
    assert everything.calls == a.calls + b.calls
    assert later.calls == 0 and earlier.calls == 0 and today.calls == everything.calls


async def test_the_sqlite_ledger_survives_reopening(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.db'}"
    memory, observer, _ = memory_with(url)
    async with memory:
        await converse(memory, "t1", "r1", 30)
    async with Memory(url) as reopened:
        report = await reopened.usage(thread_id="t1")
    assert report.by("role")[0].role == "observer"
    assert sum(r.calls for r in report.rows if r.role == "observer") == len(observer.usages)


async def test_the_budget_degrades_to_the_offline_roles_once_and_memory_keeps_working() -> None:
    events: list[EngineEvent] = []
    config = MemoryConfig(
        observation={"message_tokens": 300, "buffer_tokens": False}, reflection={"observation_tokens": 400},
        budget=BudgetConfig(max_tokens=2500, period="day", check_interval_s=0),
    )
    memory, _, _ = memory_with(config=config, on_event=events.append)
    async with memory:
        await converse(memory, "t1", "r1", 60)
        at_limit = (await memory.usage(resource_id="r1")).total()
        await converse(memory, "t1", "r1", 30)
        spent = (await memory.usage(resource_id="r1")).total()
        record = await memory.get_record("t1")
        # another resource has its own budget
        await converse(memory, "t9", "r9", 20)
        other = (await memory.usage(resource_id="r9")).total()
    exceeded = [e for e in events if str(e.kind) == "budget-exceeded" and e.data["resource_id"] == "r1"]
    assert len(exceeded) == 1  # once per resource and period
    assert exceeded[0].data["to"] == "offline" and exceeded[0].data["period"] == "day"
    assert spent == at_limit  # no model call for r1 once its budget was spent
    assert spent.input_tokens + spent.output_tokens >= 2500
    assert spent.input_tokens + spent.output_tokens < 2500 + 3100 + 60  # at most one call past the line
    assert record is not None and record.observation_tokens > 0  # the offline observer kept observing
    assert other.calls > 0


async def test_the_budget_reads_the_ledger_at_most_once_per_interval() -> None:
    config = MemoryConfig(
        observation={"message_tokens": 300, "buffer_tokens": False}, reflection={"observation_tokens": 400},
        budget=BudgetConfig(max_cost_usd=1000.0, period="month", check_interval_s=3600),
    )
    memory, observer, reflector = memory_with(config=config)
    async with memory:
        await converse(memory, "t1", "r1", 60)
    assert memory.budget is not None
    assert len(observer.usages) >= 3 and memory.budget.reads == 1
    tokens, _ = await memory.budget.spent("r1")  # the cached sum grew with the calls recorded since
    assert memory.budget.reads == 1
    assert tokens == sum(u.input_tokens + u.output_tokens for u in observer.usages + reflector.usages)


async def test_a_failing_ledger_write_is_logged_and_never_fails_memory_work(caplog: pytest.LogCaptureFixture) -> None:
    from obsmem.storage import MemoryStore

    class BrokenLedger(MemoryStore):
        async def record_model_calls(self, calls: Any) -> int:
            raise RuntimeError("the ledger table is locked")

    memory, observer, reflector = memory_with(BrokenLedger())
    async with memory:
        await converse(memory, "t1", "r1", 30)
        record = await memory.get_record("t1")
        report = await memory.usage()
    assert len(observer.usages) >= 2 and record is not None and record.observation_tokens > 0
    assert report.total().calls == 0
    assert memory.ledger.dropped == len(observer.usages) + len(reflector.usages)  # every call, none raised
    assert any("could not be recorded" in r.getMessage() for r in caplog.records)

"""The offline observer's novelty checks grow with the batch, not with its square.

Found by helper-140 timing the offline observer on one request of k parallel tool results and
the reply that sums them up (a call is never separated from its results, so such a request is
one batch whatever ``max_tokens_per_batch`` says): 500 -> 1,000 -> 2,000 results took 0.09 ->
0.27 -> 0.74 s, 4,000 took 6.5 s. For every name and number of the reply the observer asked
``term.lower() in known``, ``known`` being everything recorded or said in the batch so far
(all k results): terms x known characters, quadratic. The same shape holds for a long paste
followed by a reply naming what it holds.

Counted here through ``Memory("memory://")`` and ``Memory.observe``: the characters the
novelty checks read. Those checks run in C (``str`` ``in``), so a tracer cannot see them: the
known text, where it is one string, is wrapped in a ``str`` that notes its length per search,
and where it is an index (``KnownText``) it counts what it reads itself (``scanned``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, ObservationConfig
from obsmem.om.offline import observer as observer_module
from obsmem.types import TextPart, ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 6, 15, 9, tzinfo=UTC)
#: An application that observes in large batches (a long-context observer model, say): the
#: results, or the paste, and the reply are read in one cycle.
ONE_BATCH = MemoryConfig(observation=ObservationConfig(message_tokens=2_000_000, max_tokens_per_batch=1_000_000))


class _Known(str):
    """The known text as one string: each search reads all of it."""

    chars = 0

    def __contains__(self, term: object) -> bool:
        _Known.chars += len(self)
        return str.__contains__(self, term)  # type: ignore[operator]

    def find(self, *args: Any) -> int:  # participants._recorded searches with find
        _Known.chars += len(self)
        return str.find(self, *args)


def _parallel(k: int) -> list[Message]:
    at = iter(T0 + timedelta(seconds=i) for i in range(k + 5))
    calls = tuple(ToolCallPart(tool_call_id=f"c{i}", tool_name="lookup", args={"sku": f"A{i}"}) for i in range(k))
    return [
        Message(role="user", parts=(TextPart(text="Check every order."),), created_at=next(at)),
        Message(role="assistant", parts=calls, created_at=next(at)),
        *(Message(role="tool", created_at=next(at), parts=(ToolResultPart(
            tool_call_id=f"c{i}", tool_name="lookup", result=f"Order ORD-{i} for Quarvel{i} shipped to Berlin"),))
          for i in range(k)),  # fmt: skip
        Message.assistant(" ".join(f"Order ORD-{i} went to Zeltix{i} in Oslo Harbor {i}." for i in range(k)),
                          created_at=next(at)),  # fmt: skip
    ]


def _pasted(k: int) -> list[Message]:
    """A user pastes k lines of a log; the reply names what each line holds."""
    log = "\n".join(f"Host Vexa{i} in rack R{i} reported disk D{i} at 9{i}% full." for i in range(k))
    reply = " ".join(f"Vexa{i} needs a new disk Quill{i} from Tarvo{i}." for i in range(k))
    return [
        Message(role="user", parts=(TextPart(text=f"Which hosts need attention?\n{log}"),), created_at=T0),
        Message.assistant(reply, created_at=T0 + timedelta(seconds=5)),
    ]


@pytest.fixture
def searched(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function: the characters the novelty checks read while ``Memory.observe`` observes."""
    monkeypatch.setenv("OBSMEM_OFFLINE_PROCESS", "0")  # the rules in this process (a thread)
    cycles: list[Any] = []
    original = observer_module._Cycle.known

    def known(self: Any) -> Any:
        cycles.append(self)
        value = original(self)
        return _Known(value) if isinstance(value, str) else value

    monkeypatch.setattr(observer_module._Cycle, "known", known)

    async def run(messages: list[Message]) -> tuple[int, str]:
        _Known.chars = 0
        cycles.clear()
        async with Memory("memory://", config=ONE_BATCH) as memory:
            thread = await memory.create_thread("t1", resource_id="r")
            await memory.save_messages(thread.id, messages)
            await memory.observe(thread.id)
            record = await memory.get_record(thread.id)
            observed = record.active_observations if record is not None else ""
        index = sum({id(c._known): getattr(c._known, "scanned", 0) for c in cycles}.values())
        return _Known.chars + index, observed

    return run


async def test_a_reply_to_many_parallel_results_is_checked_in_linear_work(searched: Any) -> None:
    small, observed = await searched(_parallel(250))
    assert "Zeltix3" in observed  # the reply was observed (its names are new)
    large, _ = await searched(_parallel(1000))
    assert large / small < 6, f"4x the results read {large / small:.1f}x the known text ({small:,} -> {large:,})"


async def test_a_reply_to_a_long_paste_is_checked_in_linear_work(searched: Any) -> None:
    small, observed = await searched(_pasted(300))
    assert "vexa" in observed.lower()
    large, _ = await searched(_pasted(1200))
    assert large / small < 6, f"4x the paste read {large / small:.1f}x the known text ({small:,} -> {large:,})"

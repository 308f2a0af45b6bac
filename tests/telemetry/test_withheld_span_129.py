"""An operator sees that capture left a secret out (helper-129): the capture run's span carries
``obsmem.withheld``, the number of texts it did not store because they held a secret (never
the text). Before, the span said only ``obsmem.written``: a withheld password read as "nothing
worth capturing"."""

from __future__ import annotations

import pytest

from tests.knowledge.agents.alice import alice_memory, say

from .conftest import Otel

pytestmark = pytest.mark.anyio


async def test_the_capture_span_counts_what_it_withheld(otel: Otel) -> None:
    async with alice_memory() as (memory, _knowledge, clock):
        await say(memory, clock, "My wifi password is hunter2-Blue and my dog is called Kiwi.")
    captures = [dict(s.attributes or {}) for s in otel.spans
                if s.name == "obsmem.agent" and (s.attributes or {}).get("obsmem.agent") == "capture"]
    assert captures, "capture ran"
    assert [(a["obsmem.written"], a.get("obsmem.withheld")) for a in captures] == [(1, 1)]
    assert not any("hunter2" in str(value) for attributes in captures for value in attributes.values())

"""obsmem's context caches (the observation prefix, the volatile sections, the continuation
reminder, the rendered chunks) are shared by every Memory of the process, and several
``SyncMemory`` run each on its own thread: an entry another thread evicted (or an erase
cleared) between one thread's lookup and its "make it the newest" raised KeyError out of the
context build (two in 1.2 M builds with four threads). The interleaving is forced here: the
cache loses the entry right after it is found."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from obsmem.om import context as module
from obsmem.om.context import build_context
from obsmem.storage.contract import ObservationRecord, ThreadState

from .helpers import START, Conversation

OBS = "Date: Jun 14, 2025\n* 🔴 (09:00) User plans to fly to Lisbon on Friday (meaning Jun 13, 2025)."


class _Evicting(OrderedDict[Any, Any]):
    """A cache whose entry another thread evicts right after this one found it."""

    def get(self, key: Any, default: Any = None) -> Any:
        found = super().get(key, default)
        if found is not None:
            self.pop(key, None)  # (the other thread's eviction, or an erase's clear)
        return found


@pytest.mark.parametrize("cache", ["_PREFIXES", "_VOLATILE", "_CONTINUATIONS", "_RENDERED"])
def test_an_entry_evicted_meanwhile_does_not_fail_the_build(monkeypatch: pytest.MonkeyPatch, cache: str) -> None:
    for name in ("_PREFIXES", "_VOLATILE", "_CONTINUATIONS", "_RENDERED"):
        monkeypatch.setattr(module, name, _Evicting() if name == cache else OrderedDict())
    record = ObservationRecord(
        id="r", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1", active_observations=OBS,
        threads={"t1": ThreadState(cursor=0, current_task="Book the hotel", suggested_response="Offer options")},
    )
    conv = Conversation()
    first = build_context(record, [conv.user("hi")], thread_id="t1", now=START)
    if cache == "_RENDERED":
        module._PREFIXES.clear()  # (else the kept prefix is found and its chunks are not rendered again)
    again = build_context(record, [conv.user("hi")], thread_id="t1", now=START)  # found, then evicted
    assert [m.text for m in again.messages] == [m.text for m in first.messages]

"""What every agent shares: settings, the scope of a thread, text helpers and the run report."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from obsmem.knowledge.store.contract import Record, RecordView, TrustState
from obsmem.knowledge.store.scopes import Level, Scope, parse_level
from obsmem.knowledge.store.values import normalise_value

__all__ = [
    "ALL_RECORDS",
    "AGENT_ACTORS",
    "AgentSettings",
    "AgentRun",
    "content_tokens",
    "thread_scope",
]

AGENT_ACTORS = frozenset({"capture", "remind", "curate", "learn", "pins"})

ALL_RECORDS = RecordView(include_candidates=True, include_deleted=True, include_superseded=True)
"""Every record a scope sees, whatever its state (for de-duplication and curation)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an the and or but of to in on at for with from by is are was were be been am it its it's "
    "they them their there this that these those he she his her him we our you your i my me "
    "what which who whom when where why how do does did done have has had will would can could "
    "should shall may might must not no yes so if then than too very just also about again "
    "now new old still user stated said asked".split()
)


def content_tokens(text: str) -> set[str]:
    """The words of ``text`` that carry meaning (normalised, stopwords and 1-letter words out)."""
    return {w for w in _WORD.findall(normalise_value(text)) if len(w) > 1 and w not in _STOPWORDS}


def thread_scope(org_id: str | None, resource_id: str, thread_id: str) -> Scope:
    """The knowledge scope a conversation thread reads and writes from."""
    return Scope(org_id or "default", resource_id, thread_id)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How the knowledge agents behave (built from ``MemoryConfig.knowledge``)."""

    capture: bool = True
    remind: bool = True
    curate: bool = True
    learn: bool = True
    pins: bool = True
    trust: TrustState = TrustState.CANDIDATE
    record_level: Level = Level.THREAD
    node_level: Level = Level.RESOURCE
    ceiling: Level = Level.RESOURCE
    capture_pinning: bool = False
    remind_limit: int = 3
    remind_tokens: int = 300
    remind_candidates: bool = False
    pins_tokens: int = 400
    max_pins: int = 20
    curate_after_records: int = 20
    curate_max_age_s: float | None = 3600.0
    curate_batch: int = 500
    user_node: str = "User"
    max_steps: int = 5
    curate_max_steps: int = 50

    def __post_init__(self) -> None:
        for name in ("record_level", "node_level", "ceiling"):
            object.__setattr__(self, name, parse_level(getattr(self, name)))
        object.__setattr__(self, "trust", TrustState(self.trust))


@dataclass
class AgentRun:
    """What one agent run did (for logs, events and tests)."""

    agent: Literal["capture", "remind", "curate", "learn", "pins"]
    status: Literal["ran", "no-op", "skipped", "failed"] = "ran"
    written: list[Record] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (record id, reason)
    refused: list[str] = field(default_factory=list)
    skipped: int = 0
    cursor: str | None = None
    detail: str = ""
    tokens: int = 0

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
    "EVERYDAY_WORDS",
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


#: Everyday words that are rare in a small store but say nothing about which fact is meant
#: ("Big first day. Good night!" is not about "their first day at the Berlin office").
EVERYDAY_WORDS = frozenset(
    "day days night nights morning mornings evening evenings afternoon today tomorrow yesterday tonight week "
    "weeks weekend month months year years time times first second third last next one two three four five "
    "good great bad big small little long short high low right left best better worse more most less much many "
    "lot lots some any every all each other same different own really actually maybe please thanks thank sorry "
    "okay ok yeah hi hello hey get got gets getting go goes going went gone come comes coming came make makes "
    "made making take takes taking took know knows knew think thinks thought want wants wanted need needs "
    "needed like likes liked love loved say says see sees saw look looks looked let lets keep keeps kept put "
    "give gave find found tell told ask asked work works worked working feel feels felt try tried use used "
    "start started end ended back home way thing things stuff people person man woman kid kids everything "
    "something nothing anything everyone someone anyone there here up down out off over under again ever "
    "even only well still already soon later early late ago since until while before after around quick "
    "quickly new old big tiny whole half full free open close done ready sure fine nice cool fun happy "
    "since because anyway up bit once both near between out only all set just into onto through across along "
    "among per via yet though although however whether either neither few several such etc "
    "means mean put puts bring brings brought call calls start starts take takes want wants "
    "monday tuesday wednesday thursday friday saturday sunday january february march april june july "
    "august september october november december".split()
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
    #: Texts left out because they hold a secret (a password, a key, a PIN): counted, never kept.
    withheld: int = 0
    skipped: int = 0
    cursor: str | None = None
    detail: str = ""
    tokens: int = 0

"""The knowledge agents (the "subconscious"): capture, remind, curate, learn, and pins.

Offline, rules-based implementations by default (no model, no key). ``Memory(knowledge=...)``
runs them: capture on every committed observation, remind and pins on every context, curate and
learn after a reflection and whenever a lane's count or age trigger fires; ``obsmem worker``
also runs due curation on an idle timer. Every write goes through the knowledge store's public
operations with ``actor`` = the agent's name.
"""

from __future__ import annotations

from obsmem.knowledge.agents.capture import CaptureAgent
from obsmem.knowledge.agents.common import AgentRun, AgentSettings, thread_scope
from obsmem.knowledge.agents.curate import CAPTURE_GUIDANCE, CurateAgent, curation_due
from obsmem.knowledge.agents.extract import Proposal, Statement, propose, statements
from obsmem.knowledge.agents.lanes import (
    LANE_PREFIX,
    LaneBusyError,
    LaneLostError,
    Lanes,
    LaneState,
    backoff_delay,
)
from obsmem.knowledge.agents.learn import LearnAgent, evidence_id
from obsmem.knowledge.agents.metrics import KnowledgeScore, score_knowledge
from obsmem.knowledge.agents.pins import PIN_NODE, PinBoard, PinnedBlock
from obsmem.knowledge.agents.remind import Reminder, RemindAgent
from obsmem.knowledge.agents.runner import ContextBlocks, KnowledgeAgents

__all__ = [
    "CAPTURE_GUIDANCE",
    "LANE_PREFIX",
    "PIN_NODE",
    "AgentRun",
    "AgentSettings",
    "CaptureAgent",
    "ContextBlocks",
    "CurateAgent",
    "KnowledgeAgents",
    "KnowledgeScore",
    "LaneBusyError",
    "LaneLostError",
    "LaneState",
    "Lanes",
    "LearnAgent",
    "PinBoard",
    "PinnedBlock",
    "Proposal",
    "RemindAgent",
    "Reminder",
    "Statement",
    "backoff_delay",
    "curation_due",
    "evidence_id",
    "propose",
    "score_knowledge",
    "statements",
    "thread_scope",
]

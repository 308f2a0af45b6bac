"""The knowledge agents of one memory (or worker), wired to one knowledge store and one main store.

:class:`KnowledgeAgents` is what ``Memory`` and ``Worker`` hold. It never raises into a turn:
every entry point catches, logs and reports failures (``AgentRun(status="failed")``), because a
failing agent must never block a conversation nor lose its observations (those stay in the main
store; capture's own cursor only moves past what it captured).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from obsmem import calls, telemetry
from obsmem.clock import Clock, SystemClock
from obsmem.knowledge.agents.capture import CaptureAgent
from obsmem.knowledge.agents.common import AgentRun, AgentSettings, thread_scope
from obsmem.knowledge.agents.curate import CurateAgent
from obsmem.knowledge.agents.lanes import LaneLostError, Lanes
from obsmem.knowledge.agents.learn import LearnAgent
from obsmem.knowledge.agents.pins import PinBoard, PinnedBlock
from obsmem.knowledge.agents.remind import Reminder, RemindAgent
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.store.scopes import Scope
from obsmem.models.base import ChatModel
from obsmem.storage.contract import Store

__all__ = ["ContextBlocks", "KnowledgeAgents"]

logger = logging.getLogger("obsmem.knowledge")


@contextmanager
def _agent_run(agent: str, context: Scope, source_thread_id: str | None = None) -> Iterator[telemetry.Span]:
    """One agent run: the call scope its model calls are metered under (``role=agent``) and its
    span (``obsmem.agent``, with the agent's name and the scope's ids; never the text it handles)."""
    thread_id = source_thread_id or context.thread
    with calls.call_scope(role=agent, thread_id=thread_id, resource_id=context.resource), telemetry.span(
        "obsmem.agent", {"obsmem.agent": agent, **telemetry.ids(thread_id, context.resource)}
    ) as span:
        yield span


def _ran(span: telemetry.Span, run: AgentRun) -> AgentRun:
    span.update({"obsmem.outcome": run.status, "obsmem.written": len(run.written),
                 "obsmem.removed": len(run.removed), "obsmem.withheld": run.withheld, "obsmem.tokens": run.tokens})
    if run.status == "failed":
        span.fail("AgentFailed")
    return run


@dataclass(frozen=True, slots=True)
class ContextBlocks:
    """What the knowledge side adds to one context: pins and a reminder (either may be empty)."""

    pinned: PinnedBlock
    reminder: Reminder
    errors: tuple[str, ...] = ()


class KnowledgeAgents:
    """capture, remind, curate, learn and pins over ``knowledge``; lane state in ``store``."""

    def __init__(
        self,
        knowledge: Knowledge,
        store: Store,
        settings: AgentSettings | None = None,
        *,
        count_tokens: Callable[[str], int] | None = None,
        clock: Clock | None = None,
        owner: str | None = None,
        model: ChatModel | None = None,
        redact: Callable[[str], str] | None = None,
        hosted_for: Callable[[str | None, str | None], bool] | None = None,
    ) -> None:
        self.knowledge = knowledge
        #: The privacy allow-list for ``model``: whether it may see a (thread, resource)'s text;
        #: where it may not, the offline agents run instead (None: it may see every scope).
        self.hosted_for = hosted_for
        #: The privacy boundary for text bound for the store (observation deltas, pins); None: off.
        self.redact = redact
        self.settings = settings or AgentSettings()
        self.clock = clock or SystemClock()
        count = count_tokens or (lambda text: max(1, len(text) // 4))
        self.lanes = Lanes(store, clock=self.clock, owner=owner)
        self.model = model
        self.capturer: CaptureAgent
        self.reminder: RemindAgent
        self.curator: CurateAgent
        if model is None:  # offline rules, the default: no key, no network
            self.capturer = CaptureAgent(knowledge.store, self.settings)
            self.reminder = RemindAgent(knowledge, self.settings, count)
            self.curator = CurateAgent(knowledge.store, self.lanes, self.settings, self.clock)
        else:
            from obsmem.knowledge.agents.llm import LLMCaptureAgent, LLMCurateAgent, LLMRemindAgent

            self.capturer = LLMCaptureAgent(knowledge.store, self.settings, model, knowledge)
            self.reminder = LLMRemindAgent(knowledge, self.settings, count, model)
            self.curator = LLMCurateAgent(knowledge.store, self.lanes, self.settings, model, self.clock)
        self.learner: LearnAgent = LearnAgent(knowledge.store, self.lanes, self.settings, self.clock)
        if model is not None:
            from obsmem.knowledge.agents.llm import LLMLearnAgent

            self.learner = LLMLearnAgent(knowledge.store, self.lanes, self.settings, model, self.clock)
        self.pins = PinBoard(knowledge.store, self.settings, count)
        self.runs: list[AgentRun] = []
        #: The offline agents, for the scopes ``hosted_for`` keeps from the model.
        self._offline: KnowledgeAgents | None = None
        if model is not None and hosted_for is not None:
            self._offline = KnowledgeAgents(knowledge, store, self.settings, count_tokens=count_tokens,
                                            clock=self.clock, owner=owner, redact=redact)

    def _for(self, context: Scope | str, thread_id: str | None = None) -> KnowledgeAgents:
        """The agents that may read ``context``'s text: these, or the offline ones where the
        privacy allow-list keeps the scope (its thread, else its resource) from the model."""
        if self._offline is None or self.hosted_for is None:
            return self
        parsed = Scope.parse(context)
        if self.hosted_for(thread_id or parsed.thread, parsed.resource):
            return self
        return self._offline

    @staticmethod
    def scope(org_id: str | None, resource_id: str, thread_id: str) -> Scope:
        return thread_scope(org_id, resource_id, thread_id)

    def forget_kept(self) -> None:
        """After an erase: nothing the agents keep between calls holds what went (the run log's
        records written, the remind agent's recent requests)."""
        self.runs.clear()
        self.reminder.forget_kept()

    def _kept(self, run: AgentRun) -> AgentRun:
        self.runs.append(run)
        del self.runs[:-200]
        if run.status == "failed":
            telemetry.log_failure(logger, "knowledge agent %s failed", run.agent, error=run.detail or "failed",
                                  operation=run.agent)
        return run

    async def capture(self, observations: str, context: Scope, *, source_thread_id: str) -> AgentRun:
        """Capture one committed observation delta (raises only for a store failure, so the
        caller keeps its cursor where it was)."""
        if not self.settings.capture:
            return AgentRun("capture", "skipped", detail="capture is off")
        if self.redact is not None:
            observations = self.redact(observations)
        # Inside the thread's capture lane (held by this process): each write checks the lane is
        # still this run's, so a run that lost it to another worker stops instead of writing again
        # what that worker captures.
        fence = self.lanes.fence(f"capture:{source_thread_id}")
        with _agent_run("capture", context, source_thread_id) as span:
            try:
                run = await self._for(context, source_thread_id).capturer.run(
                    observations, context, source_thread_id=source_thread_id, fence=fence)
            except LaneLostError as lost:  # not a failure: the new holder captures this delta
                _ran(span, self._kept(AgentRun("capture", "skipped", detail=str(lost))))
                raise
            except Exception as exc:
                _ran(span, self._kept(AgentRun("capture", "failed", detail=f"{type(exc).__name__}: {exc}")))
                raise  # the caller keeps its cursor before this delta
            return _ran(span, self._kept(run))

    async def curate(self, context: Scope, source_thread_id: str, *, force: bool = False,
                     triggered: bool = False) -> AgentRun:
        if not self.settings.curate:
            return AgentRun("curate", "skipped", detail="curate is off")
        with _agent_run("curate", context, source_thread_id) as span:
            try:
                run = await self._for(context, source_thread_id).curator.run(
                    context, source_thread_id, force=force, triggered=triggered)
            except Exception as exc:  # the lane store itself failed
                run = AgentRun("curate", "failed", detail=f"{type(exc).__name__}: {exc}")
            return _ran(span, self._kept(run))

    async def learn(self, context: Scope, source_thread_id: str) -> AgentRun:
        if not self.settings.learn:
            return AgentRun("learn", "skipped", detail="learn is off")
        with _agent_run("learn", context, source_thread_id) as span:
            try:
                run = await self._for(context, source_thread_id).learner.run(context, source_thread_id)
            except Exception as exc:
                run = AgentRun("learn", "failed", detail=f"{type(exc).__name__}: {exc}")
            return _ran(span, self._kept(run))

    async def reflection_phase(self, context: Scope, source_thread_id: str) -> list[AgentRun]:
        """After a reflection commits: curate, then learn; each independent of the other."""
        return [await self.curate(context, source_thread_id, triggered=True),
                await self.learn(context, source_thread_id)]

    async def curate_if_due(self, context: Scope, source_thread_id: str) -> AgentRun:
        """Curate when the lane's count or age trigger fires (and it is not backing off)."""
        if not self.settings.curate:
            return AgentRun("curate", "skipped", detail="curate is off")
        try:
            why = await self._for(context, source_thread_id).curator.due(context, source_thread_id)
        except Exception as exc:
            return self._kept(AgentRun("curate", "failed", detail=f"{type(exc).__name__}: {exc}"))
        if why is None:
            return AgentRun("curate", "skipped", detail="not due")
        return await self.curate(context, source_thread_id)

    async def context_blocks(self, request: str | None, context: Scope) -> ContextBlocks:
        """Pins and a reminder for a context; a failure leaves the block out and is reported."""
        errors: list[str] = []
        pinned = PinnedBlock("", (), ())
        reminder = Reminder("", ())
        if self.settings.pins:
            try:
                pinned = await self.pins.render(context)
            except Exception as exc:
                errors.append(f"pins: {type(exc).__name__}: {exc}")
        if self.settings.remind and request:
            with _agent_run("remind", context) as span:
                try:
                    reminder = await self._for(context).reminder.remind(request, context)
                    span.set("obsmem.outcome", "ran")
                except Exception as exc:
                    errors.append(f"remind: {type(exc).__name__}: {exc}")
                    span.fail(exc)
                    span.set("obsmem.outcome", "failed")
        for error in errors:
            block, _, detail = error.partition(": ")
            telemetry.log_failure(logger, "knowledge context block %s left out", block, error=detail,
                                  operation=block)
        return ContextBlocks(pinned, reminder, tuple(errors))

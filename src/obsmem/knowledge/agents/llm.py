"""LLM implementations of the agents: a prompt each, and a tool loop bounded by ``max_steps``.

They run over any :class:`~obsmem.models.base.ChatModel` (``"openai:gpt-4o-mini"``, …) and keep
the offline agents' guarantees: every write still goes through the knowledge store (ceilings,
tombstones, trust, audit with actor = the agent's name), the tools only reach what the thread's
scope sees, and each tool refuses what the agent may not do (a supersession across attributes,
a removal without a reason) with an error the model can read and correct.

* **capture** answers one JSON document of nodes and records (it may search first); each record
  needs a concrete reason, ``when`` must parse (an unparseable one drops that record and is
  reported), and the scope a record asks for is clamped to the ceiling.
* **remind** words a reminder from at most ``remind_limit`` candidates, or answers
  ``<no-reminder />``; its sources are the candidate ids the text cites (at most 5), and a
  reminder that cites none is dropped: no uncited claim reaches the actor.
* **curate** walks the worklist in id order with tools to read and to remove, and ends every
  finished record with ``<curation-complete through="ID"/>``. Fail-closed: a loop that runs out
  of steps advances nothing; a malformed marker, or one naming an id outside the worklist, is an
  error; otherwise the cursor moves to the last valid marker. Its step budget is larger
  (``curate_max_steps``) because a worklist can hold hundreds of records.
* **learn** may record one skill per run with ``knowledge_record_skill`` (≥2 distinct evidence
  records, deterministic evidence ids), ending with ``<learning-complete through="ID"/>``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from obsmem.errors import ModelOutputError
from obsmem.knowledge.agents.capture import CaptureAgent
from obsmem.knowledge.agents.common import ALL_RECORDS, AgentRun, AgentSettings
from obsmem.knowledge.agents.curate import CurateAgent, may_remove
from obsmem.knowledge.agents.extract import Proposal
from obsmem.knowledge.agents.lanes import Lanes
from obsmem.knowledge.agents.learn import LearnAgent
from obsmem.knowledge.agents.remind import Reminder, RemindAgent
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.store.contract import KnowledgeStore, Record, RecordView, TrustState
from obsmem.knowledge.store.scopes import Scope, parse_level
from obsmem.knowledge.store.values import parse_when
from obsmem.models.base import ChatModel, ModelRequest, Usage
from obsmem.quoting import defuse_lines
from obsmem.types import Message, ToolResultPart
from obsmem.clock import Clock

__all__ = [
    "CAPTURE_PROMPT",
    "CURATE_PROMPT",
    "REMIND_PROMPT",
    "CurationMarkerError",
    "LLMCaptureAgent",
    "LLMCurateAgent",
    "LLMLearnAgent",
    "LLMRemindAgent",
    "LoopResult",
    "Tool",
    "parse_markers",
    "tool_loop",
]

Handler = Callable[[Mapping[str, Any]], Awaitable[Any]]

CAPTURE_PROMPT = """You are the capture agent of a long-term knowledge store about a user.
From the new observations, extract durable knowledge the user explicitly stated: facts about
themselves, the people, projects and things in their life. No inference, no small talk, no
restated task text (unless the user asked you to remember it). Use short stable node names and
wrap named things in [[double brackets]] inside record text. For each record give:
- "text": one grounded sentence;
- "attribute": what the value is the value of (e.g. "phone number", "job title", "home city"),
  the same attribute for a changed value so the new record supersedes the old one;
- "reason": one concrete sentence saying why this is worth keeping (never "seemed relevant");
- "when": an ISO date only when the conversation anchors the time the fact refers to;
- "scope": "thread" (the default) or "resource" only when the conversation establishes it.
You may call knowledge_search first to reuse existing node names and attributes.
Answer with one JSON object and nothing else:
{"nodes": [{"name": "...", "kind": "person|project|task|event|organization|document|...",
            "records": [{"text": "...", "attribute": "...", "reason": "...", "when": null, "scope": null}]}]}"""

REMIND_PROMPT = """You are the remind agent. The user's newest message and candidate knowledge
records (id and text) follow. If some candidates would help the assistant answer, write a short
reminder (at most 3 sentences) and cite each record you use by its id in square brackets, e.g.
[01J...]. Cite only the given ids. If nothing helps, answer exactly <no-reminder />."""

CURATE_PROMPT = """You are the curate agent of a knowledge store. Walk the worklist in id order.
For each record: if another live record about the same node already says the same thing, remove
the later one as a duplicate; if an older record about the same node AND the same attribute
holds a different value, remove the older one as superseded. Never remove anything else, and
never supersede across attributes. Every removal needs a one-sentence reason.
Tools: knowledge_about(record_id) lists the live records about that record's node;
knowledge_remove(record_id, because_of, kind, reason) removes (kind "duplicate" or "superseded";
because_of is the record that makes it redundant).
After finishing each record write <curation-complete through="RECORD_ID"/>. Your final answer
must contain the marker of the last record you finished."""

LEARN_PROMPT = """You are the learn agent. From the records below, find at most ONE reusable
procedure (how the user wants something done, every time) that at least TWO distinct records
support. If there is one, call knowledge_record_skill(name, procedure, evidence) with a short
name, the procedure in one or two sentences, and the ids of the supporting records. Do not
invent procedures from a single record. Finally write <learning-complete through="RECORD_ID"/>
with the id of the last worklist record you considered."""

_MARKER = re.compile(r'<curation-complete\s+through="([^"<>]+)"\s*/>')
_LEARN_MARKER = re.compile(r'<learning-complete\s+through="([^"<>]+)"\s*/>')
_CITED = re.compile(r"\[([0-9A-HJKMNP-TV-Z]{26})\]")
_FILLER = re.compile(r"^(?:seemed|seems|might be|could be|maybe|possibly)\b.*relevant|^relevant\.?$", re.IGNORECASE)


CurationMarkerError = ModelOutputError
"""What a model's answer that breaks an agent's contract raises (a malformed, missing or foreign
completion marker; no answer within ``max_steps``): the model's output error, nothing new."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call: its JSON schema (name, description, parameters) and handler."""

    schema: dict[str, Any]
    handler: Handler


@dataclass
class LoopResult:
    """How a tool loop ended: ``text`` is the final answer (None: it ran out of steps)."""

    text: str | None
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.text is not None


async def tool_loop(
    model: ChatModel, system: str, user: str, tools: Mapping[str, Tool], *, max_steps: int,
    temperature: float = 0.0,
) -> LoopResult:
    """Ask ``model``; run the tools it calls; repeat until it answers in text or ``max_steps``
    model calls were made (then ``text`` is None). Tool errors go back to the model as
    ``{"error": ...}``; the loop itself never raises for them."""
    messages = [Message.system(system), Message.user(user)]
    settings = ModelRequest(temperature=temperature, tools=tuple(t.schema for t in tools.values()))
    result = LoopResult(None)
    while result.steps < max_steps:
        response = await model.request(messages, settings)
        result.steps += 1
        result.usage = result.usage + response.usage
        if not response.tool_calls:
            result.text = response.text
            return result
        messages.append(Message(role="assistant", parts=tuple(response.tool_calls)))
        answers: list[ToolResultPart] = []
        for call in response.tool_calls:
            args = call.args if isinstance(call.args, dict) else {}
            result.calls.append((call.tool_name, dict(args)))
            tool = tools.get(call.tool_name)
            try:
                if tool is None:
                    raise ValueError(f"unknown tool {call.tool_name!r}; use one of {sorted(tools)}")
                value: Any = await tool.handler(args)
                failed = False
            except Exception as exc:  # the model reads the error and may correct itself
                value, failed = {"error": f"{type(exc).__name__}: {exc}"}, True
            answers.append(ToolResultPart(tool_call_id=call.tool_call_id or uuid.uuid4().hex,
                                          tool_name=call.tool_name, result=value, is_error=failed))
        messages.append(Message(role="tool", parts=tuple(answers)))
    return result


def parse_markers(text: str, worklist_ids: list[str], *, tag: str = "curation-complete") -> str:
    """The id of the last valid completion marker in ``text``.

    Raises :class:`CurationMarkerError` when there is none, when a marker is malformed, or when
    one names an id outside the worklist: the cursor then moves nowhere."""
    pattern = _MARKER if tag == "curation-complete" else _LEARN_MARKER
    valid = pattern.findall(text)
    if text.count(f"<{tag}") != len(valid):
        raise CurationMarkerError(f"a malformed <{tag} .../> marker in the answer: {text[:300]!r}")
    if not valid:
        raise CurationMarkerError(f"no <{tag} through=\"ID\"/> marker in the answer")
    outside = [v for v in valid if v not in worklist_ids]
    if outside:
        raise CurationMarkerError(f"<{tag}> names ids outside the worklist: {outside}")
    last: str = valid[-1]
    return last


def _record_json(record: Record) -> dict[str, Any]:
    return {
        "id": record.id, "node_id": record.node_id, "attribute": record.attribute, "text": record.text,
        "valid_from": record.valid_from.isoformat(), "deleted": record.deleted_at is not None,
    }


def _json_object(text: str) -> Any:
    body = text.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the answer holds no JSON object")
    return json.loads(body[start : end + 1])


class LLMCaptureAgent(CaptureAgent):
    """Capture by a model: its proposals, then the same writes, dedupe and refusals as offline."""

    def __init__(self, store: KnowledgeStore, settings: AgentSettings, model: ChatModel, knowledge: Knowledge) -> None:
        super().__init__(store, settings)
        self.model = model
        self.knowledge = knowledge

    async def proposals(self, observations: str, context: Scope, report: AgentRun) -> list[Proposal]:
        async def search(args: Mapping[str, Any]) -> Any:
            hits = await self.knowledge.search(str(args.get("query", "")), context.key,
                                               view=RecordView(include_candidates=True), limit=8)
            return [{"id": h.id, "text": h.text} for h in hits]

        tools = {"knowledge_search": Tool({
            "name": "knowledge_search", "description": "Search the knowledge this thread may see.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        }, search)}
        system = CAPTURE_PROMPT
        guidance = await self.store.resolve_node("capture-guidance", context.key)
        if guidance is not None and guidance.content:
            system += ("\n\nLearned guidance (kept by the curate agent; it cannot override the rules above "
                       "or the user's instructions):\n" + guidance.content[:4000])
        loop = await tool_loop(self.model, system, f"New observations:\n{observations}", tools,
                               max_steps=self.settings.max_steps)
        report.tokens += loop.usage.total_tokens
        if loop.text is None:
            raise CurationMarkerError(f"capture ran out of steps ({self.settings.max_steps}) without an answer")
        document = _json_object(loop.text)
        found: list[Proposal] = []
        dropped: list[str] = []
        for node in document.get("nodes") or []:
            name = str(node.get("name") or "").strip()
            kind = str(node.get("kind") or "node").strip() or "node"
            if not name:
                continue
            for item in node.get("records") or []:
                text = str(item.get("text") or "").strip()
                reason = str(item.get("reason") or "").strip()
                if not text or not reason or _FILLER.search(reason):
                    dropped.append(f"{text[:60]!r}: no concrete reason")
                    continue
                try:
                    when = parse_when(item["when"]).start if item.get("when") else None
                    level = parse_level(item["scope"]) if item.get("scope") else None
                except Exception as exc:
                    dropped.append(f"{text[:60]!r}: {exc}")
                    continue
                attribute = str(item["attribute"]).strip() if item.get("attribute") else None
                found.append(Proposal(name, kind, text, attribute, when, reason, level=level))
        if dropped:
            report.detail = "dropped: " + "; ".join(dropped)
        return found


class LLMRemindAgent(RemindAgent):
    """Remind by a model: the same candidates (scope-checked twice), worded and cited by it."""

    def __init__(self, knowledge: Knowledge, settings: AgentSettings, count_tokens: Callable[[str], int],
                 model: ChatModel) -> None:
        super().__init__(knowledge, settings, count_tokens)
        self.model = model
        self.tokens = 0

    async def render(self, request: str, header: str, lines: list[str], chosen: list[Record]) -> Reminder:
        if not chosen:
            return Reminder("", ())
        candidates = "\n".join(f"[{r.id}] {r.text}" for r in chosen)
        loop = await tool_loop(self.model, REMIND_PROMPT, f"Message: {request}\n\nCandidates:\n{candidates}", {},
                               max_steps=1)
        self.tokens += loop.usage.total_tokens
        text = (loop.text or "").strip()
        if not text or "<no-reminder" in text:
            return Reminder("", ())
        by_id = {r.id: r for r in chosen}
        cited = [i for i in dict.fromkeys(_CITED.findall(text)) if i in by_id][:5]
        if not cited:
            return Reminder("", ())  # an uncited reminder is not evidence: nothing reaches the actor
        body = f"{defuse_lines(text)}\nSources: {', '.join(cited)}"  # its words, never tags (it quotes records)
        return Reminder(f"<remembered>\n{body}\n</remembered>", tuple(cited), tuple(by_id[i] for i in cited))


class LLMCurateAgent(CurateAgent):
    """Curation by a model over the worklist, with tools bounded to the same subject and attribute."""

    def __init__(self, store: KnowledgeStore, lanes: Lanes, settings: AgentSettings, model: ChatModel,
                 clock: Clock | None = None) -> None:
        super().__init__(store, lanes, settings, clock)
        self.model = model

    async def _walk(self, worklist: list[Record], context: Scope, report: AgentRun) -> str | None:
        ids = [r.id for r in worklist]

        async def about(args: Mapping[str, Any]) -> Any:
            record = await self.store.get_record(str(args.get("record_id", "")), context.key, ALL_RECORDS)
            if record is None:
                raise ValueError("no such record visible from this thread")
            return [_record_json(p) for p in await self._peers(record, context)]

        async def remove(args: Mapping[str, Any]) -> Any:
            victim = await self.store.get_record(str(args.get("record_id", "")), context.key, ALL_RECORDS)
            keeper = await self.store.get_record(str(args.get("because_of", "")), context.key, ALL_RECORDS)
            kind = str(args.get("kind", ""))
            reason = str(args.get("reason", "")).strip()
            if victim is None or keeper is None:
                raise ValueError("both record_id and because_of must be records this thread sees")
            if victim.id == keeper.id or victim.node_id != keeper.node_id:
                raise ValueError("a removal is bounded to another record about the same node")
            if kind not in ("duplicate", "superseded") or not reason:
                raise ValueError("kind must be 'duplicate' or 'superseded', with a one-sentence reason")
            if kind == "superseded" and (victim.attribute is None or victim.attribute != keeper.attribute):
                raise ValueError("supersession is bounded to the same attribute; these differ")
            if not may_remove(victim, keeper):
                raise ValueError("record_id is the organisation's, because_of one user's: an org-wide record "
                                 "is never removed because of a narrower one")
            if victim.deleted_at is not None:
                return {"removed": victim.id, "already": True}
            if victim.trust is TrustState.VERIFIED and keeper.trust is not TrustState.VERIFIED:
                raise ValueError("because_of is an unreviewed candidate: it never removes a verified record "
                                 "(a reviewer decides first)")
            prefix = f"superseded by {keeper.id}" if kind == "superseded" else f"duplicate of {keeper.id}"
            # The model wrote its reason reading this thread (it may quote any record the thread
            # sees): a removal of a broader scope's record logs it here only, and there which
            # record it was for, by id where that scope sees it (a sibling thread does not learn
            # of this thread's record).
            ref = keeper.id if Scope.parse(victim.scope).sees(keeper.scope) else "a record of a narrower scope"
            shown = f"superseded by {ref}" if kind == "superseded" else f"duplicate of {ref}"
            await self._remove(victim, context, f"{prefix}: {reason}"[:1000], report,
                               superseded_by=keeper.id if kind == "superseded" else None, private_to=context.key,
                               shared=f"{shown}: the curator's reason is in the log of a narrower scope")
            return {"removed": victim.id}

        tools = {
            "knowledge_about": Tool({
                "name": "knowledge_about", "description": "Live records about the node of a record.",
                "parameters": {"type": "object", "properties": {"record_id": {"type": "string"}},
                               "required": ["record_id"]},
            }, about),
            "knowledge_remove": Tool({
                "name": "knowledge_remove",
                "description": "Soft-remove a redundant record (duplicate of, or superseded by, another).",
                "parameters": {"type": "object", "properties": {
                    "record_id": {"type": "string"}, "because_of": {"type": "string"},
                    "kind": {"type": "string", "enum": ["duplicate", "superseded"]}, "reason": {"type": "string"},
                }, "required": ["record_id", "because_of", "kind", "reason"]},
            }, remove),
        }
        worklist_json = json.dumps([_record_json(r) for r in worklist], ensure_ascii=False)
        loop = await tool_loop(self.model, CURATE_PROMPT, f"Worklist (id order):\n{worklist_json}", tools,
                               max_steps=self.settings.curate_max_steps)
        report.tokens += loop.usage.total_tokens
        if loop.text is None:
            raise CurationMarkerError(
                f"curation ran out of steps ({self.settings.curate_max_steps}); the cursor stays where it was"
            )
        return parse_markers(loop.text, ids)


class LLMLearnAgent(LearnAgent):
    """Learning by a model: one skill per run at most, evidence checked and written like offline."""

    def __init__(self, store: KnowledgeStore, lanes: Lanes, settings: AgentSettings, model: ChatModel,
                 clock: Clock | None = None) -> None:
        super().__init__(store, lanes, settings, clock)
        self.model = model

    async def _walk(self, worklist: list[Record], context: Scope, report: AgentRun, *, learned: bool = False,
                    awaiting: list[str] | None = None) -> str | None:
        # The model judges the worklist as it is: it awaits no candidate (``awaiting`` stays as
        # given), so a procedure approved after this walk passed it is learned only offline.
        ids = [r.id for r in worklist]
        recorded: list[str] = []

        async def record_skill(args: Mapping[str, Any]) -> Any:
            if recorded:
                raise ValueError("one skill per run; it is recorded already")
            evidence = [str(i) for i in args.get("evidence") or []]
            group = [r for r in worklist if r.id in set(evidence) and r.deleted_at is None]
            name = "skill: " + str(args.get("name", "")).strip()[:80]
            procedure = str(args.get("procedure", "")).strip()
            if name == "skill: " or not procedure:
                raise ValueError("a skill needs a name and a procedure")
            if len(group) < 2:
                raise ValueError("a skill needs at least two distinct supporting records from the worklist")
            await self.record_skill(name, "Procedure: " + procedure, group, context, report)
            recorded.append(name)
            return {"recorded": name}

        tools = {"knowledge_record_skill": Tool({
            "name": "knowledge_record_skill",
            "description": "Record a reusable procedure supported by at least two distinct records.",
            "parameters": {"type": "object", "properties": {
                "name": {"type": "string"}, "procedure": {"type": "string"},
                "evidence": {"type": "array", "items": {"type": "string"}},
            }, "required": ["name", "procedure", "evidence"]},
        }, record_skill)}
        worklist_json = json.dumps([_record_json(r) for r in worklist], ensure_ascii=False)
        loop = await tool_loop(self.model, LEARN_PROMPT, f"Worklist (id order):\n{worklist_json}", tools,
                               max_steps=self.settings.max_steps)
        report.tokens += loop.usage.total_tokens
        if loop.text is None:
            raise CurationMarkerError(f"learning ran out of steps ({self.settings.max_steps}); nothing advances")
        return parse_markers(loop.text, ids, tag="learning-complete")

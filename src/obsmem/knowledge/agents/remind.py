"""The remind agent: relevant old knowledge, as a short reminder with its sources, or nothing.

Offline by default. It searches what the thread's scope may see (the store's visibility filter:
its own thread, its resource, its organisation; never a sibling thread or another resource),
fusing lexical and semantic ranking (:meth:`obsmem.knowledge.Knowledge.search`), keeps only
hits that share at least two content words with the request (one for a one-word request: a
semantic neighbour or a single common name alone is not evidence of relevance), and renders at most ``remind_limit`` excerpts within ``remind_tokens`` tokens::

    <remembered>
    Possibly relevant knowledge from earlier conversations (check before relying on it):
    - [[User]] their dog is called Kiki (stated 2025-03-04)
    Sources: 01J…, 01J…
    </remembered>

Visibility is checked twice: by the store, and again here on every hit (``Scope.sees``), so a
store adapter bug cannot leak a sibling's record into a context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from obsmem.knowledge.agents.common import AgentSettings, content_tokens
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.store.contract import Record, RecordView
from obsmem.knowledge.store.scopes import Scope

__all__ = ["Reminder", "RemindAgent"]

_EXCERPT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Reminder:
    """The reminder text and the record ids it cites (empty text: nothing relevant)."""

    text: str
    sources: tuple[str, ...]
    records: tuple[Record, ...] = ()


class RemindAgent:
    name = "remind"

    def __init__(self, knowledge: Knowledge, settings: AgentSettings, count_tokens: Callable[[str], int]) -> None:
        self.knowledge = knowledge
        self.settings = settings
        self.count = count_tokens

    async def remind(self, request: str, context: Scope, *, exclude_source_after: str | None = None) -> Reminder:
        """A reminder for ``request`` from what ``context`` may see, or an empty one."""
        wanted = content_tokens(request)
        if not wanted:
            return Reminder("", ())
        view = RecordView(include_candidates=self.settings.remind_candidates)
        query = " ".join(sorted(wanted))  # the request's content words: "what is my …" matches everything
        hits = await self.knowledge.search(query, context.key, view=view, limit=max(20, 5 * self.settings.remind_limit))
        names: dict[str, str] = {}
        chosen: list[Record] = []
        lines: list[str] = []
        header = "Possibly relevant knowledge from earlier conversations (check before relying on it):"
        budget = self.settings.remind_tokens - self.count(header) - 20
        for hit in hits:
            record = hit.record
            if record is None or not context.sees(record.scope) or record.deleted_at is not None:
                continue
            said = content_tokens(f"{record.text} {record.attribute or ''}")
            if len(wanted & said) < min(2, len(wanted)):
                continue  # one shared word ("Berlin") is not a reason to interrupt
            if record.node_id not in names:
                node = await self.knowledge.store.get_node(record.node_id, context.key)
                names[record.node_id] = node.name if node is not None else "?"
            text = record.text if len(record.text) <= _EXCERPT_CHARS else record.text[: _EXCERPT_CHARS - 1] + "…"
            stated = f" (stated {record.when.start.date().isoformat()})" if record.when is not None else ""
            line = f"- [[{names[record.node_id]}]] {text}{stated}"
            cost = self.count(line)
            if cost > budget:
                continue
            budget -= cost
            chosen.append(record)
            lines.append(line)
            if len(chosen) >= self.settings.remind_limit:
                break
        return await self.render(request, header, lines, chosen)

    async def render(self, request: str, header: str, lines: list[str], chosen: list[Record]) -> Reminder:
        """The reminder from the chosen excerpts (the LLM agent words it instead)."""
        if not chosen:
            return Reminder("", ())
        sources = tuple(r.id for r in chosen)
        body = "\n".join([header, *lines, "Sources: " + ", ".join(sources)])
        return Reminder(f"<remembered>\n{body}\n</remembered>", sources, tuple(chosen))

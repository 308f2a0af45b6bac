"""The remind agent: relevant old knowledge, as a short reminder with its sources, or nothing.

Offline by default. It searches what the thread's scope may see (the store's visibility filter:
its own thread, its resource, its organisation; never a sibling thread or another resource),
fusing lexical and semantic ranking (:meth:`obsmem.knowledge.Knowledge.search`), and speaks
only when a record is relevant to *this* turn beyond shared common words. A hit is kept when

* it shares at least two content words with the request, not counting everyday words
  (``EVERYDAY_WORDS``: "first", "day", "night", "since") or bare numbers (one for a one-word
  request: a semantic neighbour alone is not evidence of relevance), and
* at least one shared word is *specific*: a word of the record's attribute ("phone number"
  for "what is my phone number?"), or a rare word: one at most ``_RARE`` of the candidate
  records contain. The conversation's own hub words (the partner's name, the home city) are
  in many records, so sharing them alone ("Tomás sent me a photo") reminds of nothing; and
* it was not already shown in the thread's last ``_REPEAT_TURNS`` turns (distinct requests;
  the same request asked again, e.g. a context rebuilt within one turn, gets the same
  reminder). This memory is per process and bounded (``_THREADS`` threads): another process
  may repeat a reminder once, which costs tokens, never correctness.

It renders at most ``remind_limit`` excerpts within ``remind_tokens`` tokens::

    <remembered>
    Possibly relevant knowledge from earlier conversations (check before relying on it):
    - [[User]] their dog is called Kiki (stated 2025-03-04)
    Sources: 01J…, 01J…
    </remembered>

A record an agent wrote that holds a secret (captured by an obsmem from before capture left
secrets out, :func:`~obsmem.knowledge.secrets.holds_secret`) is never reminded of; what the
application stored itself is its own choice and is.

Visibility is checked twice: by the store, and again here on every hit (``Scope.sees``), so a
store adapter bug cannot leak a sibling's record into a context.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from obsmem.knowledge.agents.common import AGENT_ACTORS, EVERYDAY_WORDS, AgentSettings, content_tokens
from obsmem.knowledge.facade import Knowledge
from obsmem.knowledge.secrets import holds_secret
from obsmem.knowledge.store.contract import Record, RecordView
from obsmem.knowledge.store.scopes import Scope
from obsmem.knowledge.store.values import normalise_value
from obsmem.quoting import defuse

__all__ = ["Reminder", "RemindAgent"]

_EXCERPT_CHARS = 200
_RARE = 2  # a shared word in at most this many candidate records is specific to them
_REPEAT_TURNS = 5  # a record shown in the thread's last 5 turns is not shown again
_THREADS = 1024  # threads whose recent reminders are remembered (least recently reminded dropped)
_CANDIDATES = 50
#: A request at least this long is read on a worker thread.
_OFF_LOOP_CHARS = 16_384
#: The most words of a request the reminder searches for: its first and last halves of these
#: (a pasted log's question comes before or after it). Bounds the search's work (each word is
#: looked for in every visible record) whatever the message's size.
QUERY_WORDS = 64
_WORDS = re.compile(r"[^\W_]+")  # the words of a normalised text, in order (as content_tokens finds them)


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
        # per thread scope: the last turns' (request's digest, shown record ids), newest last
        self._recent: OrderedDict[str, deque[tuple[str, frozenset[str]]]] = OrderedDict()

    def forget_kept(self) -> None:
        """Drop the recent requests kept per thread (after an erase: they hold what users asked).
        A record shown just before may be shown once more."""
        self._recent.clear()

    def _shown_before(self, key: str, request: str) -> set[str]:
        """Records shown in the thread's recent turns other than this request's own."""
        turns = self._recent.get(key, ())
        return {rid for asked, ids in turns if asked != request for rid in ids}

    def _remember(self, key: str, request: str, shown: tuple[str, ...]) -> None:
        turns = self._recent.pop(key, None) or deque(maxlen=_REPEAT_TURNS)
        if turns and turns[-1][0] == request:
            turns[-1] = (request, turns[-1][1] | frozenset(shown))
        else:
            turns.append((request, frozenset(shown)))
        self._recent[key] = turns
        while len(self._recent) > _THREADS:
            self._recent.popitem(last=False)

    async def remind(self, request: str, context: Scope, *, exclude_source_after: str | None = None) -> Reminder:
        """A reminder for ``request`` from what ``context`` may see, or an empty one."""
        # A pasted log of megabytes takes about a second to normalise: on a worker thread then,
        # never holding the event loop (a remind timeout cannot interrupt the loop's own work).
        if len(request) >= _OFF_LOOP_CHARS:
            wanted, asked = await asyncio.to_thread(_read_request, request)
        else:
            wanted, asked = _read_request(request)
        if not wanted:
            return Reminder("", ())
        view = RecordView(include_candidates=self.settings.remind_candidates)
        query = " ".join(sorted(wanted))  # the request's content words: "what is my …" matches everything
        hits = await self.knowledge.search(query, context.key, view=view,
                                           limit=max(_CANDIDATES, 5 * self.settings.remind_limit))
        visible = [h.record for h in hits if h.record is not None and context.sees(h.record.scope)
                   and h.record.deleted_at is None]
        said_by = {r.id: content_tokens(r.text) for r in visible}
        frequency = {word: sum(1 for words in said_by.values() if word in words) for word in wanted}
        repeated = self._shown_before(context.key, asked)
        meaningful = {w for w in wanted if w not in EVERYDAY_WORDS and not w.isdigit()}
        if not meaningful:
            self._remember(context.key, asked, ())
            return Reminder("", ())
        names: dict[str, str] = {}
        chosen: list[Record] = []
        lines: list[str] = []
        header = "Possibly relevant knowledge from earlier conversations (check before relying on it):"
        budget = self.settings.remind_tokens - self.count(header) - 20
        for record in visible:
            if record.id in repeated:
                continue  # shown a few turns ago: still in view, no need to interrupt again
            named = content_tokens(record.attribute or "")
            shared = {w for w in wanted & (said_by[record.id] | named) if w not in EVERYDAY_WORDS and not w.isdigit()}
            if len(shared) < min(2, len(meaningful)):
                continue  # one shared word ("Berlin") is not a reason to interrupt
            if not shared & named and all(frequency.get(word, 0) > _RARE for word in shared):
                continue  # only the conversation's common words ("Tomás", "Berlin") in common
            if record.metadata.get("agent") in AGENT_ACTORS and holds_secret(record.text):
                continue  # a secret an earlier capture kept: no agent puts it in a context
            if record.node_id not in names:
                node = await self.knowledge.store.get_node(record.node_id, context.key)
                names[record.node_id] = node.name if node is not None else "?"
            # Stored text is data: one line of the block, no tag (it may close the block otherwise).
            text = defuse(record.text if len(record.text) <= _EXCERPT_CHARS else record.text[: _EXCERPT_CHARS - 1] + "…")
            stated = f" (stated {record.when.start.date().isoformat()})" if record.when is not None else ""
            line = f"- [[{defuse(names[record.node_id])}]] {text}{stated}"
            cost = self.count(line)
            if cost > budget:
                continue
            budget -= cost
            chosen.append(record)
            lines.append(line)
            if len(chosen) >= self.settings.remind_limit:
                break
        self._remember(context.key, asked, tuple(r.id for r in chosen))
        return await self.render(request, header, lines, chosen)

    async def render(self, request: str, header: str, lines: list[str], chosen: list[Record]) -> Reminder:
        """The reminder from the chosen excerpts (the LLM agent words it instead)."""
        if not chosen:
            return Reminder("", ())
        sources = tuple(r.id for r in chosen)
        body = "\n".join([header, *lines, "Sources: " + ", ".join(sources)])
        return Reminder(f"<remembered>\n{body}\n</remembered>", sources, tuple(chosen))


def _read_request(request: str) -> tuple[set[str], str]:
    """The request's query words (:func:`_query_words`) and the digest its turn is remembered by
    (the request itself is never kept: it may be megabytes, and it is what a user asked)."""
    return _query_words(request), hashlib.sha256(request.encode("utf-8", "surrogatepass")).hexdigest()


def _query_words(request: str) -> set[str]:
    """The request's content words (:func:`content_tokens`), at most :data:`QUERY_WORDS` of them:
    the first and last distinct ones in the order they are said."""
    wanted = content_tokens(request)
    if len(wanted) <= QUERY_WORDS:
        return wanted
    ordered = list(dict.fromkeys(w for w in _WORDS.findall(normalise_value(request)) if w in wanted))
    half = QUERY_WORDS // 2
    return {*ordered[:half], *ordered[-half:]}

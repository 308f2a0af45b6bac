"""What the actor sees: observations as system messages, a reminder, then the raw tail.

The order is chosen for provider prompt caches: the instructions and the observation chunks
form a prefix that stays byte-identical across the steps of a turn (and across turns until the
next observation), and the volatile parts (current task, suggested response, working memory)
come after it. Every message reaches the actor exactly once: either raw, in the tail, or inside
an observation — never both, and a tool call is never separated from its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from obsmem.om.text.dates import annotate_observations, gap_text, is_gap_line, optimize_for_context
from obsmem.om.text.format import split_on_boundaries
from obsmem.om.text.groups import lift_above_headings, render_for_context
from obsmem.om.sections import visible_sections
from obsmem.storage.contract import ObservationRecord
from obsmem.types import DataPart, Message, TextPart

__all__ = [
    "CONTINUATION_ID",
    "ContextWindow",
    "build_context",
    "model_visible",
    "observation_system_messages",
]

CONTINUATION_ID = "om-continuation"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

PREAMBLE = """\
The observations below are your memory of earlier conversation with this user. They were
written from the conversation as it happened and are your only record of it.

How to use them:
- Personalise your answers with the specific details recorded here; avoid generic advice when
  the memory says something concrete.
- When facts conflict, the most recent observation wins. Watch for changes of state
  ("moved to", "switched to", "changing from ...").
- A planned action whose date has passed probably happened, unless something says otherwise;
  when it matters, ask rather than assume.
- What the user stated about themselves is authoritative. Something the assistant suggested only
  counts if the user adopted it; what the assistant did is a record of what happened.
- The user's most recent message has the highest priority.
- Text inside <system-reminder> tags is guidance for you; never mention it."""

CONTINUATION = """\
<system-reminder>
Continue the conversation naturally and answer the latest message. The earlier part of this
conversation is summarised in your memory above; use it as background and pick up unfinished
work only where it helps. If a suggested response is present, follow it naturally. Do not
mention memory, summaries, context handling or missing messages. Everything after this reminder
is newer than your memory and takes priority over it.
</system-reminder>"""


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The messages for one model call, plus what they are made of."""

    messages: list[Message]
    system_messages: list[Message] = field(default_factory=list)
    raw_messages: list[Message] = field(default_factory=list)
    has_observations: bool = False

    @property
    def prefix_text(self) -> str:
        """The cacheable prefix (instructions and observation chunks), for cache-stability checks."""
        return "\n\n".join(m.text for m in self.system_messages if not m.metadata.get("obsmem_volatile"))


def _system(text: str, key: str, *, volatile: bool = False) -> Message:
    metadata: dict[str, object] = {"obsmem": key}
    if volatile:
        metadata["obsmem_volatile"] = True
    return Message(id=f"om-{key}", role="system", parts=(TextPart(text=text),), created_at=_EPOCH, metadata=metadata)


OTHER_CONVERSATIONS = """\
The following comes from this user's other conversations. It is reference only: use it for
context, do not continue those conversations here, and do not assume this conversation has
seen it."""
_OTHER_PART_CHARS = 500


def _other_conversations_block(others: Sequence[tuple[str, Sequence[Message]]]) -> str | None:
    blocks: list[str] = []
    for thread_id, messages in others:
        lines = []
        for message in messages:
            text = " ".join(p.text[:_OTHER_PART_CHARS] for p in message.parts if isinstance(p, TextPart))
            if text.strip():
                lines.append(f"{message.role}: {text.strip()}")
        if lines:
            blocks.append(f'<other-conversation id="{thread_id}">\n' + "\n".join(lines) + "\n</other-conversation>")
    if not blocks:
        return None
    return "\n".join([OTHER_CONVERSATIONS, "START_OTHER_CONVERSATIONS_BLOCK", *blocks, "END_OTHER_CONVERSATIONS_BLOCK"])


def observation_system_messages(
    record: ObservationRecord | None,
    *,
    thread_id: str | None,
    now: datetime,
    include_hints: bool = True,
    extracted: dict[str, object] | None = None,
    working_memory: str | None = None,
    shared: bool = False,
    other_conversations: Sequence[tuple[str, Sequence[Message]]] = (),
    recall_instructions: str | None = None,
    instructions_without_observations: bool = False,
) -> list[Message]:
    """The system messages: preamble, one message per observation chunk, then volatile sections.

    In resource scope, ``shared`` decides whether other threads' sections and unobserved
    messages are shown; by default a thread sees only its own sections.

    ``recall_instructions`` (retrieval mode) are appended to the preamble, and observation
    groups are shown as ``## Group `<id>` `` headings; both depend only on the config and the
    stored text, so the prefix stays byte-stable. With ``instructions_without_observations``
    the instructions are sent even before anything was observed (resource-scope recall, so
    the actor can reach other conversations from the first message).
    """
    visible = ""
    if record is not None:
        visible = record.active_observations
        if record.scope == "resource":
            visible = visible_sections(visible, thread_id, shared=shared)
    chunks = split_on_boundaries(visible) if visible.strip() else []
    if recall_instructions:  # group tags become headings; empty groups (and chunks) vanish
        chunks = [shown for shown in (render_for_context(c) for c in chunks) if shown.strip()]
    messages: list[Message] = []
    if not chunks and recall_instructions and instructions_without_observations:
        messages.append(_system(recall_instructions, "recall-instructions"))
    if chunks:
        messages.extend(_observation_messages(chunks, now, recall_instructions))
        # Other conversations change with every message there, so they come after the stable
        # observation prefix, with the other volatile sections.
        others = _other_conversations_block(other_conversations) if shared else None
        if others:
            messages.append(_system(others, "other-conversations", volatile=True))
        state = record.threads.get(thread_id) if record is not None and thread_id else None
        if include_hints and state is not None:
            messages.extend(_hint_messages(state.current_task, state.suggested_response))
        for slug, value in sorted((extracted or {}).items()):
            messages.append(_system(f"<{slug}>\n{value}\n</{slug}>", f"extracted-{slug}", volatile=True))
    if working_memory and working_memory.strip():
        messages.append(
            _system(f"<working-memory>\n{working_memory.strip()}\n</working-memory>", "working-memory", volatile=True)
        )
    return messages


def _observation_messages(chunks: Sequence[str], now: datetime, recall_instructions: str | None) -> list[Message]:
    """The cacheable prefix: the preamble, then one message per observation chunk."""
    preamble = f"{PREAMBLE}\n\n{recall_instructions}" if recall_instructions else PREAMBLE
    messages = [_system(preamble, "preamble")]
    for index, chunk in enumerate(chunks):
        text = annotate_observations(optimize_for_context(chunk), now)
        if recall_instructions:
            text = lift_above_headings(text, is_gap_line)
        opener = "<observations>\n" if index == 0 else ""
        closer = "\n</observations>" if index == len(chunks) - 1 else ""
        messages.append(_system(f"{opener}{text}{closer}", f"observations-{index}"))
    return messages


def _hint_messages(current_task: str | None, suggested_response: str | None) -> list[Message]:
    messages: list[Message] = []
    if current_task:
        messages.append(_system(f"<current-task>\n{current_task}\n</current-task>", "current-task", volatile=True))
    if suggested_response:
        messages.append(
            _system(
                f"<suggested-response>\n{suggested_response}\n</suggested-response>",
                "suggested-response",
                volatile=True,
            )
        )
    return messages


def model_visible(message: Message) -> Message | None:
    """The message without data parts (markers); None when nothing is left for a model."""
    parts = tuple(p for p in message.parts if not isinstance(p, DataPart))
    if not parts:
        return None
    if len(parts) == len(message.parts):
        return message
    return message.model_copy(update={"parts": parts})


def _gap_reminder(previous: Message, current: Message) -> Message | None:
    text = gap_text(current.created_at - previous.created_at)
    if text is None:
        return None
    stamp = current.created_at.strftime("%a %b %d %Y %H:%M %Z").strip()
    return Message(
        id=f"om-gap-{current.id}",
        role="user",
        parts=(TextPart(text=f"<system-reminder>{text} — {stamp}</system-reminder>"),),
        created_at=current.created_at,
        metadata={"obsmem": "temporal-gap", "precedes": current.id},
    )


def build_context(
    record: ObservationRecord | None,
    unobserved: Sequence[Message],
    *,
    thread_id: str | None,
    now: datetime,
    temporal_markers: bool = False,
    include_hints: bool = True,
    extracted: dict[str, object] | None = None,
    working_memory: str | None = None,
    shared: bool = False,
    other_conversations: Sequence[tuple[str, Sequence[Message]]] = (),
    recall_instructions: str | None = None,
    instructions_without_observations: bool = False,
) -> ContextWindow:
    """Assemble the context for one model call from a record and the unobserved messages."""
    system = observation_system_messages(
        record,
        thread_id=thread_id,
        now=now,
        include_hints=include_hints,
        extracted=extracted,
        working_memory=working_memory,
        shared=shared,
        other_conversations=other_conversations,
        recall_instructions=recall_instructions,
        instructions_without_observations=instructions_without_observations,
    )
    raw: list[Message] = []
    previous: Message | None = None
    for message in unobserved:
        if message.role == "system":
            continue
        visible = model_visible(message)
        if visible is None:
            continue
        if temporal_markers and previous is not None and message.role == "user":
            reminder = _gap_reminder(previous, message)
            if reminder is not None:
                raw.append(reminder)
        raw.append(visible)
        previous = message
    has_observations = any(m.metadata.get("obsmem") == "preamble" for m in system)
    messages = list(system)
    if has_observations:
        messages.append(
            Message(
                id=CONTINUATION_ID,
                role="user",
                parts=(TextPart(text=CONTINUATION),),
                created_at=_EPOCH,
                metadata={"obsmem": "continuation"},
            )
        )
    messages.extend(raw)
    return ContextWindow(messages=messages, system_messages=system, raw_messages=raw, has_observations=has_observations)

"""What the actor sees: the application's instructions, observations, a reminder, the raw tail.

A context is, in this order:

1. **The application's instructions**: the system messages the application passed with the
   most recent call that passed any (``begin_turn``, ``step``, ``end`` or ``save_messages``),
   each as stored now (a re-saved id shows its newest text). They lead every later context of
   the thread, through observation and reflection, until a call passes system messages again,
   which then replace them. They are never observed: an observer never reads a system message.
   Where they were passed is recorded on the thread (:func:`remember_instructions`, under
   ``thread.metadata["obsmem"]``), so finding them costs one read however old they are.
2. obsmem's preamble and one system message per observation chunk.
3. The volatile sections: other conversations, current task, suggested response, extracted
   values, working memory.
4. The continuation reminder (a user message), when there are observations.
5. The raw tail: the unobserved messages, as stored, without data parts.

The order is chosen for provider prompt caches: the instructions, the preamble and the
observation chunks form a prefix (:attr:`ContextWindow.prefix_text`) that stays byte-identical
across the steps of a turn (and across turns until the next observation or new instructions),
and the volatile parts come after it. Every message reaches the actor exactly once: either raw,
in the tail, or inside an observation — never both, and a tool call is never separated from its
result.

obsmem's own messages carry the marker ``metadata["obsmem"]`` and ids of their thread
(:func:`obsmem_message_id`); :func:`is_obsmem_message` recognises them (also after a trip through
a provider's wire format), and an application that saves what it sent has them dropped
(:func:`drop_obsmem_messages`): they are never stored, shown twice or observed.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from obsmem.om.cycle import CommitPolicy, Written, commit
from obsmem.om.receipts import Receipt, context_hash, forget_groups, message_digest, raw_ids_and_span, receipt_groups
from obsmem.om.sections import escape_thread_id, visible_sections
from obsmem.om.selection import plain_conversation
from obsmem.om.windows import ReadOnlyDict
from obsmem.om.text.dates import annotate_observations, gap_text, is_gap_line, optimize_for_context
from obsmem.om.text.format import split_on_boundaries
from obsmem.om.text.groups import lift_above_headings, render_for_context
from obsmem.om.text.quote import defuse, defuse_lines
from obsmem.om.text.own import (
    CONTINUATION,
    MARKER_KEY,
    OTHER_CONVERSATIONS,
    PREAMBLE,
    drop_obsmem_messages,
    is_obsmem_message,
    strip_system_reminders,
)
from obsmem.storage.contract import ObservationRecord, Store
from obsmem.tokens import TokenCounter
from obsmem.types import DataPart, Message, TextPart, Thread, ToolCallPart

__all__ = [
    "CONTINUATION",
    "CONTINUATION_ID",
    "PREAMBLE",
    "ContextWindow",
    "build_context",
    "drop_obsmem_messages",
    "forget_rendered",
    "hints_superseded",
    "rendered_erasures",
    "is_obsmem_message",
    "latest_instructions",
    "load_instructions",
    "model_visible",
    "obsmem_message_id",
    "other_conversations_block",
    "observation_system_messages",
    "remember_instructions",
]

CONTINUATION_ID = "om-continuation"
"""The continuation reminder's id in a context without a thread; with one, see :func:`obsmem_message_id`."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """The messages for one model call, plus what they are made of.

    ``messages`` is the whole context, in order: ``instructions`` (the application's system
    messages), ``system_messages`` (obsmem's), the continuation reminder when there are
    observations, then ``raw_messages`` (with a gap reminder before a late user message when
    temporal markers are on).

    The stored messages in it, and obsmem's preamble and observation messages, may be shared
    with later contexts (:mod:`obsmem.om.windows`): they are read-only, their ``metadata`` and
    tool data included (``TypeError`` on a change); change a copy (``message.model_copy(deep=True)``).
    """

    messages: list[Message]
    system_messages: list[Message] = field(default_factory=list)
    raw_messages: list[Message] = field(default_factory=list)
    has_observations: bool = False
    instructions: list[Message] = field(default_factory=list)
    #: How many of the oldest raw messages were left out because memory work fell behind (the
    #: turn stopped waiting at ``max_turn_wait``); they stay pending and are observed later.
    trimmed: int = 0
    #: What this context was made of (:mod:`obsmem.om.receipts`); None only for a context built
    #: by hand.
    receipt: Receipt | None = None

    @property
    def prefix_text(self) -> str:
        """The cacheable prefix (the application's instructions, obsmem's instructions and the
        observation chunks), for cache-stability checks."""
        stable = [m for m in self.system_messages if not m.metadata.get("obsmem_volatile")]
        return "\n\n".join(m.text for m in [*self.instructions, *stable])


def obsmem_message_id(key: str, thread_id: str | None) -> str:
    """The id of obsmem's context message ``key`` in ``thread_id``'s contexts.

    Ids are per thread, so a context saved back into its own thread never collides with another
    thread's (and :func:`drop_obsmem_messages` keeps it from being stored at all).
    """
    return f"om-{key}" if thread_id is None else f"om-{key}:{thread_id}"


def _system(text: str, key: str, thread_id: str | None, *, volatile: bool = False) -> Message:
    if volatile:
        return _volatile(text, key, thread_id)
    return _new_system(text, key, thread_id, volatile=False)


def _new_system(text: str, key: str, thread_id: str | None, *, volatile: bool) -> Message:
    metadata: dict[str, object] = {MARKER_KEY: key}
    if volatile:
        metadata["obsmem_volatile"] = True
    return Message(
        id=obsmem_message_id(key, thread_id), role="system", parts=(TextPart(text=text),), created_at=_EPOCH,
        metadata=metadata,
    )


_VOLATILE: OrderedDict[tuple[str, str, str | None], Message] = OrderedDict()
_VOLATILE_MAX = 128
#: A longer section is built afresh each time (the kept ones stay a few megabytes at most).
_VOLATILE_MAX_CHARS = 32_000


def _volatile(text: str, key: str, thread_id: str | None) -> Message:
    """A volatile section's message (the current task, the suggested response, working memory,
    other conversations, an extractor's value): the one last built for the same text, shared
    read-only as the observation messages are (:func:`_prefix`), since most steps show the same
    sections again; its token count and digest are then lookups, not a tokenizer run per step.
    The newest :data:`_VOLATILE_MAX` are kept, none longer than :data:`_VOLATILE_MAX_CHARS`."""
    if len(text) > _VOLATILE_MAX_CHARS:
        return _new_system(text, key, thread_id, volatile=True)
    cache_key = (text, key, thread_id)
    kept = _VOLATILE.get(cache_key)
    if kept is None:
        kept = _new_system(text, key, thread_id, volatile=True)
        kept.__dict__["metadata"] = ReadOnlyDict(kept.metadata)
        _VOLATILE[cache_key] = kept
        _trim(_VOLATILE, _VOLATILE_MAX)
    else:
        _touch(_VOLATILE, cache_key)
    return kept


def _touch(cache: OrderedDict[Any, Any], key: object) -> None:
    """``key`` made the newest of ``cache``, unless another thread (several ``SyncMemory`` in one
    process, each on its own loop) evicted or cleared it since it was looked up: then it is gone,
    and that is all (the caller has the value)."""
    try:
        cache.move_to_end(key)
    except KeyError:
        pass


def _trim(cache: OrderedDict[Any, Any], most: int) -> None:
    """The oldest entries of ``cache`` dropped down to ``most`` (another thread may trim or clear
    it at the same time: an empty cache ends the loop)."""
    while len(cache) > most:
        try:
            cache.popitem(last=False)
        except KeyError:
            return


_OTHER_PART_CHARS = 500


def other_conversations_block(others: Sequence[tuple[str, Sequence[Message]]]) -> str | None:
    blocks: list[str] = []
    for thread_id, messages in others:
        lines = []
        for message in drop_obsmem_messages(messages):
            texts = (p.text[:_OTHER_PART_CHARS] for p in message.parts if isinstance(p, TextPart))
            # Quoted data (obsmem.om.text.quote): one line per message, no tag, no priority
            # marker of its own: it cannot close the block, open another or pose as a line.
            text = " ".join(defuse(" ".join(map(strip_system_reminders, texts))).split())
            if text:
                lines.append(f"{message.role}: {text}")
        if lines:
            opening = f'<other-conversation id="{escape_thread_id(thread_id)}">'  # an id is data, never a tag
            blocks.append(opening + "\n" + "\n".join(lines) + "\n</other-conversation>")
    if not blocks:
        return None
    return "\n".join([OTHER_CONVERSATIONS, "START_OTHER_CONVERSATIONS_BLOCK", *blocks, "END_OTHER_CONVERSATIONS_BLOCK"])


_WAITS_FOR = re.compile(r"\bwaiting for (?:the )?(?P<who>assistant|user)\b", re.IGNORECASE)


def hints_superseded(current_task: str | None, tail: Sequence[Message]) -> bool:
    """Whether the raw tail already holds what the current-task says it is waiting for.

    Hints are written for the moment of the last observed message, and the unobserved messages
    shown after them are newer. A current-task that waits for the assistant ("…; waiting for the
    assistant to do it") is history once the tail holds an assistant reply (text, no tool call);
    one that waits for the user, once the tail holds a user message. Both hints are then left
    out: they would ask for what the tail shows done. The next observation writes fresh ones.
    ``tail`` is the conversation only (obsmem's own messages are not in it).
    """
    match = _WAITS_FOR.search(current_task or "")
    if match is None:
        return False
    if match["who"].lower() == "assistant":
        return any(
            m.role == "assistant" and m.text.strip() and not any(isinstance(p, ToolCallPart) for p in m.parts)
            for m in tail
        )
    return any(m.role == "user" and m.text.strip() for m in tail)


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
    tail: Sequence[Message] = (),
) -> list[Message]:
    """obsmem's system messages: preamble, one message per observation chunk, then volatile sections.

    In resource scope, ``shared`` decides whether other threads' sections and unobserved
    messages are shown; by default a thread sees only its own sections.

    ``recall_instructions`` (retrieval mode) are appended to the preamble, and observation
    groups are shown as ``## Group `<id>` `` headings; both depend only on the config and the
    stored text, so the prefix stays byte-stable. With ``instructions_without_observations``
    the instructions are sent even before anything was observed (resource-scope recall, so
    the actor can reach other conversations from the first message).

    ``tail`` is the conversation shown after these messages: the continuation hints are left
    out when it already holds what they wait for (:func:`hints_superseded`).
    """
    visible = ""
    if record is not None:
        visible = record.active_observations
        if record.scope == "resource":
            visible = visible_sections(visible, thread_id, shared=shared)
    prefix = _prefix(visible, now, recall_instructions, thread_id)
    messages: list[Message] = []
    if not prefix and recall_instructions and instructions_without_observations:
        messages.append(_system(recall_instructions, "recall-instructions", thread_id))
    if prefix:
        messages.extend(prefix)
        # Other conversations change with every message there, so they come after the stable
        # observation prefix, with the other volatile sections.
        others = other_conversations_block(other_conversations) if shared else None
        if others:
            messages.append(_system(others, "other-conversations", thread_id, volatile=True))
        state = record.threads.get(thread_id) if record is not None and thread_id else None
        if include_hints and state is not None and not hints_superseded(state.current_task, tail):
            messages.extend(_hint_messages(state.current_task, state.suggested_response, thread_id))
        for slug, value in sorted((extracted or {}).items()):
            text = f"<{slug}>\n{defuse_lines(str(value))}\n</{slug}>"  # a model's words: data
            messages.append(_system(text, f"extracted-{slug}", thread_id, volatile=True))
    if working_memory and working_memory.strip():
        text = f"<working-memory>\n{defuse_lines(working_memory.strip())}\n</working-memory>"
        messages.append(_system(text, "working-memory", thread_id, volatile=True))
    return messages


_PREFIXES: OrderedDict[tuple[str, date, str | None, str | None], tuple[Message, ...]] = OrderedDict()
_PREFIXES_MAX = 64


def _prefix(visible: str, now: datetime, recall_instructions: str | None, thread_id: str | None) -> list[Message]:
    """The preamble and observation messages for the observations ``visible`` (none when there
    are none): the ones last built from the same arguments, shared, since they depend only on
    them (and the day of ``now``), every step shows them, and the stored observations change
    only when memory works (the newest :data:`_PREFIXES_MAX` are kept). Shared read-only, as a
    context's stored messages are (their metadata is a read-only dict): their token counts and
    digests are lookups."""
    key = (visible, now.date(), recall_instructions, thread_id)
    kept = _PREFIXES.get(key)
    if kept is None:
        chunks = split_on_boundaries(visible) if visible.strip() else []
        if recall_instructions:  # group tags become headings; empty groups (and chunks) vanish
            chunks = [shown for shown in (render_for_context(c) for c in chunks) if shown.strip()]
        kept = tuple(_observation_messages(chunks, now, recall_instructions, thread_id)) if chunks else ()
        for message in kept:
            message.__dict__["metadata"] = ReadOnlyDict(message.metadata)  # shared by every context
            message_digest(message)  # kept on the message: hashed once
        _PREFIXES[key] = kept
        _trim(_PREFIXES, _PREFIXES_MAX)
    else:
        _touch(_PREFIXES, key)
    return list(kept)


_CONTINUATIONS: OrderedDict[str | None, Message] = OrderedDict()
_CONTINUATIONS_MAX = 256


def _continuation(thread_id: str | None) -> Message:
    """The continuation reminder of ``thread_id``'s contexts: the same text every step, so one
    message per thread is kept (the newest :data:`_CONTINUATIONS_MAX`) and shared read-only, as
    the observation messages are; its digest and token count are computed once, not per step."""
    kept = _CONTINUATIONS.get(thread_id)
    if kept is None:
        kept = Message(
            id=obsmem_message_id("continuation", thread_id),
            role="user",
            parts=(TextPart(text=CONTINUATION),),
            created_at=_EPOCH,
            metadata={MARKER_KEY: "continuation"},
        )
        kept.__dict__["metadata"] = ReadOnlyDict(kept.metadata)
        message_digest(kept)
        _CONTINUATIONS[thread_id] = kept
        _trim(_CONTINUATIONS, _CONTINUATIONS_MAX)
    else:
        _touch(_CONTINUATIONS, thread_id)
    return kept


_ERASURES = 0


def rendered_erasures() -> int:
    """How many times :func:`forget_rendered` ran in this process: a context read before an
    erase and built after it (a turn in flight) kept what the erase removed; its builder, seeing
    this change meanwhile, drops it again (:meth:`~obsmem.memory.Memory.context_from`)."""
    return _ERASURES


def forget_rendered(*, erase: bool = True) -> None:
    """Drop every kept rendering of observations (:func:`_prefix`, :func:`_volatile`,
    :func:`_rendered`): after a delete, no text of the deleted observations (nor of a deleted
    working memory) stays in this process's memory. ``erase=False``: not an erase (a builder
    dropping what it kept from a read an erase overtook), so not counted by
    :func:`rendered_erasures` (other builders in flight need not drop theirs again)."""
    global _ERASURES
    if erase:
        _ERASURES += 1
    _PREFIXES.clear()
    _VOLATILE.clear()
    _RENDERED.clear()
    forget_groups()


def _observation_messages(
    chunks: Sequence[str], now: datetime, recall_instructions: str | None, thread_id: str | None
) -> list[Message]:
    """The cacheable prefix: the preamble, then one message per observation chunk."""
    preamble = f"{PREAMBLE}\n\n{recall_instructions}" if recall_instructions else PREAMBLE
    messages = [_system(preamble, "preamble", thread_id)]
    for index, chunk in enumerate(chunks):
        text = _rendered(chunk, now, bool(recall_instructions))
        opener = "<observations>\n" if index == 0 else ""
        closer = "\n</observations>" if index == len(chunks) - 1 else ""
        messages.append(_system(f"{opener}{text}{closer}", f"observations-{index}", thread_id))
    return messages


_RENDERED: OrderedDict[tuple[str, date, bool], str] = OrderedDict()
_RENDERED_MAX = 256


def _rendered(chunk: str, now: datetime, lift: bool) -> str:
    """One observation chunk as the actor sees it. The rendering depends only on the chunk, the
    day of ``now`` (:func:`annotate_observations` reads nothing else of it) and ``lift``, so it
    is kept (the newest :data:`_RENDERED_MAX`): the stored observations change only when memory
    works, while every step renders them."""
    key = (chunk, now.date(), lift)
    text = _RENDERED.get(key)
    if text is not None:
        _touch(_RENDERED, key)
        return text
    text = annotate_observations(optimize_for_context(chunk), now)
    if lift:
        text = lift_above_headings(text, is_gap_line)
    _RENDERED[key] = text
    _trim(_RENDERED, _RENDERED_MAX)
    return text


def _hint_messages(
    current_task: str | None, suggested_response: str | None, thread_id: str | None
) -> list[Message]:
    messages: list[Message] = []
    if current_task:
        text = f"<current-task>\n{current_task}\n</current-task>"
        messages.append(_system(text, "current-task", thread_id, volatile=True))
    if suggested_response:
        text = f"<suggested-response>\n{suggested_response}\n</suggested-response>"
        messages.append(_system(text, "suggested-response", thread_id, volatile=True))
    return messages


def model_visible(message: Message) -> Message | None:
    """The message without data parts (markers); None when nothing is left for a model."""
    for part in message.parts:
        if part.type == "data":  # not isinstance: read for every message of every context
            break
    else:
        return message  # the common case, checked without building a tuple
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
        metadata={MARKER_KEY: "temporal-gap", "precedes": current.id},
    )


# -- the application's instructions ------------------------------------------------------------


def latest_instructions(messages: Sequence[Message]) -> list[Message]:
    """The application's system messages of one call: every system message in ``messages`` that
    is not obsmem's, in order, the newest version of each id.

    Used on what one save stored (:func:`remember_instructions`), and by :func:`build_context`
    on the unobserved messages of a thread whose instructions were never recorded: there the
    last contiguous run of system messages stands in for the last call that passed any.
    """
    latest: dict[str, Message] = {}
    for message in drop_obsmem_messages(messages):
        if message.role == "system":
            latest.pop(message.id, None)
            latest[message.id] = message
    return list(latest.values())


def _last_system_run(kept: Sequence[Message]) -> list[Message]:
    """The newest run of the application's system messages among ``kept`` (already without
    obsmem's own: :func:`drop_obsmem_messages`)."""
    run: list[Message] = []
    ended = False
    for message in kept:
        if message.role == "system":
            if ended:
                run, ended = [], False
            run.append(message)
        elif run and not message.is_marker_only:
            ended = True
    return latest_instructions(run)


_INSTRUCTIONS = "instructions"


def _recorded(thread: Thread) -> dict[str, Any] | None:
    own = thread.metadata.get(MARKER_KEY)
    recorded = own.get(_INSTRUCTIONS) if isinstance(own, dict) else None
    return recorded if isinstance(recorded, dict) else None


async def remember_instructions(
    store: Store, thread: Thread, saved: Sequence[Message], *, policy: CommitPolicy | None = None
) -> Thread:
    """Record on ``thread`` the application's instructions among ``saved`` (what one call stored).

    When ``saved`` holds system messages of the application, their ids (and the highest seq
    in ``saved``: the call's newest message) go to ``thread.metadata["obsmem"]["instructions"]``,
    compare-and-set: a concurrent older call (lower seq) never overwrites a newer one's. Returns the
    thread as stored (unchanged, without a write, when ``saved`` holds no system message or
    the same ones are recorded already, or the recorded ones are still stored with the same
    role and parts: an application that sends its system prompt anew on every turn, with new
    ids, costs a read, not a write).
    """
    instructions = latest_instructions(saved)
    if not instructions:
        return thread
    ids = [m.id for m in instructions]
    # The call's newest message, not its instructions' newest: a stored prompt sent again (an app
    # switching back to it, or a framework sending all its system messages) is older than the
    # recorded ones but is this call's; only a call older than the recording one is refused.
    seq = max(m.seq or 0 for m in saved)

    async def read() -> Thread | None:
        return await store.get_thread(thread.id)

    async def compose(current: Thread) -> Thread | None:
        recorded = _recorded(current)
        if recorded is not None:
            recorded_seq = recorded.get("seq")
            if recorded.get("ids") == ids or (isinstance(recorded_seq, int) and recorded_seq > seq):
                return None
            if await _same_as_recorded(store, current, recorded, instructions):
                return None
        own = current.metadata.get(MARKER_KEY)
        merged = {**(own if isinstance(own, dict) else {}), _INSTRUCTIONS: {"ids": ids, "seq": seq}}
        return current.model_copy(update={"metadata": {**current.metadata, MARKER_KEY: merged}})

    async def write(current: Thread, proposed: Thread) -> Written[Thread]:
        stored = await store.update_thread(proposed, expected_version=current.version)
        if stored is not None:
            return Written("applied", stored)
        return Written("stale", await store.get_thread(thread.id))

    done = await commit(read, compose, write, policy=policy or CommitPolicy(), first=thread)
    return done.current if done.current is not None else thread


async def _same_as_recorded(
    store: Store, thread: Thread, recorded: dict[str, Any], instructions: Sequence[Message]
) -> bool:
    """Whether the instructions recorded on ``thread`` are all still stored, with the role and
    parts of ``instructions``, in the same order (then recording these changes nothing shown)."""
    ids = [i for i in recorded.get("ids", []) if isinstance(i, str)]
    if len(ids) != len(instructions):
        return False
    stored = {m.id: m for m in await store.get_messages(ids) if m.role == "system" and m.thread_id == thread.id}
    if len(stored) != len(ids):
        return False
    return [message_digest(stored[i]) for i in ids] == [message_digest(m) for m in instructions]


async def load_instructions(store: Store, thread: Thread) -> list[Message] | None:
    """The application's instructions recorded on ``thread``, as stored now; None when the
    thread has none recorded (then :func:`build_context` looks among the unobserved messages)."""
    recorded = _recorded(thread)
    if recorded is None:
        return None
    ids = [i for i in recorded.get("ids", []) if isinstance(i, str)]
    found = await store.get_messages(ids) if ids else []
    by_id = {m.id: m for m in found if m.role == "system" and m.thread_id in (None, thread.id)}
    return [by_id[i] for i in ids if i in by_id]


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
    instructions: Sequence[Message] | None = None,
    counter: TokenCounter | None = None,
) -> ContextWindow:
    """Assemble the context for one model call from a record and the unobserved messages.

    ``instructions`` are the application's system messages (:func:`load_instructions`); None
    means none were recorded, and the last run of system messages among ``unobserved`` is used.
    Neither system messages nor obsmem's own messages (saved back by an application) appear in
    the raw tail. The context's receipt counts each section's tokens with ``counter`` (none
    without one).
    """
    # Usually the step's window, already without obsmem's own messages: checked, not dropped again.
    plain = plain_conversation(unobserved)
    kept = list(unobserved) if plain else drop_obsmem_messages(unobserved)
    conversation = [
        visible for message in kept if message.role != "system" and (visible := model_visible(message)) is not None
    ]
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
        tail=conversation,
    )
    if instructions is not None:
        leading = list(instructions)
    else:  # a plain window holds no system message at all
        leading = [] if plain else _last_system_run(kept)
    leading = [shown for shown in map(model_visible, leading) if shown is not None]
    raw: list[Message] = []
    previous: Message | None = None
    for message in conversation:
        if temporal_markers and previous is not None and message.role == "user":
            reminder = _gap_reminder(previous, message)
            if reminder is not None:
                raw.append(reminder)
        raw.append(message)
        previous = message
    has_observations = any(m.metadata.get(MARKER_KEY) == "preamble" for m in system)
    messages = [*leading, *system]
    continuation: list[Message] = []
    if has_observations:
        continuation.append(_continuation(thread_id))
        messages.extend(continuation)
    messages.extend(raw)
    shown_ids, span = raw_ids_and_span(raw)
    receipt = Receipt(
        thread_id=thread_id,
        context_hash=context_hash(messages),
        record_id=record.id if record is not None and has_observations else None,
        generation=record.generation if record is not None and has_observations else None,
        groups=receipt_groups(record, thread_id, shared=shared) if has_observations else (),
        raw_message_ids=shown_ids,
        raw_span=span,
        section_tokens=_section_tokens(counter, leading, system, continuation, raw),
        created_at=now,
    )
    return ContextWindow(
        messages=messages, system_messages=system, raw_messages=raw, has_observations=has_observations,
        instructions=leading, receipt=receipt,
    )


def _section_tokens(
    counter: TokenCounter | None, instructions: Sequence[Message], system: Sequence[Message],
    continuation: Sequence[Message], tail: Sequence[Message],
) -> dict[str, int]:
    """Tokens per section of a context: the application's instructions, the observations
    (obsmem's stable system messages), the volatile sections, the continuation and the raw tail."""
    if counter is None:
        return {}
    stable = [m for m in system if not m.metadata.get("obsmem_volatile")]
    volatile = [m for m in system if m.metadata.get("obsmem_volatile")]
    def count(messages: Sequence[Message]) -> int:  # per message; the conversation's own overhead is not a section's
        return counter.count_each(messages)

    return {
        "instructions": count(instructions),
        "observations": count(stable),
        "sections": count(volatile),
        "continuation": count(continuation),
        "raw": count(tail),
    }

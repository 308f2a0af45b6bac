"""Which messages an observation cycle takes: pure rules, tested with tables.

An observation covers a *prefix* of the unobserved messages, because the cursor is a position:
everything up to it is observed, everything after it is raw. Three rules decide where that
prefix may end:

* **A call stays with its result.** A prefix never ends between a tool call and its result (the
  actor would see a result without its call, or a call without its result, which providers
  reject), and never takes a call whose result may still come — wherever that call is in the
  window, and whichever of the calls of a parallel step it is. A call whose result can no
  longer come (a message with text, a file or a new call followed it) constrains nothing.
* **What the actor has not seen stays raw.** The input of the current step — the messages saved
  at this boundary, and at a turn's start the newest user message and everything after it — is
  never observed (or activated) before the actor has been shown it verbatim (:class:`Unseen`).
* **A recent tail stays raw**: about ``retention_floor`` tokens (:func:`select_observation_prefix`).

A prefix is then observed in observer requests of at most ``max_tokens_per_batch`` message
tokens (:func:`observer_requests`): whole messages where they fit, and a single larger message in
pieces (:func:`split_message`), so no observer request is ever one huge message.

:func:`check_input_sequence` is the matching rule on input: a new message may not put a result
before its call, or anything between a call and its result.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from obsmem.errors import InvalidInputError
from obsmem.om.text.own import conversation_messages, plain_conversation
from obsmem.tokens import TokenCounter
from obsmem.types import FilePart, Message, Part, TextPart, ToolResultPart

__all__ = [
    "MAX_OTHER_THREADS",
    "NOTHING_UNSEEN",
    "OTHER_THREAD_SHARE",
    "OtherPrefix",
    "UNANSWERED",
    "UNANSWERED_KEY",
    "ANSWERED_LATE_KEY",
    "Unseen",
    "answer_late",
    "choose_other_threads",
    "check_input_sequence",
    "close_waiting_calls",
    "is_boundary",
    "observable_messages",
    "observation_batches",
    "observer_requests",
    "pending_tool_call_ids",
    "plain_conversation",
    "safe_cursor_seqs",
    "select_observation_prefix",
    "split_message",
    "valid_cuts",
]


def observable_messages(messages: Sequence[Message]) -> list[Message]:
    """Messages that carry conversation: system messages, marker-only messages and obsmem's own
    context messages are skipped, and user text loses its ``<system-reminder>`` blocks."""
    if plain_conversation(messages):  # the common case: nothing of obsmem's to drop or cut
        return [m for m in messages if not m.is_marker_only]
    return [m for m in conversation_messages(messages) if m.role != "system" and not m.is_marker_only]


def is_boundary(message: Message) -> bool:
    """Whether every earlier call must be answered before ``message`` (what providers enforce):
    it says something, shows something, or calls something. A tool message's files are its
    results' (a screenshot, a chart a tool drew, stored beside the result): they show nothing of
    their own, and the step's other results may still follow."""
    tool = message.role == "tool"
    for part in message.parts:  # by ``type``: read for messages of every window
        if part.type in _BOUNDARY_PARTS and not (tool and part.type == "file"):
            return True
    return False


_BOUNDARY_PARTS = frozenset({"text", "file", "tool-call"})
_TOOL_PARTS = frozenset({"tool-call", "tool-result"})


def _any_tool_part(messages: Sequence[Message]) -> bool:
    """Whether any of ``messages`` holds a tool call or a tool result (by each part's ``type``,
    not isinstance: read for every message of every window at every boundary)."""
    tool = _TOOL_PARTS
    for message in messages:
        for part in message.parts:
            if part.type in tool:
                return True
    return False


def pending_tool_call_ids(messages: Sequence[Message]) -> set[str]:
    """Ids of tool calls whose result may still come: no result for them in ``messages``, and
    nothing after their message but other results (the model is waiting for its tools).

    Every call of a parallel step counts, not only those of the newest message: with calls
    ``a`` and ``b`` and only ``a``'s result saved, ``b`` is pending. A call followed by a message
    with text, a file or another call is an orphan (its result can no longer come in a valid
    place); it is not pending.
    """
    if not _any_tool_part(messages):
        return set()  # the common window: no call, no result
    answered = {r.tool_call_id for m in messages for r in m.tool_results}
    pending: set[str] = set()
    for message in reversed(messages):
        pending |= {c.tool_call_id for c in message.tool_calls if c.tool_call_id not in answered}
        if is_boundary(message):
            break  # calls before this message were due before it
    return pending


def valid_cuts(messages: Sequence[Message]) -> list[int]:
    """Every ``i`` in 1..n such that observing ``messages[:i]`` splits no call from its result
    and takes no pending call (see :func:`pending_tool_call_ids`)."""
    n = len(messages)
    if not _any_tool_part(messages):
        return list(range(1, n + 1))  # no call and no result: every cut splits nothing
    call_at: dict[str, int] = {}
    result_at: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            call_at.setdefault(call.tool_call_id, index)
        for result in message.tool_results:
            result_at[result.tool_call_id] = index
    pending = pending_tool_call_ids(messages)
    # A cut i is blocked when some pair straddles it (call index < i <= result index), and by
    # a pending call from its message to the end.
    blocked = [0] * (n + 2)
    for call_id, start in call_at.items():
        end = result_at.get(call_id)
        if end is None:
            if call_id in pending:
                blocked[start + 1] += 1
                blocked[n + 1] -= 1
            continue
        if end > start:
            blocked[start + 1] += 1
            blocked[end + 1] -= 1
    # A result whose call is outside the list (already observed) does not constrain anything.
    cuts: list[int] = []
    running = 0
    for i in range(1, n + 1):
        running += blocked[i]
        if running == 0:
            cuts.append(i)
    return cuts


@dataclass(frozen=True, slots=True)
class Unseen:
    """What the actor has not been shown yet at this boundary; it stays raw until a later one.

    ``from_seq``: the first message saved at this boundary (the turn's input, or a step's tool
    results), if known. ``newest_user``: at a turn's start, the newest user message — whoever
    saved it — and everything after it. The default protects nothing (a manual observe).
    """

    from_seq: int | None = None
    newest_user: bool = False

    def start(self, messages: Sequence[Message]) -> int:
        """The index in ``messages`` (seq order) of the first message that must stay raw;
        ``len(messages)`` when none must."""
        start = len(messages)
        if self.from_seq is not None:
            start = next((i for i, m in enumerate(messages) if (m.seq or 0) >= self.from_seq), start)
        if self.newest_user:
            for i in range(len(messages) - 1, -1, -1):
                if messages[i].role == "user" and any(isinstance(p, TextPart | FilePart) for p in messages[i].parts):
                    start = min(start, i)
                    break
        return start

    def cuts(self, messages: Sequence[Message]) -> list[int]:
        """The :func:`valid_cuts` of ``messages`` that leave everything unseen raw."""
        limit = self.start(messages)
        return [c for c in valid_cuts(messages) if c <= limit]

    @staticmethod
    def of(fresh: Sequence[Message], *, turn_start: bool) -> Unseen:
        """The unseen input of a boundary that saved ``fresh`` (stored messages, with seq)."""
        seqs = [m.seq for m in fresh if m.seq is not None]
        return Unseen(from_seq=min(seqs) if seqs else None, newest_user=turn_start)


#: Protects nothing: what a manual observe, a worker and reflection use.
NOTHING_UNSEEN = Unseen()


def safe_cursor_seqs(messages: Sequence[Message], cuts: Sequence[int]) -> frozenset[int]:
    """The seqs a cursor may move to: the last message of each allowed prefix ``messages[:cut]``."""
    return frozenset(messages[c - 1].seq or 0 for c in cuts if c > 0)


def select_observation_prefix(
    messages: Sequence[Message],
    token_counts: Sequence[int],
    *,
    retention_floor: int,
    threshold: int,
    force: bool = False,
    cuts: Sequence[int] | None = None,
) -> int:
    """How many leading messages to observe.

    Prefer the longest prefix that still leaves at least ``retention_floor`` tokens raw. If that
    would leave the window at or above ``threshold`` (one huge message, say), take the shortest
    prefix that brings it under; if none can, take everything that may be taken. ``force``
    (manual observe) takes everything that may be taken. ``cuts`` are the prefixes that may be
    taken (default: :func:`valid_cuts`; :meth:`Unseen.cuts` also keeps the unseen input raw).
    """
    cuts = valid_cuts(messages) if cuts is None else list(cuts)
    if not cuts:
        return 0
    if force:
        return cuts[-1]
    total = sum(token_counts)
    prefix_sums = [0]
    for count in token_counts:
        prefix_sums.append(prefix_sums[-1] + count)

    def tail(i: int) -> int:
        return total - prefix_sums[i]

    keeping_floor = [i for i in cuts if tail(i) >= retention_floor]
    if keeping_floor and tail(keeping_floor[-1]) < threshold:
        return keeping_floor[-1]
    under_threshold = [i for i in cuts if tail(i) < threshold]
    if under_threshold:
        return under_threshold[0]
    return cuts[-1]


def observation_batches(
    cuts: Sequence[int], token_counts: Sequence[int], end: int, max_tokens: int
) -> list[tuple[int, int]]:
    """``messages[:end]`` as consecutive ``(start, stop)`` batches, one observer call each.

    Batches end only at valid ``cuts`` (a tool call stays with its result) and hold at most
    ``max_tokens`` tokens, except where the run between two cuts is larger on its own: that
    run is one batch. ``end`` must be one of ``cuts``.
    """
    prefix_sums = [0]
    for count in token_counts[:end]:
        prefix_sums.append(prefix_sums[-1] + count)
    stops = sorted({c for c in cuts if 0 < c <= end} | {end})
    batches: list[tuple[int, int]] = []
    start, at = 0, 0  # stops[at] is the first stop after start
    # One pass over the stops (counts are never negative: the stops that fit after a start are
    # the first ones after it): the furthest that fits, else the next one alone.
    while start < end:
        last = at
        while last + 1 < len(stops) and prefix_sums[stops[last + 1]] - prefix_sums[start] <= max_tokens:
            last += 1
        stop = stops[last]
        batches.append((start, stop))
        start, at = stop, last + 1
    return batches


# --------------------------------------------------------------------------------------------
# Resource scope: which other threads of the resource join a thread's observation cycle
# --------------------------------------------------------------------------------------------

#: Without sharing, another thread joins a cycle only with at least this share of the message
#: threshold unobserved (it would be due soon on its own; one cycle then does both).
OTHER_THREAD_SHARE = 0.5
#: At most this many other threads join one cycle (each costs at least one observer request).
MAX_OTHER_THREADS = 4


@dataclass(frozen=True, slots=True)
class OtherPrefix:
    """The messages of another thread of the resource that one cycle observes, with their tokens."""

    thread_id: str
    messages: list[Message]
    counts: list[int]

    @property
    def tokens(self) -> int:
        return sum(self.counts)


def choose_other_threads(
    windows: dict[str, list[Message]],
    counts: dict[str, list[int]],
    *,
    minimum: int,
    max_tokens: int,
    max_threads: int = MAX_OTHER_THREADS,
) -> list[OtherPrefix]:
    """The other threads (``windows``: each one's unobserved messages, ``counts`` their tokens)
    that join a cycle, and the prefix of each it observes.

    Each thread offers its safe prefix only: never a call whose result may still come, nor its
    newest user message and what follows it (that thread's actor may not have seen it yet). A
    thread joins when that prefix holds at least ``minimum`` tokens. The largest threads come
    first (as the original picks them), at most ``max_threads`` of them and ``max_tokens``
    message tokens in all (``observation.max_tokens_per_batch``: a thread too large for the room
    left joins with the longest prefix that fits). The result is ordered by oldest message.
    """
    offers: list[tuple[int, str, list[int]]] = []
    protect = Unseen(newest_user=True)
    for thread_id, messages in windows.items():
        cuts = protect.cuts(messages)
        if not cuts:
            continue
        tokens = sum(counts[thread_id][: cuts[-1]])
        if tokens > 0 and tokens >= minimum:
            offers.append((tokens, thread_id, cuts))
    offers.sort(key=lambda offer: (-offer[0], offer[1]))
    chosen: list[OtherPrefix] = []
    room = max_tokens
    for _, thread_id, cuts in offers:
        if len(chosen) >= max_threads or room <= 0:
            break
        thread_counts = counts[thread_id]
        before = [0, *accumulate(thread_counts)]  # tokens before each index: one pass, not one per cut
        fitting = [c for c in cuts if before[c] <= room]
        if not fitting:
            continue
        cut = fitting[-1]
        prefix = OtherPrefix(thread_id, list(windows[thread_id][:cut]), list(thread_counts[:cut]))
        chosen.append(prefix)
        room -= prefix.tokens
    return sorted(chosen, key=lambda prefix: (prefix.messages[0].seq or 0, prefix.thread_id))


# --------------------------------------------------------------------------------------------
# Observer requests: whole messages up to the limit, a larger message in pieces
# --------------------------------------------------------------------------------------------

#: Where a piece of text prefers to end: the last line break, else the last space, in the
#: second half of the piece (so a piece is never much shorter than its budget).
_BREAKS = ("\n", " ")


def observer_requests(
    messages: Sequence[Message], token_counts: Sequence[int], max_tokens: int, counter: TokenCounter
) -> list[list[Message]]:
    """``messages`` as the message lists of consecutive observer requests.

    Whole messages are grouped as :func:`observation_batches` groups them (a run between two
    valid cuts stays together); a message larger than ``max_tokens`` on its own is cut out of
    its batch and sent in pieces of at most ``max_tokens`` tokens each (:func:`split_message`),
    the first with the messages of the calls it answers (and what lies between them and it), so a
    call and its result meet in one request even when the result alone is past the limit.
    """
    if not messages:
        return []
    if sum(token_counts) <= max_tokens:
        return [list(messages)]
    requests: list[list[Message]] = []
    batches = observation_batches(valid_cuts(messages), token_counts, len(messages), max_tokens)
    for start, stop in batches:
        if sum(token_counts[start:stop]) <= max_tokens:
            requests.append(list(messages[start:stop]))
            continue
        run: list[Message] = []
        for message, tokens in zip(messages[start:stop], token_counts[start:stop], strict=True):
            if tokens <= max_tokens:
                run.append(message)
                continue
            pieces = split_message(message, max_tokens, counter)
            # The calls this message answers go with its first piece (past the limit by their
            # size): sent alone, a call read "no result yet" and its result had no call.
            answered = {r.tool_call_id for r in message.tool_results}
            calls_from = next(
                (i for i, m in enumerate(run) if any(c.tool_call_id in answered for c in m.tool_calls)), len(run)
            )
            if run[:calls_from]:
                requests.append(run[:calls_from])
            requests.append([*run[calls_from:], pieces[0]])
            requests.extend([piece] for piece in pieces[1:])
            run = []
        if run:
            requests.append(run)
    return requests


def split_message(message: Message, max_tokens: int, counter: TokenCounter) -> list[Message]:
    """``message`` as consecutive pieces of at most ``max_tokens`` tokens each, in order.

    Each piece is a copy of the message (same id, role, time and seq) holding a run of its
    parts; a text part larger than a piece is cut at a line break or a space where it can be.
    Joined in order, the pieces' text is the message's text. A single non-text part larger than
    the limit (an image, a tool result) cannot be cut and is a piece of its own.

    Token counting is linear in the text: each piece is counted about once, its length guessed
    from the characters per token of the pieces before it.
    """
    # A message's frame (role and separators) is counted once per piece; one token spare for rounding.
    frame = counter.count_message(message.model_copy(update={"parts": (TextPart(text=""),)})) + 1
    budget = max(1, max_tokens - frame)
    pieces: list[list[Part]] = [[]]
    room = budget
    chars_per_token = 3.0  # a low guess for text; learned from each piece counted
    for part in message.parts:
        if not isinstance(part, TextPart):
            cost = counter.count_part(part) + 1  # parts are rounded apart, the message once
            if cost > room and pieces[-1]:
                pieces.append([])
                room = budget
            pieces[-1].append(part)
            room -= cost
            continue
        text, pos = part.text, 0
        while pos < len(text):
            if room <= 0 and pieces[-1]:
                pieces.append([])
                room = budget
            end, tokens = _piece_end(text, pos, max(1, room), chars_per_token, counter)
            pieces[-1].append(TextPart(text=text[pos:end]))
            chars_per_token = max(0.5, (end - pos) / max(1, tokens))
            room = room - max(1, tokens) if end == len(text) else 0  # more of this text: a new piece
            pos = end
        if not text:
            pieces[-1].append(part)
    return [message.model_copy(update={"parts": tuple(parts)}) for parts in pieces if parts]


def _piece_end(text: str, pos: int, budget: int, chars_per_token: float, counter: TokenCounter) -> tuple[int, int]:
    """Where the piece of ``text`` starting at ``pos`` ends to hold at most ``budget`` tokens,
    and its token count."""
    length = max(1, int(budget * chars_per_token))
    while True:
        end = min(len(text), pos + length)
        if end < len(text):
            end = _soft_end(text, pos, end)
        tokens = counter.count_text(text[pos:end])
        if tokens <= budget or end - pos <= 1:
            return end, tokens
        length = max(1, min(end - pos - 1, int((end - pos) * budget / tokens * 0.95)))


def _soft_end(text: str, pos: int, end: int) -> int:
    """``end`` moved back to just after a line break or a space in the second half of the piece."""
    floor = pos + (end - pos) // 2
    for mark in _BREAKS:
        found = text.rfind(mark, floor, end)
        if found >= floor:
            return found + 1
    return end


# --------------------------------------------------------------------------------------------
# Input: what may follow what
# --------------------------------------------------------------------------------------------


def check_input_sequence(existing: Sequence[Message], new: Sequence[Message], *, argument: str = "messages") -> None:
    """Raise :class:`InvalidInputError` when saving ``new`` after ``existing`` (the thread's
    stored messages, oldest first; its tail from the last message with text, a file or a call
    is enough) would break the order providers require.

    Refused: a tool result whose call is not waiting for one (never made, or already answered),
    and a message with text, a file or a new call while calls are still waiting for results —
    send every result first (in one message or several), then the next message. A call of a
    non-assistant message is refused too. System and marker-only messages are not checked,
    and messages already in ``existing`` (re-sent by id) keep their place and are skipped.
    ``existing`` is taken as it is: an old call that was never answered does not block.
    ``argument`` names ``new`` in the error (``messages``, or ``responses`` for a turn's step).
    """
    # Only the messages from the newest boundary on decide what is waiting (a boundary ends
    # every earlier call); the rest is read only to word a refusal ("already answered").
    # Each message's observable view depends on that message alone (system messages, where
    # runs matter, are never observable), so the newest end is read backwards up to a boundary.
    newest_first: list[Message] = []
    for message in reversed(existing):
        newest_first.extend(observable_messages([message]))
        if newest_first and is_boundary(newest_first[-1]):
            break
    waiting, answered = _replay(newest_first[::-1])

    def already_answered(call_id: str) -> bool:
        return call_id in answered or call_id in _replay(observable_messages(existing))[1]

    known = {m.id for m in existing}
    for index, message in enumerate(new):
        if message.id in known or message.role == "system" or message.is_marker_only:
            continue
        where = f"{argument}[{index}] ({message.role}, id {message.id!r})"
        if message.tool_calls and message.role != "assistant":
            raise InvalidInputError(f"{where} carries a tool call; only assistant messages call tools.",
                                    argument=argument)  # fmt: skip
        own = {c.tool_call_id for c in message.tool_calls}
        for result in message.tool_results:
            if result.tool_call_id in own:
                continue
            if waiting.pop(result.tool_call_id, None) is None:
                state = "was already answered" if already_answered(result.tool_call_id) else "was never made"
                raise InvalidInputError(
                    f"{where} holds the result of tool call {result.tool_call_id!r}, but no call with that id "
                    f"is waiting for a result (it {state}). A result must follow its call, before any other "
                    "message.",
                    argument=argument,
                )
            answered.add(result.tool_call_id)
        if is_boundary(message) and waiting:
            raise InvalidInputError(
                f"{where} comes while tool calls {sorted(waiting)} still wait for their results. Save every "
                "result of a step's calls first (one tool message per result, or several results in one "
                "message), then the next message.",
                argument=argument,
            )
        if is_boundary(message):
            waiting = {call.tool_call_id: message.id for call in message.tool_calls}
        for result in message.tool_results:
            if result.tool_call_id in own:
                waiting.pop(result.tool_call_id, None)
                answered.add(result.tool_call_id)


#: The result obsmem gives a call that a new turn left without one (:func:`close_waiting_calls`).
UNANSWERED = (
    "No result: the conversation went on to a new user message before this tool call was answered "
    "(the tool may not have run)."
)


#: Metadata of a closing message (:func:`close_waiting_calls`): it is obsmem's; and the calls
#: whose real result came later and took their unanswered part's place (:func:`answer_late`).
UNANSWERED_KEY = "obsmem_unanswered"
ANSWERED_LATE_KEY = "obsmem_answered_late"


def close_waiting_calls(existing: Sequence[Message], new: Sequence[Message], *, keep: Collection[str] = ()) -> list[Message]:
    """``new`` (a turn's input) with a tool message put before each of its messages that says,
    shows or calls something (:func:`is_boundary`) while tool calls still wait for results,
    answering every one of them: one :class:`~obsmem.types.ToolResultPart` per call,
    ``is_error`` set and the text :data:`UNANSWERED`, in the calls' order. ``new`` as it is when
    no call waits at such a message.

    A user who leaves a tool call unanswered (an approval never given, a tool that raised and
    was not retried) and says something else starts a new turn: the call cannot be answered in a
    valid place any more, and a call without a result is refused by providers. The closing
    message keeps the thread a valid sequence (:func:`check_input_sequence` accepts what this
    returns, unless a result has no waiting call) and tells the model, and the observer, that no
    result came. The calls may be stored (``existing``) or in ``new`` (a framework re-sending a
    history whose call never got a result). Results given before such a message answer their
    calls as usual; messages already in ``existing`` (re-sent by id) and system and marker-only
    messages are skipped, as the check does.

    ``keep``: call ids never closed here (a turn's own calls, made by its model, which must answer
    them: :func:`check_input_sequence` refuses what comes before their results, as ever); the
    others are another turn's, left waiting in the thread (see ``Turn``).
    """
    newest_first: list[Message] = []
    for message in reversed(existing):
        newest_first.extend(observable_messages([message]))
        if newest_first and is_boundary(newest_first[-1]):
            break
    # The call ids still waiting, oldest first (a dict as an ordered set: an answer removes its
    # call at once, however many calls wait).
    waiting = dict.fromkeys(_replay(newest_first[::-1])[0])
    names = {c.tool_call_id: c.tool_name for m in newest_first for c in m.tool_calls}
    known = {m.id for m in existing}
    out: list[Message] = []
    for message in new:
        if message.id in known or message.role == "system" or message.is_marker_only:
            out.append(message)
            continue
        own = {c.tool_call_id for c in message.tool_calls}
        for result in message.tool_results:
            if result.tool_call_id not in own:
                waiting.pop(result.tool_call_id, None)
        if is_boundary(message):
            closed = [call_id for call_id in waiting if call_id not in keep]
            if closed:
                parts = tuple(
                    ToolResultPart(
                        tool_call_id=call_id, tool_name=names[call_id], result=UNANSWERED, is_error=True
                    )
                    for call_id in closed
                )
                out.append(Message(role="tool", parts=parts, metadata={UNANSWERED_KEY: True}))
            waiting = {call_id: None for call_id in waiting if call_id in keep}
        answered_here = {r.tool_call_id for r in message.tool_results if r.tool_call_id in own}
        waiting.update(dict.fromkeys(c.tool_call_id for c in message.tool_calls if c.tool_call_id not in answered_here))
        names.update({c.tool_call_id: c.tool_name for c in message.tool_calls})
        out.append(message)
    return out


def answer_late(
    existing: Sequence[Message], new: Sequence[Message], *, callers: Collection[str] = ()
) -> tuple[list[Message], list[Message]]:
    """The real results in ``new`` of calls a closing message in ``existing`` answered as
    unanswered (:func:`close_waiting_calls`: an approval given after the user went on), put in
    their place: returns ``new`` without them (a message left with nothing goes) and the closing
    messages with each such part replaced by the real result (to save again, by id, where they
    are). A result for a call answered that way already (the same message sent again) is
    dropped. The thread stays a valid sequence (each result right after its call) and keeps
    what the tool returned instead of "no result". The files that follow a result in its tool
    message (a screenshot, a chart: the result's, see :func:`is_boundary`) go with it.

    ``callers``: the ids of the messages that made the calls ``new`` answers, where known (a
    turn's own). A call id is answered by the newest closing message of the calls of one of them,
    else by the newest closing message of that id: a model server that numbers each response's
    calls from call_0 gives the calls of other turns of the thread, closed later, the same ids."""
    closings: dict[str, Message] = {}  # call id -> the closing message that answers it
    own: dict[str, Message] = {}  # the same, among the closing messages of ``callers``' calls
    caller: str | None = None  # the message whose calls a closing message read now answers
    for message in existing:
        if message.tool_calls:
            caller = message.id
        if message.role == "tool" and message.metadata.get(UNANSWERED_KEY):
            for result in message.tool_results:
                closings[result.tool_call_id] = message
                if caller in callers:
                    own[result.tool_call_id] = message
    closings.update(own)
    if not closings:
        return list(new), []
    # Per closing message (by id, in the order first answered): the call ids answered late
    # (those it recorded, then these) and the results that take their places. Each closing
    # message is rebuilt once at the end, however many of its calls are answered here.
    answers: dict[str, tuple[Message, list[str], set[str], dict[str, ToolResultPart]]] = {}
    files: dict[str, list[FilePart]] = {}  # call id -> the files that came after its late result
    notes: dict[str, dict[str, Any]] = {}  # closing id -> what the late results' messages noted
    taken: set[str] = set()  # the call ids whose late result (and its files) this call took
    out: list[Message] = []
    for message in new:
        late = [r for r in message.tool_results if r.tool_call_id in closings]
        if not late:
            out.append(message)
            continue
        rest_parts = _late_files(message, closings, taken, files)
        for result in late:
            closing = closings[result.tool_call_id]
            entry = answers.get(closing.id)
            if entry is None:
                recorded = list(closing.metadata.get(ANSWERED_LATE_KEY) or [])
                entry = (closing, recorded, set(recorded), {})
            if result.tool_call_id in entry[2]:
                continue  # sent again: its result is in place already
            entry[1].append(result.tool_call_id)
            entry[2].add(result.tool_call_id)
            entry[3][result.tool_call_id] = result
            answers.setdefault(closing.id, entry)
            # how the result came (a gateway's note of its output's shape) goes with it
            notes[closing.id] = _merged(notes.get(closing.id, {}), message.metadata)
        if rest_parts:
            out.append(message.model_copy(update={"parts": tuple(rest_parts)}))
    updated = []
    for closing, answered, _, results in answers.values():
        parts: list[Part] = []
        for p in closing.parts:
            if isinstance(p, ToolResultPart) and p.tool_call_id in results:
                parts += [results[p.tool_call_id], *files.get(p.tool_call_id, ())]
            else:
                parts.append(p)
        metadata = {**_merged(closing.metadata, notes.get(closing.id, {})), ANSWERED_LATE_KEY: answered}
        metadata[UNANSWERED_KEY] = closing.metadata[UNANSWERED_KEY]
        updated.append(closing.model_copy(update={"parts": tuple(parts), "metadata": metadata}))
    return out, updated


def _late_files(
    message: Message, closings: dict[str, Message], taken: set[str], files: dict[str, list[FilePart]]
) -> list[Part]:
    """``message``'s parts but its late results (those ``closings`` answered "no result") and
    their files, which go to ``files`` by call id. A tool message's files are its results'
    (:func:`is_boundary`): those after a result, and those before its first result with nothing
    else before them. A result sent again (this call took it already, or its closing notes it
    answered) keeps no files: they are in place already. ``taken``: the call ids taken so far."""
    owner: str | None = None  # the late result the parts read now follow (None: another part)
    rest: list[Part] = []
    leading: list[FilePart] | None = [] if message.role == "tool" else None
    for part in message.parts:
        if leading is not None and isinstance(part, FilePart):
            leading.append(part)
            continue
        if isinstance(part, ToolResultPart):
            owner = part.tool_call_id if part.tool_call_id in closings else None
            if owner is None:
                rest += leading or ()
                rest.append(part)
            elif owner in taken or owner in (closings[owner].metadata.get(ANSWERED_LATE_KEY) or ()):
                owner = ""  # sent again: its files are in place already (or come with its first copy)
            else:
                taken.add(owner)
                files.setdefault(owner, []).extend(leading or ())
            leading = None
        elif owner is not None and isinstance(part, FilePart):
            if owner:
                files.setdefault(owner, []).append(part)
        else:  # a part of the message's own (text, a file of a text's)
            rest += leading or ()
            leading = None
            owner = None
            rest.append(part)
    return rest + list(leading or ())


def _merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``more`` laid over it, dict values merged key by key (``more`` wins)."""
    merged = dict(base)
    for key, value in more.items():
        old = merged.get(key)
        merged[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def _replay(messages: Sequence[Message]) -> tuple[dict[str, str], set[str]]:
    """The calls still waiting after ``messages`` (observable, oldest first; call id -> id of the
    message that made it) and the calls answered in them."""
    waiting: dict[str, str] = {}
    answered: set[str] = set()
    for message in messages:
        own = {c.tool_call_id for c in message.tool_calls}
        for result in message.tool_results:
            if result.tool_call_id not in own and waiting.pop(result.tool_call_id, None) is not None:
                answered.add(result.tool_call_id)
        if is_boundary(message):
            waiting.clear()
            for call in message.tool_calls:
                waiting[call.tool_call_id] = message.id
        answered_here = {r.tool_call_id for r in message.tool_results if r.tool_call_id in own}
        answered |= answered_here
        for call_id in answered_here:  # a call answered in its own message waits for nothing
            waiting.pop(call_id, None)
    return waiting, answered

"""The lifecycle invariants, checked against what is stored (shared by the fuzz and multiprocess tests).

A check reads the store directly, so it describes the state every engine sharing the store
would see. What "each message once" and "no chunk stranded" mean exactly:

* An *observable* message is one the observer may see: not a system message, not marker-only.
* It is **observed** when ``seq <= head.cursor(thread)``; otherwise it must be **raw** in the
  context ``get_context`` builds. Never both, never neither, and no id twice in the context.
* A chunk of a *retired* generation is **stranded** when one of its messages is neither
  observed by the head nor inside one of the head's chunks: the work that chunk did was lost
  with the old generation (and, worse, nothing remembers that the messages were buffered).
* The head's chunks of the thread continue the cursor exactly: the first starts after the
  cursor, each starts after the previous one ends, no observable message lies in a gap, and
  each holds exactly the observable messages of its seq range.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from obsmem.om.context import ContextWindow
from obsmem.storage.contract import ObservationRecord, Store, lineage_key
from obsmem.types import Message

__all__ = ["Snapshot", "check_chunks", "check_thread", "observable"]


def observable(messages: Iterable[Message]) -> list[Message]:
    return [m for m in messages if m.role != "system" and not m.is_marker_only]


@dataclass
class Snapshot:
    """What a check saw; handy for op logs and for cursor monotonicity across checks."""

    cursor: int = 0
    generation: int = -1
    generations: int = 0
    chunks: list[tuple[int, int]] = field(default_factory=list)
    messages: int = 0
    observation_tokens: int = 0
    has_buffered_reflection: bool = False

    def brief(self) -> str:
        spans = ",".join(f"{a}-{b}" for a, b in self.chunks) or "-"
        refl = " +rbuf" if self.has_buffered_reflection else ""
        return (
            f"cursor={self.cursor} chunks=[{spans}] gen={self.generation}/{self.generations} "
            f"msgs={self.messages} obs_tokens={self.observation_tokens}{refl}"
        )


def check_chunks(record: ObservationRecord, thread_id: str, seqs: Sequence[tuple[int, str]]) -> list[str]:
    """Problems with a record's chunks for ``thread_id``; ``seqs`` are the observable (seq, id)
    pairs known to exist, in seq order. Pure, so a store proxy can run it on every write."""
    problems: list[str] = []
    cursor = record.cursor(thread_id)
    chunks = [c for c in record.buffered_chunks if c.thread_id == thread_id]
    ids = [c.id for c in chunks]
    if len(ids) != len(set(ids)):
        problems.append(f"generation {record.generation}: a chunk id appears twice")
    previous_end = cursor
    seen_messages: set[str] = set()
    for index, chunk in enumerate(chunks):
        where = f"generation {record.generation} chunk#{index} [{chunk.first_seq}-{chunk.last_seq}]"
        if chunk.first_seq > chunk.last_seq:
            problems.append(f"{where}: first_seq > last_seq")
        if chunk.first_seq <= cursor:
            problems.append(f"{where}: covers an already observed message (cursor {cursor})")
        if chunk.first_seq <= previous_end and index > 0:
            problems.append(f"{where}: out of order / overlaps the previous chunk (ends at {previous_end})")
        gap = [mid for seq, mid in seqs if previous_end < seq < chunk.first_seq]
        if gap:
            problems.append(f"{where}: observable messages {gap} lie between {previous_end} and the chunk")
        inside = [mid for seq, mid in seqs if chunk.first_seq <= seq <= chunk.last_seq]
        if list(chunk.message_ids) != inside:
            problems.append(f"{where}: holds {list(chunk.message_ids)} but its range has {inside}")
        twice = seen_messages.intersection(chunk.message_ids)
        if twice:
            problems.append(f"{where}: messages {sorted(twice)} are in two chunks")
        seen_messages.update(chunk.message_ids)
        previous_end = max(previous_end, chunk.last_seq)
    return problems


async def check_thread(
    store: Store,
    thread_id: str,
    resource_id: str,
    *,
    context: ContextWindow | None = None,
    expected_ids: Sequence[str] | None = None,
    pairs: Mapping[str, tuple[str, str]] | None = None,
    previous: Snapshot | None = None,
    messages: Sequence[Message] | None = None,
    head: ObservationRecord | None = None,
    retired: Sequence[ObservationRecord] | None = None,
) -> Snapshot:
    """Assert every invariant for one thread; returns what it saw.

    ``expected_ids``: every message id the test saved (each must be stored exactly once).
    ``pairs``: tool_call_id → (call message id, result message id) for calls whose result
    followed directly; a call and its result must be observed, buffered or kept raw together.
    ``previous``: the snapshot of an earlier check, to assert the cursor never moved backward.
    ``messages``: the thread's messages as the caller already knows them (a cheaper per-step
    check); by default they are read from the store. ``head`` and ``retired`` likewise: the
    head just read, and the retired generations read while that head was already the head
    (retired generations never change again); by default both are read from the store.
    """
    problems: list[str] = []
    lineage = lineage_key("thread", thread_id, resource_id)
    if head is None or retired is None:
        head = await store.get_head(lineage)
        generations = await store.list_generations(lineage, limit=10_000)
    else:
        generations = [head, *retired]
    stored = list(messages) if messages is not None else await store.list_messages(thread_id)
    visible = observable(stored)
    seqs = [(m.seq or 0, m.id) for m in visible]
    seq_of = {m.id: m.seq or 0 for m in stored}
    snapshot = Snapshot(messages=len(stored))

    # -- messages: none lost, none duplicated ------------------------------------------------
    stored_ids = [m.id for m in stored]
    dupes = [mid for mid, n in Counter(stored_ids).items() if n > 1]
    if dupes:
        problems.append(f"messages stored twice: {dupes[:10]}")
    if expected_ids is not None:
        missing = sorted(set(expected_ids) - set(stored_ids))
        extra = sorted(set(stored_ids) - set(expected_ids))
        if missing:
            problems.append(f"{len(missing)} messages lost: {missing[:10]}")
        if extra:
            problems.append(f"{len(extra)} unexpected messages stored: {extra[:10]}")
    seq_list = [m.seq or 0 for m in stored]
    if seq_list != sorted(set(seq_list)):
        problems.append("message seqs are not strictly increasing in list order")

    # -- generations: exactly one live head, a clean chain -----------------------------------
    live = [g for g in generations if g.superseded_by is None]
    if generations or head is not None:
        if len(live) != 1:
            problems.append(f"{len(live)} live heads in lineage {lineage}: {[g.id for g in live]}")
        if head is None or (live and live[0].id != head.id):
            problems.append("get_head does not return the one live generation")
    chain = sorted(generations, key=lambda g: g.generation)
    if [g.generation for g in chain] != list(range(len(chain))):
        problems.append(f"generation numbers are not 0..n-1: {[g.generation for g in chain]}")
    for older, newer in itertools.pairwise(chain):
        if older.superseded_by != newer.id:
            problems.append(
                f"generation {older.generation} is superseded by {older.superseded_by}, not {newer.id}"
            )
        if newer.cursor(thread_id) < older.cursor(thread_id):
            problems.append(
                f"cursor moved backward across generations {older.generation}→{newer.generation}: "
                f"{older.cursor(thread_id)}→{newer.cursor(thread_id)}"
            )

    if head is not None:
        cursor = head.cursor(thread_id)
        snapshot.cursor = cursor
        snapshot.generation = head.generation
        snapshot.generations = len(generations)
        snapshot.observation_tokens = head.observation_tokens
        snapshot.has_buffered_reflection = head.buffered_reflection is not None
        mine = [c for c in head.buffered_chunks if c.thread_id == thread_id]
        snapshot.chunks = [(c.first_seq, c.last_seq) for c in mine]
        if cursor > (max(seq_of.values()) if seq_of else 0):
            problems.append(f"cursor {cursor} is past the newest message")
        if previous is not None and cursor < previous.cursor:
            problems.append(f"cursor moved backward: {previous.cursor} → {cursor}")
        if previous is not None and head.generation < previous.generation:
            problems.append(f"head generation went backward: {previous.generation} → {head.generation}")

        # -- chunks of the head ------------------------------------------------------------
        problems.extend(check_chunks(head, thread_id, seqs))
        in_head_chunks = {mid for c in mine for mid in c.message_ids}

        # -- nothing stranded on a retired generation ----------------------------------------
        for old in generations:
            if old.superseded_by is None:
                continue
            for chunk in old.buffered_chunks:
                if chunk.thread_id != thread_id:
                    continue
                lost = [
                    mid for mid in chunk.message_ids
                    if seq_of.get(mid, 0) > cursor and mid not in in_head_chunks
                ]
                if lost:
                    problems.append(
                        f"chunk [{chunk.first_seq}-{chunk.last_seq}] of retired generation {old.generation} "
                        f"is stranded: {lost} are neither observed (cursor {cursor}) nor in a head chunk"
                    )

        # -- a tool call and its result stay together -------------------------------------------
        def segment(mid: str) -> str:
            seq = seq_of[mid]
            if seq <= cursor:
                return "observed"
            for index, chunk in enumerate(mine):
                if mid in chunk.message_ids:
                    return f"chunk#{index}"
            return "raw"

        for call_id, (call_mid, result_mid) in sorted((pairs or {}).items()):
            if call_mid in seq_of and result_mid in seq_of and segment(call_mid) != segment(result_mid):
                problems.append(
                    f"tool call {call_id} split: call {call_mid} is {segment(call_mid)}, "
                    f"result {result_mid} is {segment(result_mid)}"
                )
    else:
        cursor = 0

    # -- each message reaches the actor exactly once -------------------------------------------
    if context is not None:
        raw = [m for m in context.raw_messages if (m.metadata or {}).get("obsmem") != "temporal-gap"]
        raw_ids = [m.id for m in raw]
        twice = [mid for mid, n in Counter(raw_ids).items() if n > 1]
        if twice:
            problems.append(f"messages twice in the context: {twice}")
        unknown = [mid for mid in raw_ids if mid not in seq_of]
        if unknown:
            problems.append(f"the context holds messages that are not stored: {unknown}")
        raw_set = set(raw_ids)
        for message in visible:
            observed = (message.seq or 0) <= cursor
            shown = message.id in raw_set
            if observed and shown:
                problems.append(f"{message.id} (seq {message.seq}) is observed (cursor {cursor}) AND raw")
            elif not observed and not shown:
                problems.append(
                    f"{message.id} (seq {message.seq}) is neither observed (cursor {cursor}) nor raw"
                )

    if problems:
        raise AssertionError("invariant violated:\n  - " + "\n  - ".join(problems))
    return snapshot

"""Erasers' rewrites are compare-and-set on what they read: an older generation
(``rewrite_generation(record, expected=)``), a message (``rewrite_message``) and working memory
(``replace_working_memory``) are written only while the stored row is still the one read, so two
erasers (a delete and a forget, two forgets) never undo each other's removal."""

from __future__ import annotations

import pytest

from obsmem.storage import ObservationRecord, Store
from obsmem.storage.contract import (
    replace_working_memory_if_unchanged,
    rewrite_generation_if_unchanged,
    rewrite_message_if_unchanged,
)
from obsmem.types import DataPart, Message, TextPart, Thread

pytestmark = pytest.mark.anyio


async def older_generation(store: Store, text: str) -> tuple[ObservationRecord, ObservationRecord]:
    """The resource's retired first generation holding ``text``, and the live head."""
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    first = (await store.create_record(ObservationRecord(
        id="om-r1", lineage="resource:r1", scope="resource", thread_id=None, resource_id="r1",
        active_observations=text,
    ))).record
    assert first is not None
    successor = first.model_copy(update={"id": "om-r2", "active_observations": "summary"})
    assert (await store.create_generation(first, successor, expected_version=first.version)).applied
    [head, old] = await store.list_generations("resource:r1")
    return old, head


async def test_a_generation_rewrite_is_refused_once_another_rewrote_it(store: Store) -> None:
    read, _ = await older_generation(store, "keep\nHeron\nSecret")
    # Two erasers read it; the first removes "Secret", the second (from what it read) "Heron".
    first = read.model_copy(update={"active_observations": "keep\nHeron"})
    second = read.model_copy(update={"active_observations": "keep\nSecret"})
    assert await store.rewrite_generation(first, expected=read) is True
    assert await store.rewrite_generation(second, expected=read) is False
    stored = await store.get_record(read.id)
    assert stored is not None and stored.active_observations == "keep\nHeron"
    # Read again, the change is redone on what is stored: both removals stay.
    assert await store.rewrite_generation(stored.model_copy(update={"active_observations": "keep"}), expected=stored)
    again = await store.get_record(read.id)
    assert again is not None and again.active_observations == "keep"
    assert (again.version, again.superseded_by, again.generation) == (read.version, read.superseded_by, read.generation)
    # The helper answers the same on every store.
    assert await rewrite_generation_if_unchanged(store, second, expected=read) is False
    assert await rewrite_generation_if_unchanged(store, again.model_copy(update={"active_observations": ""}),
                                                 expected=again) is True


async def test_a_generation_rewrite_expecting_is_refused_for_the_head_or_a_missing_id(store: Store) -> None:
    old, head = await older_generation(store, "Secret")
    assert await store.rewrite_generation(head.model_copy(update={"active_observations": ""}), expected=head) is False
    missing = old.model_copy(update={"id": "missing"})
    assert await store.rewrite_generation(missing, expected=missing) is False
    assert await store.get_head("resource:r1") == head
    # Without expected the rewrite stays blind (callers written before it).
    assert await store.rewrite_generation(old.model_copy(update={"active_observations": "x"})) is True


async def test_a_message_rewrite_is_refused_once_another_rewrote_it(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    [read] = await store.save_messages("t1", [Message(id="m", role="user", parts=(
        TextPart(text="One"), TextPart(text="Two"), TextPart(text="Keep"),
    ))])
    without_one = read.model_copy(update={"parts": read.parts[1:]})
    without_two = read.model_copy(update={"parts": (read.parts[0], read.parts[2])})
    assert await store.rewrite_message(without_one, expected=read) is True  # type: ignore[attr-defined]
    assert await store.rewrite_message(without_two, expected=read) is False  # type: ignore[attr-defined]
    [stored] = await store.get_messages(["m"])
    assert [p.text for p in stored.parts if isinstance(p, TextPart)] == ["Two", "Keep"]
    assert (stored.seq, stored.thread_id, stored.created_at) == (read.seq, read.thread_id, read.created_at)
    assert await rewrite_message_if_unchanged(store, without_two, expected=read) is False
    keep = stored.model_copy(update={"parts": stored.parts[1:]})
    assert await rewrite_message_if_unchanged(store, keep, expected=stored) is True
    [stored] = await store.get_messages(["m"])
    assert [p.text for p in stored.parts if isinstance(p, TextPart)] == ["Keep"]


async def test_a_message_rewrite_is_refused_after_a_marker_was_added_or_the_message_went(store: Store) -> None:
    await store.create_thread(Thread(id="t1", resource_id="r1"))
    [read] = await store.save_messages("t1", [Message(id="m", role="user", parts=(TextPart(text="a"), TextPart(text="b")))])
    await store.add_message_parts("m", [DataPart(name="data-om-test", data={"cycle_id": "c1"})])
    changed = read.model_copy(update={"parts": read.parts[:1]})
    assert await store.rewrite_message(changed, expected=read) is False  # type: ignore[attr-defined]
    [stored] = await store.get_messages(["m"])
    assert len(stored.parts) == 3  # the marker stays
    assert await store.delete_messages(["m"]) == 1
    assert await store.rewrite_message(changed, expected=stored) is False  # type: ignore[attr-defined]
    assert await store.get_messages(["m"]) == []


async def test_working_memory_is_replaced_or_deleted_only_while_it_is_what_was_read(store: Store) -> None:
    await store.set_working_memory("thread:t1", "name: Ada\npin: 1234\ncode: Zed")
    read = "name: Ada\npin: 1234\ncode: Zed"
    assert await store.replace_working_memory("thread:t1", "name: Ada\ncode: Zed", expected=read) is True  # type: ignore[attr-defined]
    assert await store.replace_working_memory("thread:t1", "name: Ada\npin: 1234", expected=read) is False  # type: ignore[attr-defined]
    assert await store.get_working_memory("thread:t1") == "name: Ada\ncode: Zed"
    assert await replace_working_memory_if_unchanged(store, "thread:t1", None, expected=read) is False
    assert await replace_working_memory_if_unchanged(store, "thread:t1", None, expected="name: Ada\ncode: Zed") is True
    assert await store.get_working_memory("thread:t1") is None
    # Gone: nothing is written back.
    assert await store.replace_working_memory("thread:t1", "name: Ada", expected="name: Ada\ncode: Zed") is False  # type: ignore[attr-defined]
    assert await store.get_working_memory("thread:t1") is None

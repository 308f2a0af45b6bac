"""``section_messages`` (:mod:`obsmem.storage.contract`, what ``delete_thread`` reads of the
other threads): every message of a thread whose data parts' ``observations`` may hold a
``<thread id>`` section, once each, in seq order, in pages of at most ``page``; on every
adapter, natively (only such messages handed out) and through the fallback a store without the
native method gets (its ``list_messages`` a page at a time)."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.errors import InvalidInputError, ThreadNotFoundError
from obsmem.storage import Store
from obsmem.storage.contract import may_hold_sections, section_messages
from obsmem.types import DataPart, Message, TextPart, Thread

pytestmark = pytest.mark.anyio

SECTION = '<thread id="gone">\n* a line\n</thread>'


class Plain:
    """A store without the native method (a third-party store written before it)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "section_messages_page":
            raise AttributeError(name)
        return getattr(self._inner, name)


@pytest.fixture(params=["native", "fallback"])
def view(request: pytest.FixtureRequest, store: Store) -> Any:
    if request.param == "native":
        assert callable(getattr(store, "section_messages_page", None)), type(store).__name__
        return store
    return Plain(store)


def _marker(n: int, observations: object) -> DataPart:
    return DataPart(name="om-observation-end", data={"cycle_id": f"c{n}", "observations": observations})


async def _seed(store: Store) -> list[str]:
    """Thread ``a``: a mix of messages; returns the ids of those that may hold a section."""
    await store.create_thread(Thread(id="a", resource_id="r"))
    await store.create_thread(Thread(id="b", resource_id="r"))
    plain = [Message.user(f"hello {n}") for n in range(7)]
    quoting = [Message.user("I typed <thread id=\"gone\"> myself")]  # text, not a marker: never stripped
    await store.save_messages("a", plain[:3] + quoting + plain[3:])
    await store.save_messages("b", [Message.assistant("b's answer")])
    expected: list[str] = []
    for n in range(23):
        saved = await store.save_messages("a", [Message.assistant(f"answer {n}")])
        if n % 3 == 0:
            continue  # an unmarked answer
        observations: object = {0: SECTION, 1: "no section here"}.get(n % 4, f"before\n{SECTION}")
        if n % 5 == 0:
            observations = 42  # not text: no section
        await store.add_message_parts(saved[0].id, [_marker(n, observations)])
        if isinstance(observations, str) and "<thread" in observations:
            expected.append(saved[0].id)
    # a marker of thread b's message holds a section too: never one of a's
    (b_message,) = await store.list_messages("b")
    await store.add_message_parts(b_message.id, [_marker(99, SECTION)])
    # an app's data part with observations text holding a section: a delete strips it too
    saved = await store.save_messages("a", [Message(role="assistant", parts=(
        TextPart(text="with app data"), DataPart(name="app-notes", data={"observations": SECTION}),
    ))])
    expected.append(saved[0].id)
    return expected


@pytest.mark.parametrize("page", [1, 4, 500])
async def test_every_message_that_may_hold_a_section_once_in_order(
    store: Store, view: Any, page: int
) -> None:
    expected = await _seed(store)
    assert len(expected) >= 8
    pages = [batch async for batch in section_messages(view, "a", page=page)]
    found = [m for batch in pages for m in batch]
    assert [m.id for m in found] == expected
    assert all(0 < len(batch) <= page for batch in pages)
    assert all(m.thread_id == "a" and may_hold_sections(m) for m in found)
    whole = {m.id: m for m in await store.list_messages("a")}
    assert all(m == whole[m.id] for m in found)  # as stored
    assert [m.id for m in await store.list_messages("a") if may_hold_sections(m)] == expected


async def test_a_thread_without_such_messages_and_an_unknown_thread(store: Store, view: Any) -> None:
    await store.create_thread(Thread(id="empty", resource_id="r"))
    assert [batch async for batch in section_messages(view, "empty")] == []
    await store.save_messages("empty", [Message.user("hi"), Message.assistant("hello")])
    assert [batch async for batch in section_messages(view, "empty", page=1)] == []
    with pytest.raises(ThreadNotFoundError):
        async for _ in section_messages(view, "missing"):
            pass
    with pytest.raises(InvalidInputError):
        async for _ in section_messages(view, "empty", page=0):
            pass


async def test_the_native_page_hands_out_only_the_messages_holding_a_tag(store: Store) -> None:
    expected = await _seed(store)
    native = store.section_messages_page  # type: ignore[attr-defined]
    every = await native("a", after_seq=0, limit=1000)
    assert [m.id for m in every if may_hold_sections(m)] == expected
    # besides those, at most the message whose text holds the tag (the store's test is its stored form)
    assert [m.text for m in every if not may_hold_sections(m)] in ([], ['I typed <thread id="gone"> myself'])
    paged: list[Message] = []
    while page := await native("a", after_seq=paged[-1].seq if paged else 0, limit=2):
        assert len(page) <= 2
        paged.extend(page)
    assert [m.id for m in paged] == [m.id for m in every]

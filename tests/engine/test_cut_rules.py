"""Where a window may be cut, as tables: pending calls, unseen input, pieces, usable chunks.

The engine observes a prefix of the raw window and activates chunks as a prefix of what was
buffered; these pure rules decide where such a prefix may end (issue 12, items 1 and 3).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from obsmem.om.activation import ChunkBounds, usable_chunks
from obsmem.om.selection import (
    Unseen,
    observer_requests,
    pending_tool_call_ids,
    split_message,
    valid_cuts,
)
from obsmem.om.step import recent_lines
from obsmem.storage.contract import BufferedChunk, ObservationRecord, ThreadState
from obsmem.tokens import TokenCounter
from obsmem.types import FilePart, Message, TextPart, ToolCallPart, ToolResultPart

NOW = datetime(2025, 6, 15, 9, tzinfo=UTC)


def text(role: str, body: str = "x", seq: int | None = None) -> Message:
    return Message(role=role, parts=(TextPart(text=body),), seq=seq)  # type: ignore[arg-type]


def calls(*ids: str, say: str | None = None) -> Message:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=say)] if say else []
    parts += [ToolCallPart(tool_call_id=i, tool_name="search") for i in ids]
    return Message(role="assistant", parts=tuple(parts))


def results(*ids: str, role: str = "tool", say: str | None = None) -> Message:
    parts: list[TextPart | ToolResultPart] = [ToolResultPart(tool_call_id=i, tool_name="search", result="ok") for i in ids]
    if say:
        parts.append(TextPart(text=say))
    return Message(role=role, parts=tuple(parts))  # type: ignore[arg-type]


U, A = text("user"), text("assistant")


@pytest.mark.parametrize(
    ("messages", "cuts", "pending"),
    [
        pytest.param([U, calls("a", "b"), results("a")], [1], {"b"}, id="second of two parallel calls waits"),
        pytest.param([U, calls("a", "b"), results("b"), results("a")], [1, 4], set(), id="both answered, any order"),
        pytest.param([U, calls("a", "b"), results("a", "b"), A], [1, 3, 4], set(), id="answered in one message"),
        pytest.param([U, calls("a", say="let me look"), results("a")], [1, 3], set(), id="a call with text"),
        pytest.param([U, calls("a"), results("a", role="user", say="and?")], [1, 3], set(), id="results in a user turn"),
        pytest.param([U, calls("lost"), U, A], [1, 2, 3, 4], set(), id="an orphan call constrains nothing"),
        pytest.param([calls("a", "b"), results("a"), results("c")], [], {"b"}, id="pending behind other results"),
        pytest.param([results("old"), A], [1, 2], set(), id="a result whose call was observed"),
    ],
)
def test_cut_table(messages: list[Message], cuts: list[int], pending: set[str]) -> None:
    assert valid_cuts(messages) == cuts
    assert pending_tool_call_ids(messages) == pending


def numbered(*messages: Message) -> list[Message]:
    return [m.model_copy(update={"seq": i + 1}) for i, m in enumerate(messages)]


@pytest.mark.parametrize(
    ("unseen", "start"),
    [
        pytest.param(Unseen(), 5, id="nothing"),
        pytest.param(Unseen(from_seq=4), 3, id="the fresh messages"),
        pytest.param(Unseen(newest_user=True), 2, id="the newest user message on"),
        pytest.param(Unseen(from_seq=2, newest_user=True), 1, id="whichever is earlier"),
    ],
)
def test_unseen_input_stays_raw(unseen: Unseen, start: int) -> None:
    window = numbered(text("user", "old"), A, text("user", "new"), calls("a"), results("a"))
    assert unseen.start(window) == start
    assert all(cut <= start for cut in unseen.cuts(window))


def test_a_results_only_user_message_is_not_the_newest_question() -> None:
    window = numbered(text("user", "q"), calls("a"), results("a", role="user"))
    assert Unseen(newest_user=True).start(window) == 0


class CountingCounter(TokenCounter):
    def __init__(self) -> None:
        super().__init__()
        self.chars = 0

    def count_text(self, text: str | None) -> int:
        self.chars += len(text or "")
        return super().count_text(text)


@pytest.mark.parametrize("max_tokens", [50, 500, 5000])
def test_a_message_is_split_into_pieces_under_the_limit_with_linear_counting(max_tokens: int) -> None:
    counter = CountingCounter()
    body = "".join(f"line {i}: the upstream reset the connection after {i % 97} ms\n" for i in range(3000))
    message = Message(role="user", parts=(TextPart(text=body),), seq=7, created_at=NOW)
    counter.chars = 0
    pieces = split_message(message, max_tokens, counter)
    assert len(pieces) > 1
    assert all(counter.count_message(p) <= max_tokens for p in pieces)
    assert "".join(p.text for p in pieces) == body
    assert {(p.id, p.seq, p.role, p.created_at) for p in pieces} == {(message.id, 7, "user", NOW)}
    assert counter.chars <= 3 * len(body)


def test_parts_that_cannot_be_cut_travel_whole() -> None:
    counter = TokenCounter()
    image = FilePart(media_type="image/png", url="https://example.com/a.png", width=512, height=512)
    message = Message(role="user", parts=(TextPart(text="look " * 400), image, TextPart(text="and this " * 300)))
    pieces = split_message(message, 300, counter)
    assert [p for piece in pieces for p in piece.parts if isinstance(p, FilePart)] == [image]
    texts = [p.text for piece in pieces for p in piece.parts if isinstance(p, TextPart)]
    assert "".join(texts) == "look " * 400 + "and this " * 300


def test_observer_requests_cut_only_the_oversized_message() -> None:
    counter = TokenCounter()
    small = [text("user", "hello"), text("assistant", "hi")]
    huge = text("user", "word " * 3000)
    messages = [*small, huge, text("assistant", "that is long")]
    counts = [counter.count_message(m) for m in messages]
    requests = observer_requests(messages, counts, 1000, counter)
    assert requests[0] == small
    assert requests[-1] == messages[-1:]
    middle = requests[1:-1]
    assert len(middle) >= 3 and all(len(r) == 1 and r[0].id == huge.id for r in middle)
    assert all(counter.count_message(r[0]) <= 1000 for r in middle)


def chunk(first: int, last: int) -> BufferedChunk:
    return BufferedChunk(
        id=f"c{first}", cycle_id=f"b{first}", thread_id="t1", observations="* x", observation_tokens=1,
        message_ids=tuple(f"m{i}" for i in range(first, last + 1)), message_tokens=10 * (last - first + 1),
        first_seq=first, last_seq=last, created_at=NOW,
    )


def record(*chunks: BufferedChunk) -> ObservationRecord:
    return ObservationRecord(
        id="r", lineage="thread:t1", scope="thread", thread_id="t1", resource_id="u1", created_at=NOW,
        updated_at=NOW, threads={"t1": ThreadState()}, buffered_chunks=chunks,
    )


@pytest.mark.parametrize(
    ("window", "chunks", "unseen", "expected"),
    [
        pytest.param([U, A, U, A], [(1, 2), (3, 4)], Unseen(), (2, 2), id="all usable"),
        pytest.param([U, A, U, A], [(1, 2), (3, 4)], Unseen(newest_user=True), (1, 2), id="not over the newest question"),
        pytest.param([U, calls("a", "b"), results("a"), results("b")], [(1, 1), (2, 3)], Unseen(), (1, 1),
                     id="a chunk ending between a parallel call and its result is broken"),
        pytest.param([U, calls("a", "b"), results("a")], [(1, 1), (2, 3)], Unseen(), (1, 1),
                     id="a chunk over a call that still waits is broken"),
        pytest.param([U, A, U], [(1, 2), (3, 5)], Unseen(), (1, 2), id="a chunk past the window read waits"),
    ],
)
def test_usable_chunks_table(
    window: list[Message], chunks: list[tuple[int, int]], unseen: Unseen, expected: tuple[int, int]
) -> None:
    head = record(*(chunk(a, b) for a, b in chunks))
    assert usable_chunks(head, "t1", ChunkBounds.of(numbered(*window), unseen)) == expected


@pytest.mark.parametrize(
    ("text_in", "limit", "expected"),
    [
        pytest.param("a\nb\nc", 100, "a\nb\nc", id="fits"),
        pytest.param("line one\nline two\nline three", 14, "line three", id="whole lines from the end"),
        pytest.param("abcdefghij", 4, "ghij", id="one long line is cut"),
    ],
)
def test_recent_lines(text_in: str, limit: int, expected: str) -> None:
    assert recent_lines(text_in, limit) == expected

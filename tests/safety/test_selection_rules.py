"""The input and batching rules of ``obsmem.om.selection``, as fast table tests.

* :func:`check_input_sequence`: a tool result must answer a call that is waiting for one, and
  nothing else may come between a step's calls and their results.
* :class:`Unseen`: what the actor has not been shown stays raw.
* :func:`observation_batches` / :func:`observer_requests` / :func:`split_message`: observer
  requests hold at most ``max_tokens`` tokens, keep a call with its result, and a large message is
  sent in pieces that rejoin to exactly its text.
"""

from __future__ import annotations

import pytest

from obsmem.errors import InvalidInputError
from obsmem.om.selection import (
    Unseen,
    check_input_sequence,
    observation_batches,
    observer_requests,
    pending_tool_call_ids,
    safe_cursor_seqs,
    split_message,
)
from obsmem.om.selection import _piece_end, _soft_end
from obsmem.tokens import TokenCounter
from obsmem.types import DataPart, Message, TextPart, ToolCallPart, ToolResultPart


def text(role: str = "user", body: str = "x", *, id: str | None = None, seq: int | None = None) -> Message:
    extra = {"id": id} if id else {}
    return Message(role=role, parts=(TextPart(text=body),), seq=seq, **extra)  # type: ignore[arg-type]


def call(*ids: str, role: str = "assistant", id: str | None = None) -> Message:
    extra = {"id": id} if id else {}
    return Message(
        role=role, parts=tuple(ToolCallPart(tool_call_id=i, tool_name="search") for i in ids), **extra  # type: ignore[arg-type]
    )


def result(*ids: str) -> Message:
    return Message(role="tool", parts=tuple(ToolResultPart(tool_call_id=i, tool_name="search", result="ok") for i in ids))


def call_with_own_result(call_id: str, *extra_results: str) -> Message:
    """A provider-executed tool: the call and its result in one assistant message."""
    return Message(
        role="assistant",
        parts=(
            ToolCallPart(tool_call_id=call_id, tool_name="web"),
            ToolResultPart(tool_call_id=call_id, tool_name="web", result="page"),
            *(ToolResultPart(tool_call_id=i, tool_name="search", result="ok") for i in extra_results),
        ),
    )


U, A = text("user"), text("assistant")
SYSTEM = text("system", "be brief")
MARKER = Message(role="user", parts=(DataPart(name="marker", data={"k": 1}),))


# --------------------------------------------------------------------------------------------
# check_input_sequence
# --------------------------------------------------------------------------------------------

OWN = call_with_own_result("s")


@pytest.mark.parametrize(
    ("existing", "new"),
    [
        pytest.param([U, call("a", "b")], [result("a"), result("b"), A], id="results of stored calls, apart"),
        pytest.param([U, call("a", "b")], [result("b", "a"), A], id="results of stored calls, one message"),
        pytest.param([], [U, call("a"), result("a"), A], id="a whole step in one save"),
        pytest.param([U, call("a"), result("a")], [A], id="stored pair then text"),
        pytest.param([result("old"), U], [A], id="a stored result whose call was observed long ago"),
        pytest.param([U, OWN], [A], id="stored provider-executed call with its result"),
        pytest.param([U], [OWN, A], id="new provider-executed call with its result"),
        pytest.param([U, call("a")], [SYSTEM, result("a"), A], id="a system message is not checked"),
        pytest.param([U, call("a")], [MARKER, result("a")], id="a marker-only message is not checked"),
        pytest.param([U, call("a")], [result("a"), SYSTEM, A], id="system after the results"),
        pytest.param([call("lost"), U], [A], id="an old call never answered does not block"),
    ],
)
def test_input_sequences_that_are_accepted(existing: list[Message], new: list[Message]) -> None:
    check_input_sequence(existing, new)


def test_a_message_sent_again_by_id_keeps_its_place() -> None:
    stored_call = call("a", id="c1")
    check_input_sequence([U, stored_call], [call("a", id="c1"), result("a")])
    check_input_sequence([U, stored_call, result("a")], [stored_call, A])


@pytest.mark.parametrize(
    ("existing", "new", "match"),
    [
        pytest.param([U], [result("ghost")], r"messages\[0\] \(tool.*'ghost'.*it was never made", id="never made"),
        pytest.param([U, call("a"), result("a")], [result("a")], r"'a'.*it was already answered",
                     id="answered in the stored messages"),
        pytest.param([U, call("a"), result("a"), A], [result("a")], "it was already answered",
                     id="answered before the stored text"),
        pytest.param([U, OWN], [result("s")], "it was already answered", id="answered by its own stored message"),
        pytest.param([U, OWN, A], [result("s")], "it was already answered",
                     id="answered by its own stored message, then text"),
        pytest.param([U], [OWN, result("s")], r"messages\[1\].*it was already answered",
                     id="answered by its own new message"),
        pytest.param([U, call("a")], [result("a"), result("a")], r"messages\[1\].*it was already answered",
                     id="answered twice in one save"),
        pytest.param([U], [call_with_own_result("s", "ghost")], "'ghost'.*it was never made",
                     id="a stray result after an own result"),
        pytest.param([U, call("a")], [A], r"messages\[0\] \(assistant.*\['a'\] still wait", id="text while waiting"),
        pytest.param([U, call("a", "b")], [result("a"), A], r"messages\[1\].*\['b'\] still wait",
                     id="one of two parallel results missing"),
        pytest.param([U, call("a")], [call("b")], r"\['a'\] still wait", id="a new call while waiting"),
        pytest.param([U, call("a")], [SYSTEM, A], r"messages\[1\]", id="text after a system message"),
        pytest.param([U, call("a")], [SYSTEM, result("ghost")], r"messages\[1\].*never made",
                     id="a stray result after a system message"),
        pytest.param([], [call("a"), text("user", "hi")], r"messages\[1\] \(user.*\['a'\] still wait",
                     id="the whole step in one save, result missing"),
        pytest.param([U], [call("a", role="user")], r"messages\[0\] \(user.*only assistant messages call tools",
                     id="a user message calling a tool"),
    ],
)
def test_input_sequences_that_are_refused(existing: list[Message], new: list[Message], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        check_input_sequence(existing, new)


def test_existing_results_answer_only_waiting_calls() -> None:
    # a stored result for a call that was never waiting does not make a later call "answered"
    check_input_sequence([U, result("b"), call("b")], [result("b"), A])
    with pytest.raises(InvalidInputError, match="still wait"):
        check_input_sequence([U, call("a", "b"), result("a")], [A])


def test_a_call_id_used_again_after_its_answer_waits_for_its_new_result() -> None:
    """Some providers reuse call ids: a stored call answered earlier and then made again waits
    for its new result, whether the history is stored or arrives with the input."""
    check_input_sequence([U, call("a"), result("a"), call("a")], [result("a")])
    check_input_sequence([], [U, call("a"), result("a"), call("a"), result("a")])


def test_pending_calls_accumulate_over_parallel_messages() -> None:
    # two assistant messages of one step, each with calls, only results after them: both pending
    two_call_messages = [U, call("a"), result("a"), call("b"), result("x"), call("c")]
    assert pending_tool_call_ids(two_call_messages) == {"c"}
    assert pending_tool_call_ids([U, call("a", "b"), result("a")]) == {"b"}
    steps = [U, Message(role="assistant", parts=(ToolCallPart(tool_call_id="p", tool_name="t"),)),
             Message(role="assistant", parts=(ToolCallPart(tool_call_id="q", tool_name="t"),))]
    assert pending_tool_call_ids(steps) == {"q"}  # 'p' was due before the message that called 'q'
    calls_then_results = [U, call("p", "q"), result("p"), result("r")]
    assert pending_tool_call_ids(calls_then_results) == {"q"}


# --------------------------------------------------------------------------------------------
# Unseen input and cursor positions
# --------------------------------------------------------------------------------------------


def stored(*seqs: int | None, roles: str = "") -> list[Message]:
    roles = roles or "u" * len(seqs)
    names = {"u": "user", "a": "assistant", "t": "tool"}
    return [text(names[r], seq=s) for r, s in zip(roles, seqs, strict=True)]


@pytest.mark.parametrize(
    ("unseen", "messages", "start"),
    [
        pytest.param(Unseen(), stored(1, 2, 3), 3, id="nothing unseen"),
        pytest.param(Unseen(from_seq=2), stored(1, 2, 3), 1, id="from the first saved at this boundary"),
        pytest.param(Unseen(from_seq=3), stored(1, 2, 4), 2, id="the first seq at or after from_seq"),
        pytest.param(Unseen(from_seq=99), stored(1, 2, 3), 3, id="from_seq after every message"),
        pytest.param(Unseen(from_seq=1), stored(None, 5), 1, id="a message without seq is not at or after 1"),
        pytest.param(Unseen(newest_user=True), stored(1, 2, 3, 4, roles="uaua"), 2, id="the newest user message"),
        pytest.param(Unseen(newest_user=True), stored(1, 2, roles="aa"), 2, id="no user message at all"),
        pytest.param(Unseen(from_seq=2, newest_user=True), stored(1, 2, 3, roles="uau"), 1,
                     id="the earlier of the two"),
        pytest.param(Unseen(from_seq=3, newest_user=True), stored(1, 2, 3, roles="uaa"), 0,
                     id="the newest user message is older than the saved input"),
    ],
)
def test_unseen_start(unseen: Unseen, messages: list[Message], start: int) -> None:
    assert unseen.start(messages) == start


def test_unseen_newest_user_needs_text_or_a_file() -> None:
    only_a_result_from_user = Message(role="user", parts=(ToolResultPart(tool_call_id="a", tool_name="t"),), seq=3)
    messages = [*stored(1, 2, roles="ua"), only_a_result_from_user]
    assert Unseen(newest_user=True).start(messages) == 0


@pytest.mark.parametrize(
    ("fresh", "turn_start", "expected"),
    [
        pytest.param(stored(7, 5, None), True, Unseen(from_seq=5, newest_user=True), id="the lowest seq saved"),
        pytest.param(stored(4), False, Unseen(from_seq=4), id="one message, inside a turn"),
        pytest.param(stored(None), False, Unseen(), id="nothing stored"),
        pytest.param([], True, Unseen(newest_user=True), id="no fresh message at a turn's start"),
    ],
)
def test_unseen_of_a_boundary(fresh: list[Message], turn_start: bool, expected: Unseen) -> None:
    assert Unseen.of(fresh, turn_start=turn_start) == expected


def test_safe_cursor_seqs_are_the_last_seq_of_each_allowed_prefix() -> None:
    messages = stored(10, 11, 12)
    assert safe_cursor_seqs(messages, [1, 3]) == {10, 12}
    assert safe_cursor_seqs(messages, [0, 2]) == {11}  # the empty prefix moves no cursor
    assert safe_cursor_seqs([text()], [1]) == {0}  # not stored yet: seq 0


# --------------------------------------------------------------------------------------------
# Observer batches and requests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuts", "counts", "end", "max_tokens", "batches"),
    [
        pytest.param([1, 2, 3], [5, 5, 5], 3, 10, [(0, 2), (2, 3)], id="as many whole messages as fit"),
        pytest.param([1, 2, 3], [5, 5, 5], 3, 15, [(0, 3)], id="exactly the limit"),
        pytest.param([1, 3], [5, 5, 5], 3, 10, [(0, 1), (1, 3)], id="a pair larger than the limit stays whole"),
        pytest.param([1], [5, 5], 2, 100, [(0, 2)], id="end is not a cut (a pending call at the end)"),
        pytest.param([0, 1, 2, 3], [5, 5, 5], 2, 100, [(0, 2)], id="cuts past end and the empty cut ignored"),
        pytest.param([1, 2], [20, 20], 2, 10, [(0, 1), (1, 2)], id="every message over the limit"),
    ],
)
def test_observation_batches(
    cuts: list[int], counts: list[int], end: int, max_tokens: int, batches: list[tuple[int, int]]
) -> None:
    assert observation_batches(cuts, counts, end, max_tokens) == batches


COUNTER = TokenCounter(exact=False)
WORDS = " ".join(f"word{i:03d}" for i in range(60))  # 120 tokens for the heuristic counter


def test_observer_requests_cut_a_large_message_out_of_its_batch() -> None:
    big = text("assistant", WORDS)
    messages = [U, call("a"), big, result("a"), A]
    counts = [1, 2, COUNTER.count_message(big), 2, 1]
    requests = observer_requests(messages, counts, 20, COUNTER)
    pieces = split_message(big, 20, COUNTER)
    assert len(pieces) > 1
    assert requests == [[U], [messages[1]], *([p] for p in pieces), [messages[3]], [A]]


def test_observer_requests_keep_whole_messages_together() -> None:
    messages = [U, A, U, A]
    assert observer_requests(messages, [5, 5, 5, 5], 20, COUNTER) == [messages]
    assert observer_requests(messages, [5, 5, 5, 5], 10, COUNTER) == [messages[:2], messages[2:]]
    assert observer_requests([], [], 10, COUNTER) == []


def test_observer_requests_send_a_message_of_exactly_the_limit_whole() -> None:
    tool_call = call("a")
    messages = [U, tool_call, result("a"), A]
    # the call and its result are one batch of 20 tokens; each is 10 tokens: both whole, together
    assert observer_requests(messages, [1, 10, 10, 1], 10, COUNTER) == [[U], [tool_call, messages[2]], [A]]


def test_observer_requests_small_messages_around_a_large_one() -> None:
    big = text("assistant", WORDS)
    first, last = text("assistant", "before"), text("assistant", "after")
    messages = [U, call("a"), first, big, last, result("a")]
    counts = [1, 2, 2, COUNTER.count_message(big), 2, 2]
    requests = observer_requests(messages, counts, 20, COUNTER)
    pieces = split_message(big, 20, COUNTER)
    assert requests == [[U], [messages[1], first], *([p] for p in pieces), [last, messages[5]]]


# --------------------------------------------------------------------------------------------
# split_message
# --------------------------------------------------------------------------------------------


class CountingCounter(TokenCounter):
    def __init__(self) -> None:
        super().__init__(exact=False)
        self.text_calls = 0

    def count_text(self, text: str | None) -> int:
        self.text_calls += 1
        return super().count_text(text)


@pytest.mark.parametrize(
    ("max_tokens", "lengths"),
    [
        pytest.param(20, [40, *[48] * 9, 7], id="20 tokens"),
        pytest.param(40, [96, 128, 128, 127], id="40 tokens"),
        pytest.param(200, [len(WORDS)], id="fits whole"),
    ],
)
def test_split_text_at_spaces_within_the_limit(max_tokens: int, lengths: list[int]) -> None:
    counter = CountingCounter()
    message = Message(id="m1", role="user", parts=(TextPart(text=WORDS),), seq=9)
    pieces = split_message(message, max_tokens, counter)
    texts = [p.parts[0].text for p in pieces]  # type: ignore[union-attr]
    assert "".join(texts) == WORDS
    assert [len(t) for t in texts] == lengths
    assert all(t.endswith(" ") for t in texts[:-1])  # cut after a space, never inside a word
    assert all(COUNTER.count_message(p) <= max_tokens for p in pieces)
    assert all((p.id, p.role, p.seq, len(p.parts)) == ("m1", "user", 9, 1) for p in pieces)
    assert counter.text_calls <= len(pieces) + 2  # about one count per piece


def test_split_prefers_a_line_break() -> None:
    lines = "\n".join(" ".join(f"w{i}{j}" for j in range(6)) for i in range(12))
    pieces = split_message(Message(role="user", parts=(TextPart(text=lines),)), 30, COUNTER)
    texts = [p.parts[0].text for p in pieces]  # type: ignore[union-attr]
    assert "".join(texts) == lines and len(texts) > 2
    assert all(t.endswith("\n") for t in texts[:-1])


def test_split_text_without_spaces_still_respects_the_limit() -> None:
    blob = "abcdefghij" * 60
    pieces = split_message(Message(role="user", parts=(TextPart(text=blob),)), 25, COUNTER)
    texts = [p.parts[0].text for p in pieces]  # type: ignore[union-attr]
    assert "".join(texts) == blob and len(texts) > 2
    assert all(COUNTER.count_message(p) <= 25 for p in pieces)


def tool_output(size: int) -> ToolResultPart:
    return ToolResultPart(tool_call_id="t", tool_name="x", result="r" * size)


def shape(pieces: list[Message]) -> list[list[str]]:
    return [[f"{type(p).__name__[:4]}{COUNTER.count_part(p)}" for p in piece.parts] for piece in pieces]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        pytest.param((TextPart(text="hello there"), tool_output(200), TextPart(text="bye")),
                     [["Text2"], ["Tool73"], ["Text1"]], id="a part too large to cut is a piece of its own"),
        pytest.param((tool_output(10),) * 4, [["Tool6"] * 3, ["Tool6"]], id="uncuttable parts packed up to the limit"),
        pytest.param((tool_output(200),), [["Tool73"]], id="one uncuttable part"),
        pytest.param((TextPart(text=""), tool_output(10)), [["Text0", "Tool6"]], id="an empty text part is kept"),
        pytest.param((tool_output(10), TextPart(text=WORDS)),
                     [["Tool6", "Text13"], ["Text23"], ["Text23"], ["Text23"], ["Text23"], ["Text20"]],
                     id="text fills the rest of a piece"),
        pytest.param((TextPart(text="ab"), TextPart(text="cd"), TextPart(text="ef")), [["Text1", "Text1", "Text1"]],
                     id="small text parts share a piece"),
    ],
)
def test_split_parts(parts: tuple[TextPart | ToolResultPart, ...], expected: list[list[str]]) -> None:
    message = Message(role="assistant", parts=parts)
    pieces = split_message(message, 30, COUNTER)
    assert shape(pieces) == expected
    joined = [p for piece in pieces for p in piece.parts]
    assert [p for p in joined if not isinstance(p, TextPart)] == [p for p in parts if not isinstance(p, TextPart)]
    assert "".join(p.text for p in joined if isinstance(p, TextPart)) == "".join(
        p.text for p in parts if isinstance(p, TextPart)
    )


@pytest.mark.parametrize(
    ("text_", "pos", "end", "soft"),
    [
        pytest.param("aaaa bbbb\ncccc dddd", 0, 17, 10, id="a line break before a later space"),
        pytest.param("a b c d e f", 0, 10, 10, id="the last space"),
        pytest.param("abcde fghij", 0, 10, 6, id="a space exactly halfway"),
        pytest.param("ab cdefghij", 0, 8, 8, id="a space only in the first half: no soft end"),
        pytest.param("0123456789abcdefg hij", 10, 20, 18, id="halfway is measured from pos"),
    ],
)
def test_soft_end(text_: str, pos: int, end: int, soft: int) -> None:
    assert _soft_end(text_, pos, end) == soft


EMOJI = "\U0001F600" * 20  # 2 tokens each for the heuristic counter


@pytest.mark.parametrize(
    ("text_", "pos", "budget", "chars_per_token", "expected"),
    [
        pytest.param(WORDS, 0, 10, 3.0, (24, 7), id="first guess fits, ends after a space"),
        pytest.param(WORDS, 0, 1, 0.5, (1, 1), id="at least one character"),
        pytest.param("ab cd ef", 0, 100, 3.0, (8, 3), id="the rest of the text fits: no soft end"),
        pytest.param("\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", 0, 2, 3.0, (2, 2),
                     id="shrunk to exactly the budget"),
        pytest.param(EMOJI, 0, 1, 2.0, (1, 2), id="one character over the budget is a piece anyway"),
        pytest.param(EMOJI, 1, 1, 3.0, (2, 2), id="one character over the budget, later in the text"),
        pytest.param(EMOJI, 0, 19, 0.53, (9, 18), id="shrunk by one character"),
    ],
)
def test_piece_end(text_: str, pos: int, budget: int, chars_per_token: float, expected: tuple[int, int]) -> None:
    assert _piece_end(text_, pos, budget, chars_per_token, COUNTER) == expected


FRAME = 6  # what the heuristic counter charges a piece of an assistant or user message besides its parts, +1


@pytest.mark.parametrize(
    ("parts", "max_tokens", "expected"),
    [
        pytest.param((tool_output(10),) * 4, FRAME + 28, [["Tool6"] * 4], id="parts that fill a piece exactly"),
        pytest.param((*(tool_output(10),) * 4, TextPart(text="hello world again and again")), FRAME + 29,
                     [["Tool6"] * 4 + ["Text1"], ["Text5"]], id="one token left: text starts in it"),
        pytest.param((TextPart(text="ab"),) * 30, 30, [["Text1"] * 24, ["Text1"] * 6],
                     id="small text parts up to the limit"),
        pytest.param((TextPart(text=" ".join(f"w{i}" for i in range(20))), tool_output(10)), 30,
                     [["Text23"], ["Text18"], ["Tool6"]], id="a part after text that filled most of a piece"),
    ],
)
def test_split_parts_at_the_limit(
    parts: tuple[TextPart | ToolResultPart, ...], max_tokens: int, expected: list[list[str]]
) -> None:
    pieces = split_message(Message(role="assistant", parts=parts), max_tokens, COUNTER)
    assert shape(pieces) == expected
    assert all(COUNTER.count_message(p) <= max_tokens for p in pieces)


@pytest.mark.parametrize(
    ("body", "max_tokens", "lengths", "most"),
    [
        pytest.param("abcdefghij" * 6, FRAME, [3] * 20, FRAME, id="the smallest limit: one token a piece"),
        pytest.param("abcdefghij" * 6, FRAME + 3, [9, 10, 10, 10, 11, 10], FRAME + 1, id="a few tokens a piece"),
        pytest.param("\U0001F600" * 40, 20, [6, 7, 7, 7, 7, 6], 19, id="two tokens a character"),
        pytest.param("\U0001F600" * 5, FRAME, [1] * 5, FRAME + 1, id="a character over the limit is a piece anyway"),
    ],
)
def test_split_text_lengths(body: str, max_tokens: int, lengths: list[int], most: int) -> None:
    pieces = split_message(Message(role="user", parts=(TextPart(text=body),)), max_tokens, COUNTER)
    texts = [p.parts[0].text for p in pieces]  # type: ignore[union-attr]
    assert "".join(texts) == body
    assert [len(t) for t in texts] == lengths
    assert max(COUNTER.count_message(p) for p in pieces) == most

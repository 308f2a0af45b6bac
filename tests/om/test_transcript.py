"""The observer transcript: headers, time labels, tools, attachments and caps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from obsmem.om.text.transcript import format_args, format_transcript, truncate_to_tokens
from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

T0 = datetime(2026, 1, 15, 14, 30, tzinfo=UTC)


def words(text: str) -> int:
    return len(text.split())


def msg(role: str, *parts: object, at: datetime = T0) -> Message:
    return Message(role=role, parts=parts, created_at=at)


def render(*messages: Message, **kwargs: object) -> str:
    return format_transcript(messages, count_tokens=words, **kwargs).text  # type: ignore[arg-type]


def test_date_header_and_time_label_only_when_they_change() -> None:
    text = render(
        Message.user("Find me a flight to Berlin.", created_at=T0),
        Message.assistant("Searching now.", created_at=T0 + timedelta(seconds=20)),
        Message.user("Make it Friday.", created_at=T0 + timedelta(minutes=5)),
        Message.assistant("Done.", created_at=T0 + timedelta(days=1, hours=-13)),
    )
    assert text == (
        "Jan 15 2026:\nUser (2:30 PM): Find me a flight to Berlin.\n\n"
        "Assistant: Searching now.\n\n"
        "User (2:35 PM): Make it Friday.\n\n"
        "Jan 16 2026:\nAssistant (1:30 AM): Done."
    )


def test_timezone_moves_dates_and_times() -> None:
    berlin_winter = timezone(timedelta(hours=1))
    text = render(Message.user("late", created_at=datetime(2026, 1, 15, 23, 30, tzinfo=UTC)), timezone=berlin_winter)
    assert text == "Jan 16 2026:\nUser (12:30 AM): late"


def test_noon_and_midnight_labels() -> None:
    text = render(
        Message.user("a", created_at=datetime(2026, 1, 15, 0, 5, tzinfo=UTC)),
        Message.user("b", created_at=datetime(2026, 1, 15, 12, 0, tzinfo=UTC)),
    )
    assert "User (12:05 AM): a" in text and "User (12:00 PM): b" in text


def test_tool_call_once_per_id_and_results() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="search_flights", args={"to": "BER", "date": "2026-01-16"})
    text = render(
        msg("assistant", TextPart(text="Let me look."), call),
        msg("tool", ToolResultPart(tool_call_id="c1", tool_name="search_flights", result=[{"flight": "LH 123"}])),
        msg("assistant", call, TextPart(text="Found one.")),  # a provider echoing the call
        msg("tool", ToolResultPart(tool_call_id="c2", tool_name="book", result="", is_error=False)),
        msg("tool", ToolResultPart(tool_call_id="c3", tool_name="pay", result="card declined", is_error=True)),
    )
    assert text.count("Tool Call search_flights") == 1
    assert 'Tool Call search_flights: {to: "BER", date: "2026-01-16"}' in text
    assert 'Tool Result search_flights: [{"flight": "LH 123"}]' in text
    assert "Tool Result book: [empty result]" in text
    assert "Tool Error pay: card declined" in text
    assert "Assistant: Found one." in text


def test_message_starting_with_a_tool_part_puts_parts_on_their_own_lines() -> None:
    call = ToolCallPart(tool_call_id="c1", tool_name="ls", args={})
    text = render(msg("assistant", call, TextPart(text="Listing.")))
    assert text == "Jan 15 2026:\nAssistant (2:30 PM):\nTool Call ls: {}\nListing."


def test_reasoning_attachments_and_data_parts() -> None:
    text_and_files = format_transcript(
        [
            msg(
                "user",
                TextPart(text="See these."),
                FilePart(media_type="image/png", url="https://x.test/cat.png"),
                FilePart(media_type="application/pdf", filename="report.pdf", data="AAAA"),
                DataPart(name="om-observation-start", data={"cycle": 1}),
            ),
            msg("assistant", ReasoningPart(text="The user wants a summary."), TextPart(text="Sure.")),
            msg("assistant", DataPart(name="om-marker")),  # marker-only: skipped entirely
        ],
        count_tokens=words,
    )
    text = text_and_files.text
    assert "Image: [Image #1: cat.png]" in text
    assert "File: [File #2: report.pdf]" in text
    assert "Reasoning: The user wants a summary." in text
    assert "om-observation-start" not in text and "om-marker" not in text
    assert [f.media_type for f in text_and_files.attachments] == ["image/png", "application/pdf"]


def test_result_capped_by_tokens() -> None:
    big = " ".join(f"w{i}" for i in range(20_000))
    text = render(msg("tool", ToolResultPart(tool_call_id="c", tool_name="dump", result=big)))
    line = text.split("\n")[-1]
    assert "[truncated" in line
    body = line.split("Tool Result dump: ", 1)[1].split(" … [truncated")[0]
    assert words(body) <= 5000
    assert words(body) > 4000  # the cut lands near the budget, not far below it


def test_truncate_to_tokens_leaves_short_text_alone() -> None:
    assert truncate_to_tokens("a b c", 5, words) == "a b c"
    assert truncate_to_tokens("a b c d e f", 3, words).startswith("a b")


def test_argument_outline_caps() -> None:
    assert format_args({"q": "x" * 500}).count("x") == 160
    assert "(+340 chars)" in format_args({"q": "x" * 500})
    wide = format_args({"items": list(range(30))})
    assert "… +10 more" in wide and "19" in wide and ", 20," not in wide
    deep: dict[str, object] = {"leaf": 1}
    for i in range(8):
        deep = {f"k{i}": deep}
    assert "keys}" in format_args(deep)
    assert format_args('{"a": 1}') == "{a: 1}"
    assert format_args("not json") == "not json"
    assert format_args("") == "{}"
    assert "[inline data" in format_args({"img": "data:image/png;base64," + "A" * 1000})


def test_inline_data_in_results_is_replaced() -> None:
    text = render(msg("tool", ToolResultPart(tool_call_id="c", tool_name="shot", result={"png": "data:" + "A" * 5000})))
    assert "[inline data, 5005 chars]" in text

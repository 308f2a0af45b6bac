"""How one message reads in a terminal (``obsmem demo``'s context, ``obsmem show``'s tail)."""

from __future__ import annotations

import pytest

from obsmem import DataPart, FilePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from obsmem.cli.render import clip, render_message

LONG = {"rows": [{"flight": f"LH {1000 + i}", "price_eur": 300 + i} for i in range(40)]}


def _call(name: str, args: dict[str, object] | str | None = None) -> ToolCallPart:
    return ToolCallPart(tool_call_id="c1", tool_name=name, args={} if args is None else args)


def _result(name: str, result: object, *, error: bool = False) -> ToolResultPart:
    return ToolResultPart(tool_call_id="c1", tool_name=name, result=result, is_error=error)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((TextPart(text="Hello there"),), "Hello there"),
        ((_call("search", {"query": "flights to Lisbon", "limit": 5}),),
         "→ tool search(query='flights to Lisbon', limit=5)"),
        ((_call("search", '{"query": "raw json"}'),), '→ tool search({"query": "raw json"})'),
        ((_call("noop"),), "→ tool noop()"),
        ((_result("search", {"hits": 2}),), '← result search: {"hits": 2}'),
        ((_result("search", "timeout", error=True),), "← error search: timeout"),
        ((ReasoningPart(text="think  about\nit"),), "(reasoning) think about it"),
        ((FilePart(media_type="image/png", filename="plan.png"),), "(file image/png plan.png)"),
        ((TextPart(text="Let me look."), _call("search", {"q": "x"})),
         "Let me look.\n→ tool search(q='x')"),
        ((DataPart(name="om-observation-end", data={"cycle_id": "c"}),), "(markers only)"),
        ((TextPart(text="done"), DataPart(name="om-observation-end", data={})), "done"),
    ],
    ids=["text", "call", "raw-args", "no-args", "result", "error", "reasoning", "file", "text+call",
         "markers", "text+marker"],  # fmt: skip
)
def test_render_message(parts: tuple[object, ...], expected: str) -> None:
    message = Message(role="assistant", parts=parts)
    assert render_message(message) == expected


def test_a_long_result_is_cut_and_says_so() -> None:
    message = Message(role="tool", parts=(_result("flights", LONG),))
    rendered = render_message(message, result_chars=100)
    assert rendered.startswith('← result flights: {"rows": [{"flight": "LH 1000"')
    assert rendered.endswith("…") and len(rendered) == len("← result flights: ") + 100


def test_a_long_argument_is_cut() -> None:
    rendered = render_message(Message(role="assistant", parts=(_call("write", {"text": "word " * 100}),)))
    assert rendered.startswith("→ tool write(text='word word") and rendered.endswith("…')")


@pytest.mark.parametrize(("text", "limit", "expected"), [
    ("short", 10, "short"), ("a  b\n c", 10, "a b c"), ("abcdefghij", 5, "abcd…"),
    ("exactly5", 8, "exactly5"),
])  # fmt: skip
def test_clip(text: str, limit: int, expected: str) -> None:
    assert clip(text, limit) == expected

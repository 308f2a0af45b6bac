"""Hypothesis strategies for valid obsmem conversations with parallel tool calls, and a normal form.

:func:`conversations` builds what an ordinary agent loop produces: system instructions, user
messages (some with images, some with obsmem's data markers), assistant steps that call one to
three tools in parallel, their results in any order and split over any number of ``tool``
messages (or carried at the head of the next user message), reasoning parts, and final answers.
With ``pending=True`` the conversation may end on an assistant message whose calls are not (all)
answered yet, as a turn does while its tools run.

:func:`normal_form` is what every converter must preserve: the text, attachments, calls and
results in the order a model sees them, independent of how they are split into messages.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from obsmem.types import (
    DataPart,
    FilePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["conversations", "normal_form"]

TOOL_NAMES = ("search", "get_weather", "calc", "read_file")

texts = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=24).filter(
    lambda s: bool(s.strip())
)
_scalars = st.one_of(st.integers(-1000, 1000), st.text(max_size=8), st.booleans(), st.none())
args = st.dictionaries(st.text(min_size=1, max_size=6), _scalars, max_size=3)
results = st.one_of(
    st.text(max_size=30),
    st.dictionaries(st.text(min_size=1, max_size=6), _scalars, max_size=3),
    st.lists(st.integers(), max_size=3),
    st.integers(),
)
_IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp"}
images = st.one_of(
    st.binary(min_size=1, max_size=12).map(
        lambda b: FilePart(media_type="image/png", data=base64.b64encode(b).decode("ascii"))
    ),
    st.sampled_from(["a.png", "b.jpg", "c.webp"]).map(
        lambda name: FilePart(
            media_type=_IMAGE_TYPES[name.rsplit(".", 1)[1]], url=f"https://example.com/{name}"
        )
    ),
)
markers = st.builds(lambda n: DataPart(name=f"om-marker-{n}", data={"n": n}), st.integers(0, 9))


@st.composite
def conversations(draw: st.DrawFn, *, pending: bool = False, max_exchanges: int = 4) -> list[Message]:
    ids = itertools.count()
    messages = [Message.system(draw(texts)) for _ in range(draw(st.integers(0, 2)))]
    carry: list[Part] = []  # results carried into the head of the next user message
    exchanges = draw(st.integers(1, max_exchanges))
    for exchange in range(exchanges):
        parts: list[Part] = [*carry, TextPart(text=draw(texts))]
        carry = []
        if draw(st.integers(0, 3)) == 0:
            parts.append(draw(images))
        if draw(st.integers(0, 3)) == 0:
            parts.insert(draw(st.integers(0, len(parts))), draw(markers))
        messages.append(Message(role="user", parts=tuple(parts)))
        if draw(st.integers(0, 4)) == 0:
            messages.append(
                Message(role=draw(st.sampled_from(["user", "assistant"])), parts=(draw(markers),))
            )
        steps = draw(st.integers(0, 3))
        for step in range(steps):
            calls = [
                ToolCallPart(
                    tool_call_id=f"call_{next(ids)}",
                    tool_name=draw(st.sampled_from(TOOL_NAMES)),
                    args=draw(args),
                )
                for _ in range(draw(st.integers(1, 3)))
            ]
            head: list[Part] = []
            if draw(st.booleans()):
                head.append(ReasoningPart(text=draw(texts)))
            if draw(st.booleans()):
                head.append(TextPart(text=draw(texts)))
            messages.append(Message(role="assistant", parts=(*head, *calls)))
            answers = [
                ToolResultPart(
                    tool_call_id=c.tool_call_id,
                    tool_name=c.tool_name,
                    result=draw(results),
                    is_error=draw(st.booleans()),
                )
                for c in calls
            ]
            groups: list[list[ToolResultPart]] = [[]]
            for answer in draw(st.permutations(answers)):
                groups[-1].append(answer)
                if draw(st.booleans()):
                    groups.append([])
            groups = [g for g in groups if g]
            last_step = step == steps - 1
            if last_step and exchange < exchanges - 1 and draw(st.integers(0, 3)) == 0:
                carry = list(groups.pop())  # the next user message opens with these results
            messages.extend(Message(role="tool", parts=tuple(g)) for g in groups)
        if not carry and draw(st.integers(0, 4)) > 0:
            messages.append(Message.assistant(draw(texts)))
    if pending and draw(st.booleans()):
        calls = [
            ToolCallPart(
                tool_call_id=f"call_{next(ids)}", tool_name=draw(st.sampled_from(TOOL_NAMES)), args={}
            )
            for _ in range(draw(st.integers(1, 3)))
        ]
        messages.append(Message(role="assistant", parts=tuple(calls)))
        answered = calls[: draw(st.integers(0, len(calls) - 1))]
        if answered:
            messages.append(
                Message(
                    role="tool",
                    parts=tuple(
                        ToolResultPart(tool_call_id=c.tool_call_id, tool_name=c.tool_name, result="done")
                        for c in answered
                    ),
                )
            )
    return messages


def _file(part: FilePart) -> tuple[Any, ...]:
    data = part.data
    if data is not None and data.startswith("data:"):
        data = data.split(",", 1)[1]
    return ("file", part.media_type, data, part.url)


def normal_form(messages: Sequence[Message], *, with_errors: bool = False) -> list[tuple[Any, ...]]:
    """The events a model sees, in order; adjacent text of one role joined with a newline."""
    events: list[tuple[Any, ...]] = []

    def result(r: ToolResultPart) -> None:
        text = r.result if isinstance(r.result, str) else json.dumps(r.result, ensure_ascii=False)
        events.append(("result", r.tool_call_id, r.tool_name, text, r.is_error if with_errors else None))

    for message in messages:
        own = {c.tool_call_id for c in message.tool_calls}
        for r in message.tool_results:
            if r.tool_call_id not in own:
                result(r)
        role = "user" if message.role == "tool" else message.role
        for part in message.parts:
            if isinstance(part, TextPart):
                if events and events[-1][:2] == ("text", role):
                    events[-1] = ("text", role, f"{events[-1][2]}\n{part.text}")
                else:
                    events.append(("text", role, part.text))
            elif isinstance(part, FilePart):
                events.append(_file(part))
            elif isinstance(part, ToolCallPart):
                events.append(("call", part.tool_call_id, part.tool_name, part.args))
        for r in message.tool_results:
            if r.tool_call_id in own:
                result(r)
    return events

"""Server-sent events: the framing OpenAI- and Anthropic-style APIs use to stream a response.

A stream is lines; an event is the ``event:`` and ``data:`` lines up to a blank line. The
parser is pure (lines in, events out) so its edge cases are tested without a socket:
multi-line ``data``, comments (``: keep-alive``), CRLF endings and an event that the stream
ended before finishing, which is *not* emitted: half an event is a cut stream, and the
provider module reports that as an incomplete response.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["ServerSentEvent", "parse_sse"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str
    data: str


async def parse_sse(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """Group ``lines`` (without their line endings) into events.

    ``event`` defaults to ``"message"`` as the SSE specification says. Fields other than
    ``event`` and ``data`` (``id``, ``retry``) carry nothing obsmem needs and are dropped.
    """
    event = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data or event:
                yield ServerSentEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)

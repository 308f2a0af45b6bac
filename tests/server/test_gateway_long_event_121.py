"""A streamed answer with one event longer than 4 MiB (helper-121's hostile review): a model writing
a long document or a large tool argument in one delta, which the upstream sends across many reads.

On main the gateway relayed the event to the client whole, but the reader that assembles the answer
to save dropped any line that grew past 4 MiB before its end arrived (``MAX_LINE_BYTES``), without a
word: the stream still completed, and memory saved the answer without that delta (here: only
"Intro. " and " Outro.") though the client had read all of it. The answer is now read from the same
whole events the client gets (bounded in all by the 32 MiB an answer may carry).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.test_gateway_streams import Answer, Gateway, chunk, open_gateway, sse

LONG = "long document. " * (5 * 1024 * 1024 // 15)  # about 5 MiB in one delta


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    yield from open_gateway(tmp_path_factory.mktemp("long-event"))


def test_one_delta_longer_than_4_mib_is_saved_as_the_client_read_it(gateway: Gateway) -> None:
    event = chunk({"content": LONG})
    pieces = [event[at : at + 64 * 1024] for at in range(0, len(event), 64 * 1024)]  # many reads

    def answer() -> Iterator[bytes]:
        yield chunk({"role": "assistant", "content": "Intro. "})
        yield from pieces
        yield chunk({"content": " Outro."}, "stop")
        yield sse("[DONE]")

    gateway.upstream.respond = lambda path, body: Answer(answer())
    stream = gateway.client("long-event").chat.completions.create(
        model="m", stream=True, messages=[{"role": "user", "content": "write it"}])  # fmt: skip
    read = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert read == "Intro. " + LONG + " Outro."
    stored = gateway.stored("long-event")
    assert [m["role"] for m in stored] == ["user", "assistant"]
    saved = "".join(p.get("text", "") for p in stored[1]["parts"] if p["type"] == "text")
    assert len(saved) == len(read) and saved == read

"""A pre-signed download link reaches the observer without its signature (helper-126's hostile
review).

An agent that handles files gets pre-signed links in its tools' results (S3, Google Cloud
Storage, Azure SAS, CloudFront): whoever holds one can download the file until it expires (S3:
up to 7 days). The signature sits in a query parameter (``X-Amz-Signature=``,
``X-Goog-Signature=``, ``sig=``, ``Signature=``) no detector knew, under a key like
``download_url`` that the structured rule does not treat as secret: the whole working link went
to the hosted observer (and from there into its observations).
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, MemoryConfig, Message, PrivacyConfig
from obsmem.models.testing import FunctionModel
from obsmem.privacy import Redactor
from obsmem.types import ToolCallPart, ToolResultPart

pytestmark = pytest.mark.anyio

SIGNATURES = {
    "s3": "4f2a6c0e9b1d3e5f7a9c1b3d5e7f9a1c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f",
    "s3_session": "IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQ",
    "gcs": "8a1f0c3e5b7d9f1a3c5e7b9d1f3a5c7e9b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a",
    "azure": "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbA%3D%3D",
    "cloudfront": "nitfHRCrtziwO2HwPfWw~yYDhUF5EwRunQA-j19DzZrvDh6hQ73lDx~-ar3UocvvRQVw6EkC~GdpGQy",
}
LINKS = {
    "report": "https://bucket.s3.amazonaws.com/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261205T000000Z"
              f"&X-Amz-Expires=604800&X-Amz-Security-Token={SIGNATURES['s3_session']}"
              f"&X-Amz-SignedHeaders=host&X-Amz-Signature={SIGNATURES['s3']}",
    "slides": "https://storage.googleapis.com/b/slides.pdf?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Expires=900"
              f"&X-Goog-SignedHeaders=host&X-Goog-Signature={SIGNATURES['gcs']}",
    "photo": "https://acct.blob.core.windows.net/c/photo.jpg?sv=2022-11-02&sp=r&se=2026-12-31T00:00:00Z"
             f"&spr=https&sig={SIGNATURES['azure']}",
    "video": f"https://d111111abcdef8.cloudfront.net/v.mp4?Expires=1767225600&Signature={SIGNATURES['cloudfront']}"
             "&Key-Pair-Id=K2JCJMDEHXQW5F",
}


async def test_a_pre_signed_links_signature_never_reaches_the_observer() -> None:
    seen: list[str] = []

    def observer(messages: list[Message], settings: Any) -> str:
        seen.append("\n".join(m.text for m in messages))
        return "<observations>\nDate: Jun 15, 2025\n* 🔴 (10:00) User got download links.\n</observations>"

    config = MemoryConfig(observation={"message_tokens": 60, "buffer_tokens": False}, privacy=PrivacyConfig(key="k"))
    async with Memory("memory://", config=config, observer=FunctionModel(observer, name="openai:x")) as memory:
        messages = [
            Message.user("share my files please " + "x " * 30),
            Message(role="assistant", parts=(ToolCallPart(tool_call_id="c1", tool_name="share", args={"all": True}),)),
            Message(role="tool", parts=(ToolResultPart(
                tool_call_id="c1", tool_name="share",
                result=[{"name": name, "download_url": url} for name, url in LINKS.items()]),)),
            Message.assistant(f"Here is the report: {LINKS['report']} " + "y " * 30),
        ]
        turn = await memory.begin_turn(thread_id="t1", resource_id="r1", messages=messages)
        await turn.end()
        await memory.observe("t1")
    sent = "\n".join(seen)
    assert "bucket.s3.amazonaws.com/report.pdf" in sent, "the link itself (not its signature) is kept"
    assert [name for name, value in SIGNATURES.items() if value[:24] in sent] == []


@pytest.mark.parametrize(
    "text",
    ["the sig=yes flag", "Signature=pending", "email signature=Best regards", "?sig=abc"],
)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor(b"k").redact(text).text == text


@pytest.mark.parametrize("unit", ["sig=", "&sig=a1", "X-Amz-Signature=%41", "Signature=abcdefghijklmno&"])
def test_linear_on_runs_of_parameters(unit: str) -> None:
    from tests.integrity.work_count import GROWTH_BOUND, growth

    ratio = growth(Redactor(b"k").redact, lambda n: unit * max(1, n // len(unit)), 10_000)
    assert ratio < GROWTH_BOUND, f"{unit!r}: {ratio:.1f}x the work for 4x the input"

"""A Gemini (2.x / 1.5) image is counted as Gemini bills it: scaled down to fit 3072 x 3072 (its
aspect ratio kept), then 258 tokens per 768-px tile, so no image counts more than 16 tiles (4,128
tokens), as OpenAI's (2048 then 768 px) and Anthropic's (1568 px) images have a ceiling.

The tiles were counted on the image's full size: a 108-megapixel photo (12,000 x 9,000) counted
192 tiles (49,536 tokens), a 20,000 x 15,000 scan 540 tiles, and a PNG whose header claims
2,147,483,647 x 2,147,483,647 pixels (a few dozen bytes) about 2 * 10**15 tokens, in the thread's
window (``Memory.status``): one such upload and the window is over every threshold at once."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest

from obsmem import FilePart, Memory, Message, TokenCounter

pytestmark = pytest.mark.anyio

GEMINI = ("google", "gemini-2.5-flash")
TILE, MOST_TILES = 258, 16
URL = "https://example.com/photo.png"


def _png(width: int, height: int) -> str:
    """A PNG (signature, IHDR, IEND) whose header says ``width`` x ``height``, as a data URL."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(raw).decode()


def _image(width: int, height: int) -> Message:
    return Message(role="user", parts=(FilePart(media_type="image/png", url=URL, width=width, height=height),))


def _count(message: Message, provider: str = GEMINI[0], model: str = GEMINI[1]) -> int:
    return TokenCounter(provider=provider, model=model, cache_size=0).count_message(message)


@pytest.mark.parametrize(("width", "height", "fits"), [
    (12_000, 9_000, (3072, 2304)),  # a 108 MP phone photo
    (4_032, 3_024, (3072, 2304)),  # a 12 MP one
    (20_000, 15_000, (3072, 2304)),
    (100_000, 100_000, (3072, 3072)),
    (30_000, 2_000, (3072, 205)),  # a panorama
])  # fmt: skip
@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.0-flash", "gemini-1.5-pro"])
def test_a_large_image_counts_as_it_fits_3072_px(width: int, height: int, fits: tuple[int, int], model: str) -> None:
    assert _count(_image(width, height), model=model) == _count(_image(*fits), model=model)
    assert _count(_image(width, height), model=model) <= _count(_image(3072, 3072), model=model)


def test_smaller_images_keep_their_tiles() -> None:
    one_tile = _count(_image(1, 1))
    assert _count(_image(384, 384)) == _count(_image(768, 768)) == one_tile
    assert _count(_image(1536, 1536)) - one_tile == 3 * TILE
    assert _count(_image(3072, 3072)) - one_tile == (MOST_TILES - 1) * TILE


def test_no_image_counts_more_than_its_ceiling_like_the_other_providers() -> None:
    huge = _image(2**31 - 1, 2**31 - 1)
    assert _count(huge) - _count(_image(1, 1)) == (MOST_TILES - 1) * TILE
    for provider, model in [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-5")]:
        assert _count(huge, provider, model) == _count(_image(4096, 4096), provider, model)


async def test_two_pictures_do_not_fill_the_window() -> None:
    """Counted as Gemini bills them (about 7,200 tokens), a forged PNG and a 108 MP photo leave
    the window far below the 30,000-token threshold: nothing is observed yet. They counted
    about 2 * 10**15 tokens, and were observed at once."""
    counter = TokenCounter(provider=GEMINI[0], model=GEMINI[1])
    forged = Message(role="user", parts=(FilePart(media_type="image/png", data=_png(2**31 - 1, 2**31 - 1)),))
    photo = _image(12_000, 9_000)
    async with Memory("memory://", counter=counter) as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user("look"), forged, photo])
        await turn.step([Message.assistant("Two pictures.")])
        await turn.end()
        await memory.settled()
        status = await memory.status("t")
        stored = await memory.store.list_messages("t")
        observations = await memory.get_observations("t")
    assert len(stored) == 4
    assert status.message_threshold == 30_000 and status.unobserved_messages == 4, (status, observations)
    assert status.window_tokens <= 2 * MOST_TILES * TILE + 200, f"{status.window_tokens:,} tokens in the window"
    assert "image" not in observations, observations

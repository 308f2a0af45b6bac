"""Token counting: o200k parity with tiktoken, the heuristic fallback, Mastra's rules, the cache."""

from __future__ import annotations

import base64
import gzip
import json
import math
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext import openai_public  # type: ignore[import-untyped]

from obsmem.errors import ConfigError, ObsmemError
from obsmem.tokens import (
    EXACT_ESTIMATOR_ID,
    HEURISTIC_ESTIMATOR_ID,
    O200K_SHA256,
    TokenCounter,
    _build_o200k_encoding,
    count_text_tokens,
    decode_bpe_ranks,
    default_counter,
    o200k_encoding,
)
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

# --------------------------------------------------------------------------------------
# Sample texts (written for these tests)
# --------------------------------------------------------------------------------------

PROSE = """\
The harbour town woke slowly that Tuesday. Fishermen who had been out since four were already
hauling crates of mackerel up the slipway, and the bakery on the corner had its shutters half
open, letting the smell of bread drift across the square. Margaret, who ran the lighthouse
museum, didn't open until ten, but she liked to walk the long way round, past the chandlery and
the old customs house, to see which boats had come in overnight.

She'd lived here for thirty-one years and still couldn't predict the weather. The forecast said
sunshine; the gulls, huddled on the harbour wall, clearly disagreed. By eleven the first squall
had arrived, and the handful of visitors who'd wandered in were happy to linger over the display
of brass lamps and the logbooks kept by keepers whose handwriting grew shakier with each winter.
One of them, a retired engineer from Leeds, asked whether the lens still turned. "Only on
Sundays," she told him, "and only if the volunteers remember to wind it."

In the afternoon the rain settled into a steady drizzle. Margaret made tea, updated the visitor
book, and began drafting a proposal to the council: a small grant to restore the fog signal,
silent since 1987, so that children could hear what their grandparents had heard on nights when
the sea disappeared entirely and the only certainty was sound.
"""

CODE = '''\
from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass
class Inventory:
    """Tracks stock levels per warehouse and flags items that need reordering."""

    reorder_level: int = 10
    _stock: dict[str, dict[str, int]] = dataclasses.field(default_factory=lambda: defaultdict(dict))

    def receive(self, warehouse: str, sku: str, quantity: int) -> None:
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        current = self._stock[warehouse].get(sku, 0)
        self._stock[warehouse][sku] = current + quantity

    def ship(self, warehouse: str, sku: str, quantity: int) -> bool:
        available = self._stock[warehouse].get(sku, 0)
        if available < quantity:
            return False
        self._stock[warehouse][sku] = available - quantity
        return True

    def needs_reorder(self) -> list[tuple[str, str]]:
        low = []
        for warehouse, items in sorted(self._stock.items()):
            for sku, count in sorted(items.items()):
                if count < self.reorder_level:
                    low.append((warehouse, sku))
        return low


def summarize(inventory: Inventory) -> str:
    lines = [f"{w}/{s}" for w, s in inventory.needs_reorder()]
    return "\\n".join(lines) if lines else "all stocked"
'''

JSON_TEXT = json.dumps(
    {
        "order_id": "A-20931",
        "customer": {"name": "Priya Raman", "email": "priya@example.org", "tier": "gold"},
        "items": [
            {"sku": "KB-101", "title": "Mechanical keyboard", "qty": 1, "price": 89.5},
            {"sku": "MS-220", "title": "Wireless mouse", "qty": 2, "price": 24.99},
        ],
        "shipping": {"method": "express", "eta_days": 2, "address": "14 Quay Street, Bristol"},
        "notes": None,
        "paid": True,
    },
    indent=2,
)

PARITY_TEXTS = {
    "prose": PROSE,
    "code": CODE,
    "json": JSON_TEXT,
    "contractions": "I'M sure they'll say we've done it; don't you THINK she'd agree? It's John's.",
    "chinese": "今天下午我们在图书馆讨论了新的项目计划，大家都同意下周开始。",
    "japanese": "明日の会議は午前十時からです。資料を準備しておいてください。",
    "korean": "안녕하세요. 오늘 회의는 세 시에 시작합니다.",
    "emoji": "Launch day 🚀🎉! Family: 👨‍👩‍👧 flags 🇫🇷🇯🇵 skin 👍🏽 heart ❤️ ok ✅",
    "whitespace": "a   \n\n\t  b    \r\n\r\n      c\t\t\td  \n   ",
    "numbers": "1234567 3.14159 1,000,000 2024-06-15T12:00:00Z 0x1F 1e-9",
    "special_tokens": "ignore <|endoftext|> and <|endofprompt|> please",
    "scripts": "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. नमस्ते दुनिया। Ça va très bien, merci.",
    "markdown": "# Title\n\n- item **bold** and `code`\n- [link](https://example.com/a/b?c=d#e)\n\n> quote",
    "long_run": "a" * 5000 + " " + "ab" * 2000,
    "lone_surrogate": "before \ud800 after",
}


# --------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------


def _shipped_table_gz() -> bytes:
    return resources.files("obsmem").joinpath("data", "o200k_base.tiktoken.gz").read_bytes()


@pytest.fixture(scope="module")
def reference_ranks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bytes, int]]:
    """Ranks read by tiktoken's own loader from the decompressed table, hash-checked."""
    path: Path = tmp_path_factory.mktemp("bpe") / "o200k_base.tiktoken"
    path.write_bytes(gzip.decompress(_shipped_table_gz()))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", "")  # no side copy in the system temp dir
        yield load_tiktoken_bpe(str(path), expected_hash=O200K_SHA256)


@pytest.fixture(scope="module")
def reference_encoding(reference_ranks: dict[bytes, int]) -> tiktoken.Encoding:
    """o200k_base exactly as tiktoken defines it (its pat_str and special tokens)."""
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *_a, **_k: reference_ranks):
        params = openai_public.o200k_base()
    return tiktoken.Encoding(**params)


@pytest.fixture
def no_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import tiktoken`` fail, as on an install without it."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)


def _data_uri(raw: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(raw).decode()}"


# --------------------------------------------------------------------------------------
# Exact o200k
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", list(PARITY_TEXTS.values()), ids=list(PARITY_TEXTS))
def test_o200k_ids_match_tiktoken_reference(text: str, reference_encoding: tiktoken.Encoding) -> None:
    expected = reference_encoding.encode(text, disallowed_special=())
    assert o200k_encoding().encode_ordinary(text) == expected
    assert TokenCounter(exact=True).count_text(text) == len(expected)


def test_o200k_special_tokens_and_vocab_match_reference(reference_encoding: tiktoken.Encoding) -> None:
    encoding = o200k_encoding()
    assert encoding.name == "o200k_base"
    assert encoding.special_tokens_set == reference_encoding.special_tokens_set
    assert encoding.n_vocab == reference_encoding.n_vocab
    assert encoding.encode_single_token("<|endoftext|>") == 199999
    assert encoding.encode_single_token("<|endofprompt|>") == 200018
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [199999]


def test_encoding_is_built_from_package_data_without_tiktoken_downloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_download(*_args: object, **_kwargs: object) -> bytes:
        raise AssertionError("tiktoken tried to read or download a file")

    monkeypatch.setattr("tiktoken.load.read_file", no_download)
    monkeypatch.setattr("tiktoken.load.read_file_cached", no_download)
    encoding = _build_o200k_encoding()
    assert encoding.encode_ordinary("offline works") == o200k_encoding().encode_ordinary("offline works")
    assert o200k_encoding() is o200k_encoding()


def test_shipped_table_parses_like_tiktoken_loader(reference_ranks: dict[bytes, int]) -> None:
    assert decode_bpe_ranks(_shipped_table_gz()) == reference_ranks


def test_special_token_text_is_counted_as_text_not_rejected() -> None:
    counter = TokenCounter(exact=True)
    assert counter.count_text("<|endoftext|>") > 1


def test_whitespace_run_too_long_for_tiktoken_is_counted_in_slices() -> None:
    # tiktoken panics (a BaseException) on a whitespace run of about a million characters.
    counter = TokenCounter(exact=True)
    assert counter.count_text(" " * 1_200_000 + "x") > 0
    assert counter.count_text("a\n" + "\t " * 600_000 + "b") > 0


def test_sliced_whitespace_run_stays_within_a_token_per_slice(reference_encoding: tiktoken.Encoding) -> None:
    text = "start" + " " * 250_000 + "end"  # long enough to be sliced, short enough for tiktoken
    expected = len(reference_encoding.encode_ordinary(text))
    assert abs(TokenCounter(exact=True).count_text(text) - expected) <= 3


@pytest.mark.parametrize(
    ("compressed", "problem"),
    [
        (gzip.compress(b"dGVzdA== 0\n"), "sha256"),
        (b"this is not gzip at all", "not valid gzip"),
        (gzip.compress(b"x")[:-4], "not valid gzip"),
    ],
    ids=["wrong-content", "not-gzip", "truncated-gzip"],
)
def test_corrupted_table_raises_obsmem_error_naming_the_file(compressed: bytes, problem: str) -> None:
    with pytest.raises(ObsmemError, match="corrupted") as caught:
        decode_bpe_ranks(compressed, source="/site-packages/obsmem/data/o200k_base.tiktoken.gz")
    assert "o200k_base.tiktoken.gz" in str(caught.value)
    assert problem in str(caught.value)


def test_one_flipped_byte_in_the_real_table_is_detected() -> None:
    raw = bytearray(gzip.decompress(_shipped_table_gz()))
    raw[1000] ^= 0x01
    with pytest.raises(ObsmemError, match="sha256"):
        decode_bpe_ranks(gzip.compress(bytes(raw)))


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("text", ["", None])
def test_empty_and_none_text_count_zero(exact: bool, text: str | None) -> None:
    assert TokenCounter(exact=exact).count_text(text) == 0


def test_estimator_ids() -> None:
    assert TokenCounter().estimator_id == EXACT_ESTIMATOR_ID == "o200k-v1"
    assert TokenCounter(exact=False).estimator_id == HEURISTIC_ESTIMATOR_ID == "heuristic-v1"
    assert TokenCounter().exact and not TokenCounter(exact=False).exact


def test_default_counter_is_shared_and_exact() -> None:
    assert default_counter() is default_counter()
    assert count_text_tokens("hello world") == default_counter().count_text("hello world") == 2


# --------------------------------------------------------------------------------------
# Heuristic fallback
# --------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_tiktoken")
def test_missing_tiktoken_falls_back_to_heuristic() -> None:
    counter = TokenCounter()
    assert counter.estimator_id == HEURISTIC_ESTIMATOR_ID
    assert counter.count_text(PROSE) > 0


@pytest.mark.usefixtures("no_tiktoken")
def test_exact_true_without_tiktoken_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="tiktoken"):
        TokenCounter(exact=True)


@pytest.mark.parametrize(
    ("name", "text", "bound"),
    [
        ("english-prose", PROSE, 0.15),
        ("python-code", CODE, 0.15),
        ("json", JSON_TEXT, 0.15),
        ("chinese", PARITY_TEXTS["chinese"] * 20, 0.25),
    ],
)
def test_heuristic_stays_close_to_exact(name: str, text: str, bound: float) -> None:
    exact = TokenCounter(exact=True).count_text(text)
    estimate = TokenCounter(exact=False).count_text(text)
    error = estimate / exact - 1
    print(f"{name}: exact {exact}, heuristic {estimate}, error {error:+.1%}")
    assert abs(error) <= bound


def test_heuristic_beats_chars_over_four_on_code_and_cjk() -> None:
    exact_counter, heuristic = TokenCounter(exact=True), TokenCounter(exact=False)
    for text in (CODE, PARITY_TEXTS["chinese"] * 20):
        exact = exact_counter.count_text(text)
        assert abs(heuristic.count_text(text) - exact) < abs(len(text) / 4 - exact)


# --------------------------------------------------------------------------------------
# Messages and parts (spec §7)
# --------------------------------------------------------------------------------------


def _round(value: float) -> int:
    return math.floor(value + 0.5)


def test_message_is_role_plus_overhead_plus_parts() -> None:
    counter = TokenCounter()
    message = Message.user("hello world, how are you?")
    expected = _round(counter.count_text("user") + 3.8 + counter.count_text("hello world, how are you?"))
    assert counter.count_message(message) == expected


def test_message_list_adds_conversation_overhead_and_empty_list_is_zero() -> None:
    counter = TokenCounter()
    messages = [Message.user("first question"), Message.assistant("a longer answer to it")]
    assert counter.count_messages([]) == 0
    assert counter.count_messages(iter(())) == 0
    expected = 24 + sum(counter.count_message(m) for m in messages)
    assert counter.count_messages(messages) == expected
    assert counter.count_messages(m for m in messages) == expected


@pytest.mark.parametrize(
    "part",
    [
        DataPart(name="om-observation-start", data={"cycle": "c1", "tokens": 1200}),
        ReasoningPart(text="Let me think about this carefully before answering. " * 20),
    ],
    ids=["data", "reasoning"],
)
def test_data_and_reasoning_parts_are_free_and_not_cached(part: DataPart | ReasoningPart) -> None:
    counter = TokenCounter()
    assert counter.count_part(part) == 0
    message = Message(role="assistant", parts=(part,))
    assert counter.count_message(message) == _round(counter.count_text("assistant") + 3.8)
    assert counter.cache_info().hits == counter.cache_info().misses == 0


def test_tool_call_with_dict_args_counts_name_and_compact_json_less_overhead() -> None:
    counter = TokenCounter()
    args = {"query": "weather forecast for Bristol this weekend", "units": "metric", "days": [1, 2, 3]}
    part = ToolCallPart(tool_call_id="c1", tool_name="search_web", args=args)
    compact = json.dumps(args, separators=(",", ":"), ensure_ascii=False)
    expected = counter.count_text("search_web") + counter.count_text(compact) - 12
    assert counter.count_text(compact) > 12
    assert counter.count_part(part) == expected


@pytest.mark.parametrize(
    ("args", "counted_as"),
    [({}, ""), ({"a": 1}, ""), ("", ""), ('{"city": "Paris"}', '{"city": "Paris"}')],
    ids=["empty-dict", "small-dict-floors-at-zero", "empty-string", "string-as-is"],
)
def test_tool_call_args_edge_cases(args: dict[str, Any] | str, counted_as: str) -> None:
    counter = TokenCounter()
    part = ToolCallPart(tool_call_id="c1", tool_name="lookup", args=args)
    assert counter.count_part(part) == counter.count_text("lookup") + counter.count_text(counted_as)


@pytest.mark.parametrize(
    ("result", "is_error", "payload"),
    [
        (None, False, "[empty result]"),
        ("Sunny, 21°C, light wind from the west.", False, "Sunny, 21°C, light wind from the west."),
        ("Error: city not found", True, "Error: city not found"),
    ],
    ids=["none-is-empty-result", "string-as-is", "error-text"],
)
def test_tool_result_with_text_payload(result: str | None, is_error: bool, payload: str) -> None:
    counter = TokenCounter()
    part = ToolResultPart(tool_call_id="c1", tool_name="weather", result=result, is_error=is_error)
    assert counter.count_part(part) == _round(
        3.8 + counter.count_text("weather") + counter.count_text(payload)
    )


def test_tool_result_with_structured_payload_is_indented_json_less_overhead() -> None:
    counter = TokenCounter()
    result = {"temperature": 21, "conditions": ["sunny", "windy"], "station": {"id": "EGGD", "elev": 190}}
    part = ToolResultPart(tool_call_id="c1", tool_name="weather", result=result)
    body = counter.count_text(json.dumps(result, indent=2, ensure_ascii=False)) - 12
    assert counter.count_part(part) == _round(3.8 + counter.count_text("weather") + body)


@pytest.mark.parametrize(
    "result",
    [{"at": object(), "ok": {1, 2}}, {(1, 2): "tuple key"}, [b"raw bytes", 3 + 4j]],
    ids=["object-and-set", "tuple-key", "bytes-and-complex"],
)
def test_tool_result_with_unserializable_payload_still_counts(result: Any) -> None:
    counter = TokenCounter()
    part = ToolResultPart(tool_call_id="c1", tool_name="clock", result=result)
    assert counter.count_part(part) > counter.count_text("clock")


def test_message_rounds_once_over_unrounded_part_costs() -> None:
    counter = TokenCounter()
    results = tuple(ToolResultPart(tool_call_id=f"c{i}", tool_name="ping", result="pong") for i in range(3))
    message = Message(role="tool", parts=results)
    per_part = 3.8 + counter.count_text("ping") + counter.count_text("pong")
    assert counter.count_message(message) == _round(counter.count_text("tool") + 3.8 + 3 * per_part)


# --------------------------------------------------------------------------------------
# Images and files
# --------------------------------------------------------------------------------------


def _png_header(width: int, height: int) -> bytes:
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return b"\x89PNG\r\n\x1a\n" + (13).to_bytes(4, "big") + b"IHDR" + ihdr + b"\x00" * 4


def _gif_header(width: int, height: int) -> bytes:
    return b"GIF89a" + width.to_bytes(2, "little") + height.to_bytes(2, "little") + b"\x00" * 6


def _jpeg_header(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + (16).to_bytes(2, "big") + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = (
        b"\xff\xc0" + (17).to_bytes(2, "big") + b"\x08" + height.to_bytes(2, "big") + width.to_bytes(2, "big")
    )
    return b"\xff\xd8" + app0 + sof0 + b"\x03" + b"\x00" * 9


def _bmp_header(width: int, height: int) -> bytes:
    top_down = (-height).to_bytes(4, "little", signed=True)
    return b"BM" + b"\x00" * 16 + width.to_bytes(4, "little") + top_down + b"\x00" * 8


def _webp_vp8x_header(width: int, height: int) -> bytes:
    body = b"VP8X" + (10).to_bytes(4, "little") + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + (len(body) + 4).to_bytes(4, "little") + b"WEBP" + body


def _webp_vp8l_header(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"VP8L" + (5).to_bytes(4, "little") + b"\x2f" + bits.to_bytes(4, "little")
    return b"RIFF" + (len(body) + 4).to_bytes(4, "little") + b"WEBP" + body + b"\x00" * 8


def _webp_vp8_header(width: int, height: int) -> bytes:
    frame = b"\x00\x00\x00\x9d\x01\x2a" + width.to_bytes(2, "little") + height.to_bytes(2, "little")
    body = b"VP8 " + len(frame).to_bytes(4, "little") + frame
    return b"RIFF" + (len(body) + 4).to_bytes(4, "little") + b"WEBP" + body


def _image(**fields: Any) -> FilePart:
    return FilePart(media_type=fields.pop("media_type", "image/png"), **fields)


SPEC_EXAMPLES = [
    # The three numbers Mastra's token-counter tests pin (spec §9.9, item 53).
    pytest.param(None, None, _image(url="https://example.com/cat.png"), 85, id="url-without-dimensions"),
    pytest.param(
        None, None, _image(url="https://x.test/a.png", width=2048, height=1024), 1105, id="2048x1024"
    ),
    pytest.param(
        "openai", "gpt-4o", _image(data=_data_uri(b"\x00" * 1_500_000)), 765, id="1.5MB-data-uri-gpt-4o"
    ),
]


@pytest.mark.parametrize(("provider", "model", "part", "expected"), SPEC_EXAMPLES)
def test_spec_image_examples(provider: str | None, model: str | None, part: FilePart, expected: int) -> None:
    assert TokenCounter(provider=provider, model=model).count_part(part) == expected


WIDE = {"width": 2048, "height": 1024}
URL = "https://example.com/photo.jpg"

IMAGE_RULES = [
    # OpenAI and the default: base + tiles x tile.
    ("openai", "gpt-4o", _image(url=URL, detail="low", **WIDE), 85),
    ("openai", "gpt-4o", _image(url=URL, width=512, height=512), 85),  # auto -> low (<= 768)
    ("openai", "gpt-4o", _image(url=URL, width=512, height=512, detail="high"), 255),
    ("openai", "gpt-4o", _image(url=URL, width=4096, height=8192, detail="high"), 1105),
    ("openai", "gpt-4o", _image(url=URL, detail="high"), 85 + 4 * 170),  # nothing known: 4 tiles
    ("openai", "gpt-4o", _image(data=_data_uri(b"\x00" * 600_000)), 85),  # auto, <= 1 MB -> low
    ("openai", "gpt-4o", _image(data=_data_uri(b"\x00" * 3_000_000)), 85 + 6 * 170),
    ("openai", "gpt-4o", _image(data=_data_uri(b"\x00" * 5_000_000)), 85 + 8 * 170),
    ("openai", "gpt-4o", _image(data=_data_uri(b"\x00" * 300_000), detail="high"), 85 + 170),
    ("openai", "gpt-5", _image(url=URL, **WIDE), 70 + 6 * 140),
    ("openai", "gpt-4o-mini", _image(url=URL, detail="high"), 2833 + 5667),
    ("openai", "o3", _image(url=URL, **WIDE), 75 + 6 * 150),
    ("openai", "o1-preview", _image(url=URL, **WIDE), 75 + 6 * 150),
    ("openai", "computer-use-preview", _image(url=URL, **WIDE), 65 + 6 * 129),
    (None, None, _image(url=URL, token_estimate=4321), 4321),
    # Google: Gemini 3 by media resolution, legacy by 768-px tiles.
    ("google", "gemini-3-pro-preview", _image(url=URL, **WIDE), 1120),
    ("google", "gemini-2.0-flash", _image(url=URL, width=1536, height=1536), 258 * 4),
    ("google", "gemini-1.5-pro", _image(url=URL), 258),
    # Anthropic: pixels / 750 after fitting the long edge into 1568.
    ("anthropic", "claude-sonnet-4", _image(url=URL, width=1000, height=1000), 1334),
    ("anthropic", "claude-sonnet-4", _image(url=URL, width=3000, height=2000), math.ceil(1568 * 1045 / 750)),
    ("anthropic", "claude-sonnet-4", _image(data=_data_uri(b"\x00" * 100_000)), 341),
    ("anthropic", "claude-sonnet-4", _image(data=_data_uri(b"\x00" * 1_000_000)), 1366),
    ("anthropic", "claude-sonnet-4", _image(data=_data_uri(b"\x00" * 3_000_000)), 2048),
    ("anthropic", "claude-sonnet-4", _image(data=_data_uri(b"\x00" * 5_000_000)), 2731),
    ("anthropic", "claude-sonnet-4", _image(url=URL), 1600),
]


@pytest.mark.parametrize(("provider", "model", "part", "expected"), IMAGE_RULES)
def test_image_rules_per_provider(
    provider: str | None, model: str | None, part: FilePart, expected: int
) -> None:
    assert TokenCounter(provider=provider, model=model).count_part(part) == expected


@pytest.mark.parametrize(
    "header",
    [
        _png_header,
        _gif_header,
        _jpeg_header,
        _bmp_header,
        _webp_vp8x_header,
        _webp_vp8l_header,
        _webp_vp8_header,
    ],
    ids=["png", "gif", "jpeg", "bmp", "webp-vp8x", "webp-vp8l", "webp-vp8"],
)
def test_inline_image_dimensions_come_from_the_header(header: Any) -> None:
    raw: bytes = header(2048, 1024) + b"\x00" * 2000
    assert TokenCounter().count_part(_image(data=_data_uri(raw))) == 1105
    plain_base64 = base64.b64encode(raw).decode()
    assert TokenCounter().count_part(_image(data=plain_base64)) == 1105


def test_image_is_recognised_by_filename_or_data_uri() -> None:
    counter = TokenCounter()
    by_name = FilePart(media_type="application/octet-stream", url=URL, width=2048, height=1024)
    by_uri = FilePart(media_type="application/octet-stream", data=_data_uri(_png_header(2048, 1024)))
    assert counter.count_part(by_name) == counter.count_part(by_uri) == 1105


PDF_100K = _data_uri(b"\x00" * 100_000, "application/pdf")
PDF_1K = _data_uri(b"\x00" * 1_000, "application/pdf")

FILE_RULES = [
    ("google", "gemini-2.0-flash", FilePart(media_type="application/pdf", data=PDF_100K), 5000),
    ("anthropic", "claude-sonnet-4", FilePart(media_type="application/pdf", data=PDF_100K), 33334),
    ("openai", "gpt-4o", FilePart(media_type="application/pdf", data=PDF_100K), 25000),
    ("google", "gemini-2.0-flash", FilePart(media_type="application/pdf", data=PDF_1K), 258),
    ("anthropic", "claude-sonnet-4", FilePart(media_type="Application/PDF; x=1", data=PDF_1K), 1500),
    (None, None, FilePart(media_type="application/pdf", data=PDF_1K), 500),
    (None, None, FilePart(media_type="text/plain", data=base64.b64encode(b"x" * 1000).decode()), 250),
    (None, None, FilePart(media_type="text/plain", data="data:text/plain,hello%20world"), 3),
    (None, None, FilePart(media_type="application/zip", data=base64.b64encode(b"z" * 10).decode()), 3),
    (None, None, FilePart(media_type="application/pdf", url=URL, token_estimate=77), 77),
]


@pytest.mark.parametrize(("provider", "model", "part", "expected"), FILE_RULES)
def test_non_image_files_by_size(
    provider: str | None, model: str | None, part: FilePart, expected: int
) -> None:
    assert TokenCounter(provider=provider, model=model).count_part(part) == expected


@pytest.mark.parametrize(
    ("part", "filename"),
    [
        (FilePart(media_type="application/pdf", url="https://x.test/docs/report.pdf?v=2"), "report.pdf"),
        (
            FilePart(media_type="application/pdf", url="https://x.test/r.pdf", filename="Q3 report.pdf"),
            "Q3 report.pdf",
        ),
        (FilePart(media_type="application/pdf", url="https://x.test/"), None),
    ],
    ids=["name-from-url", "explicit-filename", "no-name"],
)
def test_file_without_bytes_counts_its_descriptor(part: FilePart, filename: str | None) -> None:
    counter = TokenCounter()
    descriptor = json.dumps(
        {"type": "file", "media_type": "application/pdf", "filename": filename}, separators=(",", ":")
    )
    assert counter.count_part(part) == counter.count_text(descriptor)


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        (None, "openai:gpt-5", 70 + 6 * 140),
        (None, "openai/gpt-5", 70 + 6 * 140),
        (None, "gpt-5-mini", 70 + 6 * 140),
        (None, "anthropic/claude-sonnet-4", math.ceil(1568 * 784 / 750)),
        (None, "claude-3-5-sonnet-latest", math.ceil(1568 * 784 / 750)),
        ("openrouter", "anthropic/claude-sonnet-4", math.ceil(1568 * 784 / 750)),
        ("google-vertex", "gemini-3-pro", 1120),
        (None, "gemini-3-flash", 1120),
        ("Azure", "GPT-5", 70 + 6 * 140),
        ("mistral", "pixtral-large", 1105),
        (None, None, 1105),
    ],
)
def test_actor_model_resolution(provider: str | None, model: str | None, expected: int) -> None:
    part = _image(url=URL, **WIDE)
    assert TokenCounter(provider=provider, model=model).count_part(part) == expected


# --------------------------------------------------------------------------------------
# The per-part cache
# --------------------------------------------------------------------------------------


def test_identical_part_hits_the_cache_and_edit_misses() -> None:
    counter = TokenCounter()
    first = counter.count_part(TextPart(text="The meeting moved to Thursday."))
    assert counter.cache_info()[:3] == (0, 1, 1)
    again = counter.count_part(TextPart(text="The meeting moved to Thursday."))  # equal, not the same object
    assert again == first
    assert counter.cache_info()[:3] == (1, 1, 1)
    edited = counter.count_part(TextPart(text="The meeting moved to Thursday at 3pm in room 4."))
    assert edited != first
    assert counter.cache_info()[:3] == (1, 2, 2)


def test_cached_count_equals_fresh_count_for_every_part_kind() -> None:
    parts: list[Part] = [
        TextPart(text=PROSE),
        ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "tides in Bristol", "limit": 5}),
        ToolResultPart(tool_call_id="c1", tool_name="search", result={"hits": [1, 2, 3], "took_ms": 12}),
        _image(url=URL, **WIDE),
        FilePart(media_type="application/pdf", data=PDF_100K),
    ]
    warm = TokenCounter()
    first = [warm.count_part(p) for p in parts]
    second = [warm.count_part(p) for p in parts]
    fresh = [TokenCounter(cache_size=0).count_part(p) for p in parts]
    assert first == second == fresh
    assert warm.cache_info().hits == len(parts)


def test_tool_args_edit_invalidates() -> None:
    counter = TokenCounter()
    short = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "tides"})
    long = ToolCallPart(tool_call_id="c1", tool_name="search", args={"q": "tides " * 40})
    assert counter.count_part(short) < counter.count_part(long)
    assert counter.cache_info().misses == 2


def test_message_overheads_are_not_cached() -> None:
    counter = TokenCounter()
    message = Message.user("hello there")
    counter.count_messages([message, message])
    info = counter.cache_info()
    assert (info.hits, info.misses, info.size) == (1, 1, 1)  # one text part, counted twice


def test_cache_is_bounded_lru() -> None:
    counter = TokenCounter(cache_size=2)
    a, b, c = (TextPart(text=t) for t in ("alpha", "beta", "gamma"))
    counter.count_part(a)
    counter.count_part(b)
    counter.count_part(a)  # a becomes most recent; b is the eviction candidate
    counter.count_part(c)
    assert counter.cache_info().size == 2
    counter.count_part(a)
    assert counter.cache_info().hits == 2
    counter.count_part(b)
    assert counter.cache_info().misses == 4


def test_cache_size_zero_disables_caching() -> None:
    counter = TokenCounter(cache_size=0)
    part = TextPart(text="no cache")
    assert counter.count_part(part) == counter.count_part(part) == 2
    assert counter.cache_info() == (0, 0, 0, 0)


def test_negative_cache_size_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cache_size"):
        TokenCounter(cache_size=-1)


def test_with_model_shares_cache_but_images_follow_the_new_provider() -> None:
    counter = TokenCounter(provider="openai", model="gpt-4o")
    text, image = TextPart(text="shared across actors"), _image(url=URL, **WIDE)
    counter.count_part(text)
    assert counter.count_part(image) == 1105
    anthropic = counter.with_model("anthropic", "claude-sonnet-4")
    assert (anthropic.provider, anthropic.model) == ("anthropic", "claude-sonnet-4")
    assert (counter.provider, counter.model) == ("openai", "gpt-4o")
    before = anthropic.cache_info()
    anthropic.count_part(text)
    assert anthropic.cache_info().hits == before.hits + 1  # text: same key, shared cache
    assert anthropic.count_part(image) == math.ceil(1568 * 784 / 750)  # image: new key
    assert anthropic.cache_info().misses == before.misses + 1
    assert counter.count_part(image) == 1105  # the original keeps its own price
    assert anthropic.estimator_id == counter.estimator_id
    assert anthropic.cache_info() == counter.cache_info()


def test_exact_and_heuristic_counters_never_share_counts() -> None:
    exact, heuristic = TokenCounter(exact=True), TokenCounter(exact=False)
    part = TextPart(text=CODE)
    assert exact.count_part(part) == exact.count_text(CODE)
    assert heuristic.count_part(part) == heuristic.count_text(CODE)
    assert exact.estimator_id != heuristic.estimator_id

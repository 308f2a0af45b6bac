"""profiles: every vendor fact keyed by ``provider:model``, read by one model-id parser."""

from __future__ import annotations

import pytest

from obsmem.profiles import (
    ModelId,
    accepts_temperature,
    attachment_billing,
    bare_model,
    default_max_output_tokens,
    embedding_dimensions,
    parse_model_id,
    prompt_cache_ttl,
    provider_name,
    reflection_start_level,
    split_base_url,
    split_spec,
    tool_flavor,
)

MINUTE = 60.0
HOUR = 3600.0

MODEL_IDS: list[tuple[str | None, tuple[str, str]]] = [
    (None, ("", "")),
    ("", ("", "")),
    ("gpt-4o", ("", "gpt-4o")),
    ("GPT-4o", ("", "GPT-4o")),
    ("openai:gpt-4o", ("openai", "gpt-4o")),
    ("OpenAI:GPT-4o", ("openai", "GPT-4o")),
    ("openai/gpt-4o", ("openai", "gpt-4o")),
    ("openai.responses:gpt-4o", ("openai", "gpt-4o")),
    ("anthropic.messages:claude-opus-4", ("anthropic", "claude-opus-4")),
    ("ollama:llama3.1:8b", ("ollama", "llama3.1:8b")),
    ("openrouter:google/gemini-2.5-flash", ("openrouter", "google/gemini-2.5-flash")),
    ("google/gemini-2.5-flash:free", ("google", "free")),  # ':' is looked for before '/'
    (" groq :llama-3.3-70b ", ("groq", "llama-3.3-70b ")),
    (":gpt-4o", ("", "gpt-4o")),
    ("openai:", ("openai", "")),
    ("vllm:model@http://host:8000/v1", ("vllm", "model@http://host:8000/v1")),
    ("models/gemini-2.5-flash-preview", ("models", "gemini-2.5-flash-preview")),
]


@pytest.mark.parametrize(("spec", "expected"), MODEL_IDS)
def test_parse_model_id(spec: str | None, expected: tuple[str, str]) -> None:
    parsed = parse_model_id(spec)
    assert parsed == ModelId(*expected)
    assert (parsed.provider, parsed.model) == expected


def test_model_id_unpacks_like_a_tuple() -> None:
    provider, model = parse_model_id("openai:gpt-4o")
    assert (provider, model) == ("openai", "gpt-4o")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("openai.responses", "openai"),
        ("openai:gpt-4o", "openai"),
        ("anthropic.messages", "anthropic"),
        ("google/gemini-2.5-flash", "google"),
        ("OpenAI", "openai"),
        (" xai ", "xai"),
        ("groq", "groq"),
        ("openai-compatible", "openai-compatible"),
        ("", ""),
    ],
)
def test_provider_name(value: str, expected: str) -> None:
    assert provider_name(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gpt-5.1", "gpt-5.1"),
        ("openai:gpt-5.1", "gpt-5.1"),
        ("openai/GPT-5.1", "gpt-5.1"),
        ("openrouter:openai/gpt-5.1", "gpt-5.1"),
        ("ollama:llama3.1:8b", "8b"),
        (" Claude-Opus-4 ", "claude-opus-4"),
        ("", ""),
    ],
)
def test_bare_model(value: str, expected: str) -> None:
    assert bare_model(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llama3@http://host:8000/v1", ("llama3", "http://host:8000/v1")),
        ("llama3@https://host/v1", ("llama3", "https://host/v1")),
        ("team@org", ("team@org", None)),
        ("a@b@http://h", ("a@b", "http://h")),
        ("plain", ("plain", None)),
    ],
)
def test_split_base_url(text: str, expected: tuple[str, str | None]) -> None:
    assert split_base_url(text) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4o", ("openai", "gpt-4o", None)),
        ("  OpenAI:gpt-4o  ", ("openai", "gpt-4o", None)),
        ("ollama:llama3.1:8b", ("ollama", "llama3.1:8b", None)),
        ("vllm:m@http://h:8000/v1", ("vllm", "m", "http://h:8000/v1")),
        ("my.gateway:m", ("my.gateway", "m", None)),  # a registered prefix is kept whole
        ("openai/gpt-4o", None),  # specs need ':'
        ("gpt-4o", None),
        (":gpt-4o", None),
        ("openai:", None),
        ("openai:@http://h", None),
    ],
)
def test_split_spec(spec: str, expected: tuple[str, str, str | None] | None) -> None:
    assert split_spec(spec) == expected


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o", 5 * MINUTE),
        ("openai", "gpt-4", 5 * MINUTE),
        ("openai", "gpt-4.1-mini", 5 * MINUTE),
        ("openai", "gpt-5", 5 * MINUTE),
        ("openai", "gpt-5-mini", 5 * MINUTE),
        ("openai", "gpt-5.1", 5 * MINUTE),
        ("openai", "gpt-5.1-codex", 5 * MINUTE),
        ("openai", "gpt-5.4-pro", 5 * MINUTE),
        ("openai", "GPT-5.1", 5 * MINUTE),
        ("openai.responses", "gpt-4o", 5 * MINUTE),
        ("openai", "openai/gpt-5.1-codex", 5 * MINUTE),
        ("openai", "gpt-5.5", HOUR),
        ("openai", "gpt-5.10", HOUR),
        ("openai", "gpt-6", HOUR),
        ("openai", "o3", HOUR),
        ("azure-openai", "gpt-5.5", HOUR),  # "openai" anywhere in the provider
        ("google", "gemini-2.5-flash", 24 * HOUR),
        ("google.generative-ai", "gemini-2.5-pro", 24 * HOUR),
        ("gemini", "gemini-2.5-flash", 24 * HOUR),
        ("deepseek", "deepseek-chat", HOUR),
        ("groq", "llama-3.3-70b", 2 * HOUR),
        ("Groq", "llama-3.3-70b", 2 * HOUR),
        ("anthropic", "claude-sonnet-4-5", 5 * MINUTE),
        ("xai", "grok-4", 5 * MINUTE),
        ("openrouter", "openai/gpt-5.5", 5 * MINUTE),
        ("mistral", "mistral-large", 5 * MINUTE),
        ("", "unknown-model", 5 * MINUTE),
        ("", "openai:gpt-5.5", HOUR),
        ("", "google/gemini-2.5-flash", 24 * HOUR),
        ("", "groq:llama-3.3-70b", 2 * HOUR),
    ],
)
def test_prompt_cache_ttl(provider: str, model: str, expected: float) -> None:
    assert prompt_cache_ttl(provider, model) == expected


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("gpt-4o", {"openai": {"promptCacheRetention": "24h"}}, HOUR),
        ("gpt-5.5", {"openai": {"promptCacheRetention": "in_memory"}}, 5 * MINUTE),
        ("gpt-4o", {"openai": {"prompt_cache_retention": "24h"}}, HOUR),
        ("gpt-4o", {"openai": {"promptCacheRetention": "other"}}, 5 * MINUTE),
        ("gpt-5.5", {"anthropic": {"promptCacheRetention": "in_memory"}}, HOUR),
        ("gpt-4o", {"openai": "24h"}, 5 * MINUTE),
        ("gpt-4o", None, 5 * MINUTE),
    ],
)
def test_prompt_cache_ttl_openai_retention_option(
    model: str, options: dict[str, object] | None, expected: float
) -> None:
    assert prompt_cache_ttl("openai", model, options) == expected


def test_cache_retention_option_is_only_openai_s() -> None:
    options = {"openai": {"promptCacheRetention": "24h"}}
    assert prompt_cache_ttl("anthropic", "claude-sonnet-4-5", options) == 5 * MINUTE


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("gemini-2.5-flash", 2),
        ("google:gemini-2.5-flash", 2),
        ("openrouter:google/gemini-2.5-flash", 2),
        ("models/gemini-2.5-flash-preview", 2),
        (" Google:Gemini-2.5-Flash-Lite ", 2),
        ("gemini-2.5-pro", 1),
        ("openai:gpt-4o", 1),
        ("", 1),
        (None, 1),
        (42, 1),
    ],
)
def test_reflection_start_level(model_id: object, expected: int) -> None:
    assert reflection_start_level(model_id) == expected


@pytest.mark.parametrize(
    ("provider", "model", "family", "bare", "rule", "flat"),
    [
        ("openai", "gpt-4o", "openai", "gpt-4o", (85, 170, 4), None),
        (None, "openai:gpt-4o", "openai", "gpt-4o", (85, 170, 4), None),
        (None, "OpenAI.Responses:GPT-5-mini", "openai", "gpt-5-mini", (70, 140, 4), None),
        ("openai", "gpt-4o-mini", "openai", "gpt-4o-mini", (2833, 5667, 1), None),
        ("openai", "o3-pro", "openai", "o3-pro", (75, 150, 4), None),
        ("openai", "computer-use-preview", "openai", "computer-use-preview", (65, 129, 4), None),
        ("azure", "gpt-4o", "openai", "gpt-4o", (85, 170, 4), None),
        ("vertex", "gemini-2.5-pro", "google", "gemini-2.5-pro", (85, 170, 4), None),
        ("google", "gemini-3-pro", "google", "gemini-3-pro", (85, 170, 4), 1120),
        (None, "gemini-3-flash", "google", "gemini-3-flash", (85, 170, 4), 1120),
        ("openai", "gemini-3-pro", "openai", "gemini-3-pro", (85, 170, 4), None),  # the provider decides
        ("openrouter", "anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", (85, 170, 4), None),
        (None, "openrouter:google/gemini-2.5-flash", "google", "gemini-2.5-flash", (85, 170, 4), None),
        (None, "openrouter:meta/claude-lookalike", "anthropic", "claude-lookalike", (85, 170, 4), None),
        (None, "claude-opus-4", "anthropic", "claude-opus-4", (85, 170, 4), None),
        ("ollama", "llava", "", "llava", (85, 170, 4), None),
        (None, None, "", "", (85, 170, 4), None),
    ],
)
def test_attachment_billing(
    provider: str | None,
    model: str | None,
    family: str,
    bare: str,
    rule: tuple[int, int, int],
    flat: int | None,
) -> None:
    billing = attachment_billing(provider, model)
    assert (billing.family, billing.model, billing.flat_image_tokens) == (family, bare, flat)
    assert (billing.openai_rule.base, billing.openai_rule.tile, billing.openai_rule.fallback_tiles) == rule
    assert billing.cache_key == f"{family}:{bare}"


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("anthropic.messages:claude-sonnet-4-5", "anthropic"),
        ("openai:gpt-4o", "openai"),
        ("openai-compatible:qwen", "openai"),
        ("openrouter:anthropic/claude-sonnet-4-5", "openai"),  # the router's own API decides
        ("groq:llama", "openai"),
        ("ollama:llama3.1:8b", "openai"),
        ("litellm:gpt-4o", "openai"),
        ("scripted", "generic"),
        ("mistral:large", "generic"),
        (None, "generic"),
    ],
)
def test_tool_flavor(model_id: str | None, expected: str) -> None:
    assert tool_flavor(model_id) == expected


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "claude-3-5-sonnet-latest", 8_192),
        ("anthropic", "claude-3.5-haiku", 8_192),
        ("anthropic", "claude-3-haiku-20240307", 4_096),
        ("anthropic", "Claude-3-Opus", 4_096),
        ("anthropic", "claude-3-7-sonnet-latest", 32_000),
        ("anthropic", "claude-sonnet-4-5", 32_000),
        ("anthropic.messages", "claude-3-haiku", 4_096),
        ("openai", "gpt-4o", None),
        ("", "claude-3-haiku", None),
    ],
)
def test_default_max_output_tokens(provider: str, model: str, expected: int | None) -> None:
    assert default_max_output_tokens(provider, model) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("text-embedding-3-small", (1536, True)),
        ("text-embedding-3-large", (3072, True)),
        ("text-embedding-ada-002", (1536, False)),
        ("nomic-embed-text", (None, False)),
    ],
)
def test_embedding_dimensions(model: str, expected: tuple[int | None, bool]) -> None:
    assert embedding_dimensions(model) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", True),
        ("gpt-4.1-mini", True),
        ("o1", False),
        ("o3-mini", False),
        ("O4-mini", False),
        ("gpt-5", False),
        ("gpt-5.1-codex", False),
        ("openai/gpt-5", False),  # a router prefix is looked through
        ("llama3.1:8b", True),
        ("claude-sonnet-4-5", True),
    ],
)
def test_accepts_temperature(model: str, expected: bool) -> None:
    assert accepts_temperature(model) is expected


def test_a_base_url_with_credentials_is_split_at_its_start() -> None:
    """The credentials' ``@`` belongs to the URL: the model name ends at the first ``@http(s)://``."""
    from obsmem.profiles import split_base_url

    assert split_base_url("m@http://user:pw@host/v1") == ("m", "http://user:pw@host/v1")
    assert split_base_url("team@org/model@https://h:8000/v1") == ("team@org/model", "https://h:8000/v1")
    assert split_base_url("name@with-at") == ("name@with-at", None)


# -- prices (the cost ledger's estimates, issue 18) ----------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai:gpt-4o-mini", (0.15, 0.075, 0.15, 0.60)),
        ("openai:gpt-4o-mini-2024-07-18", (0.15, 0.075, 0.15, 0.60)),  # a dated snapshot: its family
        ("openai:gpt-4o", (2.50, 1.25, 2.50, 10.0)),  # not gpt-4o-mini's (the longest prefix wins)
        ("openai.responses:gpt-4.1-nano", (0.10, 0.025, 0.10, 0.40)),
        ("openrouter:openai/gpt-5-mini", (0.25, 0.025, 0.25, 2.0)),
        ("gpt-5.1-codex", (1.25, 0.125, 1.25, 10.0)),
        ("anthropic:claude-sonnet-4-5-20250929", (3.0, 0.30, 3.75, 15.0)),  # cache write 1.25x, read 0.1x
        ("anthropic:claude-sonnet-4-20250514", (3.0, 0.30, 3.75, 15.0)),
        ("anthropic:claude-haiku-4-5", (1.0, 0.10, 1.25, 5.0)),
        ("anthropic:claude-opus-4-5", (5.0, 0.50, 6.25, 25.0)),
        ("openai-text-embedding-3-small-1536", (0.02, 0.02, 0.02, 0.0)),  # OpenAIEmbedder's name
    ],
)
def test_model_price(model: str, expected: tuple[float, float, float, float]) -> None:
    from obsmem.profiles import model_price

    price = model_price(model)
    assert price is not None
    assert (price.input, price.cached_input, price.cache_write, price.output) == expected


@pytest.mark.parametrize("model", ["test:scripted", "acme:mystery", "ollama:llama3.1:8b", "", "gpt-4oz"])
def test_a_model_without_a_price_has_none(model: str) -> None:
    from obsmem.profiles import estimate_cost, model_price

    assert model_price(model) is None
    assert estimate_cost(model, 1000, 0, 0, 100) is None


def test_cost_bills_cached_and_written_tokens_at_their_prices_and_overrides_win() -> None:
    from obsmem.profiles import ModelPrice, estimate_cost

    # 1M input of which 400k cached and 100k written, 200k output, at Sonnet 4.5's prices
    cost = estimate_cost("anthropic:claude-sonnet-4-5", 1_000_000, 400_000, 100_000, 200_000)
    assert cost == pytest.approx(0.5 * 3.0 + 0.4 * 0.30 + 0.1 * 3.75 + 0.2 * 15.0)
    mine = {"acme:mystery": ModelPrice(1.0, 0.5, 1.0, 4.0), "gpt-4o": ModelPrice(9.0, 9.0, 9.0, 9.0)}
    assert estimate_cost("acme:mystery", 2_000_000, 1_000_000, 0, 1_000_000, mine) == pytest.approx(5.5)
    assert estimate_cost("openai:gpt-4o-2024-08-06", 1_000_000, 0, 0, 0, mine) == pytest.approx(9.0)
    assert estimate_cost("openai:gpt-4o-mini", 1_000_000, 0, 0, 0, mine) == pytest.approx(0.15)  # not gpt-4o's

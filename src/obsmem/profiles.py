"""What obsmem knows about each vendor's models, keyed by ``provider:model``, in one place.

Facts that depend on *which* model runs — how long its prompt cache lives, how it bills an
image, where reflection starts, which tool-definition shape it takes, its output ceiling —
used to be worked out next to each use, each with its own reading of a model id. They live
here now, as pure functions of the id, so adding a provider or a model family is one edit.

Model ids
---------
One reading of a model id, :func:`parse_model_id`::

    "openai:gpt-4o"              → ModelId("openai", "gpt-4o")
    "openai.responses:gpt-4o"    → ModelId("openai", "gpt-4o")     API flavour dropped
    "google/gemini-2.5-flash"    → ModelId("google", "gemini-2.5-flash")
    "ollama:llama3.1:8b"         → ModelId("ollama", "llama3.1:8b")  first ``:`` splits
    "openrouter:anthropic/claude-sonnet-4-5"
                                 → ModelId("openrouter", "anthropic/claude-sonnet-4-5")
    "gpt-4o"                     → ModelId("", "gpt-4o")           no provider named
    None or ""                   → ModelId("", "")

The provider is compared by :func:`provider_name` (lower-case, cut at the first ``.``, ``:``
or ``/``); the model keeps its spelling. :func:`bare_model` is the model's own name with any
router or provider prefix removed (``openai/gpt-5.1`` → ``gpt-5.1``), which is what the
per-family rules below match.

The chat-model registry (:mod:`obsmem.models.registry`) reads *specs* with the same split
but stricter rules — the prefix must be written with ``:`` and is kept exactly as registered,
since it names a factory — through :func:`split_spec`.

This module is part of the foundation: pure functions, no I/O, no obsmem imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = [
    "AttachmentBilling",
    "BillingFamily",
    "ModelId",
    "ModelPrice",
    "OpenAIImageRule",
    "PRICES_AS_OF",
    "ToolFlavor",
    "accepts_temperature",
    "attachment_billing",
    "bare_model",
    "default_max_output_tokens",
    "embedding_dimensions",
    "estimate_cost",
    "model_price",
    "parse_model_id",
    "prompt_cache_ttl",
    "provider_name",
    "reflection_start_level",
    "split_base_url",
    "split_spec",
    "tool_flavor",
]


# --------------------------------------------------------------------------------------------
# Reading a model id
# --------------------------------------------------------------------------------------------


class ModelId(NamedTuple):
    """A model id read as ``(provider, model)``; unpacks like the plain tuple it replaces."""

    provider: str
    """Bare lower-case provider name (see :func:`provider_name`), ``""`` when none is named."""
    model: str
    """The model as written after the provider prefix (case and any router prefix kept)."""


_PROVIDER_END = re.compile(r"[.:/]")
_MODEL_SEPARATORS = (":", "/")


def provider_name(provider_or_model_id: str) -> str:
    """The bare, lower-case provider name: ``"openai.responses"`` and ``"openai:gpt-4o"`` → ``"openai"``.

    Provider ids arrive with API-flavour suffixes (``.responses``, ``.messages``) or glued to a
    model id (``provider:model`` or ``provider/model``); comparisons need the name alone.
    """
    text = provider_or_model_id.strip().lower()
    return _PROVIDER_END.split(text, maxsplit=1)[0]


def _split_prefix(text: str, separators: tuple[str, ...]) -> tuple[str, str] | None:
    """``text`` split at the first occurrence of the first separator it holds; None if none."""
    for separator in separators:
        if separator in text:
            head, tail = text.split(separator, 1)
            return head, tail
    return None


def parse_model_id(spec: str | None) -> ModelId:
    """Read ``provider:model``, ``provider/model`` or a bare ``model`` (see the module table).

    ``:`` is looked for first, so ``openrouter:google/gemini`` names OpenRouter and
    ``ollama:llama3.1:8b`` keeps its tag. Nothing is refused: an empty or missing id reads as
    ``ModelId("", "")`` and a bare name as ``ModelId("", name)``.
    """
    if not spec:
        return ModelId("", "")
    split = _split_prefix(spec, _MODEL_SEPARATORS)
    if split is None:
        return ModelId("", spec)
    provider, model = split
    return ModelId(provider_name(provider), model)


_MODEL_NAME_SPLIT = re.compile(r"[:/]")


def bare_model(model: str) -> str:
    """The model's own lower-case name: ``"openrouter:openai/GPT-5.1"`` → ``"gpt-5.1"``."""
    return _MODEL_NAME_SPLIT.split(model.strip().lower())[-1]


def split_base_url(model: str) -> tuple[str, str | None]:
    """``"llama3@http://host:8000/v1"`` → ``("llama3", "http://host:8000/v1")``.

    The first ``@http://`` or ``@https://`` starts the base URL (which may itself hold
    ``user:password@`` credentials); any other ``@`` is part of the model name.
    """
    starts = [i for i in (model.find("@http://"), model.find("@https://")) if i >= 0]
    if starts:
        first = min(starts)
        return model[:first], model[first + 1 :]
    return model, None


def split_spec(spec: str) -> tuple[str, str, str | None] | None:
    """A registry spec ``prefix:model[@base_url]`` as ``(prefix, model, base_url)``.

    The prefix is lower-cased but otherwise kept (it names a registered factory, which may
    contain ``.``); only ``:`` separates it. None when the spec has no prefix or no model.
    """
    split = _split_prefix(spec.strip(), (":",))
    if split is None:
        return None
    prefix, rest = split
    model, base_url = split_base_url(rest)
    if not prefix or not model:
        return None
    return prefix.lower(), model, base_url


# --------------------------------------------------------------------------------------------
# Prompt-cache lifetime (what "auto" idle activation waits for)
# --------------------------------------------------------------------------------------------

_MINUTE = 60.0
_HOUR = 3600.0

#: OpenAI models whose prompt cache lives in memory (about five minutes): gpt-4*, gpt-5,
#: gpt-5-*, gpt-5.1 … gpt-5.4 with an optional ``-suffix``. Newer models keep it longer.
_OPENAI_SHORT_CACHE_RE = re.compile(r"gpt-4.*|gpt-5|gpt-5-.+|gpt-5\.[1-4](?:-.+)?")

#: Substring of the lower-cased provider → TTL in seconds. Checked in order; anything
#: unmatched gets five minutes.
_CACHE_TTL_BY_PROVIDER: tuple[tuple[tuple[str, ...], float], ...] = (
    (("google", "gemini"), 24 * _HOUR),
    (("deepseek",), _HOUR),
    (("groq",), 2 * _HOUR),
    (("anthropic", "xai", "grok", "openrouter"), 5 * _MINUTE),
)
_DEFAULT_CACHE_TTL = 5 * _MINUTE


def prompt_cache_ttl(provider: str, model: str, provider_options: Mapping[str, Any] | None = None) -> float:
    """How long (seconds) the provider keeps a prompt cached: what idle activation ``"auto"`` waits.

    The idea: activate buffered observations when the provider's prompt cache has expired
    anyway, so rewriting the prompt costs no cache hit. ``provider`` may be empty when
    ``model`` carries it (``"openai:gpt-4o"``); it matches by substring, so
    ``"google.generative-ai"`` is Google. For OpenAI an explicit ``promptCacheRetention`` in
    ``provider_options["openai"]`` (``'24h'`` → 1 h, ``'in_memory'`` → 5 min) wins over the
    model-name rule (GPT-4*, GPT-5 … 5.4: 5 min; later models: 1 h).
    """
    name = provider.strip().lower()
    if not name and _MODEL_NAME_SPLIT.search(model):
        name = provider_name(model)
    if "openai" in name:
        return _openai_cache_ttl(model, provider_options)
    for needles, ttl in _CACHE_TTL_BY_PROVIDER:
        if any(needle in name for needle in needles):
            return ttl
    return _DEFAULT_CACHE_TTL


def _openai_cache_ttl(model: str, provider_options: Mapping[str, Any] | None) -> float:
    openai_options = (provider_options or {}).get("openai")
    if isinstance(openai_options, Mapping):
        retention = openai_options.get("promptCacheRetention", openai_options.get("prompt_cache_retention"))
        if retention == "24h":
            return _HOUR
        if retention == "in_memory":
            return 5 * _MINUTE
    if _OPENAI_SHORT_CACHE_RE.fullmatch(bare_model(model)):
        return 5 * _MINUTE
    return _HOUR


# --------------------------------------------------------------------------------------------
# Reflection start level
# --------------------------------------------------------------------------------------------

# Models that reliably under-compress at the gentle levels start higher, saving a wasted call.
_EAGER_REFLECTION_MODELS = ("gemini-2.5-flash",)


def reflection_start_level(model_id: object) -> int:
    """The compression level automatic reflection starts at: 2 for Gemini 2.5 Flash, else 1.

    Any provider prefix is ignored (``google:gemini-2.5-flash``,
    ``openrouter:google/gemini-2.5-flash``, ``models/gemini-2.5-flash-preview``); anything
    that is not a string falls back to 1. Manual reflection starts at 0; the engine passes that.
    """
    if not isinstance(model_id, str):
        return 1
    return 2 if bare_model(model_id).startswith(_EAGER_REFLECTION_MODELS) else 1


# --------------------------------------------------------------------------------------------
# Attachment billing (images and PDFs)
# --------------------------------------------------------------------------------------------

BillingFamily = Literal["openai", "google", "anthropic", ""]
"""Whose attachment prices apply; ``""`` (unknown) is charged by OpenAI's rules."""


@dataclass(frozen=True, slots=True)
class OpenAIImageRule:
    """OpenAI's image price for a model: ``base`` + ``tile`` per 512-px tile at high detail."""

    base: int
    tile: int
    fallback_tiles: int  # high detail with nothing known about the image


_OPENAI_DEFAULT_IMAGE_RULE = OpenAIImageRule(85, 170, 4)
_OPENAI_IMAGE_RULES: tuple[tuple[Literal["prefix", "contains"], tuple[str, ...], OpenAIImageRule], ...] = (
    ("prefix", ("gpt-5",), OpenAIImageRule(70, 140, 4)),
    ("prefix", ("gpt-4o-mini",), OpenAIImageRule(2833, 5667, 1)),
    ("prefix", ("o1", "o3"), OpenAIImageRule(75, 150, 4)),
    ("contains", ("computer-use",), OpenAIImageRule(65, 129, 4)),
)

_GEMINI_3_IMAGE_TOKENS = 1120  # Gemini 3 bills by media resolution; the default is "high"

_FAMILY_BY_PROVIDER_PREFIX: tuple[tuple[str, BillingFamily], ...] = (
    ("openai", "openai"),
    ("azure", "openai"),
    ("google", "google"),
    ("gemini", "google"),
    ("vertex", "google"),
    ("anthropic", "anthropic"),
    ("claude", "anthropic"),
)
_FAMILY_BY_MODEL_PREFIX: tuple[tuple[tuple[str, ...], BillingFamily], ...] = (
    (("gpt-", "o1", "o3", "o4", "chatgpt", "computer-use"), "openai"),
    (("gemini",), "google"),
    (("claude",), "anthropic"),
)


def _openai_image_rule(model: str) -> OpenAIImageRule:
    for how, needles, rule in _OPENAI_IMAGE_RULES:
        if (model.startswith(needles) if how == "prefix" else any(n in model for n in needles)):
            return rule
    return _OPENAI_DEFAULT_IMAGE_RULE


def _family_of_provider(provider: str) -> BillingFamily:
    return next((family for prefix, family in _FAMILY_BY_PROVIDER_PREFIX if provider.startswith(prefix)), "")


@dataclass(frozen=True, slots=True)
class AttachmentBilling:
    """How an actor model bills images and files: its family's rules and the model they key on."""

    family: BillingFamily
    model: str  # lower-case model id without any provider or router prefix
    openai_rule: OpenAIImageRule
    flat_image_tokens: int | None = None  # a fixed price per image, whatever its size

    @property
    def cache_key(self) -> str:
        return f"{self.family}:{self.model}"


def attachment_billing(provider: str | None, model: str | None) -> AttachmentBilling:
    """The billing rules for ``provider="openai", model="gpt-4o"`` or ``model="openai:gpt-4o"``.

    Routers (``openrouter:anthropic/claude-…``) are seen through: when the provider is not
    one of the three billing families, the model id's own prefix decides, and failing that
    the model name (``claude-…``, ``gemini-…``, ``gpt-…``).
    """
    provider = (provider or "").strip().lower()
    model = (model or "").strip().lower()
    if not provider:
        provider, model = parse_model_id(model)
    family = _family_of_provider(provider)
    if "/" in model:
        inner_provider, _, model = model.rpartition("/")
        family = family or _family_of_provider(inner_provider)
    if not family:
        family = next((fam for prefixes, fam in _FAMILY_BY_MODEL_PREFIX if model.startswith(prefixes)), "")
    flat = _GEMINI_3_IMAGE_TOKENS if family == "google" and model.startswith("gemini-3") else None
    return AttachmentBilling(family, model, _openai_image_rule(model), flat)


# --------------------------------------------------------------------------------------------
# Tool-definition shape, request settings, embedding sizes
# --------------------------------------------------------------------------------------------

ToolFlavor = Literal["generic", "openai", "anthropic"]
"""The shape of a tool definition: neutral, OpenAI's function tool, or Anthropic's input_schema."""

#: Providers that speak the Chat Completions wire format (and so take OpenAI function tools).
_OPENAI_WIRE_PROVIDERS = frozenset(
    {"openai", "azure", "openai-compatible", "openrouter", "groq", "ollama", "vllm", "lmstudio", "litellm"}
)


def tool_flavor(model_id: str | None) -> ToolFlavor:
    """The tool-definition shape the model's API takes: ``anthropic:…`` Anthropic's, the
    Chat Completions providers OpenAI's, anything else (or no provider) the neutral one."""
    provider = parse_model_id(model_id).provider
    if provider == "anthropic":
        return "anthropic"
    if provider in _OPENAI_WIRE_PROVIDERS:
        return "openai"
    return "generic"


# Reasoning models refuse any temperature but the default (HTTP 400), so none is sent.
_NO_TEMPERATURE = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)


def accepts_temperature(model: str) -> bool:
    """Whether a Chat Completions ``model`` takes a temperature (OpenAI's o-series and GPT-5
    do not); a router prefix (``openai/gpt-5``) is looked through."""
    return _NO_TEMPERATURE.match(model.rsplit("/", 1)[-1]) is None


def default_max_output_tokens(provider: str, model: str) -> int | None:
    """The output limit to send when none is configured, or None when the API needs none.

    Anthropic requires one: Claude 3 (Haiku, Sonnet, Opus) allows 4,096 output tokens, 3.5
    allows 8,192, later models at least 32,000. A reflection can be long, so the ceiling, not
    a small default. Chat Completions servers pick their own limit.
    """
    if provider_name(provider) != "anthropic":
        return None
    name = model.lower()
    if name.startswith(("claude-3-5", "claude-3.5")):
        return 8_192
    if name.startswith("claude-3-") and not name.startswith("claude-3-7"):
        return 4_096
    return 32_000


_EMBEDDING_DIMENSIONS: Mapping[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_SHORTENABLE_EMBEDDINGS_PREFIX = "text-embedding-3-"  # models that accept the "dimensions" parameter


def embedding_dimensions(model: str) -> tuple[int | None, bool]:
    """An OpenAI embedding model's native vector size (None if unknown) and whether the API
    can shorten its vectors on request (the ``dimensions`` parameter)."""
    return _EMBEDDING_DIMENSIONS.get(model), model.startswith(_SHORTENABLE_EMBEDDINGS_PREFIX)


# --------------------------------------------------------------------------------------------
# Prices (the cost ledger's estimates)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per 1M tokens: uncached input, cached input (a prompt-cache read), cache write, output.

    ``input_tokens`` in a :class:`~obsmem.models.base.Usage` count every input token, so a call
    costs ``(input - cached - cache_write) * input + cached * cached_input + cache_write *
    cache_write + output * output``, over 1M.
    """

    input: float
    cached_input: float
    cache_write: float
    output: float

    def cost(self, input_tokens: int, cached_input_tokens: int, cache_write_tokens: int, output_tokens: int) -> float:
        uncached = max(0, input_tokens - cached_input_tokens - cache_write_tokens)
        return (
            uncached * self.input + cached_input_tokens * self.cached_input + cache_write_tokens * self.cache_write
            + output_tokens * self.output
        ) / 1_000_000


#: The day the built-in prices were read from the providers' price pages. They are estimates:
#: providers change prices, and batch, regional or negotiated prices differ. Override them with
#: ``MemoryConfig(prices={...})``.
PRICES_AS_OF = "2025-11-01"


def _p(inp: float, cached: float, out: float, write: float | None = None) -> ModelPrice:
    return ModelPrice(inp, cached, inp if write is None else write, out)


# Keyed by the bare model name's prefix (the longest prefix wins, so "gpt-4o-mini-2024-07-18" is
# gpt-4o-mini's, not gpt-4o's). OpenAI bills a cache write at the input price; Anthropic's 5-minute
# cache write costs 1.25x input and a read 0.1x.
_PRICES: dict[str, ModelPrice] = {
    # OpenAI
    "gpt-5": _p(1.25, 0.125, 10.0),
    "gpt-5.1": _p(1.25, 0.125, 10.0),
    "gpt-5-mini": _p(0.25, 0.025, 2.0),
    "gpt-5-nano": _p(0.05, 0.005, 0.40),
    "gpt-4.1": _p(2.0, 0.50, 8.0),
    "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
    "gpt-4o": _p(2.50, 1.25, 10.0),
    "gpt-4o-mini": _p(0.15, 0.075, 0.60),
    "o3": _p(2.0, 0.50, 8.0),
    "o3-mini": _p(1.10, 0.55, 4.40),
    "o4-mini": _p(1.10, 0.275, 4.40),
    "text-embedding-3-small": _p(0.02, 0.02, 0.0),
    "text-embedding-3-large": _p(0.13, 0.13, 0.0),
    # Anthropic
    "claude-opus-4-5": _p(5.0, 0.50, 25.0, 6.25),
    "claude-opus-4-1": _p(15.0, 1.50, 75.0, 18.75),
    "claude-opus-4": _p(15.0, 1.50, 75.0, 18.75),
    "claude-sonnet-4-5": _p(3.0, 0.30, 15.0, 3.75),
    "claude-sonnet-4": _p(3.0, 0.30, 15.0, 3.75),
    "claude-3-7-sonnet": _p(3.0, 0.30, 15.0, 3.75),
    "claude-3-5-sonnet": _p(3.0, 0.30, 15.0, 3.75),
    "claude-haiku-4-5": _p(1.0, 0.10, 5.0, 1.25),
    "claude-3-5-haiku": _p(0.80, 0.08, 4.0, 1.0),
    "claude-3-haiku": _p(0.25, 0.03, 1.25, 0.30),
    # Google
    "gemini-2.5-pro": _p(1.25, 0.31, 10.0),
    "gemini-2.5-flash": _p(0.30, 0.075, 2.50),
    "gemini-2.5-flash-lite": _p(0.10, 0.025, 0.40),
}


def _price_key(model: str) -> str:
    bare = bare_model(split_base_url(model)[0])
    if bare.startswith("openai-text-embedding"):  # OpenAIEmbedder's name: openai-<model>-<dims>
        bare = bare.removeprefix("openai-")
    return bare


def model_price(model: str, overrides: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of ``model`` (a ``provider:model`` id or a bare name); None when unknown.

    A key matches when it is the id as written, or the bare name, or a prefix of the bare name
    ending at a word boundary (``gpt-4o`` matches ``gpt-4o-2024-08-06`` and ``gpt-4o-mini``). Of
    the built-in table and ``overrides`` (``MemoryConfig.prices``) together, the longest matching
    key wins, an override on a tie: an override for ``gpt-4o`` does not reprice ``gpt-4o-mini``,
    which the table names more precisely.
    """
    if overrides and model in overrides:
        return overrides[model]
    bare = _price_key(model)
    mine = _longest({_price_key(k): v for k, v in (overrides or {}).items()}, bare)
    table = _longest(_PRICES, bare)
    if mine is None or (table is not None and len(table[0]) > len(mine[0])):
        return table[1] if table is not None else None
    return mine[1]


def _longest(table: Mapping[str, ModelPrice], bare: str) -> tuple[str, ModelPrice] | None:
    best: str | None = None
    for key in table:
        if bare == key:
            return key, table[key]
        if bare.startswith(key) and bare[len(key)] in "-.@:_" and (best is None or len(key) > len(best)):
            best = key
    return (best, table[best]) if best is not None else None


def estimate_cost(
    model: str, input_tokens: int, cached_input_tokens: int, cache_write_tokens: int, output_tokens: int,
    overrides: Mapping[str, ModelPrice] | None = None,
) -> float | None:
    """USD for one model's tokens at the table's (or the overrides') price; None when unpriced."""
    price = model_price(model, overrides)
    if price is None:
        return None
    return price.cost(input_tokens, cached_input_tokens, cache_write_tokens, output_tokens)

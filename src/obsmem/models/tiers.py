"""``ModelByInputTokens``: a different model for each size of input (reference §1.5).

A small observation batch does not need the model a 100k-token reflection needs. Tiers map
an upper bound of input tokens to a model; each request goes to the first tier (in
ascending order) whose bound is at least the request's counted input. An input above the
largest tier is refused with :class:`~obsmem.errors.ModelRequestError`, which is permanent:
retrying the same input cannot make it smaller, and silently sending it to the largest
model would hide a misconfiguration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from obsmem.errors import ConfigError, ModelRequestError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse
from obsmem.tokens import TokenCounter
from obsmem.types import Message

__all__ = ["ModelByInputTokens"]


class ModelByInputTokens:
    """A :class:`~obsmem.models.base.ChatModel` that picks a tier per request by input size.

    ``up_to`` maps positive token bounds to models or ``provider:model`` specs (resolved now,
    so a missing key fails at construction). ``count_messages`` counts a request's input
    (default: obsmem's :class:`~obsmem.tokens.TokenCounter`).
    """

    def __init__(
        self,
        up_to: Mapping[int, ChatModel | str],
        *,
        count_messages: Callable[[list[Message]], int] | None = None,
    ) -> None:
        if not up_to:
            raise ConfigError(
                "model", "ModelByInputTokens needs at least one tier", allowed="{max_input_tokens: model}"
            )
        for bound in up_to:
            if isinstance(bound, bool) or not isinstance(bound, int) or bound <= 0:
                raise ConfigError(
                    "model",
                    f"tier bound {bound!r} is not a positive whole number of tokens",
                    allowed="integers > 0",
                )
        self.tiers: tuple[tuple[int, ChatModel], ...] = tuple(
            (bound, _resolve(spec)) for bound, spec in sorted(up_to.items())
        )
        self.name = "by-input-tokens:" + ",".join(f"{bound}={model.name}" for bound, model in self.tiers)
        self._count = count_messages or TokenCounter().count_messages

    def select(self, messages: list[Message]) -> ChatModel:
        """The tier model for ``messages``; raises ModelRequestError above the largest tier."""
        tokens = self._count(messages)
        for bound, model in self.tiers:
            if tokens <= bound:
                return model
        largest = self.tiers[-1][0]
        raise ModelRequestError(
            f"The input has {tokens} tokens, more than the largest ModelByInputTokens tier ({largest}); "
            "add a larger tier or lower the observation/reflection thresholds."
        )

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        return await self.select(messages).request(messages, settings)


def _resolve(spec: ChatModel | str) -> ChatModel:
    """A tier's model; the provider registry (and httpx) loads only for a spec string."""
    from obsmem.models.registry import infer_model

    return infer_model(spec)

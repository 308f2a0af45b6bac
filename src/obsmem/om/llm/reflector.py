"""The LLM-backed reflector: the compression ladder and the never-empty guard.

A reflection rewrites the whole observation log into a smaller one that *replaces* it, so two
failure modes matter more than anything else:

* **Not compressing.** Models asked to condense often return about as much as they got. The
  ladder re-asks with stronger compression guidance (levels 0-4, ``om/llm/prompts.py``), going up
  one level per attempt, at most three times above the start level. Success is measured only
  as "output tokens below target". At the top level the best effort is accepted even if it is
  still over target: an unbounded loop (#14109) costs more than an oversized memory, and the
  engine suppresses re-reflection of the same size afterwards.
* **Wiping memory.** Empty or degenerate output for non-empty input would erase everything
  the assistant knows (#15062). Such an attempt counts as a failure and escalates like an
  uncompressed one; if the top level fails the same way, :class:`~obsmem.errors.ReflectionError`
  is raised and the engine keeps the current observations. Nothing here ever returns empty
  text for non-empty input.

Each escalation is reported through ``request.on_attempt_failed`` before the next attempt, so
the engine can write a "failed, retrying" marker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from obsmem.clock import Clock
from obsmem.errors import ReflectionError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, Usage
from obsmem.models.retry import RetryPolicy, assert_complete, with_retry
from obsmem.om.llm.degenerate import degeneracy_report
from obsmem.om.llm.observer import cache_key, cache_settings, split_stable
from obsmem.om.llm.parsing import ParsedOutput, parse_reflector_output
from obsmem.om.llm.prompts import REFLECT_TAG, reflector_system_prompt_v1, reflector_user_prompt_v1
from obsmem.om.protocols import AttemptFailed, ReflectionRequest, ReflectionResult
from obsmem.profiles import reflection_start_level
from obsmem.types import Message, TextPart

__all__ = ["MAX_ESCALATIONS", "MAX_LEVEL", "LLMReflector", "compression_start_level", "local_now"]

MAX_LEVEL = 4
MAX_ESCALATIONS = 3


def compression_start_level(model_name: str) -> int:
    """The level automatic reflection starts at for a model: 2 for Gemini 2.5 Flash, else 1.

    A vendor fact, kept with the others in :func:`obsmem.profiles.reflection_start_level`
    (any provider prefix ignored, an unreadable name gives 1). Manual reflection starts at 0;
    the engine passes that.
    """
    return reflection_start_level(model_name)


def local_now(request: ReflectionRequest) -> datetime | None:
    """The request's "now" on the user's clock: in ``request.timezone`` when set (the engine sets
    the configured zone, else the newest observed message's own offset), else as given."""
    if request.now is None or request.timezone is None:
        return request.now
    return request.now.astimezone(request.timezone)


@dataclass(frozen=True, slots=True)
class _Attempt:
    level: int
    parsed: ParsedOutput | None  # None when degenerate
    output_tokens: int
    failure: str | None  # "degenerate" / "empty" / None


class LLMReflector:
    """A :class:`~obsmem.om.protocols.Reflector` that prompts a chat model up a compression ladder.

    ``count_tokens`` measures input and output against the request's target. Temperature 0 by
    default: reflection should be as reproducible as the provider allows. Transient model
    errors are retried per attempt (``retry_policy``, waited out on ``clock``); a model error
    that survives its retries propagates unchanged and the engine keeps the observations.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        count_tokens: Callable[[str], int],
        temperature: float | None = 0.0,
        max_output_tokens: int | None = 100_000,
        retry_policy: RetryPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.model = model
        self.name = f"llm:{model.name}"
        self.count_tokens = count_tokens
        self.settings = ModelRequest(temperature=temperature, max_output_tokens=max_output_tokens)
        self.retry_policy = retry_policy or RetryPolicy()
        self.clock = clock

    def build_messages(self, request: ReflectionRequest, level: int) -> list[Message]:
        """The exact messages sent for ``request`` at compression ``level``."""
        system = reflector_system_prompt_v1(
            extractors=request.extractors,
            continuation_hints=request.continuation_hints,
            instruction=request.instruction,
        )
        user = reflector_user_prompt_v1(
            observations=request.observations,
            level=level,
            guidance=request.guidance,
            extracted=request.extracted,
            extractors=request.extractors,
            now=local_now(request),
        )
        # The observations first and on their own (the same for every attempt up the ladder and
        # for a buffered reflection's retries), the task, level and time after them.
        pieces = split_stable(user, [(f"</{REFLECT_TAG}>", True)])
        return [Message.system(system), Message(role="user", parts=tuple(TextPart(text=p) for p in pieces))]

    def request_settings(self, request: ReflectionRequest, messages: list[Message]) -> ModelRequest:
        """A cache breakpoint after the system prompt and after the observations; a cache key per
        thread (or resource)."""
        key = cache_key("reflector", request.thread_id or request.resource_id)
        return cache_settings(self.settings, len(messages[-1].parts) - 1, key)

    async def reflect(self, request: ReflectionRequest) -> ReflectionResult:
        if not request.observations.strip():
            # Nothing to condense; returning empty cannot wipe anything.
            return ReflectionResult(observations="", attempts=0, level=request.start_level)

        input_tokens = self.count_tokens(request.observations)
        level = max(0, min(MAX_LEVEL, request.start_level))
        max_level = min(MAX_LEVEL, level + MAX_ESCALATIONS)
        usage = Usage()
        attempts = 0
        while True:
            attempts += 1
            messages = self.build_messages(request, level)
            response = await self._call(messages, self.request_settings(request, messages))
            usage = usage + response.usage
            attempt = self._judge(response.text, request, level, input_tokens)
            if attempt.failure is None and (attempt.output_tokens < request.target_tokens or level >= max_level):
                break
            if level >= max_level:
                raise ReflectionError(
                    f"The reflector ({self.model.name}) produced {attempt.failure} output at its "
                    f"last compression level ({max_level}, after {attempts} attempts); the "
                    "observations were kept unchanged."
                )
            if request.on_attempt_failed is not None:
                await request.on_attempt_failed(
                    AttemptFailed(
                        level=level,
                        next_level=level + 1,
                        input_tokens=input_tokens,
                        output_tokens=attempt.output_tokens,
                        target_tokens=request.target_tokens,
                        reason=self._reason(attempt, input_tokens, request.target_tokens),
                    )
                )
            level += 1

        parsed = attempt.parsed
        assert parsed is not None  # an accepted attempt is never degenerate
        return ReflectionResult(
            observations=parsed.observations,
            suggested_response=parsed.suggested_response if request.continuation_hints else None,
            extracted=parsed.extracted,
            extraction_failures=parsed.extraction_failures,
            usage=usage,
            attempts=attempts,
            level=level,
            output_tokens=attempt.output_tokens,
        )

    def _judge(self, text: str, request: ReflectionRequest, level: int, input_tokens: int) -> _Attempt:
        """Classify one answer. Degenerate output is charged at the input size, as no progress."""
        # A faithful condensation repeats a line at most once per input line (om/llm/degenerate.py).
        input_lines = sum(1 for line in request.observations.splitlines() if line.strip())
        if degeneracy_report(text, input_lines=input_lines) is not None:
            return _Attempt(level, None, input_tokens, "degenerate")
        parsed = parse_reflector_output(text, request.extractors)
        if not parsed.observations.strip():
            return _Attempt(level, parsed, 0, "empty")
        return _Attempt(level, parsed, self.count_tokens(parsed.observations), None)

    @staticmethod
    def _reason(attempt: _Attempt, input_tokens: int, target: int) -> str:
        retry = f"retrying at level {attempt.level + 1}"
        if attempt.failure == "degenerate":
            return f"Output was degenerate (a repetition loop), {retry}"
        if attempt.failure == "empty":
            return f"Output was empty for non-empty input ({input_tokens} tokens), {retry}"
        return (
            f"Did not compress below threshold ({input_tokens} → {attempt.output_tokens}, "
            f"target {target}), {retry}"
        )

    async def _call(self, messages: list[Message], settings: ModelRequest) -> ModelResponse:
        async def attempt() -> ModelResponse:
            return assert_complete(await self.model.request(messages, settings))

        return await with_retry(attempt, policy=self.retry_policy, clock=self.clock)

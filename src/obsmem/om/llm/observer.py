"""The LLM-backed observer: messages in, dated observation lines out.

One cycle is one model request (system prompt + a single user message, see
``om/llm/prompts.py``), retried on transient errors, then parsed tolerantly (``om/llm/parsing.py``).

Two kinds of bad output are handled differently, on purpose:

* **Degenerate output** (a repetition loop, see ``om/llm/degenerate.py``) is regenerated once,
  since loops are usually a sampling accident. A second loop raises
  :class:`~obsmem.errors.DegenerateOutputError`; the engine then skips the cycle and the
  messages stay pending, so the next cycle observes them again. Nothing from a loop is ever
  committed.
* **Malformed output** (no ``<observations>`` block and no list items, even for non-empty
  input) is *not* an error: it yields empty observations. A model that answered in prose has
  nothing usable to add, and raising would block memory on a formatting slip; an empty result
  is something the engine can commit safely. Repeated empty results show up in the markers.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from collections.abc import Callable, Sequence
from dataclasses import replace

from obsmem.clock import Clock
from obsmem.errors import DegenerateOutputError
from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, Usage
from obsmem.models.retry import RetryPolicy, assert_complete, with_retry
from obsmem.om.llm.degenerate import degeneracy_report
from obsmem.om.llm.parsing import parse_observer_output
from obsmem.om.llm.prompts import PREVIOUS_TAG, observer_system_prompt_v1, observer_user_prompt_v1
from obsmem.om.protocols import ObservationRequest, ObservationResult
from obsmem.om.text.transcript import format_transcript
from obsmem.types import FilePart, Message, TextPart

__all__ = [
    "BUFFERED_SEPARATOR",
    "DEGENERATE_REGENERATIONS",
    "MIN_TITLE_CHARS",
    "LLMObserver",
    "cache_key",
    "cache_settings",
    "local_now",
    "split_stable",
]

BUFFERED_SEPARATOR = "--- BUFFERED (pending activation) ---"
"""The line between a record's active observations and its buffered chunks in a buffer's prompt
(the same text as ``om/buffering.py`` writes): the active part before it is the same for every
buffer of one record, the chunks after it only grow."""


DEGENERATE_REGENERATIONS = 1
"""How many times a degenerate answer is asked for again before the cycle is given up."""

MIN_TITLE_CHARS = 3


def split_stable(text: str, ends: Sequence[tuple[str, bool]]) -> tuple[str, ...]:
    """``text`` cut into parts that end where a stable (cacheable) prefix ends.

    Each ``(needle, after)`` of ``ends`` is searched in order, after the previous cut; the cut
    falls on the line break right after the needle (``after``) or right before it, and that line
    break is dropped, so the parts joined with ``"\\n"`` (as :attr:`Message.text` and the Chat
    Completions adapter join text parts) give back ``text`` byte for byte. A needle that is not
    found, or has no line break where the cut would fall, cuts nothing.
    """
    parts: list[str] = []
    start = 0
    for needle, after in ends:
        found = text.find(needle, start)
        if found < 0:
            continue
        cut = found + len(needle) if after else found - 1
        if cut <= start or cut >= len(text) or text[cut] != "\n":
            continue
        parts.append(text[start:cut])
        start = cut + 1
    parts.append(text[start:])
    return tuple(parts)


def cache_key(role: str, lineage: str | None) -> str | None:
    """A stable, opaque prompt-cache key for one role's requests on one thread (or resource)."""
    if not lineage:
        return None
    return f"obsmem-{role}-" + hashlib.sha256(lineage.encode()).hexdigest()[:24]


def cache_settings(settings: ModelRequest, stable_parts: int, key: str | None) -> ModelRequest:
    """``settings`` for ``[system, user]`` whose user message starts with ``stable_parts`` stable
    parts: a cache breakpoint after the system prompt and after each of them, and the cache key."""
    breakpoints = ((0, 0), *((1, p) for p in range(stable_parts)))
    return replace(settings, cache_key=key, cache_breakpoints=breakpoints)


def local_now(request: ObservationRequest) -> datetime | None:
    """The request's "now" on the clock the transcript is shown in: ``request.timezone`` when the
    application set one, else the offset of the newest message that carries one (the transcript
    shows each message in its own offset), so "today" and "tomorrow" are the user's days, not
    UTC's: "in two weeks" said at 00:30 in Tokyo counts from the Tokyo day. The offline observer
    reads dates the same way."""
    now = request.now
    if now is None:
        return None
    if request.timezone is not None:
        return now.astimezone(request.timezone)
    for message in reversed(request.messages):
        if message.created_at.tzinfo is not None and message.created_at.utcoffset() is not None:
            return now.astimezone(message.created_at.tzinfo)
    return now


class LLMObserver:
    """An :class:`~obsmem.om.protocols.Observer` that prompts a chat model.

    ``count_tokens`` caps tool results and arguments in the transcript. ``temperature`` and
    ``max_output_tokens`` go to every request (None leaves the provider's default). Transient
    model errors are retried on ``retry_policy`` (default :class:`RetryPolicy`) and waited out
    on ``clock``; an exhausted retry budget or a permanent error propagates unchanged.
    ``observe_attachments`` forwards images and files after the transcript, for multimodal
    models; without it they appear as placeholders only.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        count_tokens: Callable[[str], int],
        temperature: float | None = 0.3,
        max_output_tokens: int | None = 100_000,
        retry_policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        observe_attachments: bool = False,
    ) -> None:
        self.model = model
        self.name = f"llm:{model.name}"
        self.count_tokens = count_tokens
        self.settings = ModelRequest(temperature=temperature, max_output_tokens=max_output_tokens)
        self.retry_policy = retry_policy or RetryPolicy()
        self.clock = clock
        self.observe_attachments = observe_attachments

    def build_messages(self, request: ObservationRequest) -> list[Message] | None:
        """The exact messages sent for ``request``, or None when there is nothing to observe.

        Public so callers can inspect (or log) a prompt without making a model call.
        """
        transcript = format_transcript(request.messages, count_tokens=self.count_tokens, timezone=request.timezone)
        if not transcript.text.strip():
            return None
        system = observer_system_prompt_v1(
            extractors=request.extractors,
            continuation_hints=request.continuation_hints,
            want_title=request.want_title,
            instruction=request.instruction,
        )
        user_text = observer_user_prompt_v1(
            transcript=transcript.text,
            previous_observations=request.previous_observations,
            previous_truncated=request.previous_truncated,
            current_task=request.current_task,
            suggested_response=request.suggested_response,
            thread_title=request.thread_title,
            extracted=request.extracted,
            extractors=request.extractors,
            continuation_hints=request.continuation_hints,
            want_title=request.want_title,
            # Shown in the same zone as the transcript's times, so "tomorrow" resolves consistently.
            now=local_now(request),
        )
        # Stable first: the previous observations (the active part, the same for every request
        # until the record changes, then the buffered chunks, which only grow), each its own part
        # so Anthropic can mark it; the task, the time and the new transcript last.
        pieces = split_stable(user_text, [(BUFFERED_SEPARATOR, False), (f"</{PREVIOUS_TAG}>", True)])
        parts: list[TextPart | FilePart] = [TextPart(text=piece) for piece in pieces]
        if self.observe_attachments:
            parts.extend(transcript.attachments)
        user = Message(role="user", parts=tuple(parts))
        return [Message.system(system), user]

    def request_settings(self, request: ObservationRequest, messages: list[Message]) -> ModelRequest:
        """The settings for ``messages``: a cache breakpoint after the system prompt and after each
        stable part of the request, and a cache key per thread (or resource)."""
        stable = sum(1 for part in messages[-1].parts if isinstance(part, TextPart)) - 1
        return cache_settings(self.settings, stable, cache_key("observer", request.thread_id or request.resource_id))

    async def observe(self, request: ObservationRequest) -> ObservationResult:
        messages = self.build_messages(request)
        if messages is None:
            return ObservationResult(observations="")
        # A faithful answer repeats a line at most once per line it observed (om/llm/degenerate.py):
        # the request's lines other than the previous observations, which it quotes verbatim
        # (the transcript, plus a few lines of headings).
        input_lines = max(
            1, _non_blank_lines(messages[-1].text) - _non_blank_lines(request.previous_observations)
        )

        settings = self.request_settings(request, messages)
        usage = Usage()
        problem: str | None = None
        for _ in range(1 + DEGENERATE_REGENERATIONS):
            response = await self._call(messages, settings)
            usage = usage + response.usage
            problem = degeneracy_report(response.text, input_lines=input_lines)
            if problem is None:
                break
        if problem is not None:
            raise DegenerateOutputError(
                f"The observer ({self.model.name}) produced degenerate, repetitive output twice "
                f"({problem}); the cycle was skipped and its messages stay pending."
            )

        parsed = parse_observer_output(response.text, request.extractors)
        title = parsed.thread_title if request.want_title else None
        if title is not None and len(title) < MIN_TITLE_CHARS:
            title = None
        return ObservationResult(
            observations=parsed.observations,
            current_task=parsed.current_task if request.continuation_hints else None,
            suggested_response=parsed.suggested_response if request.continuation_hints else None,
            thread_title=title,
            extracted=parsed.extracted,
            extraction_failures=parsed.extraction_failures,
            usage=usage,
        )

    async def _call(self, messages: list[Message], settings: ModelRequest) -> ModelResponse:
        async def attempt() -> ModelResponse:
            return assert_complete(await self.model.request(messages, settings))

        return await with_retry(attempt, policy=self.retry_policy, clock=self.clock)


def _non_blank_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())

"""``RedactingModel``: a chat model that never lets a secret reach the model it wraps.

Every text a request carries is redacted by a :class:`~obsmem.privacy.Redactor` before the
wrapped model (a provider, tiers, a retry wrapper) is called: text and reasoning parts, tool
call arguments and tool results (strings anywhere inside them, and whole values under
key-like names such as ``password`` or ``api_key``), and an attachment's URL, file name and,
for a textual attachment (``text/*``, JSON, XML, YAML), its inline content. Images and other
binary attachments cannot be read and pass unchanged (turn ``observation.observe_attachments``
off to keep them local). Because it wraps the model itself, no prompt obsmem builds can bypass it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from obsmem.models.base import ChatModel, ModelRequest, ModelResponse, WrapperModel
from obsmem.privacy import Redactor
from obsmem.types import FilePart, Message, Part, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = ["RedactingModel", "redact_messages"]

#: Keys whose whole string value is a secret, whatever it looks like.
_SECRET_KEY = re.compile(
    r"(?i)passw|passphrase|secret|token|api_?key|apikey|private_?key|credential|authorization|access_?key|signing_?key"
)
_TEXTUAL = re.compile(r"(?i)^(?:text/|application/(?:[\w.+-]*\+)?(?:json|xml|yaml|x-yaml|toml|x-sh|javascript)\b)")


class _Count:
    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.counts: Counter[str] = Counter()

    def text(self, text: str) -> str:
        result = self.redactor.redact(text)
        self.counts.update(result.counts)
        return result.text

    def field(self, key: str, value: str) -> str:
        """A string value under ``key``: redacted, and replaced whole when the key names a secret."""
        redacted = self.text(value)
        if _SECRET_KEY.search(key) is None or not value.strip() or redacted != value:
            return redacted
        if value.strip().startswith(("$", "<", "{", "%")) or set(value.strip()) <= set("*xX."):
            return value  # a template or a mask, not the secret itself
        category = "password" if re.search(r"(?i)pass", key) else "secret"
        self.counts[category] += 1
        return self.redactor.placeholder(category, value)

    def value(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            return self.text(value) if key is None else self.field(key, value)
        if isinstance(value, Mapping):
            return {k: self.value(v, k if isinstance(k, str) else None) for k, v in value.items()}
        if isinstance(value, list | tuple):
            items = [self.value(item, key) for item in value]
            return items if isinstance(value, list) else tuple(items)
        return value

    def file(self, part: FilePart) -> FilePart:
        update: dict[str, Any] = {}
        if part.url is not None:
            update["url"] = self.text(part.url)
        if part.filename is not None:
            update["filename"] = self.text(part.filename)
        if part.data is not None and _TEXTUAL.match(part.media_type):
            data = self._file_text(part.data)
            if data is not None:
                update["data"] = data
        return part.model_copy(update=update) if update else part

    def _file_text(self, data: str) -> str | None:
        prefix, _, payload = data.partition(",") if data.startswith("data:") else ("", "", data)
        try:
            decoded = base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            return None
        redacted = self.text(decoded)
        if redacted == decoded:
            return data
        encoded = base64.b64encode(redacted.encode("utf-8")).decode("ascii")
        return f"{prefix},{encoded}" if prefix else encoded

    def part(self, part: Part) -> Part:
        if isinstance(part, TextPart | ReasoningPart):
            return part.model_copy(update={"text": self.text(part.text)})
        if isinstance(part, ToolCallPart):
            return part.model_copy(update={"args": self.value(part.args)})
        if isinstance(part, ToolResultPart):
            return part.model_copy(update={"result": self.value(part.result)})
        if isinstance(part, FilePart):
            return self.file(part)
        return part  # DataPart: never sent to a model


def redact_messages(redactor: Redactor, messages: list[Message]) -> tuple[list[Message], dict[str, int]]:
    """``messages`` with every text redacted, and how many values of each category were."""
    count = _Count(redactor)
    redacted = [
        message.model_copy(update={"parts": tuple(count.part(part) for part in message.parts)})
        for message in messages
    ]
    return redacted, dict(count.counts)


#: A request holding this many characters of text or more is redacted off the event loop.
OFFLOAD_CHARS = 8_192


def _request_chars(messages: list[Message]) -> int:
    """About the characters of text ``messages`` carry (text and reasoning parts; a tool payload
    or an attachment counts as large: it is walked whole)."""
    chars = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart | ReasoningPart):
                chars += len(part.text)
            elif isinstance(part, ToolCallPart | ToolResultPart | FilePart):
                chars += OFFLOAD_CHARS // 8
        if chars >= OFFLOAD_CHARS:
            break
    return chars


class RedactingModel(WrapperModel):
    """A :class:`~obsmem.models.base.ChatModel` that redacts each request before ``wrapped`` sees it.

    ``on_redacted`` (when given) hears the counts per category of each request that had
    anything redacted. ``name`` is the wrapped model's, so defaults chosen by name still apply.
    """

    def __init__(
        self,
        wrapped: ChatModel,
        redactor: Redactor,
        *,
        on_redacted: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.redactor = redactor
        self.on_redacted = on_redacted

    async def request(self, messages: list[Message], settings: ModelRequest | None = None) -> ModelResponse:
        if _request_chars(messages) >= OFFLOAD_CHARS:
            # Redaction is linear but not cheap (about 1 ms a KB: every detector reads the whole
            # text): a large request is redacted in a thread, so the event loop keeps running.
            redacted, counts = await asyncio.to_thread(redact_messages, self.redactor, messages)
        else:
            redacted, counts = redact_messages(self.redactor, messages)
        if counts and self.on_redacted is not None:
            self.on_redacted(counts)
        if settings is not None and settings.cache_key:
            # The prompt-cache key names the thread (stable, so one thread's calls share a cache):
            # keyed, so it cannot be told from a hash of a guessed id (an e-mail address).
            settings = replace(settings, cache_key="obsmem-" + self.redactor.keyed("cache-key", settings.cache_key))
        return await self.wrapped.request(redacted, settings)

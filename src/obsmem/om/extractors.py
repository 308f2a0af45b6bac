"""Extractors: named values the observer (or reflector) maintains beside the observations.

Built-ins are current-task, suggested-response and thread-title; users add their own, and the
working-memory extractor keeps a markdown working memory per thread or resource.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from obsmem.errors import ConfigError

__all__ = ["RESERVED_SLUGS", "Extractor", "slugify"]

RESERVED_SLUGS = frozenset(
    {
        "observations", "observation", "extracted-values", "thread", "message", "messages",
        "conversation", "history", "system", "user", "assistant", "tool",
        "current-task", "suggested-response", "thread-title",
    }
)
_SLUG_OK = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


def slugify(name: str) -> str:
    """Lowercase alphanumeric words joined by '-'; quotes are dropped, not turned into '-'."""
    cleaned = re.sub(r"['\"‘’“”`]", "", name.lower())
    return "-".join(re.findall(r"[a-z0-9]+", cleaned))


OnExtracted = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Extractor:
    """A value to extract each cycle.

    ``mode="inline"``: the observer emits ``<slug>…</slug>`` in its output. ``mode="hook"``:
    no model output; ``on_extracted`` receives the cycle's raw observations and may return a
    value. ``include_previous``: the previous value is shown to the observer and to the actor.
    """

    name: str
    instructions: str
    mode: Literal["inline", "hook"] = "inline"
    include_previous: bool = True
    on_extracted: OnExtracted | None = None
    builtin: bool = False

    @property
    def slug(self) -> str:
        return slugify(self.name)

    def validate(self) -> None:
        slug = self.slug
        if not _SLUG_OK.match(slug):
            raise ConfigError(
                "observation.extract",
                f"extractor name '{self.name}' gives slug '{slug}'",
                allowed="a slug that starts with a letter and ends with a letter or digit",
            )
        if not self.builtin and slug in RESERVED_SLUGS:
            raise ConfigError(
                "observation.extract", f"extractor slug '{slug}' is reserved", allowed="any other name"
            )

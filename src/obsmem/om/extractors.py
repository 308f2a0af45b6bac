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


WORKING_MEMORY_SLUG = "working-memory"
_WORKING_MEMORY_INSTRUCTIONS = (
    "Maintain the user's working memory as markdown: a short '## Profile' list of durable facts "
    "about the user (names, places, preferences, constraints) and a '## Open items' list of plans "
    "and unfinished tasks with dates. Output the complete updated document every time, keeping "
    "facts that still hold and replacing ones that changed."
)
_WORKING_MEMORY_LIMIT = 40


async def _working_memory_hook(payload: dict[str, Any]) -> str | None:
    """Offline working memory: the high-priority facts, newest version kept, as markdown."""
    from obsmem.om.text.format import PRIORITY_DONE, PRIORITY_HIGH, parse_observations

    previous = payload.get("previous")
    lines: list[str] = []
    if isinstance(previous, str):
        lines = [ln[2:].strip() for ln in previous.splitlines() if ln.startswith("- ")]
    for group in parse_observations(str(payload.get("current") or "")):
        for line in group.lines:
            if line.indent == 0 and line.priority in (PRIORITY_HIGH, PRIORITY_DONE):
                text = line.text if line.priority == PRIORITY_HIGH else f"done: {line.text}"
                lines.append(text)
    kept: list[str] = []
    seen: set[str] = set()
    for text in reversed(lines):  # newest first, so a repeated fact keeps its latest wording
        key = re.sub(r"\W+", " ", text.lower()).strip()
        if key and key not in seen:
            seen.add(key)
            kept.append(text)
    kept = list(reversed(kept[:_WORKING_MEMORY_LIMIT]))
    if not kept:
        return previous if isinstance(previous, str) else None
    return "## Key facts\n" + "\n".join(f"- {text}" for text in kept)


def working_memory_extractor(mode: Literal["inline", "hook"] = "hook") -> Extractor:
    """The working-memory extractor: inline for LLM observers, a deterministic hook offline."""
    return Extractor(
        name=WORKING_MEMORY_SLUG,
        instructions=_WORKING_MEMORY_INSTRUCTIONS,
        mode=mode,
        include_previous=True,
        on_extracted=_working_memory_hook if mode == "hook" else None,
        builtin=True,
    )

"""Which embedder obsmem uses when the caller does not choose one.

MiniLM when the ``obsmem[embeddings]`` extra is installed, the lexical fallback otherwise.
The choice is reported (``EmbedderChoice.reason``) because the two give very different
retrieval quality, and a user who forgot the extra should be able to see why recall is weak.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from .base import Embedder
from .lexical import LexicalHashEmbedder
from .minilm import MiniLMEmbedder, missing_minilm_packages

__all__ = ["EmbedderChoice", "choose_default_embedder", "default_embedder"]

_log = logging.getLogger("obsmem.embeddings")


@dataclass(frozen=True, slots=True)
class EmbedderChoice:
    """The default embedder, which kind it is, and why it was picked."""

    embedder: Embedder
    kind: Literal["minilm", "lexical"]
    reason: str


def choose_default_embedder(*, threads: int | None = None) -> EmbedderChoice:
    """Pick MiniLM if its extra is installed, else the lexical fallback, and say why."""
    missing = missing_minilm_packages()
    if not missing:
        return EmbedderChoice(
            MiniLMEmbedder(threads=threads), "minilm", "the obsmem[embeddings] extra is installed"
        )
    reason = (
        f"{', '.join(missing)} not installed; using the lexical fallback "
        "(install 'obsmem[embeddings]' for semantic embeddings)"
    )
    _log.info("default embedder: %s", reason)
    return EmbedderChoice(LexicalHashEmbedder(), "lexical", reason)


def default_embedder(*, threads: int | None = None) -> Embedder:
    """The default embedder; ``embedder.name`` says which one it is."""
    return choose_default_embedder(threads=threads).embedder

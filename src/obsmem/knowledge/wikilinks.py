"""``[[wikilinks]]`` in record text and node content: extraction and resolution.

Extraction is one regular-expression scan whose body cannot backtrack (the name may not
contain a bracket), so it is linear in the input even for megabytes of padding. Names are
trimmed, deduplicated case-insensitively (first spelling wins) and ``[[Name|label]]`` links to
``Name``. Malformed links (``[[bad``, ``[[]]``) are ignored.

Resolution turns names into :data:`~obsmem.knowledge.store.contract.MentionTarget` values:
each name is looked up narrow → broad along ``resolution_scope``'s own chain (never a sibling
thread); a name found nowhere becomes a node to create in ``default_scope``, inside the same
write as the text that mentions it. Only the first :data:`MAX_LINKS` distinct names of a text
resolve: the others stay plain text (a warning counts them), so one pasted text never makes
hundreds of nodes (a 10,000-character REST fact could make about 900; a pasted pandas
notebook makes a "link" of every ``df[["a", "b"]]``).
"""

from __future__ import annotations

import logging
import re

from obsmem.errors import InvalidInputError, UnresolvedMentionError
from obsmem.knowledge.store.contract import KnowledgeStore, MentionTarget, NewNodeMention
from obsmem.knowledge.store.scopes import Scope

__all__ = ["MAX_LINKS", "extract_wikilinks", "resolve_mentions"]

logger = logging.getLogger(__name__)

_LINK = re.compile(r"\[\[([^\[\]]+)\]\]")

MAX_LINKS = 64
"""The most distinct links of one text that resolve (mentions, and nodes created for them)."""


def extract_wikilinks(text: str, *, limit: int | None = None) -> list[str]:
    """Unique link names in order of first appearance (case-insensitive, first spelling wins);
    with ``limit``, the scan stops once it has found that many."""
    seen: set[str] = set()
    names: list[str] = []
    for match in _LINK.finditer(text):
        if limit is not None and len(names) >= limit:
            break
        name = match.group(1).split("|", 1)[0].strip()
        key = name.casefold()
        if name and key not in seen:
            seen.add(key)
            names.append(name)
    return names


async def resolve_mentions(
    store: KnowledgeStore, text: str | None, resolution_scope: str | None, default_scope: str | None
) -> list[MentionTarget]:
    """Resolve every wikilink of ``text``; raise if a link exists but cannot be resolved.

    ``default_scope`` must lie on ``resolution_scope``'s chain, so an auto-created node is
    always visible from where it was mentioned.
    """
    names = extract_wikilinks(text or "", limit=MAX_LINKS + 1)
    if not names:
        return []
    if len(names) > MAX_LINKS:
        names = names[:MAX_LINKS]
        left = len(extract_wikilinks(text or "")) - MAX_LINKS
        logger.warning("%d [[links]] of a text left unresolved: only the first %d resolve", left, MAX_LINKS,
                       extra={"obsmem_operation": "remember"})
    if resolution_scope is None:
        raise UnresolvedMentionError(
            f"The text links to {names!r} but no resolution scope was given; pass resolution_scope "
            "(the scope the links are read from)."
        )
    resolver = Scope.parse(resolution_scope)
    create_in = Scope.parse(default_scope) if default_scope is not None else resolver
    if not resolver.sees(create_in):
        raise InvalidInputError(
            f"default_scope '{create_in.key}' is not on the chain of resolution_scope '{resolver.key}'; "
            "nodes created for unresolved links must be visible where they were linked."
        )
    targets: list[MentionTarget] = []
    for name in names:
        node = await store.resolve_node(name, resolver.key)
        targets.append(node.id if node is not None else NewNodeMention(name, create_in.key))
    return targets

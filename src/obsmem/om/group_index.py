"""Vector indexing of observation groups, for ``recall(mode="search")``.

Each group's text is embedded (in chunks of whole lines, so long groups are not cut off by an
embedder's input limit) and stored in a :class:`~obsmem.vectors.VectorIndex` under a namespace
that encodes where it came from::

    obsmem-groups/r:<resource>/t:<thread>/g:<group id>/

Ids are percent-encoded, so a ``/`` in an id cannot forge a namespace, and scope filtering is a
prefix match: ``…/r:<resource>/`` is one user, ``…/r:<resource>/t:<thread>/`` one conversation.
The prefix is only the first fence: recall checks every hit against the store before
returning it (see ``om/recall/recaller.py``).

Indexing never fails an observation: the memory is committed first, and an index that is down
is logged and retried once; a missed group is simply not found by search.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from obsmem.config import RetrievalConfig
from obsmem.errors import ConfigError, PrivacyError
from obsmem.om.text.groups import ObservationGroup, parse_groups, strip_groups
from obsmem import calls, telemetry

if TYPE_CHECKING:  # types only: numpy and the index modules load when first used
    from obsmem.storage.contract import ObservationRecord
    from obsmem.embeddings import Embedder
    from obsmem.vectors import VectorIndex

__all__ = [
    "GroupHit",
    "GroupIndex",
    "group_index_for",
    "held_groups",
    "group_namespace",
    "resource_namespace",
    "thread_namespace",
]

logger = logging.getLogger("obsmem")

_ROOT = "obsmem-groups/"
_CHUNK_CHARS = 800  # about 200 tokens: inside every shipped embedder's input window
_ATTEMPTS = 2
_SETTLE_ROUNDS = 4


def held_groups(record: ObservationRecord | None) -> dict[str, ObservationGroup]:
    """The groups a head holds, by id: its active observations' and its buffered chunks'."""
    if record is None:
        return {}
    texts = [record.active_observations, *(chunk.observations for chunk in record.buffered_chunks)]
    return {g.id: g for text in texts for g in parse_groups(text)}


def resource_namespace(resource_id: str) -> str:
    return f"{_ROOT}r:{quote(resource_id, safe='')}/"


def thread_namespace(resource_id: str, thread_id: str) -> str:
    return f"{resource_namespace(resource_id)}t:{quote(thread_id, safe='')}/"


def group_namespace(resource_id: str, thread_id: str, group_id: str) -> str:
    return f"{thread_namespace(resource_id, thread_id)}g:{quote(group_id, safe='')}/"


@dataclass(frozen=True, slots=True)
class GroupHit:
    """A search result as the index holds it: where the group lives, and how similar it is.

    Only a claim: recall verifies the thread and group against the store before use.
    """

    resource_id: str
    thread_id: str
    group_id: str
    score: float


def _parse_namespace(namespace: str) -> tuple[str, str, str] | None:
    if not namespace.startswith(_ROOT):
        return None
    parts = namespace[len(_ROOT) :].rstrip("/").split("/")
    if len(parts) != 3 or not (
        parts[0].startswith("r:") and parts[1].startswith("t:") and parts[2].startswith("g:")
    ):
        return None
    return unquote(parts[0][2:]), unquote(parts[1][2:]), unquote(parts[2][2:])


def _chunks(text: str) -> list[str]:
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if current and size + len(line) > _CHUNK_CHARS:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line[: _CHUNK_CHARS * 2])
        size += len(line) + 1
    if current:
        chunks.append("\n".join(current))
    return chunks


class GroupIndex:
    """Embeds groups into a vector index and searches them. Built by ``Memory``, given to the engine."""

    def __init__(self, embedder: Embedder, index: VectorIndex, *, timeout_s: float | None = None) -> None:
        if embedder.dimensions != index.dimensions:
            raise ConfigError(
                "retrieval.vector",
                f"the embedder makes {embedder.dimensions}-dimensional vectors but the vector index "
                f"holds {index.dimensions}-dimensional ones",
                allowed="an index created with dimensions=embedder.dimensions",
            )
        if index.space and index.space != embedder.name:
            raise ConfigError(
                "retrieval.vector",
                f"the vector index holds vectors of '{index.space}', not of the embedder '{embedder.name}'",
                allowed="an index whose space is the embedder's name (or a new index)",
            )
        self.embedder = embedder
        self.index = index
        self.timeout_s = timeout_s  # bounds one sync in all (None: no bound)

    async def add(self, resource_id: str, groups: Sequence[ObservationGroup]) -> None:
        """Embed and store ``groups`` (replacing what their keys held).

        Each thread's groups are embedded as that thread's call (its call scope: the ledger, and
        the privacy allow-list, judge an embedding by the thread whose text it carries); a thread
        whose text the embedder may not see (:class:`~obsmem.errors.PrivacyError`) is left out
        of the index, the others are indexed."""
        by_thread: dict[str, tuple[list[str], list[str], list[str]]] = {}
        for group in groups:
            keys, namespaces, texts = by_thread.setdefault(group.thread_id, ([], [], []))
            namespace = group_namespace(resource_id, group.thread_id, group.id)
            for position, chunk in enumerate(_chunks(strip_groups(group.body))):
                keys.append(f"{namespace}{position}")
                namespaces.append(namespace)
                texts.append(chunk)
        for thread_id, (keys, namespaces, texts) in by_thread.items():
            if not keys:
                continue
            with calls.call_scope(thread_id=thread_id, resource_id=resource_id):
                try:
                    vectors = await self.embedder.embed(texts)
                except PrivacyError:
                    continue  # (the boundary reported it: event privacy-fallback)
            await self.index.upsert_many(keys, vectors, namespaces)

    async def remove(self, resource_id: str, groups: Sequence[ObservationGroup]) -> None:
        for group in groups:
            await self.index.delete_namespace(group_namespace(resource_id, group.thread_id, group.id))

    async def remove_thread(self, resource_id: str, thread_id: str) -> None:
        await self.index.delete_namespace(thread_namespace(resource_id, thread_id))

    async def remove_resource(self, resource_id: str) -> int:
        """Delete every vector of a resource's groups; how many went."""
        return await self.index.delete_namespace(resource_namespace(resource_id))

    async def refresh(self, resource_id: str, before: str, after: str) -> None:
        """Like :meth:`sync`, and groups whose text changed (a forgotten line) are embedded anew.

        Raises when the index fails: forgetting must not report success over stale vectors.
        """
        old = {g.id: g for g in parse_groups(before)}
        new = {g.id: g for g in parse_groups(after)}
        changed = [g for gid, g in new.items() if gid not in old or old[gid].body != g.body]
        await self.remove(resource_id, [g for gid, g in old.items() if gid not in new or new[gid].body != g.body])
        await self.add(resource_id, changed)

    async def sync(self, resource_id: str, before: str, after: str) -> None:
        """Make the index follow a change of observation text: new groups in, gone groups out.

        Failures are logged, never raised: the committed memory matters more than its index. The
        whole sync is bounded by ``timeout_s`` (an embedder that never answers cannot hold the
        memory work that called it).
        """
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._sync(resource_id, before, after)
        except TimeoutError:
            logger.warning("obsmem: indexing observation groups gave up after %s s; they are left out of the index",
                           self.timeout_s)

    async def settle(
        self, resource_id: str, written: Sequence[ObservationGroup],
        held: Callable[[], Awaitable[dict[str, ObservationGroup]]],
    ) -> None:
        """After ``written`` were indexed from a head that another writer may have rewritten
        meanwhile (a forget scrubbed it and re-embedded what it left, a reflection replaced it):
        read what the head holds now (``held``: its groups, :func:`held_groups`) and put each written group
        that changed or went back as it is held, or out. Without it the text a forget took out
        stayed searchable. At most :data:`_SETTLE_ROUNDS` reads (a head that keeps changing is
        indexed by the writers that change it). Failures are logged, as :meth:`sync`'s."""
        groups = {g.id: g for g in written}
        try:
            async with asyncio.timeout(self.timeout_s):
                for _ in range(_SETTLE_ROUNDS):
                    if not groups:
                        return
                    now = await held()
                    stale = [g for gid, g in groups.items() if gid not in now or now[gid].body != g.body]
                    if not stale:
                        return
                    back = [now[g.id] for g in stale if g.id in now]
                    await self.remove(resource_id, stale)
                    await self.add(resource_id, back)
                    groups = {g.id: g for g in back}
        except TimeoutError:
            logger.warning("obsmem: settling the index of observation groups gave up after %s s", self.timeout_s)
        except Exception as exc:  # an index outage must not fail the memory write
            telemetry.log_failure(logger, "obsmem: settling the index of observation groups failed", error=exc,
                                  operation="index")  # fmt: skip

    async def _sync(self, resource_id: str, before: str, after: str) -> None:
        old = {g.id: g for g in parse_groups(before)}
        new = {g.id: g for g in parse_groups(after)}
        added = [g for gid, g in new.items() if gid not in old]
        removed = [g for gid, g in old.items() if gid not in new]
        if not added and not removed:
            return
        for attempt in range(_ATTEMPTS):
            try:
                await self.add(resource_id, added)
                await self.remove(resource_id, removed)
                return
            except Exception as exc:  # an index outage must not undo or fail the memory write
                telemetry.log_failure(
                    logger, "obsmem: indexing observation groups failed (attempt %d of %d)", attempt + 1, _ATTEMPTS,
                    error=exc, operation="index",
                )

    async def search(self, query: str, *, namespace_prefix: str, k: int) -> list[GroupHit]:
        """The best groups for ``query`` inside ``namespace_prefix``, one hit per group (only
        groups with a positive similarity)."""
        if k <= 0 or not query.strip():
            return []
        vector = (await self.embedder.embed([query]))[0]
        # Several chunks of one group may match; ask for more so k distinct groups come back.
        raw = await self.index.search(vector, k * 4, namespace_prefix=namespace_prefix)
        hits: dict[tuple[str, str, str], GroupHit] = {}
        for hit in raw:
            if hit.score <= 0.0:
                continue  # nothing in common with the query: not a result, however few there are
            parsed = _parse_namespace(hit.namespace)
            if parsed is None or not hit.namespace.startswith(namespace_prefix) or parsed in hits:
                continue
            hits[parsed] = GroupHit(parsed[0], parsed[1], parsed[2], hit.score)
        return sorted(hits.values(), key=lambda h: -h.score)[:k]


def group_index_for(
    retrieval: RetrievalConfig, embedder: Embedder | None, vector_index: VectorIndex | None
) -> GroupIndex | None:
    """The group index ``retrieval`` asks for, or None; vector retrieval without both parts is
    a ConfigError naming what is missing (Memory and workers build theirs the same way)."""
    if not (retrieval.enabled and retrieval.vector):
        return None
    if embedder is None or vector_index is None:
        given = (("embedder", embedder), ("vector_index", vector_index))
        missing = " and ".join(name for name, value in given if value is None)
        raise ConfigError(
            "retrieval.vector",
            f"vector retrieval needs an embedder and a vector index, but no {missing} was given",
            allowed="embedder=LexicalHashEmbedder(), vector_index=InMemoryVectorIndex(384), "
            "or retrieval={'vector': False}",
        )
    return GroupIndex(embedder, vector_index, timeout_s=retrieval.index_timeout_s)

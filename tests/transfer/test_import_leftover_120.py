"""Taking back a cut-off import never takes what the app wrote since (helper-120's review).

An import killed midway leaves a note of what it was writing (threads, lineages, working
memory); the next import of the user takes that back first, "unless the threads it wrote have
been used since" (README: "refused instead if the app has written to its threads since"). The
check looked only at the noted threads' messages. But the app may meanwhile have begun a new
thread of the user (in resource scope it observes into the user's lineage, which the cut-off
import had created, and its working memory is the user's key): the next import then deleted
the user's resource lineage and working memory, the new thread's observations with them, and
was refused anyway (the new thread is the user's). It is refused now before anything is taken.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from obsmem import Message
from obsmem.errors import ImportConflictError
from obsmem.storage import ObservationRecord, SQLiteStore, lineage_key, open_store
from obsmem.transfer import export_resource, import_resource
from obsmem.types import Thread

from ..engine.helpers import Conversation, chat_turns
from .helpers import memory_over

pytestmark = pytest.mark.anyio

LINEAGE = lineage_key("resource", None, "alice")


async def _export() -> str:
    async with open_store("memory://") as source:
        for thread in ("t1", "t2"):
            await source.create_thread(Thread(id=thread, resource_id="alice"))
            await source.save_messages(thread, [Message.user(f"hello from {thread}")])
        made = await source.create_record(
            ObservationRecord(id="r0", lineage=LINEAGE, scope="resource", thread_id=None, resource_id="alice",
                              active_observations="- the user said hello")
        )  # fmt: skip
        assert made.applied
        await source.set_working_memory("resource:alice", "- greets people")
        out = io.StringIO()
        await export_resource(source, "alice", out)
        return out.getvalue()


class _KilledMidway(SQLiteStore):
    """The import's process dies when it writes the user's working memory (its last step): it
    writes nothing more, so nothing is taken back and its note stays."""

    dead = False

    async def set_working_memory(self, key: str, text: str) -> None:
        if key == "resource:alice" and not self.dead:
            self.dead = True
            raise KeyboardInterrupt("killed midway")
        if self.dead:
            raise RuntimeError("the process is gone")
        await super().set_working_memory(key, text)

    async def delete_working_memory(self, key: str) -> bool:
        if self.dead:
            raise RuntimeError("the process is gone")
        return await super().delete_working_memory(key)

    async def delete_lineage(self, lineage: str) -> int:
        if self.dead:
            raise RuntimeError("the process is gone")
        return await super().delete_lineage(lineage)

    async def delete_thread(self, thread_id: str) -> bool:
        if self.dead:
            raise RuntimeError("the process is gone")
        return await super().delete_thread(thread_id)


async def test_a_leftover_import_is_not_taken_back_over_a_new_thread_of_the_user(tmp_path: Path) -> None:
    """On main: ImportConflictError as now, but the user's resource lineage (with t3's
    observations) and working memory had been deleted by it first (head None)."""
    export = await _export()
    db = tmp_path / "m.db"
    async with _KilledMidway(db) as store:
        with pytest.raises(KeyboardInterrupt):
            await import_resource(store, io.StringIO(export))
    async with SQLiteStore(db) as store:
        assert await store.get_head(LINEAGE) is not None  # what the cut-off import left
        memory = memory_over(store, scope="resource")
        conv = Conversation()
        async with memory:  # the app goes on: a new thread of alice, observed into her lineage
            await memory.create_thread("t3", resource_id="alice")
            messages = []
            for user_text, reply in chat_turns(4):
                messages += [conv.user(user_text), conv.assistant(reply)]
            await memory.save_messages("t3", messages)
            await memory.observe("t3")
        await store.set_working_memory("resource:alice", "- moved to Berlin (said in t3)")
        head = await store.get_head(LINEAGE)
        assert head is not None and "t3" in head.threads

        with pytest.raises(ImportConflictError) as refused:
            await import_resource(store, io.StringIO(export))
        after = await store.get_head(LINEAGE)
        assert after is not None and after.id == head.id and after.version == head.version
        assert await store.get_working_memory("resource:alice") == "- moved to Berlin (said in t3)"
        assert sorted(t.id for t in await store.list_threads("alice")) == ["t1", "t2", "t3"]
        assert "cut off midway" in str(refused.value)  # it says why, naming the leftover import

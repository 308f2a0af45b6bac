"""The SQLite knowledge store killed after an erase's rows were gone and before its log was
truncated: the old pages, with the erased text, were left in ``k.db-wal`` for as long as the
restarted app ran (nothing noted that the clean-up was owed). It is now noted beside the file
until done, and the next open of the store does it first.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from obsmem.knowledge import Knowledge
from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

from ..lifecycle_delete.test_erased_file_bytes import in_files
from .harness import env

pytestmark = pytest.mark.anyio

SECRET = "KNOW-CRASH-5505"
SCOPE = "org:acme/resource:alice"

CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from obsmem.knowledge import Knowledge
    from obsmem.knowledge.store.sqlite import SQLiteKnowledgeStore

    async def main(path, erase):
        store = SQLiteKnowledgeStore(path)
        knowledge = Knowledge(store, actor="app")
        jane = await knowledge.node("Jane", "person", "org:acme")
        for i in range(20):
            await knowledge.append(jane.id, f"Jane's card {i} is {SECRET}", SCOPE + "/thread:t1", reason="said so")
        await knowledge.drain()

        async def killed():  # every row erased; the log not truncated yet
            os.kill(os.getpid(), signal.SIGKILL)

        store.truncate_wal = killed
        if erase == "forget":
            await store.forget_value(SECRET, SCOPE, actor="app", reason="asked")
        else:
            await store.purge_scope(SCOPE + "/thread:t1", actor="app", reason="thread deleted")
        sys.exit("not killed")

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
).replace("SECRET", repr(SECRET)).replace("SCOPE", repr(SCOPE))


@pytest.mark.parametrize("erase", ["forget", "purge"])
async def test_a_knowledge_erase_killed_before_its_log_was_truncated_is_cleaned_when_the_store_opens(
    tmp_path: Path, erase: str
) -> None:
    path = tmp_path / "k.db"
    child = subprocess.run([sys.executable, "-c", CHILD, str(path), erase],
                           capture_output=True, text=True, env=env(), timeout=180)  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "k.db-wal" in in_files(tmp_path, SECRET)  # the kill left the old pages in the log

    async with Knowledge(SQLiteKnowledgeStore(path), actor="app") as knowledge:
        jane = await knowledge.store.resolve_node("Jane", "org:acme")
        assert jane is not None
        assert [r.text for r in (await knowledge.store.list_about(jane.id, SCOPE + "/thread:t1")).items] == []

        assert in_files(tmp_path, SECRET) == {}

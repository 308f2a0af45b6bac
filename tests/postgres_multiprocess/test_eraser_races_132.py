"""Two erasers in two processes on one PostgreSQL database (review 132): a forget stopped after it
read what it rewrites (working memory, an older generation) while another process forgets
another value or deletes the thread. Each rewrite is a compare-and-set on what was read, so the
stopped one's write is refused and redone from what is stored: neither eraser's removal comes
back. Real processes (``worker_132.py``), coordinated by files, checked in every table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from obsmem import Memory, Message

from . import harness
from .hostile_109_worker import SECRET, wait_for
from .test_hostile_review_109_held_up import tables_holding
from .test_hostile_review_131 import HERON, older_generation_of_two_threads

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("worker_132.py")
MEMORY = "- pin: ValueOne\n- code: ValueTwo\n- name: Ada Lovelace"


def start_forget(url: str, folder: Path, **args: Any) -> subprocess.Popen[str]:
    """A process forgetting ``args["value"]``, stopped at its first ``args["method"]`` call."""
    (folder / "args.json").write_text(json.dumps(args))
    forgetting = subprocess.Popen(
        [sys.executable, str(WORKER), "paused_forget", url, "0", str(folder)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=harness.env(),
    )
    wait_for(folder, "rewriting")
    return forgetting


async def thread_with_working_memory(url: str) -> None:
    async with Memory(url) as memory:
        await memory.create_thread(thread_id="shared", resource_id="u1")
        await memory.save_messages("shared", [Message.user("Hello there.", id="hello")])
        await memory.store.set_working_memory("thread:shared", MEMORY)


async def test_two_forgets_of_one_working_memory_in_two_processes_keep_both_out(postgres_url: str,
                                                                                tmp_path: Path) -> None:
    """Each forget read the working memory and wrote back its lines without its own value's:
    the one that wrote last brought the other's value back."""
    await thread_with_working_memory(postgres_url)
    forgetting = start_forget(postgres_url, tmp_path, value="ValueOne", thread_id="shared",
                              method="replace_working_memory")
    async with Memory(postgres_url) as admin:
        await admin.forget("ValueTwo", thread_id="shared")
    (tmp_path / "go").write_text("1")
    [report] = harness.finish([forgetting])
    assert report == {"paused": True, "errors": []}
    assert tables_holding(postgres_url, "ValueOne") == []
    assert tables_holding(postgres_url, "ValueTwo") == []
    async with Memory(postgres_url) as memory:
        assert await memory.store.get_working_memory("thread:shared") == "- name: Ada Lovelace"


async def test_a_forget_stopped_at_working_memory_writes_nothing_of_a_thread_deleted_meanwhile(
    postgres_url: str, tmp_path: Path
) -> None:
    """The thread is deleted while the forget stands between its read and its write of the
    thread's working memory: written blindly, the deleted thread's working memory was back."""
    await thread_with_working_memory(postgres_url)
    forgetting = start_forget(postgres_url, tmp_path, value="ValueOne", thread_id="shared",
                              method="replace_working_memory")
    async with Memory(postgres_url) as admin:
        assert await admin.delete_thread("shared") is True
    (tmp_path / "go").write_text("1")
    [report] = harness.finish([forgetting])
    assert report["paused"] is True
    for word in ("ValueOne", "ValueTwo", "Ada Lovelace"):
        assert tables_holding(postgres_url, word) == [], word


async def test_a_forget_and_a_delete_rewriting_one_older_generation_lose_neither(postgres_url: str,
                                                                                tmp_path: Path) -> None:
    """Resource scope, the other way round from review 131's test: the forget stops after it read
    an older generation (holding thread t1's section and, in t2's, the value), the delete of t1
    rewrites it meanwhile; the forget's blind rewrite brought t1's words back."""
    config = await older_generation_of_two_threads(postgres_url)
    forgetting = start_forget(postgres_url, tmp_path, value=SECRET, resource_id="u1", scope="resource",
                              method="rewrite_generation")
    async with Memory(postgres_url, config=config) as admin:
        assert await admin.delete_thread("t1") is True
    (tmp_path / "go").write_text("1")
    [report] = harness.finish([forgetting])
    assert report == {"paused": True, "errors": []}
    assert tables_holding(postgres_url, HERON) == []
    assert tables_holding(postgres_url, SECRET) == []

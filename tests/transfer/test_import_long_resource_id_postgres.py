"""Import on PostgreSQL of a user whose id is long and non-ASCII (800 CJK characters): exported
and imported whole, as before the import's note (kept while it runs) named the user's id
percent-quoted in its key, 9 bytes a character, past PostgreSQL's key index (about 2,700 bytes a
row), so the import failed with a StorageError."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest

from obsmem import Memory, Message
from obsmem.storage import open_store
from obsmem.transfer import export_resource, import_resource

from ..postgres_fixtures import postgres_server, postgres_url  # noqa: F401

pytestmark = pytest.mark.anyio


async def test_a_user_with_a_long_id_is_imported(postgres_url: str, tmp_path: Path) -> None:  # noqa: F811
    rng = random.Random(7)
    resource_id = "user-" + "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(800))
    source = f"sqlite:///{tmp_path / 'a.db'}"
    async with Memory(source) as memory:
        await memory.create_thread("t1", resource_id)
        await memory.save_messages("t1", [Message.user("hello"), Message.assistant("hi")])
        out = io.StringIO()
        await export_resource(memory.store, resource_id, out)
    async with open_store(postgres_url) as store:
        await import_resource(store, io.StringIO(out.getvalue()))
        assert [t.id for t in await store.list_threads(resource_id)] == ["t1"]
        assert await store.count_messages("t1") == 2

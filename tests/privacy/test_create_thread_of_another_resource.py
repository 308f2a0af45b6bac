"""``Memory.create_thread`` never hands one resource (or org) another's thread.

Hostile review (helper-103) on main (d2e97d7): ``create_thread("shared-id", "bob")``, with alice
already owning ``shared-id``, returned alice's thread (her title and metadata) to bob's app, where
``get_thread(..., resource_id="bob")``, ``begin_turn`` and the REST API (409) refuse the same id.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.errors import InvalidInputError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_create_thread_refuses_an_id_another_resource_owns(tmp_path: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'om.db'}"
    async with Memory(url) as memory:
        await memory.create_thread("shared-id", "alice", title="Alice: lawyer notes", metadata={"email": "a@x.org"})
        with pytest.raises(InvalidInputError, match="another resource") as caught:
            await memory.create_thread("shared-id", "bob")
        assert "Alice" not in str(caught.value) and "a@x.org" not in str(caught.value)
        # the same resource asking again gets its thread (creating is idempotent)
        again = await memory.create_thread("shared-id", "alice")
        assert again.title == "Alice: lawyer notes"


async def test_create_thread_refuses_an_id_another_org_owns(tmp_path: Path) -> None:
    async with Memory(f"sqlite:///{tmp_path / 'om.db'}") as memory:
        await memory.create_thread("t-1", "u1", org_id="acme", title="acme secret")
        with pytest.raises(InvalidInputError, match="another org"):
            await memory.create_thread("t-1", "u1", org_id="globex")

"""``export_resource`` (the library and ``obsmem export``) of a resource whose id no knowledge
scope can hold: the gateway names resources from a request's ``user``, which may hold '/'.
The id ``kn/thread:t1`` was spelled into ``org:acme/resource:kn/thread:t1``, a thread scope of
resource ``kn``, so the export carried ``kn``'s knowledge (its scope chain) to whoever asked for
``kn/thread:t1``'s data (found by helper-147; the REST route was fixed in fe5ad2e). Such a
resource has no knowledge: its export holds none."""

from __future__ import annotations

import io

import pytest

from obsmem import Memory
from obsmem.knowledge import Knowledge
from obsmem.transfer import export_resource

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("odd", ["kn/thread:t1", "kn/x", "kn thread"])
async def test_an_id_no_scope_holds_exports_no_other_resources_knowledge(odd: str) -> None:
    knowledge = Knowledge.in_memory()
    async with Memory("memory://", knowledge=knowledge) as memory:
        await memory.create_thread("t-kn", "kn", org_id="acme")
        node = await knowledge.node("user", "entity", "org:acme/resource:kn", reason="test")
        await knowledge.append(node.id, "KN-FACT-8812", "org:acme/resource:kn", reason="test")
        await memory.create_thread("t-odd", odd, org_id="acme")
        await memory.save_messages("t-odd", [{"role": "user", "parts": [{"type": "text", "text": "hi there"}]}])
        out = io.StringIO()
        await export_resource(memory.store, odd, out, knowledge=knowledge)
        exported = out.getvalue()
        assert "hi there" in exported  # the resource's own data is there
        assert "KN-FACT-8812" not in exported
        # kn's own export still carries its knowledge (the control)
        mine = io.StringIO()
        await export_resource(memory.store, "kn", mine, knowledge=knowledge)
        assert "KN-FACT-8812" in mine.getvalue()

"""A user's export holds no audit event of another user's deletion (helper-161).

Deleting bob's resource leaves one ``scope-purged`` event at the org: when, by which key, why
(and the key's reason) and how much his scope held. The audit log shows it only to the org
and to bob's own scope, never to another resource of the org; alice's export (``export_resource``
with knowledge, ``obsmem export --knowledge``, the REST export), which reads the same rows through
``dump_scope``, carried it all the same.
"""

from __future__ import annotations

import io
import json

import pytest

from obsmem import Memory, Message
from obsmem.knowledge import ActivityAction, Knowledge
from obsmem.transfer import export_resource

pytestmark = pytest.mark.anyio

ORG = "org:default"


async def test_alices_export_holds_no_event_of_bobs_deletion() -> None:
    async with Knowledge.in_memory(actor="key:admin-7") as knowledge, Memory("memory://", knowledge=knowledge) as memory:
        for who in ("alice", "bob"):
            async with memory.turn(thread_id=f"{who}-t1", resource_id=who, messages=[Message.user("hello")]) as turn:
                await turn.step([Message.assistant("hi")])
            user = await knowledge.node("User", "person", f"{ORG}/resource:{who}")
            await knowledge.append(user.id, f"{who} likes green tea", f"{ORG}/resource:{who}", reason="said")
        await memory.delete_resource("bob", actor="key:ops-9")
        # control: the org's own audit log shows the deletion, alice's does not
        assert [e.actor for e in (await knowledge.store.list_activity(ORG)).items
                if e.action is ActivityAction.SCOPE_PURGED] == ["key:ops-9"]
        assert not [e for e in (await knowledge.store.list_activity(f"{ORG}/resource:alice")).items
                    if e.action is ActivityAction.SCOPE_PURGED]

        out = io.StringIO()
        await export_resource(memory.store, "alice", out, knowledge=knowledge)
        lines = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
        activity = [line["data"] for line in lines if line.get("kind") == "knowledge_activity"]
        assert activity  # alice's own events are exported
        assert not [e for e in activity if e["action"] == "scope-purged"], activity
        assert "key:ops-9" not in out.getvalue()


async def test_a_resource_export_keeps_its_own_deletion_events() -> None:
    """The filter is the audit log's: a resource's own thread deletion stays in its export."""
    async with Knowledge.in_memory(actor="key:admin-7") as knowledge:
        alice = f"{ORG}/resource:alice"
        user = await knowledge.node("User", "person", alice)
        await knowledge.append(user.id, "alice likes tea", f"{alice}/thread:t1", reason="said")
        await knowledge.store.purge_scope(f"{alice}/thread:t1", actor="key:admin-7", reason="thread deleted")
        dump = await knowledge.store.dump_scope(alice)
        assert [e.reason for e in dump.events if e.action is ActivityAction.SCOPE_PURGED] == ["thread deleted"]

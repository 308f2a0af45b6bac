"""After an import, the user's next message is in the context (helper-120's hostile review).

A forget that removes a thread's last message whole (README: "a message left with nothing is
deleted") leaves the observation cursor on that message's seq, which the source store never
gives out again (seqs are never reused). The export then ends one message short of its cursor,
and an import into an empty store gives every message its old seq (``seqs_preserved``), so the
target's next seq is the very one the cursor stands on: the user's next message counted as
already observed. It was not in ``get_context`` (the model never saw it) and no observation
would ever read it. A cursor (or a span, a group range, the recorded instructions' seq) past the
export's last message is brought back onto that message now.
"""

from __future__ import annotations

import io

import pytest

from obsmem import Message
from obsmem.storage import lineage_key, open_store
from obsmem.transfer import export_resource, import_resource

from ..engine.helpers import Conversation, chat_turns
from .helpers import memory_over

pytestmark = pytest.mark.anyio

SECRET = "my locker code is ZZZ-4242"


def _texts(messages: object) -> list[str]:
    return [part.text for message in messages for part in message.parts if hasattr(part, "text")]  # type: ignore[attr-defined]


async def _export_after_forgetting_the_last_message() -> str:
    conv = Conversation()
    async with open_store("memory://") as source:
        memory = memory_over(source)
        async with memory:
            await memory.create_thread("t1", resource_id="alice")
            messages = []
            for user_text, reply in chat_turns(4):
                messages += [conv.user(user_text), conv.assistant(reply)]
            await memory.save_messages("t1", [*messages, conv.user(SECRET)])
            await memory.observe("t1")
            await memory.forget(SECRET, thread_id="t1")
            stored = await source.list_messages("t1")
            head = await source.get_head(lineage_key("thread", "t1", "alice"))
            assert head is not None and head.threads["t1"].cursor > max(m.seq or 0 for m in stored)
            out = io.StringIO()
            await export_resource(source, "alice", out)
            return out.getvalue()


async def test_the_next_message_after_an_import_is_in_the_context() -> None:
    """On main: get_context('t1') after 'I moved to Paris' was saved ended with the system
    reminder, without the message (seq 9, the imported cursor 9: taken as observed)."""
    export = await _export_after_forgetting_the_last_message()
    async with open_store("memory://") as target:
        summary = await import_resource(target, io.StringIO(export))
        assert summary.seqs_preserved
        memory = memory_over(target)
        async with memory:
            await memory.save_messages("t1", [Message.user("I moved to Paris")])
            context = await memory.get_context("t1")
            assert "I moved to Paris" in _texts(context.messages)
            assert SECRET not in str(context.messages)
            head = await target.get_head(lineage_key("thread", "t1", "alice"))
            stored = await target.list_messages("t1")
            assert head is not None and head.threads["t1"].cursor < (stored[-1].seq or 0)


async def test_a_round_trip_of_such_an_export_is_stable() -> None:
    """Exported again, the import is the same file but the cursor (now on the last message)."""
    export = await _export_after_forgetting_the_last_message()
    async with open_store("memory://") as target:
        await import_resource(target, io.StringIO(export))
        again = io.StringIO()
        await export_resource(target, "alice", again)
    before = [line for line in export.splitlines()[1:] if '"kind": "record"' not in line]
    after = [line for line in again.getvalue().splitlines()[1:] if '"kind": "record"' not in line]
    assert before == after

"""A realistic resource built through the public Memory API, and a deep comparison of two stores."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from obsmem import Memory, Message, Store
from obsmem.knowledge import Knowledge
from obsmem.storage import ObservationRecord, lineage_key
from obsmem.transfer import ImportSummary, export_resource, import_resource

from ..engine.helpers import Conversation, chat_turns, fake_clock, small_config

RESOURCE = "alice"
THREADS = ("trip", "work", "home")


def memory_over(store: Store, *, scope: str = "thread") -> Memory:
    config = small_config(message_tokens=120, observation_tokens=150)
    if scope == "resource":
        config = config.model_copy(update={"scope": "resource"})
    return Memory(store, config=config, clock=fake_clock(), failure_policy="continue")


async def build_resource(store: Store, *, scope: str = "thread") -> None:
    """Three threads with tool calls, several observations and ≥ 2 reflections each, working memory."""
    memory = memory_over(store, scope=scope)
    conv = Conversation()
    async with memory:
        for index, thread_id in enumerate(THREADS):
            await memory.create_thread(thread_id, resource_id=RESOURCE, title=f"about {thread_id}")
            for round_ in range(3):
                messages = []
                for user_text, reply in chat_turns(3 + index):
                    messages += [conv.user(user_text), conv.assistant(reply)]
                call_id = f"call-{thread_id}-{round_}"
                messages += [
                    conv.call(call_id, city="Munich", day=round_),
                    conv.result(call_id, {"temp_c": 20 + round_, "sky": "clear"}),
                ]
                await memory.save_messages(thread_id, messages)
                await memory.observe(thread_id)
                await memory.reflect(thread_id)
            await memory.save_messages(thread_id, [conv.user(f"still pending in {thread_id}")])
            await memory.store.set_working_memory(f"thread:{thread_id}", f"# {thread_id}\n- user: Alice")
        await memory.store.set_working_memory(f"resource:{RESOURCE}", "# Alice\n- lives in Munich")


async def snapshot(store: Store, *, scope: str = "thread") -> dict[str, Any]:
    """Everything the resource holds, as plain data, plus the context Memory builds per thread."""
    out: dict[str, Any] = {}
    threads = await store.list_threads(RESOURCE)
    out["threads"] = [t.model_dump() for t in threads]
    lineages = [lineage_key("thread", t.id, RESOURCE) for t in threads] + [lineage_key("resource", None, RESOURCE)]
    out["generations"] = {
        lineage: [r.model_dump() for r in await store.list_generations(lineage, limit=1000)] for lineage in lineages
    }
    out["heads"] = {lineage: _dump(await store.get_head(lineage)) for lineage in lineages}
    memory = memory_over(store, scope=scope)
    for thread in threads:
        out[f"messages:{thread.id}"] = [m.model_dump() for m in await store.list_messages(thread.id)]
        out[f"wm:{thread.id}"] = await store.get_working_memory(f"thread:{thread.id}")
        context = await memory.get_context(thread.id)
        out[f"context:{thread.id}"] = [m.model_dump() for m in context.messages]
    out["wm:resource"] = await store.get_working_memory(f"resource:{RESOURCE}")
    await memory.aclose()
    return out


def _dump(record: ObservationRecord | None) -> dict[str, Any] | None:
    return record.model_dump() if record else None


async def export_text(store: Store, **kwargs: Any) -> str:
    import io

    buffer = io.StringIO()
    await export_resource(store, RESOURCE, buffer, **kwargs)
    return buffer.getvalue()


async def restored_after_forget(
    tmp_path: Path, messages: list[Message], *values: str
) -> tuple[list[Message], list[Message], ImportSummary]:
    """Thread t1 of alice holding ``messages`` (a knowledge store beside it), exported, then
    ``values`` forgotten there, and the backup imported into a new store: the thread as the
    forget left it, the thread as the import restored it, and the import's summary."""
    knowledge = Knowledge.sqlite(tmp_path / "k.db")
    try:
        async with Memory(f"sqlite:///{tmp_path / 'a.db'}", knowledge=knowledge) as memory:
            await memory.create_thread("t1", RESOURCE)
            await memory.save_messages("t1", messages)
            backup = io.StringIO()
            await export_resource(memory.store, RESOURCE, backup)
            for value in values:
                await memory.forget(value, resource_id=RESOURCE)
            live = await memory.list_messages("t1")
        async with Memory(f"sqlite:///{tmp_path / 'b.db'}") as memory:
            summary = await import_resource(memory.store, io.StringIO(backup.getvalue()), knowledge=knowledge)
            restored = await memory.list_messages("t1")
    finally:
        await knowledge.close()
    return live, restored, summary

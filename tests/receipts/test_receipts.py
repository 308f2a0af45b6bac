"""Receipts from the user's side: every context says what memory it was made of, a reply keeps
the receipt of the context it was made from, and an old reply's receipt still resolves after
later reflections (issue 21)."""

from __future__ import annotations

import pytest

from obsmem import Memory, Message
from obsmem.clock import FakeClock
from obsmem.demo.conversation import demo_conversation
from obsmem.om.receipts import Receipt, context_hash

pytestmark = pytest.mark.anyio

CONFIG = {
    "retrieval": True,
    "observation": {"message_tokens": 1_500, "buffer_tokens": False},
    "reflection": {"observation_tokens": 1_200},
}


def _conversation_ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages if m.role != "system"]


async def _replay(memory: Memory, clock: FakeClock, turns: int) -> list[tuple[Message, Receipt]]:
    """Replay the demo's first ``turns`` turns; each final reply with the receipt of the context
    the turn handed the actor for it (the one it was made from)."""
    replies = []
    for demo in demo_conversation()[:turns]:
        clock.advance_to(demo.user.created_at)
        turn = await memory.begin_turn(thread_id="demo-thread", resource_id="demo-user", messages=[demo.user])
        if len(demo.responses) > 1:
            await turn.step(list(demo.responses[:-1]))
        made_from = turn.context.receipt
        assert made_from is not None
        assert made_from.context_hash == context_hash(turn.context.messages)
        await turn.end([demo.responses[-1]])
        replies.append((demo.responses[-1], made_from))
    return replies


async def test_a_reply_after_two_reflections_traces_back_to_exactly_its_messages() -> None:
    clock = FakeClock(demo_conversation()[0].user.created_at)
    async with Memory(config=CONFIG, clock=clock) as memory:
        replies = await _replay(memory, clock, 120)
        generations = await memory.list_generations("demo-thread")
        assert len(generations) >= 4, "the replay must reflect at least twice"
        late = [(reply, made_from) for reply, made_from in replies if (made_from.generation or 0) >= 2]
        assert late, "a reply made after two reflections"
        stored = [m for m in await memory.list_messages("demo-thread") if m.role != "system"]
        stored_everything = [m.id for m in stored]
        for reply, made_from in late[:10]:
            receipt = await memory.receipt(reply.id)
            assert receipt is not None and receipt.data() == made_from.data()  # stored with the reply
            sources = await memory.receipt_sources(receipt)
            covered = [m.id for group in receipt.groups for m in sources[group.id]]
            raw = [m.id for m in sources["raw"]]
            assert sorted(raw) == sorted(made_from.raw_message_ids)
            # groups + raw tail are every message before the reply (reflection groups may overlap:
            # a reflected line can draw on several cycles); only the turn's own question may be
            # both observed and raw (shown again in a tool loop that observed it)
            before = stored_everything[: stored_everything.index(reply.id)]
            assert set(covered) | set(raw) == set(before)
            assert set(covered) & set(raw) <= set(made_from.raw_outside)
            for group in receipt.groups:  # exactly the conversation messages of its span, in order
                expected = [m.id for m in stored if group.first_seq <= (m.seq or 0) <= group.last_seq]
                assert [m.id for m in sources[group.id]] == expected


async def test_an_old_receipt_still_resolves_after_later_reflections() -> None:
    clock = FakeClock(demo_conversation()[0].user.created_at)
    async with Memory(config=CONFIG, clock=clock) as memory:
        replies = await _replay(memory, clock, 70)
        reply, _ = next((r, m) for r, m in reversed(replies) if m.groups)
        before = await memory.receipt(reply.id)
        assert before is not None
        resolved_before = {g: [m.id for m in ms] for g, ms in (await memory.receipt_sources(before)).items()}
        head_before = (await memory.list_generations("demo-thread"))[0].generation
        # keep talking: more observations and reflections replace the generation the reply saw
        for demo in demo_conversation()[70:140]:
            clock.advance_to(demo.user.created_at)
            turn = await memory.begin_turn(thread_id="demo-thread", messages=[demo.user])
            await turn.end(list(demo.responses))
        assert (await memory.list_generations("demo-thread"))[0].generation >= head_before + 2
        after = await memory.receipt(reply.id)
        assert after is not None and after.data() == before.data()
        resolved_after = {g: [m.id for m in ms] for g, ms in (await memory.receipt_sources(after)).items()}
        assert resolved_after == resolved_before and any(resolved_after.values())
        # the generation it names is still there to read
        assert before.record_id in {g.id for g in await memory.list_generations("demo-thread", limit=1_000)}


async def test_without_retrieval_groups_the_receipt_covers_each_thread_up_to_its_cursor() -> None:
    clock = FakeClock(demo_conversation()[0].user.created_at)
    config = {**CONFIG, "retrieval": False}
    async with Memory(config=config, clock=clock) as memory:
        replies = await _replay(memory, clock, 40)
        reply, made_from = next((r, m) for r, m in reversed(replies) if m.groups)
        (group,) = made_from.groups
        assert group.kind == "coverage" and group.thread_id == "demo-thread"
        receipt = await memory.receipt(reply.id)
        assert receipt is not None
        sources = await memory.receipt_sources(receipt)
        covered = [m.id for m in sources[group.id]]
        everything = _conversation_ids(await memory.list_messages("demo-thread"))
        before = everything[: everything.index(reply.id)]
        assert set(covered) | {m.id for m in sources["raw"]} == set(before)


async def test_a_receipt_counts_each_section_and_holds_no_text() -> None:
    clock = FakeClock(demo_conversation()[0].user.created_at)
    async with Memory(config=CONFIG, clock=clock) as memory:
        await _replay(memory, clock, 40)
        context = await memory.get_context("demo-thread")
        receipt = context.receipt
        assert receipt is not None and receipt.section_tokens["observations"] > 0 and receipt.section_tokens["raw"] > 0
        assert receipt.total_tokens == memory.counter.count_messages(context.messages)
        data = str(receipt.data())
        for message in context.raw_messages:
            if len(message.text) > 20:
                assert message.text not in data
        assert Receipt.from_data(receipt.data()) == receipt

"""Observing a pasted multi-megabyte message sends each of its characters to the offline
rules' child interpreter about once, not once per chunk.

The offline observer works a long message in chunks of about 44,000 characters, each a job
pickled to a child interpreter. Each chunk is a copy of the message with fewer parts, and the
copy carried the whole message's memos (its token count, which keeps the parts tuple it was
counted for): every job pickled the whole megabyte again. A 1 MB message pickled 23.5 MB, a
2 MB one 91 MB (quadratic: a 20 MB paste would copy gigabytes).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from obsmem.om.offline import offload
from obsmem.tokens import TokenCounter
from obsmem.types import Message, TextPart

from tests.integrity.test_event_loop import converse, megabyte_message

pytestmark = pytest.mark.anyio


class _Sizes:
    """``pickle`` as the offload sees it, noting the size of every job it pickles."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def dumps(self, obj: Any, *args: Any, **kwargs: Any) -> bytes:
        data = pickle.dumps(obj, *args, **kwargs)
        self.sizes.append(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(pickle, name)


@pytest.mark.parametrize("chars", [1_000_000, 2_000_000])
async def test_a_pasted_log_is_pickled_to_the_child_about_once(chars: int, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = _Sizes()
    monkeypatch.setattr(offload, "pickle", sizes)
    observed, moved = await converse(megabyte_message(chars))
    assert observed and moved["in_child"] >= 10, moved  # worked in chunks, each a job
    assert sum(sizes.sizes) <= 2 * chars, (
        f"{sum(sizes.sizes):,} bytes pickled in {len(sizes.sizes)} jobs for a {chars:,}-character message"
    )


def test_a_copy_with_other_parts_does_not_keep_the_counts_of_the_old_ones() -> None:
    """What the chunks came from: a counted message's copy with new parts carries nothing that
    holds the old parts (and a pickle of it holds only its own text)."""
    big = Message.user("x " * 500_000)
    counter = TokenCounter()
    counter.count_message(big)
    chunk = big.model_copy(update={"parts": (TextPart(text="a short piece"),)})
    assert len(pickle.dumps(chunk)) < 10_000
    assert counter.count_message(chunk) < 20
    same = big.model_copy(update={"metadata": {"k": "v"}})  # the same parts: the count is kept
    assert counter.count_message(same) == counter.count_message(big)


class _KeepsAMemoMeanwhile:
    """Pickled, it does what the event loop may do while a worker thread pickles a request: keep a
    memo on the message being pickled (a token count, a digest)."""

    def __init__(self) -> None:
        self.message: Message | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        assert self.message is not None
        self.message.__dict__["_obsmem_count"] = ("parts", "estimator", "user", 3, 1)
        return (str, ("kept",))


def test_a_memo_kept_while_a_message_is_pickled_does_not_break_the_pickle() -> None:
    """Found by helper-142: the state pickled was the message's live ``__dict__`` when it held no
    memo yet; a memo added meanwhile (the loop counting the same message while the offload
    pickled it on a thread) raised "dictionary changed size during iteration", and the offload
    does not fall back on that error: the observation failed."""
    sneaky = _KeepsAMemoMeanwhile()
    message = Message.user("hello", metadata={"x": sneaky})
    sneaky.message = message
    restored = pickle.loads(pickle.dumps(message))
    assert restored.text == "hello" and restored.metadata == {"x": "kept"}
    assert "_obsmem_count" not in restored.__dict__

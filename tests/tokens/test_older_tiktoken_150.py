"""obsmem accepts tiktoken 0.7 and 0.8 (pyproject: tiktoken>=0.7), whose ``Encoding`` has no
``encode_to_numpy`` (tiktoken 0.9 added it): a long text must still be counted, exactly, with the
token lists those versions return."""

from __future__ import annotations

from typing import Any

import pytest

from obsmem import Memory, Message
from obsmem import tokens as tokens_module
from obsmem.tokens import TokenCounter

pytestmark = pytest.mark.anyio


class _Tiktoken08Encoding:
    """The o200k encoding as tiktoken 0.8 offers it: everything but ``encode_to_numpy``."""

    def __init__(self, encoding: Any) -> None:
        self._encoding = encoding

    def __getattr__(self, name: str) -> Any:
        if name == "encode_to_numpy":
            raise AttributeError(name)
        return getattr(self._encoding, name)


async def test_a_long_message_is_counted_with_tiktoken_0_8(monkeypatch: pytest.MonkeyPatch) -> None:
    real = tokens_module.o200k_encoding()
    monkeypatch.setattr(tokens_module, "_encoding", _Tiktoken08Encoding(real))
    text = "The invoice for Lisbon, pier 4, didn't arrive; it's 2025-06-15. " * 3_000
    async with Memory("memory://") as memory:
        turn = await memory.begin_turn(thread_id="t", resource_id="u", messages=[Message.user(text)])
        await turn.end()
    assert TokenCounter(exact=True, cache_size=0).count_text(text) == len(real.encode_ordinary(text))

"""An embeddings server whose vectors hold things that are not JSON numbers of a float's range
(helper-122's hostile review), against a real local server.

The README promises that everything obsmem raises is an ``ObsmemError`` and that an answer not in
the documented shape is a :class:`~obsmem.errors.ModelOutputError`. On main a vector holding an
integer of 400 digits (valid JSON, past a float's range) escaped as a bare ``OverflowError``
(numpy's conversion), and vectors of strings (``"0.5"``) or booleans were taken as numbers: a
broken or hostile server's answer became the user's embeddings, stored and searched.
"""

from __future__ import annotations

from typing import Any

import pytest

from obsmem.embeddings import OpenAIEmbedder
from obsmem.errors import ModelOutputError

from .conftest import FakeOpenAI, Reply

pytestmark = pytest.mark.anyio

ODD: dict[str, list[Any]] = {
    "huge-integer": [10**400] + [1.0] * 7,
    "strings": ["0.5"] * 8,
    "booleans": [True, False] * 4,
}


@pytest.mark.parametrize("case", list(ODD))
async def test_a_vector_of_odd_numbers_is_a_malformed_answer(openai_server: FakeOpenAI, case: str) -> None:
    """On main: huge-integer raised OverflowError; strings and booleans came back as vectors."""
    answer = {"object": "list", "model": "local-embed",
              "data": [{"object": "embedding", "index": 0, "embedding": ODD[case]}]}  # fmt: skip
    openai_server.script(Reply(body=answer))
    embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key="sk-test", base_url=openai_server.base_url,
                              backoff_s=0.0, max_retries=0)  # fmt: skip
    async with embedder:
        with pytest.raises(ModelOutputError, match="non-numbers"):
            await embedder.embed(["hello"])


async def test_integers_and_floats_are_numbers(openai_server: FakeOpenAI) -> None:
    """A vector of plain integers and floats is read (passed on main too: it guards the check)."""
    answer = {"object": "list", "model": "local-embed",
              "data": [{"object": "embedding", "index": 0, "embedding": [1, 0, 0, 0, 0.0, 0, 0, 0]}]}  # fmt: skip
    openai_server.script(Reply(body=answer))
    embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key="sk-test", base_url=openai_server.base_url,
                              backoff_s=0.0, max_retries=0)  # fmt: skip
    async with embedder:
        matrix = await embedder.embed(["hello"])
    assert matrix[0].tolist() == [1.0, 0, 0, 0, 0, 0, 0, 0]


async def test_an_index_that_is_a_boolean_is_a_malformed_answer(openai_server: FakeOpenAI) -> None:
    """On main: ``"index": true`` (JSON true, which Python's int check takes for 1) was a numpy
    boolean mask: its vector was written over every row, here over input 0's, already read."""
    vectors = [[1.0] + [0.0] * 7, [0.0, 1.0] + [0.0] * 6]
    answer = {"object": "list", "model": "local-embed",
              "data": [{"object": "embedding", "index": 0, "embedding": vectors[0]},
                       {"object": "embedding", "index": True, "embedding": vectors[1]}]}  # fmt: skip
    openai_server.script(Reply(body=answer))
    embedder = OpenAIEmbedder("local-embed", dimensions=8, api_key="sk-test", base_url=openai_server.base_url,
                              backoff_s=0.0, max_retries=0)  # fmt: skip
    async with embedder:
        with pytest.raises(ModelOutputError, match="bad index"):
            await embedder.embed(["first", "second"])

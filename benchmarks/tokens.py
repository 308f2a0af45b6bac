"""Benchmark obsmem.tokens: counting speed, and agreement with tiktoken's own o200k_base.

Builds ~1 MB of deterministic mixed text (English prose, Python code, JSON, markdown, CJK,
emoji chat, number tables) cut into message-sized pieces, then measures:

* the exact counter's tokens/s on the pieces with a cold and a warm per-part cache, per piece
  without the cache, and on the whole text in one call;
* the heuristic fallback's tokens/s;
* agreement with a reference ``tiktoken.Encoding`` built from ``load_tiktoken_bpe`` on the
  decompressed table (hash-checked) and tiktoken's own o200k definition: the share of pieces
  with identical counts and the total count ratio;
* the heuristic's mean absolute % error per piece, overall and per kind of text;
* the time to load the shipped table (decompress, verify, parse, build).

Every timing is the median of ``--repeats`` runs (at least 5). Runs in a few seconds on two
cores. ``--json PATH`` writes the same numbers.

    .venv/bin/python benchmarks/tokens.py [--json out.json] [--repeats 5] [--seed 7]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any
from unittest import mock

import tiktoken
from rich.console import Console
from rich.table import Table
from tiktoken.load import load_tiktoken_bpe
from tiktoken_ext import openai_public  # type: ignore[import-untyped]

from obsmem.tokens import O200K_SHA256, TokenCounter, _build_o200k_encoding
from obsmem.types import TextPart

TARGET_BYTES = 1_000_000

# --------------------------------------------------------------------------------------
# Deterministic corpus
# --------------------------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


NOUNS = _words(
    "harbour market ledger engine garden river signal window council museum journey recipe invoice "
    "teacher village library bicycle lantern forecast orchard festival ferry quarry archive compass "
    "mountain bakery workshop meadow telescope voyage kitchen studio platform pipeline customer "
    "schedule warehouse contract neighbour budget manuscript"
)
VERBS = _words(
    "repaired visited measured painted delivered questioned borrowed planted described cancelled "
    "recorded discovered organised translated reviewed shipped approved tested rebuilt mentioned "
    "followed finished"
)
ADJECTIVES = _words(
    "quiet enormous careful ancient crowded brilliant narrow patient rusty generous fragile seasonal "
    "unexpected practical distant colourful reliable temporary"
)
ADVERBS = _words("slowly eventually carefully suddenly rarely happily quietly almost certainly")
NAMES = _words("Margaret Tomasz Aisha Kenji Lucia Owen Priya Dmitri Fatima Hugo Ingrid Mateo")
CONNECTORS = ("and then", "but", "because", "although", "so", "while", "after which", "until")
CONTRACTIONS = ("didn't", "couldn't", "we'll", "she'd", "it's", "they've", "I'm", "won't")
IDENTIFIERS = _words(
    "user count items total result config path buffer index record cache session payload retry "
    "timeout handler value offset limit token message thread stream"
)
PY_TYPES = ("int", "str", "float", "bool", "list[str]", "dict[str, int]", "bytes", "None")
ZH_WORDS = _words(
    "我们 今天 图书馆 讨论 项目 计划 同意 下周 开始 天气 非常 好 朋友 电脑 学习 工作 城市 晚上 吃饭 问题"
)
JA_WORDS = _words("明日 会議 資料 準備 して ください です ます 東京 電車 友達 時間 新しい 仕事 天気 とても")
KO_WORDS = _words("안녕하세요 오늘 회의 시작 합니다 내일 날씨 친구 학교 컴퓨터 정말 감사 시간 도서관")
CJK_PUNCT = ("。", "，", "、", "！", "？")
EMOJI = _words(
    "😀 😂 🥲 😍 🤔 👍 👍🏽 🙏 🎉 🚀 ❤️ 🔥 ✅ ❌ "
    "⭐ 🌧️ ☕ 🍕 🐶 🐱 🌍 🇫🇷 🇯🇵 👨\u200d👩\u200d👧 🧘\u200d♀️ 💡 📎 🗓️"
)


def _sentence(rng: random.Random) -> str:
    subject = rng.choice(NAMES) if rng.random() < 0.5 else f"the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)}"
    clause = f"{subject} {rng.choice(ADVERBS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)}"
    if rng.random() < 0.5:
        clause += (
            f" {rng.choice(CONNECTORS)} {rng.choice(NAMES)} {rng.choice(CONTRACTIONS)} {rng.choice(VERBS)} it"
        )
    if rng.random() < 0.3:
        clause += f" on {rng.randint(1, 28)} March {rng.randint(1990, 2030)}"
    return clause[0].upper() + clause[1:] + rng.choice((".", ".", ".", "!", "?", ";"))


def prose(rng: random.Random) -> str:
    paragraphs = [
        " ".join(_sentence(rng) for _ in range(rng.randint(2, 7))) for _ in range(rng.randint(1, 3))
    ]
    return "\n\n".join(paragraphs)


def _ident(rng: random.Random) -> str:
    return "_".join(rng.sample(IDENTIFIERS, rng.randint(1, 3)))


def code(rng: random.Random) -> str:
    name, args = _ident(rng), [_ident(rng) for _ in range(rng.randint(1, 3))]
    signature = ", ".join(f"{a}: {rng.choice(PY_TYPES)}" for a in args)
    lines = [f"def {name}({signature}) -> {rng.choice(PY_TYPES)}:", f'    """{_sentence(rng)}"""']
    for _ in range(rng.randint(2, 8)):
        target, source = _ident(rng), rng.choice(args)
        lines.append(
            rng.choice(
                (
                    f"    {target} = {source} * {rng.randint(2, 999)} + {rng.random():.3f}",
                    f'    if {source} is None:\n        raise ValueError(f"{source} missing: {{{source}!r}}")',
                    f"    for {target} in range(len({source})):\n        {_ident(rng)}.append({target})",
                    f"    # {rng.choice(NOUNS)} {rng.choice(VERBS)} here",
                    f"    {target} = {{'{rng.choice(IDENTIFIERS)}': {source}, 'n': {rng.randint(0, 99)}}}",
                )
            )
        )
    lines.append(f"    return {rng.choice(args)}")
    return "\n".join(lines)


def _json_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.25:
        return {rng.choice(IDENTIFIERS): _json_value(rng, depth + 1) for _ in range(rng.randint(1, 4))}
    if depth < 2 and roll < 0.4:
        return [_json_value(rng, depth + 1) for _ in range(rng.randint(1, 4))]
    return rng.choice(
        (
            rng.randint(0, 100_000),
            round(rng.uniform(-1000, 1000), 4),
            rng.random() < 0.5,
            None,
            rng.choice(NOUNS),
        )
    )


def json_doc(rng: random.Random) -> str:
    doc = {rng.choice(IDENTIFIERS): _json_value(rng, 0) for _ in range(rng.randint(3, 8))}
    return json.dumps(doc, indent=2 if rng.random() < 0.5 else None, ensure_ascii=False)


def markdown(rng: random.Random) -> str:
    lines = [f"## {rng.choice(ADJECTIVES).title()} {rng.choice(NOUNS)} notes", ""]
    for _ in range(rng.randint(2, 6)):
        lines.append(f"- **{rng.choice(NOUNS)}**: {_sentence(rng)} See `{_ident(rng)}()`.")
    lines += ["", f"| {rng.choice(NOUNS)} | qty | price |", "|---|---:|---:|"]
    for _ in range(rng.randint(1, 4)):
        lines.append(f"| {rng.choice(NOUNS)} | {rng.randint(1, 50)} | {rng.uniform(1, 500):.2f} |")
    lines.append(
        f"\n[{rng.choice(NOUNS)}](https://example.org/{rng.choice(NOUNS)}/{rng.randint(1, 9999)}?ref=md)"
    )
    return "\n".join(lines)


def cjk(rng: random.Random) -> str:
    words = rng.choice((ZH_WORDS, JA_WORDS, KO_WORDS))
    sep = " " if words is KO_WORDS else ""
    sentences = [sep.join(rng.choices(words, k=rng.randint(4, 12))) + rng.choice(CJK_PUNCT) for _ in range(6)]
    return sep.join(sentences)


def emoji_chat(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(3, 8)):
        text = " ".join(rng.choices(NOUNS + VERBS + ADJECTIVES, k=rng.randint(2, 8)))
        lines.append(f"{rng.choice(NAMES)}: {text} {' '.join(rng.choices(EMOJI, k=rng.randint(1, 4)))}")
    return "\n".join(lines)


def numbers(rng: random.Random) -> str:
    rows = [
        f"{rng.randint(2000, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}  "
        f"#{rng.randint(10_000, 99_999)}  {rng.uniform(-1e6, 1e6):,.2f}  {rng.randint(0, 10**9)}  "
        f"{rng.random():.6f}  0x{rng.getrandbits(32):08x}"
        for _ in range(rng.randint(3, 12))
    ]
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[random.Random], str]] = {
    "prose": prose,
    "code": code,
    "json": json_doc,
    "markdown": markdown,
    "cjk": cjk,
    "emoji": emoji_chat,
    "numbers": numbers,
}
WEIGHTS = {"prose": 30, "code": 20, "json": 15, "markdown": 12, "cjk": 10, "emoji": 8, "numbers": 5}


def build_corpus(seed: int, target_bytes: int = TARGET_BYTES) -> list[tuple[str, str]]:
    """Message-sized (kind, text) pieces totalling about ``target_bytes`` of UTF-8."""
    rng = random.Random(seed)
    kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
    pieces: list[tuple[str, str]] = []
    size = 0
    while size < target_bytes:
        kind = rng.choices(kinds, weights)[0]
        text = GENERATORS[kind](rng)
        pieces.append((kind, text))
        size += len(text.encode()) + 2
    return pieces


# --------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------


def reference_encoding() -> tiktoken.Encoding:
    """tiktoken's own o200k_base, built from the decompressed shipped table."""
    gz = resources.files("obsmem").joinpath("data", "o200k_base.tiktoken.gz").read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "o200k_base.tiktoken"
        path.write_bytes(gzip.decompress(gz))
        os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the file in place, leave no cached copy
        ranks = load_tiktoken_bpe(str(path), expected_hash=O200K_SHA256)
    with mock.patch.object(openai_public, "load_tiktoken_bpe", lambda *_a, **_k: ranks):
        return tiktoken.Encoding(**openai_public.o200k_base())


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def measure(seed: int, repeats: int) -> dict[str, Any]:
    pieces = build_corpus(seed)
    texts = [text for _, text in pieces]
    whole = "\n\n".join(texts)
    parts = [TextPart(text=t) for t in texts]
    reference = reference_encoding()
    exact, heuristic = TokenCounter(exact=True), TokenCounter(exact=False)

    ref_counts = [len(reference.encode(t, disallowed_special=())) for t in texts]
    exact_counts = [exact.count_text(t) for t in texts]
    heuristic_counts = [heuristic.count_text(t) for t in texts]
    whole_tokens = exact.count_text(whole)
    piece_tokens = sum(exact_counts)

    def cold_parts() -> None:
        counter = TokenCounter(exact=True)
        for part in parts:
            counter.count_part(part)

    warm = TokenCounter(exact=True)
    for part in parts:
        warm.count_part(part)

    def warm_parts() -> None:
        for part in parts:
            warm.count_part(part)

    timings = {
        "exact_pieces_cold_cache": median_seconds(cold_parts, repeats),
        "exact_pieces_warm_cache": median_seconds(warm_parts, repeats),
        "exact_pieces_count_text": median_seconds(lambda: [exact.count_text(t) for t in texts], repeats),
        "exact_whole_text": median_seconds(lambda: exact.count_text(whole), repeats),
        "heuristic_pieces": median_seconds(lambda: [heuristic.count_text(t) for t in texts], repeats),
        "heuristic_whole_text": median_seconds(lambda: heuristic.count_text(whole), repeats),
        "tiktoken_pieces": median_seconds(lambda: [reference.encode_ordinary(t) for t in texts], repeats),
        "table_load": median_seconds(_build_o200k_encoding, repeats),
    }
    throughput = {
        name: (whole_tokens if name.endswith("whole_text") else piece_tokens) / seconds
        for name, seconds in timings.items()
        if name != "table_load"
    }

    def mape(kind: str | None) -> float:
        errors = [
            abs(h - r) / r
            for (k, _), h, r in zip(pieces, heuristic_counts, ref_counts, strict=True)
            if r and (kind is None or k == kind)
        ]
        return 100 * statistics.fmean(errors)

    def ratio(counts: list[int], kind: str | None = None) -> float:
        chosen = [
            (c, r) for (k, _), c, r in zip(pieces, counts, ref_counts, strict=True) if kind in (None, k)
        ]
        return sum(c for c, _ in chosen) / sum(r for _, r in chosen)

    return {
        "seed": seed,
        "repeats": repeats,
        "corpus": {
            "bytes": len(whole.encode()),
            "chars": len(whole),
            "pieces": len(texts),
            "tokens_whole": whole_tokens,
            "tokens_pieces": piece_tokens,
            "kinds": {kind: sum(1 for k, _ in pieces if k == kind) for kind in GENERATORS},
        },
        "seconds": timings,
        "tokens_per_second": throughput,
        "agreement": {
            "identical_piece_share": sum(e == r for e, r in zip(exact_counts, ref_counts, strict=True))
            / len(texts),
            "total_ratio": ratio(exact_counts),
            "whole_text_identical": whole_tokens == len(reference.encode(whole, disallowed_special=())),
        },
        "heuristic": {
            "mape_percent": mape(None),
            "total_ratio": ratio(heuristic_counts),
            "by_kind": {
                kind: {"mape_percent": mape(kind), "total_ratio": ratio(heuristic_counts, kind)}
                for kind in GENERATORS
            },
        },
    }


def render(results: dict[str, Any]) -> None:
    console = Console()
    corpus, rates, seconds = results["corpus"], results["tokens_per_second"], results["seconds"]
    title = (
        f"obsmem.tokens - {corpus['bytes'] / 1e6:.2f} MB, {corpus['pieces']} pieces, "
        f"{corpus['tokens_whole']:,} o200k tokens; medians of {results['repeats']} runs"
    )
    speed = Table(title=title)
    speed.add_column("measurement")
    speed.add_column("tokens/s", justify="right")
    speed.add_column("median time", justify="right")
    labels = {
        "exact_pieces_cold_cache": "exact, count_part per piece, cold cache",
        "exact_pieces_warm_cache": "exact, count_part per piece, warm cache",
        "exact_pieces_count_text": "exact, count_text per piece (no cache)",
        "exact_whole_text": "exact, count_text on the whole text",
        "heuristic_pieces": "heuristic, count_text per piece",
        "heuristic_whole_text": "heuristic, count_text on the whole text",
        "tiktoken_pieces": "tiktoken reference, encode per piece",
    }
    for key, label in labels.items():
        speed.add_row(label, f"{rates[key] / 1e6:.2f} M", f"{seconds[key] * 1000:.1f} ms")
    speed.add_row("table load (gunzip, sha256, parse, build)", "", f"{seconds['table_load'] * 1000:.0f} ms")
    console.print(speed)

    agreement, heur = results["agreement"], results["heuristic"]
    accuracy = Table(title="Agreement with tiktoken o200k_base")
    accuracy.add_column("counter / kind")
    accuracy.add_column("identical pieces", justify="right")
    accuracy.add_column("total ratio", justify="right")
    accuracy.add_column("mean abs % error", justify="right")
    accuracy.add_row(
        "exact, o200k-v1",
        f"{agreement['identical_piece_share']:.1%}",
        f"{agreement['total_ratio']:.4f}",
        "0.00 %" if agreement["identical_piece_share"] == 1 else "",
    )
    accuracy.add_row("heuristic-v1, all", "", f"{heur['total_ratio']:.3f}", f"{heur['mape_percent']:.2f} %")
    for kind, numbers_ in heur["by_kind"].items():
        accuracy.add_row(
            f"  {kind} ({corpus['kinds'][kind]} pieces)",
            "",
            f"{numbers_['total_ratio']:.3f}",
            f"{numbers_['mape_percent']:.2f} %",
        )
    console.print(accuracy)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (median; at least 5)")
    parser.add_argument("--seed", type=int, default=7, help="corpus seed")
    args = parser.parse_args()
    results = measure(args.seed, max(5, args.repeats))
    render(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

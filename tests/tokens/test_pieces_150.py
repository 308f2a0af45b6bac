"""A long text is counted piece by piece (one tokenizer call holds the interpreter lock while it
reads its text and hands its tokens back, so a 5 MB paste counted in one call stood the event
loop still even on a worker thread). The pieces are cut where o200k's pre-tokenizer cannot join
the characters on either side, so the sum must be the whole text's count, exactly, for any text:
checked here on adversarial text with pieces as small as one character, against tiktoken's own
count of the whole text."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsmem import tokens
from obsmem.tokens import TokenCounter, o200k_encoding

# What o200k's pre-tokenizer treats differently: letters of each case and script, title case,
# modifier letters, combining marks (also alone, after punctuation or a digit), digits of several
# scripts and other numbers, every ASCII punctuation mark, the apostrophes and contraction
# suffixes (also as Unicode folds them: long s, Kelvin sign), every kind of whitespace (Unicode's
# and Python's, which differ), NUL and other controls, emoji with joiners and selectors, lone and
# paired surrogates, special-token text, and long runs of each.
_ALPHABET = (
    list("aBzZéÉßǅʰ中ひカ한ไअ") + ["\u0915\u093f", "\u0301", "\u0903", "\u20dd", "\u200d", "\ufe0f"]
    + list("0123456789") + ["٣", "²", "½", "Ⅻ", "〇", "१"]
    + list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("’‘“”—…、。，．！？：；（）「」『』【】《》〈〉·")
    + ["'s", "'S", "'t", "'re", "'ve", "'m", "'ll", "'d", "'ſ", "'\u212a", "’s", "''"]
    + [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\u00a0", "\u1680", "\u2003",
       "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u0085", "\x1c", "\x1f", "\u180e", "\u200b", "\ufeff"]
    + ["\x00", "\x01", "\x7f", "\ufffd", "\ud83d", "\ude00", "\ud83d\ude00", "\udfff", "\ud800"]
    + ["🙂", "👩\u200d💻", "🇵🇹", "❤\ufe0f", "<|endoftext|>", "<|endofprompt|>", "https://x.io/a/b?c=1",
       " " * 40, "\n" * 20, "a" * 60, "A" * 30, "9" * 25, "." * 30, "中" * 30, "\u0301" * 10]
)

_TEXT = st.lists(st.sampled_from(_ALPHABET), max_size=80).map("".join)
_ANY_TEXT = st.text(max_size=60)  # any code point, surrogates included


def _whole(text: str) -> int:
    return len(o200k_encoding().encode_ordinary(text))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT, st.integers(min_value=1, max_value=6))
def test_the_pieces_make_the_text_and_its_count(text: str, size: int) -> None:
    pieces = tokens._pieces(text, size)
    assert "".join(pieces) == text
    assert all(pieces) or pieces == [""]
    assert sum(_whole(piece) for piece in pieces) == _whole(text), pieces


@settings(max_examples=500, deadline=None)
@given(_ANY_TEXT, st.integers(min_value=1, max_value=4))
def test_the_pieces_of_any_code_points_keep_the_count(text: str, size: int) -> None:
    pieces = tokens._pieces(text, size)
    assert "".join(pieces) == text
    assert sum(_whole(piece) for piece in pieces) == _whole(text), pieces


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_every_cut_keeps_the_count(text: str) -> None:
    """Every place the cut pattern allows, not only the first after each piece's length."""
    for found in tokens._CUT.finditer(text):
        cut = found.start()
        assert cut > 0
        assert _whole(text[:cut]) + _whole(text[cut:]) == _whole(text), (text[:cut], text[cut:])


@settings(max_examples=400, deadline=None)
@given(_TEXT, st.integers(min_value=1, max_value=8))
def test_a_counter_counting_in_pieces_agrees_with_tiktoken(text: str, size: int) -> None:
    """Through the public counter, with pieces made small: its count is tiktoken's of the whole."""
    saved = tokens._PIECE_CHARS
    tokens._PIECE_CHARS = size
    try:
        assert TokenCounter(exact=True, cache_size=0).count_text(text) == _whole(text)
    finally:
        tokens._PIECE_CHARS = saved


def test_long_texts_are_counted_exactly() -> None:
    """Texts far over a piece, of each kind a user pastes; the same count twice (deterministic)."""
    counter = TokenCounter(exact=True, cache_size=0)
    texts = [
        "The quick brown fox didn't jump; it's 2024-06-15 and 12345 foxes.\n" * 4_000,
        "日本語のテキスト、ünïcödé слова।  मराठी\u093f ไทย 한국어 🙂👩\u200d💻 " * 3_000,
        "".join(chr(c) for c in range(0x20, 0x3000)) * 8,
        '{"id":12,"name":"Ada","tags":["x","y"],"blob":"QUJDRA=="},' * 5_000,
        ("a" * 5_000 + " ") * 20 + "\n" * 3,
        "\ud83d\ude00 \ud83d x \ude00\x00 <|endoftext|> " * 5_000,
    ]
    for text in texts:
        assert len(text) > tokens._PIECE_CHARS * 4
        first = counter.count_text(text)
        assert first == _whole(text)
        assert counter.count_text(text) == first

"""Forgetting a value that obsmem stores in more than one spelling.

Messages keep the text as the user wrote it; observations (the live record, every older
generation, the context built from them) keep it quoted as data (:mod:`obsmem.quoting`: ``<``
and ``>`` become ``‹`` and ``›``, a tab or line break a space); JSON columns keep it escaped
(``"`` as ``\\"``, ``‹`` as ``\\u2039``). ``Memory.forget(value)`` must find every one of them:
the user forgets what they typed, not obsmem's spelling of it.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from obsmem import Memory
from obsmem.quoting import defuse
from obsmem.storage.forgetting import contains, forget_lines, holds
from obsmem.types import Message

from .test_forget import config

pytestmark = pytest.mark.anyio

VALUES = [
    "pa<ss>wd-77",
    "a&b<c>d-9",
    "x</observations>y-3",
    'say "hi" <5>',
    "tab\t<here>-6",
    "O'Brien & <Sons> 12",
]


def spellings(value: str) -> set[str]:
    """How the value may stand in a read or in the file: as written, quoted as data, and either
    of them inside a JSON string (escaped, with or without ASCII escapes)."""
    forms = {value, defuse(value), " ".join(defuse(value).split())}
    return forms | {json.dumps(form, ensure_ascii=ascii)[1:-1] for form in forms for ascii in (True, False)}


def strings(data: object) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for key, item in data.items() for s in [str(key), *strings(item)]]
    if isinstance(data, list | tuple):
        return [s for item in data for s in strings(item)]
    return []


async def readable(memory: Memory, thread_id: str) -> dict[str, str]:
    """Everything a user can read back for the thread, per API."""
    messages = await memory.list_messages(thread_id, limit=1000)
    generations = await memory.list_generations(thread_id, limit=1000)
    context = await memory.get_context(thread_id)
    return {
        "messages": "\n".join(s for m in messages for s in strings(m.model_dump(mode="json"))),
        "observations": await memory.get_observations(thread_id),
        "generations": "\n".join(s for g in generations for s in strings(g.model_dump(mode="json"))),
        "context": "\n".join(m.text for m in context.messages),
    }


def found(blobs: dict[str, str], value: str) -> list[tuple[str, str]]:
    return [(name, form) for name, blob in blobs.items() for form in spellings(value) if form in blob]


def in_tables(path: Path, value: str, kept_prefix: str) -> list[str]:
    """Cells of any table of the SQLite file holding a spelling of ``value``, other than as the
    end of ``kept_prefix + value`` (another user's text, which stays)."""
    hits = []
    with closing(sqlite3.connect(path)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for cell in map(str, row):
                    for form in spellings(value):
                        if form in cell.replace(kept_prefix + form, ""):
                            hits.append(f"{table}: {form!r} in {cell[:80]!r}")
    return hits


async def plant(memory: Memory, thread_id: str, resource_id: str, value: str) -> None:
    for step in range(6):
        turn = await memory.begin_turn(
            thread_id=thread_id, resource_id=resource_id,
            messages=[Message.user(f"My wifi password is {value} and I need step {step} of the plan.")],
        )
        await turn.end([Message.assistant(f"Done step {step}.")])
    await memory.settled()


@pytest.mark.parametrize("value", VALUES)
async def test_forget_finds_the_value_in_every_stored_spelling(tmp_path: Path, value: str) -> None:
    path = tmp_path / "m.db"
    async with Memory(f"sqlite:///{path}", config=config(), max_turn_wait=None) as memory:
        await plant(memory, "t1", "u1", value)
        await plant(memory, "t2", "u2", "kept" + value)  # another user's: stays
        before = await readable(memory, "t1")
        # Planted where it matters: quoted in the live record and older generations, as written
        # in the messages.
        assert defuse(value) in before["observations"] and defuse(value) in before["context"]
        assert sum(defuse(value) in g.active_observations for g in await memory.list_generations("t1")) >= 2
        assert value in "\n".join(m.text for m in await memory.list_messages("t1"))

        counts = await memory.forget(value, resource_id="u1")

        left = found(await readable(memory, "t1"), value)
        assert not left, f"still readable after forget: {sorted(left)}"
        in_file = in_tables(path, value, kept_prefix="kept")
        assert not in_file, f"still in the file's tables: {in_file}"
        assert counts["messages"] > 0 and counts["generations"] >= 2
        # What did not hold it stays; the other user's memory is untouched.
        assert "Done step 5." in (await readable(memory, "t1"))["messages"]
        assert defuse("kept" + value) in await memory.get_observations("t2")
        assert ("kept" + value) in "\n".join(m.text for m in await memory.list_messages("t2"))


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("pa<ss>wd-77", "pa<ss>wd-77", True),  # as written (a message)
        ("User's password is pa‹ss›wd-77.", "pa<ss>wd-77", True),  # quoted as data (observations)
        ("password pa&lt;ss>wd-77", "pa<ss>wd-77", True),  # an LLM observer's markup escape
        ("password pa&lt;ss&gt;wd-77", "pa<ss>wd-77", True),
        ("a&amp;b‹c›d", "a&b<c>d", True),
        ("said “hi” there", 'said "hi" there', True),  # a quotation's marks
        ("tab  ‹here›", "tab\t<here>", True),  # a tab or line break quoted as a space
        ("🔴 secret‹1›", "🔴 secret<1>", True),  # a priority marker is never quoted into text
        ("pa‹ss›wd-78", "pa<ss>wd-77", False),
        ("pass wd", "pa<ss>wd", False),
        ("Case: PA‹SS›WD", "pa<ss>wd", False),  # case-sensitive, as before
        ("any line at all", "🔴", False),  # a value that quotes to nothing matches only itself
        ("a 🔴 marker", "🔴", True),
        ("   ", "\t", False),
    ],
)
def test_a_value_is_found_in_each_stored_spelling(text: str, value: str, expected: bool) -> None:
    assert holds(text, value) is expected
    assert contains({"k": [text]}, value) is expected
    assert (forget_lines(f"keep\n{text}\nkeep too", value) == "keep\nkeep too") is expected


def test_structured_data_is_matched_string_by_string() -> None:
    """A quote mark or backslash that JSON escapes is still found, in a value or a key."""
    assert contains({"q": 'say "hi"'}, 'say "hi"')
    assert contains({"path": "C:\\secret\\x"}, "\\secret\\")
    assert contains({'say "hi"': 1}, 'say "hi"')
    assert contains({"n": 4111}, "4111")
    assert not contains({"q": "say hi"}, 'say "hi"')

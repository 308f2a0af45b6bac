"""Text that is not UTF-8 never gets in through a stream (helper-120's hostile review).

``obsmem import FILE`` refuses bytes that are not UTF-8 ("line N: not UTF-8 text"). ``obsmem
import -`` read the same bytes from stdin, which Python decodes with ``surrogateescape``: every
bad byte became a lone surrogate, the import succeeded, and the stored message held text no UTF-8
writer can write: ``obsmem export -o FILE`` of that user then died with a traceback
(``UnicodeEncodeError: ... surrogates not allowed``) leaving a half-written file, and a model
call carrying it fails the same way. The same holds for a lone surrogate written as a JSON
escape (``"\\udcff"``) by any stream or REST body. Such a line is refused now, by its number,
nothing written.
"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from obsmem import Message
from obsmem.errors import ExportFormatError
from obsmem.storage import SQLiteStore, open_store
from obsmem.transfer import export_resource, import_resource
from obsmem.types import Thread

PLACEHOLDER = "PLACEHOLDER-120"


async def _export() -> str:
    async with open_store("memory://") as source:
        await source.create_thread(Thread(id="t1", resource_id="alice"))
        await source.save_messages("t1", [Message.user(f"hello {PLACEHOLDER} world")])
        out = io.StringIO()
        await export_resource(source, "alice", out)
        return out.getvalue()


def _message_line(text: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if PLACEHOLDER in line)


def test_cli_import_from_stdin_refuses_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """On main: exit 0, "imported resource 'alice' ...: 1 thread, 1 message", the message stored
    as 'hello \\udcff\\udcfe world'."""
    text = asyncio.run(_export())
    data = text.encode("utf-8").replace(PLACEHOLDER.encode(), b"\xff\xfe")
    db = tmp_path / "m.db"
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "obsmem", "import", "-", "--store", str(db)],
        input=data, capture_output=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    output = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert done.returncode == 1, output
    assert f"line {_message_line(text)}: not UTF-8 text" in output and "Traceback" not in output

    async def stored() -> list[Thread]:
        async with SQLiteStore(db) as store:
            return await store.list_threads("alice")

    assert asyncio.run(stored()) == []


@pytest.mark.anyio
@pytest.mark.parametrize("surrogate", ["\udcff", "\\udcff", "\\uD800"], ids=["raw", "escaped", "escaped-high"])
async def test_a_lone_surrogate_in_a_stream_is_refused_by_its_line(surrogate: str) -> None:
    """On main: imported (the stored text then cannot be exported to a file)."""
    text = await _export()
    forged = text.replace(PLACEHOLDER, surrogate)
    async with open_store("memory://") as target:
        with pytest.raises(ExportFormatError, match=f"line {_message_line(text)}: not UTF-8"):
            await import_resource(target, io.StringIO(forged))
        assert await target.list_threads("alice") == []


@pytest.mark.anyio
async def test_a_surrogate_pair_escape_is_text_and_imports() -> None:
    text = (await _export()).replace(PLACEHOLDER, "\\ud83d\\ude00")  # 😀 as JSON writes it escaped
    async with open_store("memory://") as target:
        await import_resource(target, io.StringIO(text))
        (message,) = await target.list_messages("t1")
        assert message.parts[0].text == "hello \U0001f600 world"  # type: ignore[union-attr]

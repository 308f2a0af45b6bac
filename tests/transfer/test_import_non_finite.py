"""An export line holding NaN or ±Infinity (Python's JSON reader takes them, though they are no
JSON, so a hand-edited export can hold them) is refused by its line number before anything is
written: imported, the number was stored as null (the data changed) or, after the stores began
refusing it, refused midway by the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from obsmem.storage import MemoryStore, SQLiteStore
from obsmem.transfer import ExportFormatError, import_resource

from .helpers import build_resource, export_text

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_a_non_finite_number_in_an_export_is_refused_by_its_line(tmp_path: Path, constant: str) -> None:
    async with MemoryStore() as source, SQLiteStore(tmp_path / "t.db") as target:
        await build_resource(source)
        lines = (await export_text(source)).splitlines()
        index = next(i for i, line in enumerate(lines) if json.loads(line).get("kind") == "message")
        item = json.loads(lines[index])
        item["data"]["metadata"] = {"score": "HOLE"}
        lines[index] = json.dumps(item).replace('"HOLE"', constant)
        with pytest.raises(ExportFormatError) as caught:
            await import_resource(target, lines)
        assert caught.value.line == index + 1
        assert constant.lstrip("-") in str(caught.value)
        assert await target.list_all_threads() == []

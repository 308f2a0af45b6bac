"""``obsmem serve`` tells at startup whether the store holds API keys ("no API keys yet: create
one …"). It read every key row of the store to know that (``keys.list()``): a store of 300 keys
read 300 rows each start. It now reads one (``keys.page(limit=1)``), and still says so only when
there is none."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from obsmem.cli import app
from obsmem.server import keys as key_module

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def _serve(store: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[int]]:
    """The startup output of ``obsmem serve --store …`` (uvicorn not started) and the key rows read."""
    import uvicorn

    rows: list[int] = []
    listed = key_module.SQLiteKeyStore._list
    paged = key_module.SQLiteKeyStore._page

    def count_list(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = listed(self, *args, **kwargs)
        rows.append(len(found))
        return found

    def count_page(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = paged(self, *args, **kwargs)
        rows.append(len(found))
        return found

    monkeypatch.setattr(key_module.SQLiteKeyStore, "_list", count_list)
    monkeypatch.setattr(key_module.SQLiteKeyStore, "_page", count_page)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    result = runner.invoke(app, ["serve", "--store", store, "--port", "0"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output, rows


def test_serve_reads_one_key_row_of_many(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = f"sqlite:///{tmp_path / 'm.db'}"
    keys = key_module.key_store_for(store)

    async def make() -> None:
        await keys.setup()
        for n in range(300):
            await keys.create(f"org-{n % 3}", resource_id=f"r-{n}")

    asyncio.run(make())
    output, rows = _serve(store, monkeypatch)
    assert "no API keys yet" not in output, output
    assert "listening on http" in output, output
    assert sum(rows) <= 1, rows  # before: [300], every key row read


def test_serve_still_says_there_is_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output, rows = _serve(f"sqlite:///{tmp_path / 'm.db'}", monkeypatch)
    assert "no API keys yet" in output, output
    assert sum(rows) == 0, rows

"""``obsmem usage``: the ledger of a SQLite store, as JSON and as a table (issue 18)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from obsmem import Memory
from obsmem.cli import app

from .test_memory_usage import CONFIG, OBSERVATIONS, Billing, converse
from obsmem.models.testing import FunctionModel


def fill(path: Path) -> tuple[Billing, Billing]:
    priced, unpriced = Billing(OBSERVATIONS, 1000), Billing(OBSERVATIONS, 500)

    async def run() -> None:
        async with Memory(f"sqlite:///{path}", config=CONFIG,
                          model=FunctionModel(priced, name="openai:gpt-4o-mini")) as memory:
            await converse(memory, "t1", "alice", 30)
        async with Memory(f"sqlite:///{path}", config=CONFIG,
                          model=FunctionModel(unpriced, name="acme:mystery")) as memory:
            await converse(memory, "t2", "bob", 30)

    asyncio.run(run())
    return priced, unpriced


def test_usage_json_reports_rows_totals_and_unpriced_calls(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    priced, unpriced = fill(path)
    runner = CliRunner()
    result = runner.invoke(app, ["usage", "--store", f"sqlite:///{path}", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    total = document["total"]
    assert total["calls"] == len(priced.usages) + len(unpriced.usages)
    assert total["unpriced_calls"] == len(unpriced.usages)
    assert total["input_tokens"] == sum(u.input_tokens for u in priced.usages + unpriced.usages)
    assert total["cost_usd"] > 0 and document["prices_as_of"]
    assert {row["model"] for row in document["rows"]} == {"openai:gpt-4o-mini", "acme:mystery"}

    alice = json.loads(runner.invoke(app, ["usage", "--store", f"sqlite:///{path}", "--resource", "alice",
                                           "--json", "--by", "role"]).stdout)
    assert alice["total"]["calls"] == len(priced.usages) and alice["total"]["unpriced_calls"] == 0
    assert [row["role"] for row in alice["rows"]] == ["observer", "reflector"][: len(alice["rows"])]
    assert all(row["model"] is None and row["day"] is None for row in alice["rows"])
    later = json.loads(runner.invoke(app, ["usage", "--store", f"sqlite:///{path}", "--since", "2999-01-01",
                                           "--json"]).stdout)
    assert later["total"]["calls"] == 0

    table = runner.invoke(app, ["usage", "--store", f"sqlite:///{path}", "--thread", "t1"])
    assert table.exit_code == 0 and "openai:gpt-4o-mini" in table.stdout and "total" in table.stdout
    assert "acme:mystery" not in table.stdout and "estimates" in table.stdout


def test_usage_needs_a_store_and_a_valid_date(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["usage"]).exit_code == 1
    path = tmp_path / "memory.db"
    fill(path)
    bad = runner.invoke(app, ["usage", "--store", f"sqlite:///{path}", "--since", "yesterday"])
    assert bad.exit_code == 1 and "not a date" in bad.output

"""The logging rule: one logger tree (``obsmem.*``), structured fields, no text at INFO and above."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

import obsmem
from obsmem import telemetry

SRC = Path(obsmem.__file__).resolve().parent


def test_every_logger_is_in_the_obsmem_tree() -> None:
    named = re.compile(r"logging\.getLogger\(([^)]*)\)")
    outside = []
    for path in sorted(SRC.rglob("*.py")):
        for argument in named.findall(path.read_text(encoding="utf-8")):
            argument = argument.strip()
            if argument == "__name__" or re.fullmatch(r"[\"']obsmem(\.[\w.]+)?[\"']", argument):
                continue
            if argument == "" and path.relative_to(SRC).as_posix() == "cli/worker.py":
                continue  # `obsmem worker` configures the root handler of its own process
            if argument == "_SDK_LOGGER" and path.relative_to(SRC).as_posix() == "server/mcp_server.py":
                continue  # a filter clipping what the MCP SDK logs; obsmem logs nothing there
            outside.append(f"{path.relative_to(SRC)}: getLogger({argument})")
    assert outside == []


def test_a_failure_logs_its_type_at_warning_and_its_text_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("obsmem.test")
    caplog.set_level(logging.DEBUG, logger="obsmem")
    telemetry.configure(hash_ids=True, salt="")
    try:
        telemetry.log_failure(
            logger, "obsmem: observation of thread %s failed", "t1",
            error=ValueError("the model said: my secret is 42"), thread_id="t1", operation="observation",
        )
        telemetry.log_failure(logger, "knowledge agent %s failed", "curate", error="LaneBusyError: quoted text here")
        telemetry.log_failure(logger, "knowledge agent %s failed", "curate", error="free text without a type")
    finally:
        telemetry.configure(hash_ids=False)
    warnings = [r for r in caplog.records if r.levelno >= logging.INFO]
    debugs = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert [r.getMessage() for r in warnings] == [
        f"obsmem: observation of thread {telemetry.hash_id('t1')} failed (ValueError)",  # hashed in the text too
        "knowledge agent curate failed (LaneBusyError)",
        "knowledge agent curate failed (error)",
    ]
    assert "secret" in debugs[0].getMessage() and "quoted text" in debugs[1].getMessage()
    first = warnings[0]
    assert first.obsmem_error_type == "ValueError"  # type: ignore[attr-defined]
    assert first.obsmem_operation == "observation"  # type: ignore[attr-defined]
    assert first.obsmem_thread_id == telemetry.hash_id("t1") != "t1"  # type: ignore[attr-defined]
